package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/envelope"
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
//	GET  /healthz               200 while the process serves
//	GET  /readyz                200 when the store answers, else 503
//	GET  /metrics               Prometheus exposition of Config.Gatherer (when set), behind Config.MetricsToken (when set)
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

// APIHandler returns the /v1 endpoints of Handler, without /healthz,
// /readyz and /metrics.
func (s *Service) APIHandler() http.Handler { return s.handler(true, false) }

// OpsHandler returns the operational endpoints of Handler (/healthz,
// /readyz and /metrics) alone.
func (s *Service) OpsHandler() http.Handler { return s.handler(false, true) }

func (s *Service) handler(api, ops bool) http.Handler {
	mux := http.NewServeMux()
	routes := []struct {
		method, path, name string
		fn                 func(ctx context.Context, r *http.Request) (any, error)
	}{
		{"POST", "/v1/tasks", "Submit", s.restSubmit},
		{"POST", "/v1/tasks:batch", "SubmitBatch", s.restSubmitBatch},
		{"GET", "/v1/tasks/{id}", "GetTask", s.restGetTask},
		{"GET", "/v1/dlq/tasks", "ListDead", s.restListDead},
		{"GET", "/v1/dlq/tasks/{id}", "ShowDead", s.restShowDead},
		{"GET", "/v1/dlq/groups", "DeadGroups", s.restDeadGroups},
		{"POST", "/v1/dlq:redrive", "Redrive", s.restRedrive},
		{"POST", "/v1/dlq:purge", "Purge", s.restPurge},
		{"GET", "/v1/audit", "ListAudit", s.restListAudit},
		{"GET", "/v1/queues", "QueueStats", s.restQueueStats},
		{"POST", "/v1/queues:pause", "PauseQueue", s.restPause},
		{"POST", "/v1/queues:resume", "ResumeQueue", s.restResume},
		{"GET", "/v1/tasks", "ListTasks", s.restListTasks},
		{"GET", "/v1/tasks:by-key", "TaskByKey", s.restTaskByKey},
		{"POST", "/v1/tasks:retry", "RetryTasks", s.restChange(s.RetryTasks)},
		{"POST", "/v1/tasks:cancel", "CancelTasks", s.restChange(s.CancelTasks)},
		{"GET", "/v1/breakers", "ListBreakers", s.restListBreakers},
		{"POST", "/v1/breakers:set", "SetBreaker", s.restSetBreaker},
		{"GET", "/v1/workers", "ListWorkers", s.restListWorkers},
	}
	allowed := map[string][]string{} // path → its methods, in route order
	for _, rt := range routes {
		if !api {
			break
		}
		mux.Handle(rt.method+" "+rt.path, s.api(rt.name, rt.fn))
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for path, methods := range allowed {
		allow := strings.Join(methods, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeProblem(w, r, errorf(CodeMethodNotAllowed, fmt.Sprintf("%s %s is not supported; use %s", r.Method, r.URL.Path, allow)))
		})
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

// api wraps one REST method: timeout, trace context, authentication,
// errors as problem documents, metrics.
func (s *Service) api(name string, fn func(ctx context.Context, r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		ctx = s.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, "rdq.v1.RdqService/"+name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()

		var out any
		ctx, err := s.authenticate(ctx, r.Header.Get("Authorization"))
		if err == nil && r.Method == http.MethodPost {
			// The body, and what is decoded from it, live until fn
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
		if err == nil {
			out, err = fn(ctx, r)
		}
		if err != nil {
			var classified *Error
			if !errors.As(err, &classified) {
				// Service methods log what they classify; this is
				// anything else (rendering a response, say).
				err = s.fail(ctx, name, err)
			}
			e := classify(err)
			span.SetStatus(otelcodes.Error, string(e.Code))
			s.m.request(name, e.Code)
			writeProblem(w, r, e)
			return
		}
		s.m.request(name, "")
		s.writeJSON(w, http.StatusOK, out)
	})
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

// --- wire shapes of the REST mapping ---

type restError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func restErr(e *rdqv1.Error) *restError {
	if e == nil {
		return nil
	}
	return &restError{Code: e.GetCode(), Message: e.GetMessage()}
}

type restFailure struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
}

// restFilter is DeadFilter in a JSON body.
type restFilter struct {
	Queue           string `json:"queue"`
	Handler         string `json:"handler"`
	ErrorType       string `json:"error_type"`
	Fingerprint     string `json:"fingerprint"`
	DeadAfter       string `json:"dead_after"`
	DeadBefore      string `json:"dead_before"`
	MessageContains string `json:"message_contains"`
	LifeMin         int32  `json:"life_min"`
	LifeBelow       int32  `json:"life_below"`
}

func (f *restFilter) proto(prefix string) (*rdqv1.DeadFilter, error) {
	if f == nil {
		return nil, nil
	}
	out := &rdqv1.DeadFilter{
		Queue: f.Queue, Handler: f.Handler, ErrorType: f.ErrorType,
		Fingerprint: f.Fingerprint, MessageContains: f.MessageContains,
		LifeMin: f.LifeMin, LifeBelow: f.LifeBelow,
	}
	var err error
	if out.DeadAfter, err = parseTime(prefix+"dead_after", f.DeadAfter); err != nil {
		return nil, err
	}
	if out.DeadBefore, err = parseTime(prefix+"dead_before", f.DeadBefore); err != nil {
		return nil, err
	}
	return out, nil
}

func parseTime(field, v string) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, errorf(CodeInvalidArgument, fmt.Sprintf("%s %q is not an RFC 3339 time such as 2024-06-01T12:00:00Z", field, v))
	}
	return timestamppb.New(t), nil
}

func parseInt(field, v string, bits int) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		return 0, errorf(CodeInvalidArgument, fmt.Sprintf("%s %q is not a whole number", field, v))
	}
	return n, nil
}

func filterFromQuery(q url.Values) (*rdqv1.DeadFilter, error) {
	f := &restFilter{
		Queue: q.Get("queue"), Handler: q.Get("handler"), ErrorType: q.Get("error_type"),
		Fingerprint: q.Get("fingerprint"), MessageContains: q.Get("message_contains"),
		DeadAfter: q.Get("dead_after"), DeadBefore: q.Get("dead_before"),
	}
	for _, n := range []struct {
		field string
		dst   *int32
	}{{"life_min", &f.LifeMin}, {"life_below", &f.LifeBelow}} {
		v, err := parseInt(n.field, q.Get(n.field), 32)
		if err != nil {
			return nil, err
		}
		*n.dst = int32(v)
	}
	return f.proto("")
}

// envelopeJSON renders a task message, and optionally its history, as the
// wire envelope.
func envelopeJSON(pt *rdqv1.Task, history []*rdqv1.Attempt) (json.RawMessage, error) {
	t, err := TaskFromProto(pt)
	if err != nil {
		return nil, fmt.Errorf("rendering task %s: %w", pt.GetId(), err)
	}
	env := envelope.Envelope{Task: *t}
	for _, pa := range history {
		a, err := AttemptFromProto(t.ID, pa)
		if err != nil {
			return nil, fmt.Errorf("rendering task %s: %w", t.ID, err)
		}
		env.History = append(env.History, a)
	}
	if len(history) > 0 && env.History == nil {
		env.History = []rdq.Attempt{}
	}
	b, err := envelope.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("rendering task %s: %w", t.ID, err)
	}
	return b, nil
}

// specFromEnvelope decodes a submission: the envelope plus the optional
// first_failure member.
func specFromEnvelope(raw []byte) (*rdqv1.TaskSpec, error) {
	env, err := envelope.Unmarshal(raw)
	if err != nil {
		return nil, err
	}
	var extra struct {
		FirstFailure *restFailure `json:"first_failure"`
	}
	// The envelope is decoded once; the document is read again only if
	// it may hold a first_failure member (Go's decoder matches member
	// names case-insensitively, and a name may be written with escapes).
	if mayHoldMember(raw, "first_failure") {
		if err := unmarshalJSON(raw, &extra); err != nil {
			return nil, err
		}
	}
	spec := &rdqv1.TaskSpec{
		Version:        envelope.Version,
		Queue:          env.Task.Queue,
		Handler:        env.Task.Handler,
		Payload:        env.Task.Payload,
		ContentType:    env.Task.ContentType,
		Headers:        env.Task.Headers,
		IdempotencyKey: env.Task.IdempotencyKey,
		DelayMs:        env.Delay.Milliseconds(),
		MaxAttempts:    int32(min(env.Task.MaxAttempts, math.MaxInt32)),
		TimeoutMs:      env.Task.Timeout.Milliseconds(),
	}
	if ff := extra.FirstFailure; ff != nil {
		spec.FirstFailure = &rdqv1.FailureSpec{ErrorType: ff.ErrorType, Message: ff.Message}
	}
	return spec, nil
}

// mayHoldMember reports whether the JSON document raw may have a member
// called name (lowercase ASCII letters and '_'): true if name occurs in
// it, ignoring ASCII case, or if it holds an escape sequence or a non-ASCII
// byte that a decoder could fold onto one of name's letters. false is
// certain; true may be wrong.
func mayHoldMember(raw []byte, name string) bool {
	n := len(name)
	for i := 0; i+n <= len(raw); i++ {
		if raw[i]|0x20 == name[0] && bytes.EqualFold(raw[i:i+n], []byte(name)) {
			return true
		}
	}
	// "\u0066irst_failure", and the Unicode letters Go's decoder folds
	// onto 's' and 'k' (U+017F, U+212A).
	return bytes.Contains(raw, []byte(`\u`)) || bytes.Contains(raw, []byte("\u017f")) || bytes.Contains(raw, []byte("\u212a"))
}

type restSubmitResponse struct {
	Task      json.RawMessage `json:"task"`
	Duplicate bool            `json:"duplicate"`
}

func (s *Service) restSubmit(ctx context.Context, r *http.Request) (any, error) {
	body, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	spec, err := specFromEnvelope(body)
	if err != nil {
		return nil, err
	}
	res, err := s.Submit(ctx, &rdqv1.SubmitRequest{Task: spec})
	if err != nil {
		return nil, err
	}
	env, err := envelopeJSON(res.GetTask(), nil)
	if err != nil {
		return nil, err
	}
	return restSubmitResponse{Task: env, Duplicate: res.GetDuplicate()}, nil
}

type restSubmitResult struct {
	Task      json.RawMessage `json:"task,omitempty"`
	Duplicate bool            `json:"duplicate,omitempty"`
	Error     *restError      `json:"error,omitempty"`
}

func (s *Service) restSubmitBatch(ctx context.Context, r *http.Request) (any, error) {
	specs, results, index, err := s.decodeBatch(r)
	if err != nil {
		return nil, err
	}
	if len(specs) > 0 {
		res, err := s.SubmitBatch(ctx, &rdqv1.SubmitBatchRequest{Tasks: specs})
		if err != nil {
			return nil, err
		}
		for j, item := range res.GetResults() {
			out := &results[index[j]]
			if item.GetError() != nil {
				out.Error = restErr(item.GetError())
				continue
			}
			if out.Task, err = envelopeJSON(item.GetTask(), nil); err != nil {
				return nil, err
			}
			out.Duplicate = item.GetDuplicate()
		}
	}
	return map[string]any{"results": results}, nil
}

// decodeBatch reads a {"tasks": [envelope, ...]} body as a stream: each
// envelope is decoded once, as it arrives, and the body is never held
// whole. It returns the valid tasks, a result per envelope (with the error
// of each invalid one) and, for each valid task, the index of its result.
func (s *Service) decodeBatch(r *http.Request) (specs []*rdqv1.TaskSpec, results []restSubmitResult, index []int, err error) {
	rd, err := s.bodyReader(r)
	if err != nil {
		return nil, nil, nil, err
	}
	dec := json.NewDecoder(rd)
	fail := func(err error) error {
		var mbe *http.MaxBytesError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &mbe):
			return s.readError(err)
		case errors.Is(err, io.EOF):
			return errorf(CodeInvalidArgument, `the request body is empty or cut short; send {"tasks": [...]}`)
		case errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &se):
			return jsonError(err)
		}
		return s.readError(err)
	}
	if tok, err := dec.Token(); err != nil {
		return nil, nil, nil, fail(err)
	} else if tok != json.Delim('{') {
		return nil, nil, nil, errorf(CodeInvalidArgument, `the body must be a JSON object: {"tasks": [...]}`)
	}
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, fail(err)
		}
		if tok != "tasks" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, nil, fail(err)
			}
			continue
		}
		if seen {
			return nil, nil, nil, errorf(CodeInvalidArgument, `the body has two "tasks" members; send one`)
		}
		seen = true
		if tok, err := dec.Token(); err != nil {
			return nil, nil, nil, fail(err)
		} else if tok != json.Delim('[') {
			return nil, nil, nil, errorf(CodeInvalidArgument, "tasks: want a JSON array of task envelopes")
		}
		for dec.More() {
			if len(results) == MaxBatch {
				return nil, nil, nil, errorf(CodeInvalidArgument, fmt.Sprintf("a batch holds at most %d tasks; this one has more", MaxBatch))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, nil, fail(err)
			}
			results = append(results, restSubmitResult{})
			spec, err := specFromEnvelope(raw)
			if err != nil {
				e := classify(err)
				results[len(results)-1].Error = &restError{Code: string(e.Code), Message: e.Message}
				continue
			}
			specs = append(specs, spec)
			index = append(index, len(results)-1)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, nil, nil, fail(err)
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, nil, nil, fail(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, nil, nil, errorf(CodeInvalidArgument, "the body holds more than one JSON value")
		}
		return nil, nil, nil, fail(err)
	}
	if results == nil {
		results = []restSubmitResult{}
	}
	return specs, results, index, nil
}

func (s *Service) restGetTask(ctx context.Context, r *http.Request) (any, error) {
	res, err := s.GetTask(ctx, &rdqv1.GetTaskRequest{Id: r.PathValue("id")})
	if err != nil {
		return nil, err
	}
	return envelopeJSON(res.GetTask(), res.GetHistory())
}

func (s *Service) restShowDead(ctx context.Context, r *http.Request) (any, error) {
	res, err := s.ShowDead(ctx, &rdqv1.ShowDeadRequest{Id: r.PathValue("id")})
	if err != nil {
		return nil, err
	}
	return envelopeJSON(res.GetTask(), res.GetHistory())
}

func (s *Service) restListDead(ctx context.Context, r *http.Request) (any, error) {
	q := r.URL.Query()
	f, err := filterFromQuery(q)
	if err != nil {
		return nil, err
	}
	size, err := parseInt("page_size", q.Get("page_size"), 32)
	if err != nil {
		return nil, err
	}
	res, err := s.ListDead(ctx, &rdqv1.ListDeadRequest{Filter: f, PageSize: int32(size), PageToken: q.Get("page_token")})
	if err != nil {
		return nil, err
	}
	tasks := make([]json.RawMessage, len(res.GetTasks()))
	for i, t := range res.GetTasks() {
		if tasks[i], err = envelopeJSON(t, nil); err != nil {
			return nil, err
		}
	}
	return struct {
		Tasks         []json.RawMessage `json:"tasks"`
		NextPageToken string            `json:"next_page_token"`
	}{tasks, res.GetNextPageToken()}, nil
}

type restGroup struct {
	Fingerprint string    `json:"fingerprint"`
	ErrorType   string    `json:"error_type"`
	Message     string    `json:"message"`
	Count       int64     `json:"count"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	ExampleID   string    `json:"example_id"`
}

func (s *Service) restDeadGroups(ctx context.Context, r *http.Request) (any, error) {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		return nil, err
	}
	res, err := s.DeadGroups(ctx, &rdqv1.DeadGroupsRequest{Filter: f})
	if err != nil {
		return nil, err
	}
	groups := make([]restGroup, len(res.GetGroups()))
	for i, g := range res.GetGroups() {
		groups[i] = restGroup{
			Fingerprint: g.GetFingerprint(), ErrorType: g.GetErrorType(), Message: g.GetMessage(), Count: g.GetCount(),
			FirstSeen: g.GetFirstSeen().AsTime().UTC(), LastSeen: g.GetLastSeen().AsTime().UTC(), ExampleID: g.GetExampleId(),
		}
	}
	return map[string]any{"groups": groups}, nil
}

type restRedriveRequest struct {
	IDs      []string    `json:"ids"`
	Filter   *restFilter `json:"filter"`
	All      bool        `json:"all"`
	Payload  *string     `json:"payload"`
	DelayMs  int64       `json:"delay_ms"`
	SpreadMs int64       `json:"spread_ms"`
	MaxLife  int32       `json:"max_life"`
	Reason   string      `json:"reason"`
}

type restRedriveResult struct {
	ID    string     `json:"id"`
	Error *restError `json:"error,omitempty"`
}

func (s *Service) restRedrive(ctx context.Context, r *http.Request) (any, error) {
	var req restRedriveRequest
	if err := s.decodeJSON(r, &req); err != nil {
		return nil, err
	}
	f, err := req.Filter.proto("filter.")
	if err != nil {
		return nil, err
	}
	pr := &rdqv1.RedriveRequest{
		Ids: req.IDs, Filter: f, All: req.All, DelayMs: req.DelayMs, SpreadMs: req.SpreadMs,
		MaxLife: req.MaxLife, Reason: req.Reason,
	}
	if req.Payload != nil {
		if pr.Payload, err = base64.StdEncoding.DecodeString(*req.Payload); err != nil {
			return nil, errorf(CodeInvalidArgument, "payload is not standard base64 (RFC 4648 §4, padded)")
		}
	}
	res, err := s.Redrive(ctx, pr)
	if err != nil {
		return nil, err
	}
	out := struct {
		Redriven int64               `json:"redriven"`
		AtLimit  int64               `json:"at_limit"`
		Results  []restRedriveResult `json:"results,omitempty"`
	}{Redriven: res.GetRedriven(), AtLimit: res.GetAtLimit()}
	for _, item := range res.GetResults() {
		out.Results = append(out.Results, restRedriveResult{ID: item.GetId(), Error: restErr(item.GetError())})
	}
	return out, nil
}

func (s *Service) restPurge(ctx context.Context, r *http.Request) (any, error) {
	var req struct {
		IDs    []string    `json:"ids"`
		Filter *restFilter `json:"filter"`
		All    bool        `json:"all"`
		Reason string      `json:"reason"`
	}
	if err := s.decodeJSON(r, &req); err != nil {
		return nil, err
	}
	f, err := req.Filter.proto("filter.")
	if err != nil {
		return nil, err
	}
	res, err := s.Purge(ctx, &rdqv1.PurgeRequest{Ids: req.IDs, Filter: f, All: req.All, Reason: req.Reason})
	if err != nil {
		return nil, err
	}
	return map[string]int64{"purged": res.GetPurged()}, nil
}

type restAuditEntry struct {
	ID      int64             `json:"id"`
	At      time.Time         `json:"at"`
	Actor   string            `json:"actor"`
	Action  string            `json:"action"`
	Filter  string            `json:"filter,omitempty"`
	IDs     []string          `json:"ids,omitempty"`
	Count   int64             `json:"count"`
	Reason  string            `json:"reason,omitempty"`
	Details map[string]string `json:"details,omitempty"`
}

func (s *Service) restListAudit(ctx context.Context, r *http.Request) (any, error) {
	q := r.URL.Query()
	req := &rdqv1.ListAuditRequest{Actor: q.Get("actor"), Action: q.Get("action"), PageToken: q.Get("page_token")}
	var err error
	if req.Since, err = parseTime("since", q.Get("since")); err != nil {
		return nil, err
	}
	if req.Until, err = parseTime("until", q.Get("until")); err != nil {
		return nil, err
	}
	size, err := parseInt("page_size", q.Get("page_size"), 32)
	if err != nil {
		return nil, err
	}
	req.PageSize = int32(size)
	res, err := s.ListAudit(ctx, req)
	if err != nil {
		return nil, err
	}
	entries := make([]restAuditEntry, len(res.GetEntries()))
	for i, e := range res.GetEntries() {
		entries[i] = restAuditEntry{
			ID: e.GetId(), At: e.GetAt().AsTime().UTC(), Actor: e.GetActor(), Action: e.GetAction(), Filter: e.GetFilter(),
			IDs: e.GetIds(), Count: e.GetCount(), Reason: e.GetReason(), Details: e.GetDetails(),
		}
	}
	return struct {
		Entries       []restAuditEntry `json:"entries"`
		NextPageToken string           `json:"next_page_token"`
	}{entries, res.GetNextPageToken()}, nil
}

type restQueueStat struct {
	Queue          string `json:"queue"`
	Pending        int64  `json:"pending"`
	InFlight       int64  `json:"in_flight"`
	Dead           int64  `json:"dead"`
	Succeeded      int64  `json:"succeeded"`
	OldestDueAgeMs int64  `json:"oldest_due_age_ms"`
	Paused         bool   `json:"paused"`
}

func (s *Service) restQueueStats(ctx context.Context, r *http.Request) (any, error) {
	window, err := parseInt("succeeded_window_ms", r.URL.Query().Get("succeeded_window_ms"), 64)
	if err != nil {
		return nil, err
	}
	res, err := s.QueueStats(ctx, &rdqv1.QueueStatsRequest{SucceededWindowMs: window})
	if err != nil {
		return nil, err
	}
	queues := make([]restQueueStat, len(res.GetQueues()))
	for i, q := range res.GetQueues() {
		queues[i] = restQueueStat{
			Queue: q.GetQueue(), Pending: q.GetPending(), InFlight: q.GetInFlight(), Dead: q.GetDead(),
			Succeeded: q.GetSucceeded(), OldestDueAgeMs: q.GetOldestDueAgeMs(), Paused: q.GetPaused(),
		}
	}
	return map[string]any{"queues": queues}, nil
}

type restPauseRequest struct {
	Queue  string `json:"queue"`
	Reason string `json:"reason"`
}

func (s *Service) restPause(ctx context.Context, r *http.Request) (any, error) {
	var req restPauseRequest
	if err := s.decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if _, err := s.PauseQueue(ctx, &rdqv1.PauseQueueRequest{Queue: req.Queue, Reason: req.Reason}); err != nil {
		return nil, err
	}
	return map[string]any{"queue": req.Queue, "paused": true}, nil
}

func (s *Service) restResume(ctx context.Context, r *http.Request) (any, error) {
	var req restPauseRequest
	if err := s.decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if _, err := s.ResumeQueue(ctx, &rdqv1.ResumeQueueRequest{Queue: req.Queue, Reason: req.Reason}); err != nil {
		return nil, err
	}
	return map[string]any{"queue": req.Queue, "paused": false}, nil
}
