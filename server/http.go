package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/srjn45/rdq/proto/rdqv1"
)

// readyTimeout bounds the readiness check of /readyz.
const readyTimeout = 5 * time.Second

// Handler returns the REST/JSON API and the operational endpoints:
//
//	POST /v1/tasks              Submit          body: a task envelope (+ optional first_failure)
//	POST /v1/tasks:batch        SubmitBatch     body: {"tasks": [envelope, ...]}
//	GET  /v1/tasks/{id}         GetTask         → the task envelope with "history"
//	GET  /v1/dlq/tasks          ListDead        query: the DeadFilter fields, page_size, page_token
//	GET  /v1/dlq/tasks/{id}     ShowDead
//	GET  /v1/dlq/groups         DeadGroups      query: the DeadFilter fields
//	POST /v1/dlq:redrive        Redrive         body: RedriveRequest (payload in base64)
//	POST /v1/dlq:purge          Purge           body: PurgeRequest
//	GET  /v1/audit              ListAudit       query: actor, action, since, until, page_size, page_token
//	GET  /v1/queues             QueueStats      query: succeeded_window_ms
//	POST /v1/queues:pause       PauseQueue      body: {"queue": "...", "reason": "..."}
//	POST /v1/queues:resume      ResumeQueue     body: {"queue": "...", "reason": "..."}
//	GET  /v1/tasks              ListTasks       query: state, the TaskFilter fields, page_size, page_token
//	GET  /v1/tasks:by-key       TaskByKey       query: queue, key → the task envelope with "history"
//	POST /v1/tasks:retry        RetryTasks      body: {"ids": [...], "reason": "..."}
//	POST /v1/tasks:cancel       CancelTasks     body: {"ids": [...], "reason": "..."}
//	GET  /v1/breakers           ListBreakers    query: queue
//	POST /v1/breakers:set       SetBreaker      body: {"queue", "handler", "state": "open"|"closed", "cool_off_ms", "reason"}
//	GET  /v1/workers            ListWorkers     query: queue
//	GET  /v1/series             GetSeries       query: queue, handler, resolution (minute|hour), since, until
//	GET  /healthz               200 while the process serves
//	GET  /readyz                200 when the store answers, else 503
//	GET  /metrics               Prometheus exposition of Config.Gatherer (when set), behind Config.MetricsToken (when set)
//	POST /rdq.v1.RdqService/*   every method over the Connect protocol and gRPC-Web (see RPCPath)
//
// Each /v1 route is the google.api.http annotation of its method in
// proto/rdq/v1/rdq.proto. Every /v1 request needs "Authorization: Bearer
// <token>". Request bodies
// are JSON (Content-Type application/json, or none) of at most
// Config.MaxBodyBytes; unknown fields are ignored. Times are RFC 3339,
// durations whole milliseconds. Errors are RFC 9457 problem documents
// (application/problem+json) with a stable "code".
//
// To serve the operational endpoints on a listener of their own (one that
// only the monitoring network reaches, say), serve APIHandler and
// OpsHandler instead.
func (s *Service) Handler() http.Handler { return s.handler(true, true) }

// APIHandler returns the /v1 and RPCPath endpoints of Handler, without
// /healthz, /readyz and /metrics.
func (s *Service) APIHandler() http.Handler { return s.handler(true, false) }

// OpsHandler returns the operational endpoints of Handler (/healthz,
// /readyz and /metrics) alone.
func (s *Service) OpsHandler() http.Handler { return s.handler(false, true) }

func (s *Service) handler(api, ops bool) http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{} // path → its methods, in route order
	for _, rt := range restRoutes {
		if !api {
			break
		}
		mux.Handle(rt.method+" "+rt.path, s.api(rt))
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for path, methods := range allowed {
		allow := strings.Join(methods, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeProblem(w, r, errorf(CodeMethodNotAllowed, fmt.Sprintf("%s %s is not supported; use %s", r.Method, r.URL.Path, allow)))
		})
	}
	if api {
		mux.Handle(RPCPath, s.rpc)
	}
	if ops {
		s.opsRoutes(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, errorf(CodeNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)))
	})
	return mux
}

// opsRoutes adds /healthz, /readyz and /metrics to mux.
func (s *Service) opsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := s.Ready(ctx); err != nil {
			s.log.WarnContext(ctx, "rdq server not ready", "error", err)
			writeProblem(w, r, errorf(CodeUnavailable, "the store does not answer"))
			return
		}
		s.writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	if s.scrape != nil {
		mux.Handle("GET /metrics", s.metricsHandler())
	}
}

// restRoute maps one RPC onto REST.
type restRoute struct {
	method string // the HTTP method, of the RPC's google.api.http rule
	path   string // the ServeMux path pattern, of the rule's path template
	rpc    string // the RPC called, named as in the rdq.v1 service
	status int    // the HTTP status of a success
	// serve decodes the request, calls the RPC and renders its response.
	serve func(s *Service, ctx context.Context, r *http.Request) (any, error)
}

// rest makes the route of one RPC, at the method and path of its
// google.api.http annotation in rdq.proto: decode makes the RPC's request
// of the HTTP request (its path, query or body), call is the RPC, and
// render makes the response body of the request and the RPC's response.
func rest[Req, Res any](rpc string, status int,
	decode func(*Service, *http.Request) (Req, error),
	call func(*Service, context.Context, Req) (Res, error),
	render func(Req, Res) (any, error),
) restRoute {
	method, path, err := httpRule(rpc)
	if err != nil {
		// rdq.proto is compiled in: every test starts here.
		panic(err)
	}
	return restRoute{method: method, path: path, rpc: rpc, status: status,
		serve: func(s *Service, ctx context.Context, r *http.Request) (any, error) {
			req, err := decode(s, r)
			if err != nil {
				return nil, err
			}
			res, err := call(s, ctx, req)
			if err != nil {
				return nil, err
			}
			return render(req, res)
		},
	}
}

// httpRule returns the HTTP method and the ServeMux path pattern of the
// google.api.http annotation of RPC rpc of rdq.v1.RdqService: a GET
// without a body or a POST with one, its path literal segments and
// single-segment variables ("/v1/tasks/{id}").
func httpRule(rpc string) (method, path string, err error) {
	md := rdqv1.File_rdq_v1_rdq_proto.Services().ByName("RdqService").Methods().ByName(protoreflect.Name(rpc))
	if md == nil {
		return "", "", fmt.Errorf("server: rdq.v1.RdqService has no method %s", rpc)
	}
	rule, ok := proto.GetExtension(md.Options(), annotations.E_Http).(*annotations.HttpRule)
	if !ok || rule == nil {
		return "", "", fmt.Errorf("server: rdq.v1.RdqService.%s has no google.api.http annotation", rpc)
	}
	switch {
	case rule.GetGet() != "" && rule.GetBody() == "":
		method, path = http.MethodGet, rule.GetGet()
	case rule.GetPost() != "" && rule.GetBody() != "":
		method, path = http.MethodPost, rule.GetPost()
	default:
		return "", "", fmt.Errorf("server: rdq.v1.RdqService.%s: the REST mapping serves a GET without a body or a POST with one, not %v", rpc, rule)
	}
	if len(rule.GetAdditionalBindings()) > 0 || rule.GetResponseBody() != "" {
		return "", "", fmt.Errorf("server: rdq.v1.RdqService.%s: additional_bindings and response_body are not served", rpc)
	}
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if strings.ContainsAny(seg, "*=") || strings.HasPrefix(seg, "{") != strings.HasSuffix(seg, "}") {
			return "", "", fmt.Errorf("server: rdq.v1.RdqService.%s: path %q: only literal segments and single-segment variables ({id}) are served", rpc, path)
		}
	}
	return method, path, nil
}

// restRoutes is the REST mapping of the rdq.v1 service, one route per RPC
// (TestEveryRPCHasAPolicyAndARoute keeps it so), as Handler documents it:
// each RPC's method and path are those of its google.api.http annotation.
// A POST's body is read by decode, within the limits admit sets.
var restRoutes = []restRoute{
	rest("Submit", http.StatusOK, decodeSubmit, (*Service).Submit, renderSubmit),
	rest("SubmitBatch", http.StatusOK, decodeSubmitBatch, submitBatch, renderSubmitBatch),
	rest("GetTask", http.StatusOK, decodeGetTask, (*Service).GetTask, renderTask),
	rest("ListDead", http.StatusOK, decodeListDead, (*Service).ListDead, renderListDead),
	rest("ShowDead", http.StatusOK, decodeShowDead, (*Service).ShowDead, renderTask),
	rest("DeadGroups", http.StatusOK, decodeDeadGroups, (*Service).DeadGroups, renderDeadGroups),
	rest("Redrive", http.StatusOK, decodeRedrive, (*Service).Redrive, renderRedrive),
	rest("Purge", http.StatusOK, decodePurge, (*Service).Purge, renderPurge),
	rest("ListAudit", http.StatusOK, decodeListAudit, (*Service).ListAudit, renderListAudit),
	rest("QueueStats", http.StatusOK, decodeQueueStats, (*Service).QueueStats, renderQueueStats),
	rest("PauseQueue", http.StatusOK, decodePause, (*Service).PauseQueue, renderPause),
	rest("ResumeQueue", http.StatusOK, decodeResume, (*Service).ResumeQueue, renderResume),
	rest("ListTasks", http.StatusOK, decodeListTasks, (*Service).ListTasks, renderListTasks),
	rest("TaskByKey", http.StatusOK, decodeTaskByKey, (*Service).TaskByKey, renderTask),
	rest("RetryTasks", http.StatusOK, decodeChange, (*Service).RetryTasks, renderChange),
	rest("CancelTasks", http.StatusOK, decodeChange, (*Service).CancelTasks, renderChange),
	rest("ListBreakers", http.StatusOK, decodeListBreakers, (*Service).ListBreakers, renderListBreakers),
	rest("SetBreaker", http.StatusOK, decodeSetBreaker, (*Service).SetBreaker, renderSetBreaker),
	rest("ListWorkers", http.StatusOK, decodeListWorkers, (*Service).ListWorkers, renderListWorkers),
	rest("GetSeries", http.StatusOK, decodeGetSeries, (*Service).GetSeries, renderGetSeries),
}

// api serves one route: timeout, trace context, admission (admit:
// authentication, and a place, a read deadline and the size limit for a
// POST's body), errors as problem documents, metrics.
func (s *Service) api(rt restRoute) http.Handler {
	name := rt.rpc
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		ctx = s.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, "rdq.v1.RdqService/"+name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()

		var out any
		ctx, release, err := s.admit(ctx, w, r, s.maxBody)
		defer release()
		refusedUnread := err != nil && r.Method == http.MethodPost
		if err == nil {
			out, err = rt.serve(s, ctx, r)
		}
		if e := s.outcome(ctx, span, name, err); e != nil {
			if refusedUnread {
				// A body refused unread is not drained before the
				// answer (net/http would wait for a body that never
				// ends): the connection closes after it instead.
				w.Header().Set("Connection", "close")
			}
			writeProblem(w, r, e)
			return
		}
		s.writeJSON(w, rt.status, out)
	})
}

// outcome ends one request of RPC name on either transport: it records
// the result in span and the request metrics, and returns err as the
// *Error the caller gets, or nil for a success.
func (s *Service) outcome(ctx context.Context, span trace.Span, name string, err error) *Error {
	if err == nil {
		s.m.request(name, "")
		return nil
	}
	var classified *Error
	if !errors.As(err, &classified) {
		// Service methods log what they classify; this is anything
		// else (rendering a response, or a panic, say).
		err = s.fail(ctx, name, err)
	}
	e := classify(err)
	span.SetStatus(otelcodes.Error, string(e.Code))
	s.m.request(name, e.Code)
	return e
}

// admit lets a request of the API in, on either transport, before its
// body is read: it authenticates the request from its Authorization
// header and, for a POST, holds one of the principal's body places
// (Config.MaxConcurrentBodies), sets the body's read deadline
// (Config.BodyReadTimeout) and limits the body to limit bytes, refusing at
// once one whose Content-Length says it is larger. It returns ctx with the
// principal and a release to call once the request is served (also after
// an error), or the error to answer the request with, its body unread.
func (s *Service) admit(ctx context.Context, w http.ResponseWriter, r *http.Request, limit int64) (_ context.Context, release func(), err error) {
	release = func() {}
	ctx, err = s.authenticate(ctx, r.Header.Get("Authorization"))
	if err != nil || r.Method != http.MethodPost {
		return ctx, release, err
	}
	// The body, and what is decoded from it, live until the request is
	// served: they hold a place meanwhile, one of the principal's own.
	p, _ := PrincipalFrom(ctx)
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	release, err = s.bodies.acquire(actx, p.Name)
	cancel()
	if err != nil {
		return ctx, func() {}, errorf(CodeUnavailable, "the server is handling as many request bodies of yours as it may; retry later")
	}
	if derr := http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyRead)); derr != nil && !errors.Is(derr, http.ErrNotSupported) {
		s.log.DebugContext(ctx, "rdq api: setting the body's read deadline", "error", derr)
	}
	if r.ContentLength > limit {
		return ctx, release, errorf(CodePayloadTooLarge, fmt.Sprintf("the request body is larger than %d bytes", s.maxBody))
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	return ctx, release, nil
}

// authenticate returns ctx with the principal of the Authorization value.
func (s *Service) authenticate(ctx context.Context, authz string) (context.Context, error) {
	tok, ok := bearerToken(authz)
	if !ok {
		return ctx, errorf(CodeUnauthenticated, `missing bearer token: send "Authorization: Bearer <token>"`)
	}
	p, err := s.auth.Authenticate(ctx, tok)
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			return ctx, &Error{Code: CodeUnauthenticated, Message: "invalid bearer token", Err: err}
		}
		return ctx, err
	}
	return WithPrincipal(ctx, p), nil
}

func (s *Service) writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.log.Debug("rdq api: writing a response", "error", err)
	}
}

// bodyReader checks the request's content type and returns its body,
// which admit limited to the size limit.
func (s *Service) bodyReader(r *http.Request) (io.Reader, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, errorf(CodeUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not supported; send application/json", ct))
		}
	}
	return r.Body, nil
}

// readError turns an error reading a request body into an API error.
func (s *Service) readError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(CodePayloadTooLarge, fmt.Sprintf("the request body is larger than %d bytes", s.maxBody))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("the request body did not arrive within %s; send it at once", s.bodyRead), Err: err}
	}
	return &Error{Code: CodeInvalidArgument, Message: "reading the request body: " + err.Error(), Err: err}
}

// readBody reads a JSON request body within the size limit.
func (s *Service) readBody(r *http.Request) ([]byte, error) {
	rd, err := s.bodyReader(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		return nil, s.readError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errorf(CodeInvalidArgument, "the request body is empty; send a JSON object")
	}
	return body, nil
}

// decodeJSON reads the body into dst, a pointer to a struct.
func (s *Service) decodeJSON(r *http.Request, dst any) error {
	body, err := s.readBody(r)
	if err != nil {
		return err
	}
	return unmarshalJSON(body, dst)
}

func unmarshalJSON(body []byte, dst any) error {
	if err := json.Unmarshal(body, dst); err != nil {
		return jsonError(err)
	}
	return nil
}

// jsonError describes a JSON decoding error for the caller.
func jsonError(err error) error {
	{
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se), Err: err}
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "the body"
			}
			return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("%s: want a JSON %s, got %s", field, jsonKind(te.Type.Kind().String()), te.Value), Err: err}
		}
		return &Error{Code: CodeInvalidArgument, Message: "request body: " + err.Error(), Err: err}
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "array"
	case "string":
		return "string"
	case "bool":
		return "boolean"
	}
	return "number"
}
