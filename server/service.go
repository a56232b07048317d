// Package server is rdq's network API as a library: one implementation of
// the rdq.v1 contract (proto/rdq/v1/rdq.proto) served over gRPC, over the
// Connect protocol and gRPC-Web (at RPCPath, on the REST handler) and as
// REST/JSON under /v1/..., bearer-token authentication with roles per queue
// pattern, RFC 9457 problem documents, health and readiness endpoints and
// Prometheus metrics.
//
//	svc, err := server.New(server.Config{Store: st, Auth: tokens})
//	...
//	srv := &http.Server{ // REST, Connect, gRPC-Web, /healthz, /readyz, /metrics
//		Handler:           svc.Handler(),
//		ReadHeaderTimeout: 10 * time.Second,
//		ReadTimeout:       30 * time.Second,
//		WriteTimeout:      server.DefaultRequestTimeout + 15*time.Second,
//		IdleTimeout:       2 * time.Minute,
//		MaxHeaderBytes:    64 << 10,
//	}
//	lis, err := net.Listen("tcp", ":8080")
//	...
//	lis, err = server.LimitListener(lis, 1024) // bound open connections
//	...
//	go srv.Serve(lis)
//	g := svc.NewGRPCServer() // gRPC, same methods, on a listener of its own
//	go g.Serve(grpcLis)
//
// Never serve the API with http.ListenAndServe: a server without timeouts
// lets any client hold a connection (and its memory) for as long as it
// likes. To keep /healthz, /readyz and /metrics off the API's listener,
// serve APIHandler and OpsHandler on two servers.
//
// Tasks are submitted through package client (so the caller's W3C trace
// context, taken from the request, travels in the task's headers and the
// worker's attempt spans join the caller's trace) and the dead-letter queue
// is operated through package dlq. The principal that authenticated a
// request is the actor in the audit log.
package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/envelope"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

// Limits and defaults of the API.
const (
	// MaxBatch bounds the tasks of one SubmitBatch.
	MaxBatch = 1000
	// MaxIDs bounds the IDs of one Redrive or Purge.
	MaxIDs = 1000
	// DefaultMaxBodyBytes bounds a REST request body when
	// Config.MaxBodyBytes is zero: room for one maximal task, or a batch
	// of smaller ones.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxConcurrentBodies bounds the REST requests whose bodies
	// are being read and handled at once when Config.MaxConcurrentBodies
	// is zero.
	DefaultMaxConcurrentBodies = 16
	// DefaultBodyReadTimeout bounds the reading of a REST request body
	// when Config.BodyReadTimeout is zero.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultRequestTimeout bounds one request when Config.RequestTimeout
	// is zero.
	DefaultRequestTimeout = time.Minute
	// DefaultStatsWindow is the succeeded window of QueueStats when the
	// request gives none.
	DefaultStatsWindow = time.Hour
)

// Config configures a Service.
type Config struct {
	// Store holds the tasks. Required. The DLQ and statistics methods need
	// it to implement store.Admin too, and PauseQueue and ResumeQueue
	// store.Pauser; without them those methods fail with unimplemented.
	Store store.Store
	// Auth authenticates bearer tokens. Required.
	Auth Authenticator
	// Queues, if not nil, restricts submissions to these queues, each to
	// the listed handler names (an empty list accepts any handler):
	// anything else is refused as invalid_argument instead of dying in the
	// dead-letter queue for want of a handler.
	Queues map[string][]string
	// MaxLife is the default redrive cap (see dlq.Config.MaxLife).
	MaxLife int
	// Logger receives request failures and internal errors; nil means
	// slog.Default(). Payloads are never logged.
	Logger *slog.Logger
	// Metrics, if set, receives the server's collectors:
	// rdq_server_submitted_total{queue}, rdq_server_requests_total{method,
	// code}, rdq_server_console_signins_total{result}, the DLQ's counters (rdq_dlq_redriven_total, ...) and, when
	// the store implements store.Admin, per-queue gauges read from
	// Admin.Stats at most once per StatsInterval whatever the number of
	// scrapers (rdq_queue_tasks{queue,status},
	// rdq_queue_oldest_due_age_seconds{queue}; see StatsCollector).
	Metrics prometheus.Registerer
	// Gatherer, if set, is served at /metrics by Handler and OpsHandler,
	// gathered, and encoded in each exposition format, at most once per
	// MetricsCacheTTL whatever the number of scrapers: a scrape within it
	// is a copy of bytes.
	Gatherer prometheus.Gatherer
	// MetricsToken, if set, is the bearer token /metrics requires
	// ("Authorization: Bearer <MetricsToken>"; Prometheus'
	// authorization.credentials); it must pass ValidateToken. Without it
	// /metrics is open to whoever reaches the listener: serve OpsHandler
	// on a listener only the monitoring network reaches instead.
	MetricsToken string
	// MetricsCacheTTL is how long one gathering of Gatherer serves
	// /metrics; zero means DefaultMetricsCacheTTL.
	MetricsCacheTTL time.Duration
	// Propagator carries trace context from requests into task headers;
	// nil means W3C trace context.
	Propagator propagation.TextMapPropagator
	// TracerProvider creates a server span per request; nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Ready reports whether the server can serve (/readyz); nil means a
	// lookup of a random task ID in the store, which succeeds when the
	// store answers.
	Ready func(ctx context.Context) error
	// MaxBodyBytes bounds a REST request body and a gRPC message; zero
	// means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxConcurrentBodies bounds the REST requests with a body (the
	// POSTs) handled at once per principal (by name), so that memory stays
	// within about principals × MaxConcurrentBodies × a few × MaxBodyBytes
	// however many clients send at once, and the slow bodies of one
	// principal never hold up another's requests. A request that finds no
	// room waits for it, until its timeout ends it with unavailable (503).
	// Zero means DefaultMaxConcurrentBodies.
	MaxConcurrentBodies int
	// BodyReadTimeout bounds the reading of a REST request body, from
	// the moment its request is authenticated: a body still arriving
	// then is refused with invalid_argument and its place freed. Zero
	// means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// RequestTimeout bounds each request; zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// Service implements rdqv1.RdqServiceServer. Its methods are what both
// transports call; each needs a principal in its context (WithPrincipal),
// which the transports add after authenticating the bearer token. Errors
// are *Error values. A Service is safe for concurrent use.
type Service struct {
	rdqv1.UnimplementedRdqServiceServer

	store        store.Store
	admin        store.Admin
	pauser       store.Pauser
	handlers     store.HandlerPauser
	registry     store.WorkerRegistry
	series       store.SeriesReader
	dlq          *dlq.DLQ
	live         *tasks.Tasks // nil without store.LiveTasks
	auth         Authenticator
	queues       map[string][]string
	log          *slog.Logger
	propagator   propagation.TextMapPropagator
	tracer       trace.Tracer
	ready        func(ctx context.Context) error
	scrape       *cachedGatherer // Config.Gatherer, cached; nil without one
	metricsToken []byte          // SHA-256 of Config.MetricsToken; nil without one
	maxBody      int64
	bodies       *bodySlots // places for REST bodies, per principal
	bodyRead     time.Duration
	timeout      time.Duration
	rpc          http.Handler // RPCPath: Connect, gRPC-Web and gRPC
	m            *metrics
	// consoleNow, if set, is the clock of console sessions and sign-in
	// throttles (tests set it).
	consoleNow func() time.Time
}

// New returns a Service for cfg. It fails with an error wrapping
// rdq.ErrInvalid for a missing store or authenticator, and with the
// registerer's error if the collectors cannot be registered.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: server: Config.Store is nil", rdq.ErrInvalid)
	}
	if cfg.Auth == nil {
		return nil, fmt.Errorf("%w: server: Config.Auth is nil: every request needs a bearer token", rdq.ErrInvalid)
	}
	if cfg.MaxBodyBytes < 0 || cfg.RequestTimeout < 0 || cfg.MaxConcurrentBodies < 0 || cfg.BodyReadTimeout < 0 {
		return nil, fmt.Errorf("%w: server: MaxBodyBytes, MaxConcurrentBodies, BodyReadTimeout and RequestTimeout must not be negative", rdq.ErrInvalid)
	}
	for q, hs := range cfg.Queues {
		if err := rdq.ValidateName("queue", q); err != nil {
			return nil, fmt.Errorf("server: Config.Queues: %w", err)
		}
		for _, h := range hs {
			if err := rdq.ValidateName("handler", h); err != nil {
				return nil, fmt.Errorf("server: Config.Queues[%s]: %w", q, err)
			}
		}
	}
	s := &Service{
		store:      cfg.Store,
		auth:       cfg.Auth,
		queues:     cfg.Queues,
		log:        cfg.Logger,
		propagator: cfg.Propagator,
		ready:      cfg.Ready,
		maxBody:    cfg.MaxBodyBytes,
		timeout:    cfg.RequestTimeout,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.propagator == nil {
		s.propagator = propagation.TraceContext{}
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/srjn45/rdq/server")
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.timeout == 0 {
		s.timeout = DefaultRequestTimeout
	}
	s.bodies = newBodySlots(cmp.Or(cfg.MaxConcurrentBodies, DefaultMaxConcurrentBodies))
	s.bodyRead = cmp.Or(cfg.BodyReadTimeout, DefaultBodyReadTimeout)
	if s.ready == nil {
		s.ready = s.probeStore
	}
	if cfg.MetricsCacheTTL < 0 {
		return nil, fmt.Errorf("%w: server: MetricsCacheTTL %s is negative", rdq.ErrInvalid, cfg.MetricsCacheTTL)
	}
	if cfg.Gatherer != nil {
		s.scrape = &cachedGatherer{g: cfg.Gatherer, ttl: cmp.Or(cfg.MetricsCacheTTL, DefaultMetricsCacheTTL), now: time.Now}
	}
	if cfg.MetricsToken != "" {
		if err := ValidateToken(cfg.MetricsToken); err != nil {
			return nil, fmt.Errorf("server: Config.MetricsToken: %w", err)
		}
		sum := sha256.Sum256([]byte(cfg.MetricsToken))
		s.metricsToken = sum[:]
	}
	if a, ok := store.AdminOf(cfg.Store); ok {
		s.admin = a
	}
	if p, ok := store.PauserOf(cfg.Store); ok {
		s.pauser = p
	}
	if hp, ok := store.HandlerPauserOf(cfg.Store); ok {
		s.handlers = hp
	}
	if r, ok := store.RegistryOf(cfg.Store); ok {
		s.registry = r
	}
	if sr, ok := store.SeriesReaderOf(cfg.Store); ok {
		s.series = sr
	}
	switch lt, err := tasks.New(cfg.Store, tasks.Config{Logger: s.log}); {
	case err == nil:
		s.live = lt
	case !errors.Is(err, tasks.ErrUnsupported):
		return nil, fmt.Errorf("server: %w", err)
	}
	if b, ok := dlq.BackendOf(cfg.Store); ok {
		dm, err := dlqMetrics(cfg.Metrics)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		d, err := dlq.New(b, dlq.Config{MaxLife: cfg.MaxLife, Metrics: dm, Logger: s.log})
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.dlq = d
	}
	m, err := newMetrics(cfg.Metrics, s.admin, s.log)
	if err != nil {
		return nil, err
	}
	s.m = m
	if s.rpc, err = s.newRPCHandler(); err != nil {
		return nil, err
	}
	return s, nil
}

// Ready reports whether the service can serve: Config.Ready, or a probe of
// the store.
func (s *Service) Ready(ctx context.Context) error { return s.ready(ctx) }

func (s *Service) probeStore(ctx context.Context) error {
	_, _, err := s.store.Get(ctx, rdq.NewID())
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// fail classifies err for the caller, logging internal errors.
func (s *Service) fail(ctx context.Context, method string, err error) error {
	e := classify(err)
	if e.Code == CodeInternal || e.Code == CodeUnavailable {
		s.log.ErrorContext(ctx, "rdq api request failed", "method", method, "error", err)
	}
	return e
}

type remoteFailure struct{ typ, msg string }

func (f *remoteFailure) Error() string     { return f.msg }
func (f *remoteFailure) ErrorType() string { return f.typ }

func millis(what string, ms int64) (time.Duration, error) {
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, fmt.Errorf("%w: %s %d is out of range: use a non-negative number of milliseconds", rdq.ErrInvalid, what, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// taskFromSpec validates a submission and checks that the caller may make
// it.
func (s *Service) taskFromSpec(c *call, spec *rdqv1.TaskSpec) (client.Task, error) {
	if spec == nil {
		return client.Task{}, errorf(CodeInvalidArgument, "no task given")
	}
	if v := spec.GetVersion(); v != 0 && v != envelope.Version {
		return client.Task{}, errorf(CodeInvalidArgument, fmt.Sprintf("envelope version %d is not supported; use %d", v, envelope.Version))
	}
	if err := rdq.ValidateName("queue", spec.GetQueue()); err != nil {
		return client.Task{}, err
	}
	if err := rdq.ValidateName("handler", spec.GetHandler()); err != nil {
		return client.Task{}, err
	}
	if err := c.queue(spec.GetQueue()); err != nil {
		return client.Task{}, err
	}
	if s.queues != nil {
		handlers, ok := s.queues[spec.GetQueue()]
		if !ok {
			return client.Task{}, errorf(CodeInvalidArgument, fmt.Sprintf("queue %q is not served here", spec.GetQueue()))
		}
		if len(handlers) > 0 && !slices.Contains(handlers, spec.GetHandler()) {
			return client.Task{}, errorf(CodeInvalidArgument, fmt.Sprintf("queue %q has no handler %q", spec.GetQueue(), spec.GetHandler()))
		}
	}
	delay, err := millis("delay_ms", spec.GetDelayMs())
	if err != nil {
		return client.Task{}, err
	}
	timeout, err := millis("timeout_ms", spec.GetTimeoutMs())
	if err != nil {
		return client.Task{}, err
	}
	t := client.Task{
		Queue:          spec.GetQueue(),
		Handler:        spec.GetHandler(),
		Payload:        spec.GetPayload(),
		ContentType:    spec.GetContentType(),
		Headers:        spec.GetHeaders(),
		IdempotencyKey: spec.GetIdempotencyKey(),
		Delay:          delay,
		MaxAttempts:    int(spec.GetMaxAttempts()),
		Timeout:        timeout,
	}
	check := rdq.Task{Queue: t.Queue, Handler: t.Handler, Payload: t.Payload, ContentType: t.ContentType, Headers: t.Headers, IdempotencyKey: t.IdempotencyKey}
	if err := check.Validate(); err != nil {
		return client.Task{}, err
	}
	if ff := spec.GetFirstFailure(); ff != nil {
		typ, msg := ff.GetErrorType(), ff.GetMessage()
		switch {
		case typ == "":
			typ = "remote"
		case rdq.IsReservedErrorType(typ):
			// A submitter cannot record one of rdq's own events.
			typ = rdq.RemoteTypePrefix + typ
		}
		if msg == "" {
			msg = "failure reported by the submitter"
		}
		t.FirstFailure = &remoteFailure{typ: rdq.Truncate(typ, 256), msg: msg}
	}
	return t, nil
}

func (s *Service) client(p *Principal) (*client.Client, error) {
	return client.New(client.Config{Store: s.store, ID: "api:" + p.Name, Propagator: s.propagator})
}

// Submit implements rdqv1.RdqServiceServer.
func (s *Service) Submit(ctx context.Context, req *rdqv1.SubmitRequest) (*rdqv1.SubmitResponse, error) {
	return serve(ctx, s, "Submit", func(c *call) (*rdqv1.SubmitResponse, error) {
		t, err := s.taskFromSpec(c, req.GetTask())
		if err != nil {
			return nil, err
		}
		cl, err := s.client(c.p)
		if err != nil {
			return nil, err
		}
		res, err := cl.Submit(ctx, t)
		if err != nil {
			return nil, err
		}
		if !res.Duplicate {
			s.m.submitted(t.Queue, 1)
		}
		return &rdqv1.SubmitResponse{Task: taskForCaller(c.p, res.Task, true), Duplicate: res.Duplicate}, nil
	})
}

// SubmitBatch implements rdqv1.RdqServiceServer. Items that are invalid or
// that the caller may not submit get an error result and are not stored;
// the others are stored in one call.
func (s *Service) SubmitBatch(ctx context.Context, req *rdqv1.SubmitBatchRequest) (*rdqv1.SubmitBatchResponse, error) {
	return serve(ctx, s, "SubmitBatch", func(c *call) (*rdqv1.SubmitBatchResponse, error) {
		specs := req.GetTasks()
		if len(specs) > MaxBatch {
			return nil, errorf(CodeInvalidArgument, fmt.Sprintf("a batch holds at most %d tasks; this one has %d", MaxBatch, len(specs)))
		}
		out := &rdqv1.SubmitBatchResponse{Results: make([]*rdqv1.SubmitResult, len(specs))}
		var (
			tasks []client.Task
			index []int
		)
		for i, spec := range specs {
			t, err := s.taskFromSpec(c, spec)
			if err != nil {
				out.Results[i] = &rdqv1.SubmitResult{Error: errorProto(err)}
				continue
			}
			tasks = append(tasks, t)
			index = append(index, i)
		}
		if len(tasks) == 0 {
			return out, nil
		}
		cl, err := s.client(c.p)
		if err != nil {
			return nil, err
		}
		res, err := cl.SubmitMany(ctx, tasks)
		if err != nil {
			return nil, err
		}
		if len(res) != len(tasks) {
			return nil, fmt.Errorf("client returned %d results for %d tasks", len(res), len(tasks))
		}
		for j, r := range res {
			out.Results[index[j]] = &rdqv1.SubmitResult{Task: taskForCaller(c.p, r.Task, true), Duplicate: r.Duplicate}
			if !r.Duplicate {
				s.m.submitted(r.Task.Queue, 1)
			}
		}
		return out, nil
	})
}

// errorProto is the per-item error of a batch result: the stable code and
// the message of err, classified as a request's error is.
func errorProto(err error) *rdqv1.Error {
	e := classify(err)
	return &rdqv1.Error{Code: string(e.Code), Message: e.Message}
}

// GetTask implements rdqv1.RdqServiceServer.
func (s *Service) GetTask(ctx context.Context, req *rdqv1.GetTaskRequest) (*rdqv1.GetTaskResponse, error) {
	return serve(ctx, s, "GetTask", func(c *call) (*rdqv1.GetTaskResponse, error) {
		t, attempts, err := c.task(ctx, req.GetId())
		if err != nil {
			return nil, err
		}
		history := attemptsToProto(attempts)
		if !c.p.Can(RoleOperator, t.Queue) {
			for _, a := range history {
				a.WorkerId = ""
			}
		}
		return &rdqv1.GetTaskResponse{Task: taskForCaller(c.p, t, true), History: history}, nil
	})
}

// taskForCaller renders t for p: the lease owner (a worker's identity,
// which says where work runs) is shown only to operators of the queue, as
// are the worker IDs of its attempts (GetTask).
func taskForCaller(p *Principal, t *rdq.Task, withPayload bool) *rdqv1.Task {
	pt := TaskToProto(t, withPayload)
	if !p.Can(RoleOperator, t.Queue) {
		pt.LeaseOwner = ""
	}
	return pt
}

// ListDead implements rdqv1.RdqServiceServer.
func (s *Service) ListDead(ctx context.Context, req *rdqv1.ListDeadRequest) (*rdqv1.ListDeadResponse, error) {
	return serve(ctx, s, "ListDead", func(c *call) (*rdqv1.ListDeadResponse, error) {
		f, err := filterFromProto(req.GetFilter())
		if err != nil {
			return nil, err
		}
		if err := c.queue(f.Queue); err != nil {
			return nil, err
		}
		page, err := s.dlq.List(ctx, f, dlq.ListOptions{PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()})
		if err != nil {
			return nil, err
		}
		out := &rdqv1.ListDeadResponse{NextPageToken: page.NextPageToken, Tasks: make([]*rdqv1.Task, len(page.Tasks))}
		for i, t := range page.Tasks {
			out.Tasks[i] = TaskToProto(t, false)
		}
		return out, nil
	})
}

// DeadGroups implements rdqv1.RdqServiceServer.
func (s *Service) DeadGroups(ctx context.Context, req *rdqv1.DeadGroupsRequest) (*rdqv1.DeadGroupsResponse, error) {
	return serve(ctx, s, "DeadGroups", func(c *call) (*rdqv1.DeadGroupsResponse, error) {
		f, err := filterFromProto(req.GetFilter())
		if err != nil {
			return nil, err
		}
		if err := c.queue(f.Queue); err != nil {
			return nil, err
		}
		groups, err := s.dlq.Groups(ctx, f)
		if err != nil {
			return nil, err
		}
		out := &rdqv1.DeadGroupsResponse{Groups: make([]*rdqv1.Group, len(groups))}
		for i, g := range groups {
			out.Groups[i] = groupToProto(g)
		}
		return out, nil
	})
}

// ShowDead implements rdqv1.RdqServiceServer.
func (s *Service) ShowDead(ctx context.Context, req *rdqv1.ShowDeadRequest) (*rdqv1.ShowDeadResponse, error) {
	return serve(ctx, s, "ShowDead", func(c *call) (*rdqv1.ShowDeadResponse, error) {
		t, attempts, err := c.task(ctx, req.GetId())
		if err != nil {
			return nil, err
		}
		return &rdqv1.ShowDeadResponse{Task: TaskToProto(t, true), History: attemptsToProto(attempts)}, nil
	})
}

// selection is the target of a redrive or purge: IDs or a filter.
type selection struct {
	ids    []rdq.ID
	filter dlq.Filter
	all    bool
}

func selectionOf(ids []string, pf *rdqv1.DeadFilter, all bool) (selection, error) {
	f, err := filterFromProto(pf)
	if err != nil {
		return selection{}, err
	}
	sel := selection{filter: f, all: all}
	switch {
	case len(ids) > 0 && (!f.IsEmpty() || all):
		return sel, errorf(CodeInvalidArgument, "give either ids or a filter (or all), not both")
	case len(ids) > MaxIDs:
		return sel, errorf(CodeInvalidArgument, fmt.Sprintf("at most %d ids per request; this one has %d (use a filter for more)", MaxIDs, len(ids)))
	case len(ids) == 0 && f.IsEmpty() && !all:
		return sel, errorf(CodeInvalidArgument, "nothing selected: give ids, a filter, or all=true for every dead task")
	}
	if len(ids) > 0 {
		if sel.ids, err = parseIDs(ids); err != nil {
			return sel, err
		}
	}
	return sel, nil
}

// authorize checks the caller's role over every task sel names: by
// filter, over the filter's queue (or every queue); by IDs, over the
// queue of each named task that exists (call.tasks), returning the IDs to
// act on.
func (sel selection) authorize(ctx context.Context, c *call) (named, error) {
	if sel.ids == nil {
		return named{}, c.queue(sel.filter.Queue)
	}
	return c.tasks(ctx, sel.ids)
}

// Redrive implements rdqv1.RdqServiceServer.
func (s *Service) Redrive(ctx context.Context, req *rdqv1.RedriveRequest) (*rdqv1.RedriveResponse, error) {
	return serve(ctx, s, "Redrive", func(c *call) (*rdqv1.RedriveResponse, error) {
		sel, err := selectionOf(req.GetIds(), req.GetFilter(), req.GetAll())
		if err != nil {
			return nil, err
		}
		if req.Payload != nil && len(sel.ids) != 1 {
			return nil, errorf(CodeInvalidArgument, "an edited payload needs exactly one id")
		}
		opts := dlq.RedriveOptions{Actor: c.p.Name, Reason: req.GetReason(), All: sel.all, MaxLife: int(req.GetMaxLife())}
		if opts.Delay, err = millis("delay_ms", req.GetDelayMs()); err != nil {
			return nil, err
		}
		if opts.Spread, err = millis("spread_ms", req.GetSpreadMs()); err != nil {
			return nil, err
		}
		n, err := sel.authorize(ctx, c)
		if err != nil {
			return nil, err
		}
		switch {
		case req.Payload != nil:
			out := &rdqv1.RedriveResponse{Results: []*rdqv1.RedriveResult{{Id: sel.ids[0].String()}}}
			err := s.dlq.EditAndRedrive(ctx, n.act[0], req.Payload, opts)
			var te dlq.TaskError
			switch {
			case err == nil:
				out.Redriven = 1
			case errors.As(err, &te):
				out.Results[0].Error = n.item(0, te.Err)
				if out.Results[0].Error.Code == string(CodeRedriveLimit) {
					out.AtLimit = 1
				}
			default:
				return nil, err
			}
			return out, nil
		case sel.ids != nil:
			res, err := s.dlq.RedriveTasks(ctx, n.act, opts)
			if err != nil {
				return nil, err
			}
			failed := make(map[rdq.ID]error, len(res.Failed))
			for _, f := range res.Failed {
				failed[f.ID] = f.Err
			}
			out := &rdqv1.RedriveResponse{Redriven: res.Redriven, AtLimit: res.AtLimit, Results: make([]*rdqv1.RedriveResult, len(sel.ids))}
			for i, id := range sel.ids {
				out.Results[i] = &rdqv1.RedriveResult{Id: id.String()}
				if e := failed[n.act[i]]; e != nil {
					out.Results[i].Error = n.item(i, e)
				}
			}
			return out, nil
		default:
			res, err := s.dlq.Redrive(ctx, sel.filter, opts)
			if err != nil {
				return nil, err
			}
			return &rdqv1.RedriveResponse{Redriven: res.Redriven, AtLimit: res.AtLimit}, nil
		}
	})
}

// Purge implements rdqv1.RdqServiceServer. Named tasks that are not dead
// are left alone and not counted.
func (s *Service) Purge(ctx context.Context, req *rdqv1.PurgeRequest) (*rdqv1.PurgeResponse, error) {
	return serve(ctx, s, "Purge", func(c *call) (*rdqv1.PurgeResponse, error) {
		sel, err := selectionOf(req.GetIds(), req.GetFilter(), req.GetAll())
		if err != nil {
			return nil, err
		}
		n, err := sel.authorize(ctx, c)
		if err != nil {
			return nil, err
		}
		f := sel.filter
		if sel.ids != nil {
			f = dlq.Filter{IDs: n.act}
		}
		res, err := s.dlq.Purge(ctx, f, dlq.PurgeOptions{Actor: c.p.Name, Reason: req.GetReason(), All: sel.all})
		if err != nil {
			return nil, err
		}
		return &rdqv1.PurgeResponse{Purged: res.Purged}, nil
	})
}

// ListAudit implements rdqv1.RdqServiceServer. It needs the operator role
// on every queue. A full page has a next_page_token, which may lead to an
// empty page.
func (s *Service) ListAudit(ctx context.Context, req *rdqv1.ListAuditRequest) (*rdqv1.ListAuditResponse, error) {
	return serve(ctx, s, "ListAudit", func(c *call) (*rdqv1.ListAuditResponse, error) {
		if err := c.queue(""); err != nil {
			return nil, err
		}
		q := dlq.AuditQuery{Actor: req.GetActor(), Action: req.GetAction(), Limit: int(req.GetPageSize())}
		var err error
		if q.Since, err = tsTime(req.GetSince()); err != nil {
			return nil, err
		}
		if q.Until, err = tsTime(req.GetUntil()); err != nil {
			return nil, err
		}
		if tok := req.GetPageToken(); tok != "" {
			n, err := strconv.ParseInt(tok, 10, 64)
			if err != nil || n <= 0 {
				return nil, errorf(CodeInvalidArgument, "page_token is not one this server issued")
			}
			q.BeforeID = n
		}
		if q.Limit == 0 {
			q.Limit = dlq.DefaultPageSize
		}
		entries, err := s.dlq.Audit(ctx, q)
		if err != nil {
			return nil, err
		}
		out := &rdqv1.ListAuditResponse{Entries: make([]*rdqv1.AuditEntry, len(entries))}
		for i, e := range entries {
			out.Entries[i] = auditToProto(e)
		}
		if len(entries) == q.Limit && len(entries) > 0 {
			out.NextPageToken = strconv.FormatInt(entries[len(entries)-1].ID, 10)
		}
		return out, nil
	})
}

// QueueStats implements rdqv1.RdqServiceServer. It lists the queues the
// caller holds the operator role on, and fails for a caller holding it on
// none.
func (s *Service) QueueStats(ctx context.Context, req *rdqv1.QueueStatsRequest) (*rdqv1.QueueStatsResponse, error) {
	return serve(ctx, s, "QueueStats", func(c *call) (*rdqv1.QueueStatsResponse, error) {
		if err := c.queue(""); err != nil {
			return nil, err
		}
		window, err := millis("succeeded_window_ms", req.GetSucceededWindowMs())
		if err != nil {
			return nil, err
		}
		if window == 0 {
			window = DefaultStatsWindow
		}
		stats, err := s.dlq.Stats(ctx, window)
		if err != nil {
			return nil, err
		}
		paused := map[string]bool{}
		if s.pauser != nil {
			names, err := s.pauser.PausedQueues(ctx)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				paused[n] = true
			}
		}
		out := &rdqv1.QueueStatsResponse{}
		for _, st := range stats {
			if !c.sees(st.Queue) {
				continue
			}
			out.Queues = append(out.Queues, &rdqv1.QueueStat{
				Queue: st.Queue, Pending: st.Pending, InFlight: st.InFlight, Dead: st.Dead, Succeeded: st.Succeeded,
				OldestDueAgeMs: st.OldestDueAge.Milliseconds(), Paused: paused[st.Queue],
			})
			delete(paused, st.Queue)
		}
		for q := range paused {
			if c.sees(q) {
				out.Queues = append(out.Queues, &rdqv1.QueueStat{Queue: q, Paused: true})
			}
		}
		slices.SortFunc(out.Queues, func(a, b *rdqv1.QueueStat) int { return strings.Compare(a.Queue, b.Queue) })
		return out, nil
	})
}

// pauseOrResume pauses or resumes queue for the caller of c.
func (s *Service) pauseOrResume(ctx context.Context, c *call, queue, reason string, pause bool) error {
	if err := rdq.ValidateName("queue", queue); err != nil {
		return err
	}
	if err := c.queue(queue); err != nil {
		return err
	}
	if err := dlq.ValidateReason(reason); err != nil {
		return err
	}
	params := store.PauseParams{Queue: queue, Actor: c.p.Name, Reason: reason}
	if pause {
		if err := s.pauser.PauseQueue(ctx, params); err != nil {
			return err
		}
		s.log.InfoContext(ctx, "queue paused", "queue", queue, "actor", c.p.Name)
		return nil
	}
	if err := s.pauser.ResumeQueue(ctx, params); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "queue resumed", "queue", queue, "actor", c.p.Name)
	return nil
}

// PauseQueue implements rdqv1.RdqServiceServer. It needs the admin role on
// the queue and a store that implements store.Pauser.
func (s *Service) PauseQueue(ctx context.Context, req *rdqv1.PauseQueueRequest) (*rdqv1.PauseQueueResponse, error) {
	return serve(ctx, s, "PauseQueue", func(c *call) (*rdqv1.PauseQueueResponse, error) {
		if err := s.pauseOrResume(ctx, c, req.GetQueue(), req.GetReason(), true); err != nil {
			return nil, err
		}
		return &rdqv1.PauseQueueResponse{}, nil
	})
}

// ResumeQueue implements rdqv1.RdqServiceServer.
func (s *Service) ResumeQueue(ctx context.Context, req *rdqv1.ResumeQueueRequest) (*rdqv1.ResumeQueueResponse, error) {
	return serve(ctx, s, "ResumeQueue", func(c *call) (*rdqv1.ResumeQueueResponse, error) {
		if err := s.pauseOrResume(ctx, c, req.GetQueue(), req.GetReason(), false); err != nil {
			return nil, err
		}
		return &rdqv1.ResumeQueueResponse{}, nil
	})
}
