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
// Every /v1 request needs "Authorization: Bearer <token>". Request bodies
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
	method string // the HTTP method
	path   string // the ServeMux path pattern
	rpc    string // the RPC called, named as in the rdq.v1 service
	status int    // the HTTP status of a success
	// serve decodes the request, calls the RPC and renders its response.
	serve func(s *Service, ctx context.Context, r *http.Request) (any, error)
}

// rest makes the route of one RPC: decode makes the RPC's request of the
// HTTP request (its path, query or body), call is the RPC, and render makes
// the response body of the request and the RPC's response.
func rest[Req, Res any](method, path, rpc string, status int,
	decode func(*Service, *http.Request) (Req, error),
	call func(*Service, context.Context, Req) (Res, error),
	render func(Req, Res) (any, error),
) restRoute {
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

// restRoutes is the REST mapping of the rdq.v1 service, one route per RPC
// (TestEveryRPCHasAPolicyAndARoute keeps it so), as Handler documents it.
// A POST's body is read by decode, within the limits api sets.
var restRoutes = []restRoute{
	rest("POST", "/v1/tasks", "Submit", http.StatusOK, decodeSubmit, (*Service).Submit, renderSubmit),
	rest("POST", "/v1/tasks:batch", "SubmitBatch", http.StatusOK, decodeSubmitBatch, submitBatch, renderSubmitBatch),
	rest("GET", "/v1/tasks/{id}", "GetTask", http.StatusOK, decodeGetTask, (*Service).GetTask, renderTask),
	rest("GET", "/v1/dlq/tasks", "ListDead", http.StatusOK, decodeListDead, (*Service).ListDead, renderListDead),
	rest("GET", "/v1/dlq/tasks/{id}", "ShowDead", http.StatusOK, decodeShowDead, (*Service).ShowDead, renderTask),
	rest("GET", "/v1/dlq/groups", "DeadGroups", http.StatusOK, decodeDeadGroups, (*Service).DeadGroups, renderDeadGroups),
	rest("POST", "/v1/dlq:redrive", "Redrive", http.StatusOK, decodeRedrive, (*Service).Redrive, renderRedrive),
	rest("POST", "/v1/dlq:purge", "Purge", http.StatusOK, decodePurge, (*Service).Purge, renderPurge),
	rest("GET", "/v1/audit", "ListAudit", http.StatusOK, decodeListAudit, (*Service).ListAudit, renderListAudit),
	rest("GET", "/v1/queues", "QueueStats", http.StatusOK, decodeQueueStats, (*Service).QueueStats, renderQueueStats),
	rest("POST", "/v1/queues:pause", "PauseQueue", http.StatusOK, decodePause, (*Service).PauseQueue, renderPause),
	rest("POST", "/v1/queues:resume", "ResumeQueue", http.StatusOK, decodeResume, (*Service).ResumeQueue, renderResume),
	rest("GET", "/v1/tasks", "ListTasks", http.StatusOK, decodeListTasks, (*Service).ListTasks, renderListTasks),
	rest("GET", "/v1/tasks:by-key", "TaskByKey", http.StatusOK, decodeTaskByKey, (*Service).TaskByKey, renderTask),
	rest("POST", "/v1/tasks:retry", "RetryTasks", http.StatusOK, decodeChange, (*Service).RetryTasks, renderChange),
	rest("POST", "/v1/tasks:cancel", "CancelTasks", http.StatusOK, decodeChange, (*Service).CancelTasks, renderChange),
	rest("GET", "/v1/breakers", "ListBreakers", http.StatusOK, decodeListBreakers, (*Service).ListBreakers, renderListBreakers),
	rest("POST", "/v1/breakers:set", "SetBreaker", http.StatusOK, decodeSetBreaker, (*Service).SetBreaker, renderSetBreaker),
	rest("GET", "/v1/workers", "ListWorkers", http.StatusOK, decodeListWorkers, (*Service).ListWorkers, renderListWorkers),
	rest("GET", "/v1/series", "GetSeries", http.StatusOK, decodeGetSeries, (*Service).GetSeries, renderGetSeries),
}

// api serves one route: timeout, trace context, authentication, a place
// and a read deadline for a POST's body, errors as problem documents,
// metrics.
func (s *Service) api(rt restRoute) http.Handler {
	name := rt.rpc
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		ctx = s.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, "rdq.v1.RdqService/"+name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()

		var out any
		ctx, err := s.authenticate(ctx, r.Header.Get("Authorization"))
		if err == nil && r.Method == http.MethodPost {
			// The body, and what is decoded from it, live until serve
			// returns: hold a place for them meanwhile, one of the
			// principal's own, and read the body under a deadline.
			p, _ := PrincipalFrom(ctx)
			release, aerr := s.bodies.acquire(ctx, p.Name)
			if aerr != nil {
				err = errorf(CodeUnavailable, "the server is handling as many request bodies of yours as it may; retry later")
			} else {
				defer release()
				if derr := http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyRead)); derr != nil && !errors.Is(derr, http.ErrNotSupported) {
					s.log.DebugContext(ctx, "rdq api: setting the body's read deadline", "error", derr)
				}
			}
		}
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
// limited to the size limit.
func (s *Service) bodyReader(r *http.Request) (io.Reader, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, errorf(CodeUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not supported; send application/json", ct))
		}
	}
	return http.MaxBytesReader(nil, r.Body, s.maxBody), nil
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
