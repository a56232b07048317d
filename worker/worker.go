// Package worker executes rdq tasks: it claims due tasks from a store, runs
// the handler registered under each task's name, and records the outcome
// according to the queue's retry policy.
//
// A Worker runs, per queue, a fetch loop that claims up to its free
// execution slots (with up to two claims in flight) and a bounded pool of
// executions; one heartbeat loop extends the leases of all running
// executions in one batched call; one completer batches the finishes and
// writes up to two batches at a time. A handler that returns an error, panics or
// outlives its timeout makes a failed attempt; the queue's rdq.Policy decides
// between a retry after a backoff and the dead-letter queue. A retry due
// before the next poll runs again in the same slot, under a lease the store
// keeps for it when it implements store.InPlaceRetrier, with no claim in
// between; the rest go back to the queue.
//
// Maintenance runs on every worker, with no leader: expired leases (of
// workers that crashed or hung) are reclaimed and their tasks retried or
// dead-lettered, and succeeded tasks past their retention are purged. Both
// are safe to run from any number of workers at once.
//
// Delivery is at-least-once: a handler may run again for a task it already
// processed (after a crash, a lost lease or a shutdown that released it), so
// handlers must be idempotent.
//
// # Lifecycle
//
//	w, err := worker.New(worker.Config{
//		Store:  st,
//		Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 20}},
//	})
//	...
//	if err := w.Handle("send-welcome", sendWelcome); err != nil { ... }
//	if err := w.Start(ctx); err != nil { ... }
//	...
//	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
//	defer cancel()
//	err = w.Stop(stopCtx) // stop claiming, let running handlers finish, release the rest
//
// # Observability
//
// Every transition of a task (claimed, succeeded, retry scheduled,
// dead-lettered, lease lost, released, reclaimed) is logged with the keys
// task_id, queue, handler, attempt and worker_id. Payloads are never logged.
//
// With Config.Metrics set, the worker registers these Prometheus
// collectors: rdq_worker_attempts_total{queue,outcome},
// rdq_worker_dead_lettered_total{queue},
// rdq_worker_handler_duration_seconds{queue,handler},
// rdq_worker_claim_duration_seconds{queue}, rdq_worker_reclaimed_total{queue},
// rdq_worker_leases_lost_total{queue}, rdq_worker_released_total{queue},
// rdq_worker_results_dropped_total{queue},
// rdq_worker_in_flight{queue}, rdq_worker_purged_total, and for queues with
// a circuit breaker rdq_worker_breaker_state{queue,handler} (0 closed, 1
// open, 2 half-open) and rdq_worker_breaker_transitions_total{queue,handler,to},
// and on a store with a worker registry rdq_worker_unserved_tasks{queue,handler}
// (waiting tasks no live worker can execute, as of this worker's last look:
// take the max over workers, not the sum).
//
// Every attempt runs in an OpenTelemetry span named "rdq.execute <handler>"
// (kind consumer), whose parent is the trace context the submitter's client
// wrote into the task's headers (traceparent), so retries hours later still
// join the trace that submitted the task.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Handler executes one task. It returns nil on success; an error makes a
// failed attempt, classified by the queue's policy: rdq.Permanent(err) sends
// the task to the dead-letter queue at once, rdq.RetryAfter(d, err) asks
// for the next attempt no sooner than d, and any other error is retried on
// the policy's backoff schedule until attempts are exhausted. A panic is a
// failed attempt recorded with its stack (rdq.PanicError).
//
// The context is cancelled when the handler's timeout passes (the attempt
// then fails with rdq.TimeoutError, whatever the handler returns), when the
// worker loses the task's lease (context.Cause is store.ErrLeaseLost; the
// result is discarded because the task now belongs to another execution),
// shortly before a lease the worker could not renew would expire
// (context.Cause is a *LeaseExpiringError) or when a stopping worker's grace
// period ends (context.Cause is ErrStopping; the task is released without
// counting an attempt). Handlers should return promptly once it is done:
// a handler that does not may run on after another execution of its task
// started (see the README's guarantees; t.LeaseToken is the defence).
//
// A handler that panics or calls runtime.Goexit makes a failed attempt
// (rdq.PanicError, GoexitError). So does an error whose methods panic (a
// typed nil pointer returned as error): rdq.MethodPanicError.
//
// t is a snapshot of the claimed task. t.Attempts is the number of attempts
// made before this one in the task's current life, so the running attempt's
// number within that life is t.NextAttempt(), the number the worker's logs
// and spans give as attempt. The stored history numbers attempts across all
// lives, so after a redrive (t.Life above zero) it records this attempt under
// a larger number. t.LeaseToken is strictly greater for every new
// execution of the task and can serve as an idempotency key downstream.
type Handler func(ctx context.Context, t *rdq.Task) error

// ErrStopping is the context.Cause of a handler's context when a stopping
// worker's grace period ended before the handler returned. The task is
// released: it becomes due again at once and no attempt is counted.
var ErrStopping = errors.New("worker: stopping; the task is released to run again")

// Defaults for zero fields of Config and QueueConfig.
const (
	// DefaultConcurrency is QueueConfig.Concurrency's default.
	DefaultConcurrency = 10
	// DefaultLease is QueueConfig.Lease's default.
	DefaultLease = 30 * time.Second
	// DefaultTimeout is QueueConfig.Timeout's default: long enough for
	// remote calls, short enough that a hung call does not hold a slot
	// (and a heartbeated lease) forever.
	DefaultTimeout = time.Minute
	// DefaultPollInterval is Config.PollInterval's default.
	DefaultPollInterval = time.Second
	// DefaultReclaimInterval is Config.ReclaimInterval's default.
	DefaultReclaimInterval = 10 * time.Second
	// DefaultPurgeInterval is Config.PurgeInterval's default.
	DefaultPurgeInterval = time.Minute
	// DefaultSucceededTTL is Config.SucceededTTL's default.
	DefaultSucceededTTL = 24 * time.Hour
	// DefaultFinishBatchSize is Config.FinishBatchSize's default.
	DefaultFinishBatchSize = 1000
	// DefaultFinishInterval is Config.FinishInterval's default.
	DefaultFinishInterval = 10 * time.Millisecond
)

// NoTimeout, as QueueConfig.Timeout, lets handlers run without a deadline.
const NoTimeout time.Duration = -1

// Disabled, as Config.ReclaimInterval or Config.PurgeInterval, turns that
// maintenance job off on this worker.
const Disabled time.Duration = -1

// PurgeActor is the actor named in the audit entries of the purges a worker
// runs.
const PurgeActor = "rdq-worker"

// QueueConfig configures how a worker runs one queue.
type QueueConfig struct {
	// Policy decides retry or dead-letter after a failed attempt. The zero
	// Policy uses rdq's defaults.
	Policy rdq.Policy
	// Concurrency is the maximum number of handlers running at once for
	// this queue on this worker. Zero means DefaultConcurrency.
	Concurrency int
	// Lease is how long a claim holds a task without a heartbeat. Zero
	// means DefaultLease. When heartbeats fail, the handler's context is
	// cancelled a margin (a tenth of the lease, at least 100ms) before the
	// lease last renewed would expire.
	Lease time.Duration
	// HeartbeatInterval is how often running executions extend their
	// lease; it must be shorter than Lease. Zero means Lease/3.
	HeartbeatInterval time.Duration
	// Timeout bounds one execution of a handler; a handler still running
	// then has its context cancelled and the attempt fails with
	// rdq.TimeoutError, whatever the handler returns once it does. Zero
	// means DefaultTimeout; NoTimeout means none. Go cannot stop a
	// goroutine: a handler that ignores its context runs on (holding its
	// slot and its heartbeated lease) until it returns.
	Timeout time.Duration
	// Breaker, if set, turns on the queue's circuit breaker (see
	// Breaker); &Breaker{} uses the defaults. It needs a store that
	// implements store.HandlerPauser. Nil (the default) turns it off.
	Breaker *Breaker
	// DeadLetterUnserved, if positive, dead-letters the queue's tasks
	// whose handler no live registered worker has (see
	// store.WorkerRegistry) once they have been due this long, each with
	// an attempt of error type rdq.UnservedHandlerErrorType, audited as
	// "dead_letter_unserved". Zero (the default) leaves them waiting.
	// Workers that do not register (other SDKs, older builds) count as
	// absent: keep it off for queues they serve. It needs a store that
	// implements store.WorkerRegistry and a registering worker.
	DeadLetterUnserved time.Duration
}

// Config configures a Worker.
type Config struct {
	// Store is where tasks are claimed from. Required. If it implements
	// store.Notifier, the worker wakes on its notifications and polls only
	// as a fallback.
	Store store.Store
	// ID names this worker in leases, attempt history and logs. Empty
	// means hostname-pid-random.
	ID string
	// Logger receives a record of every task transition. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Queues maps each queue this worker runs to its configuration.
	// At least one is required.
	Queues map[string]QueueConfig

	// PollInterval is how often each queue is polled for due tasks when no
	// notification arrives (retries becoming due are only found by
	// polling). Zero means DefaultPollInterval.
	PollInterval time.Duration
	// ReclaimInterval is how often the worker reclaims expired leases in
	// its queues. Zero means DefaultReclaimInterval; Disabled turns
	// reclaiming off on this worker.
	ReclaimInterval time.Duration
	// PurgeInterval is how often the worker purges succeeded tasks older
	// than SucceededTTL (from every queue). Zero means
	// DefaultPurgeInterval; Disabled turns purging off on this worker.
	PurgeInterval time.Duration
	// SucceededTTL is how long succeeded tasks are kept. Zero means
	// DefaultSucceededTTL.
	SucceededTTL time.Duration

	// FinishBatchSize and FinishInterval bound the completer's batching:
	// finished executions are written in one call when this many are
	// waiting or when the oldest has waited this long. Zero means
	// DefaultFinishBatchSize and DefaultFinishInterval.
	FinishBatchSize int
	FinishInterval  time.Duration

	// RegistryInterval is how often the worker refreshes its entry in the
	// store's worker registry (when the store implements
	// store.WorkerRegistry): one statement per interval. The entry is
	// stale after three missed refreshes. Every sixth refresh the worker
	// also looks for waiting tasks of its queues that no live worker can
	// execute, logs them (each queue and handler at most once every ten
	// looks), exports them as rdq_worker_unserved_tasks and applies
	// QueueConfig.DeadLetterUnserved. Zero means DefaultRegistryInterval;
	// Disabled turns registration off.
	RegistryInterval time.Duration

	// Metrics, if set, receives the worker's Prometheus collectors.
	// Workers sharing a registerer share the collectors.
	Metrics prometheus.Registerer
	// TracerProvider creates a span per attempt. Nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator extracts the submitter's trace context from task headers,
	// so an attempt's span joins the submitter's trace. Nil means
	// otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
}

// storeCallTimeout bounds each store call the worker makes on its own.
const storeCallTimeout = 30 * time.Second

// abandonAfter is how long Stop waits, once the grace period is over and
// handlers are cancelled, for them to return before releasing their tasks
// and abandoning them.
const abandonAfter = time.Second

// reclaimBatch and purgeBatch bound one maintenance call; a full batch is
// followed by another, up to maintenanceRounds per run.
const (
	reclaimBatch      = 100
	purgeBatch        = 1000
	maintenanceRounds = 10
)

type state int

const (
	stateNew state = iota
	stateRunning
	stateStopping
	stateStopped
)

// Worker claims and executes tasks. Create it with New, register handlers
// with Handle, then Start it; Stop shuts it down gracefully. A Worker runs
// once: it cannot be restarted after Stop.
type Worker struct {
	store      store.Store
	id         string
	log        *slog.Logger
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	metrics    *metrics

	pollInterval    time.Duration
	reclaimInterval time.Duration
	purgeInterval   time.Duration
	succeededTTL    time.Duration

	queues     []*queue // sorted by name
	queueNames []string
	byName     map[string]*queue

	mu         sync.Mutex
	state      state
	handlers   map[string]Handler
	middleware []func(next Handler) Handler
	// handlerNames are the registered handlers, sorted; set by Start. A
	// claim takes only their tasks.
	handlerNames []string
	// spanNames are the names of the executions' spans, by handler; set
	// by Start.
	spanNames map[string]string

	// Set by Start.
	baseCtx     context.Context // values of Start's ctx; cancelled when Stop ends
	cancelBase  context.CancelFunc
	loopCtx     context.Context // cancelled when Stop begins
	cancelLoops context.CancelFunc
	// handlerCtx is the parent of execution contexts: the values of
	// Start's ctx, never cancelled (see leaseSet.cancelAll).
	handlerCtx   context.Context
	stopClaiming chan struct{}

	loops sync.WaitGroup // fetch, notification and maintenance loops
	execs sync.WaitGroup // executions
	// Executions run on goroutines that are reused (see executors).
	executors executors
	bg        sync.WaitGroup // heartbeat loop and completer

	leases        *leaseSet
	completer     *completer
	handlerPauser store.HandlerPauser // set when a queue has a breaker
	// registryInterval is Config.RegistryInterval with its default;
	// registry is set by Start when the store keeps a worker registry.
	registryInterval time.Duration
	registryStore    store.WorkerRegistry
	registry         *registry
	unservedGauge    *prometheus.GaugeVec
	snoozer          store.Snoozer // nil when the store cannot snooze
	// retrier keeps retries due before the next poll in place; nil when
	// the store cannot.
	retrier  store.InPlaceRetrier
	hbStop   chan struct{}
	stopDone chan struct{} // closed when Stop has finished
}

// New validates cfg and returns a Worker. Invalid configuration is reported
// as an error wrapping rdq.ErrInvalid.
func New(cfg Config) (*Worker, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: worker: Config.Store is nil", rdq.ErrInvalid)
	}
	if len(cfg.Queues) == 0 {
		return nil, fmt.Errorf("%w: worker: Config.Queues is empty; configure at least one queue", rdq.ErrInvalid)
	}
	w := &Worker{
		store:    cfg.Store,
		id:       cfg.ID,
		handlers: make(map[string]Handler),
		byName:   make(map[string]*queue, len(cfg.Queues)),
	}
	if w.id == "" {
		w.id = defaultID()
	}
	var err error
	if w.pollInterval, err = durationOr("PollInterval", cfg.PollInterval, DefaultPollInterval, false); err != nil {
		return nil, err
	}
	if w.reclaimInterval, err = durationOr("ReclaimInterval", cfg.ReclaimInterval, DefaultReclaimInterval, true); err != nil {
		return nil, err
	}
	if w.purgeInterval, err = durationOr("PurgeInterval", cfg.PurgeInterval, DefaultPurgeInterval, true); err != nil {
		return nil, err
	}
	if w.registryInterval, err = durationOr("RegistryInterval", cfg.RegistryInterval, DefaultRegistryInterval, true); err != nil {
		return nil, err
	}
	if reg, ok := store.RegistryOf(cfg.Store); ok && w.registryInterval != Disabled {
		w.registryStore = reg
	}
	if w.succeededTTL, err = durationOr("SucceededTTL", cfg.SucceededTTL, DefaultSucceededTTL, false); err != nil {
		return nil, err
	}
	finishInterval, err := durationOr("FinishInterval", cfg.FinishInterval, DefaultFinishInterval, false)
	if err != nil {
		return nil, err
	}
	batch := cfg.FinishBatchSize
	switch {
	case batch < 0:
		return nil, fmt.Errorf("%w: worker: FinishBatchSize %d is negative", rdq.ErrInvalid, batch)
	case batch == 0:
		batch = DefaultFinishBatchSize
	}

	for name, qc := range cfg.Queues {
		q, err := newQueue(name, qc)
		if err != nil {
			return nil, err
		}
		w.queues = append(w.queues, q)
		w.byName[name] = q
		if q.breaker != nil && w.handlerPauser == nil {
			hp, ok := store.HandlerPauserOf(cfg.Store)
			if !ok {
				return nil, fmt.Errorf("%w: worker: queue %s has a Breaker, but the store (%T) cannot pause handlers (store.HandlerPauser)", rdq.ErrInvalid, name, cfg.Store)
			}
			w.handlerPauser = hp
		}
		if q.deadLetterUnserved > 0 && w.registryStore == nil {
			return nil, fmt.Errorf("%w: worker: queue %s has DeadLetterUnserved, which needs a store with a worker registry (store.WorkerRegistry; %T has none) and RegistryInterval not Disabled", rdq.ErrInvalid, name, cfg.Store)
		}
	}
	w.snoozer, _ = store.SnoozerOf(cfg.Store)
	w.retrier, _ = store.InPlaceRetrierOf(cfg.Store)
	sort.Slice(w.queues, func(i, j int) bool { return w.queues[i].name < w.queues[j].name })
	for _, q := range w.queues {
		w.queueNames = append(w.queueNames, q.name)
	}

	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	w.log = logger.With(slog.String("worker_id", w.id))

	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	w.tracer = tp.Tracer("github.com/srjn45/rdq/worker")
	w.propagator = cfg.Propagator
	if w.propagator == nil {
		w.propagator = otel.GetTextMapPropagator()
	}
	if w.metrics, err = newMetrics(cfg.Metrics); err != nil {
		return nil, err
	}
	if w.unservedGauge, err = newUnservedGauge(cfg.Metrics); err != nil {
		return nil, err
	}
	w.leases = newLeaseSet()
	w.completer = newCompleter(w, batch, finishInterval)
	return w, nil
}

func durationOr(field string, d, def time.Duration, allowDisabled bool) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case allowDisabled && d == Disabled:
		return Disabled, nil
	case d < 0:
		return 0, fmt.Errorf("%w: worker: %s %s is negative", rdq.ErrInvalid, field, d)
	}
	return d, nil
}

// defaultID returns hostname-pid-random.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms; fall
		// back to the clock so the ID stays distinct.
		return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// ID returns the worker's ID, as recorded in leases and attempt history.
func (w *Worker) ID() string { return w.id }

// Handle registers h as the handler of tasks whose Handler is name. Tasks
// naming a handler that is not registered fail permanently (see
// UnknownHandlerError).
//
// Registration happens before Start. Handle returns an error wrapping
// rdq.ErrInvalid, and registers nothing, if name is not a valid name
// (rdq.ValidateName), h is nil, name is already registered or the worker has
// started. A configuration-driven program (handler names read from a file)
// reports that error to its operator; a program registering literal names
// can treat it as fatal at start-up.
func (w *Worker) Handle(name string, h Handler) error {
	if err := rdq.ValidateName("handler", name); err != nil {
		return fmt.Errorf("worker: Handle: %w", err)
	}
	if h == nil {
		return fmt.Errorf("%w: worker: Handle(%q): handler is nil", rdq.ErrInvalid, name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		return fmt.Errorf("%w: worker: Handle(%q) after Start; register every handler before starting the worker", rdq.ErrInvalid, name)
	}
	if _, dup := w.handlers[name]; dup {
		return fmt.Errorf("%w: worker: Handle(%q): a handler is already registered under this name", rdq.ErrInvalid, name)
	}
	w.handlers[name] = h
	return nil
}

// Use adds middleware wrapping every registered handler. The first
// middleware added is the outermost: Use(a, b) runs a, which calls b, which
// calls the handler. Middleware is applied once, at Start, to every handler
// registered by then (not to the failure of a task naming no registered
// handler).
//
// Middleware runs inside everything the worker does around an attempt: the
// attempt's span is already in its context (it is the span's child work),
// the queue's timeout already bounds its context, and it runs under the
// worker's panic and runtime.Goexit guards, so a panic in middleware is a
// failed attempt recorded with its stack, exactly like a handler's. What it
// returns is the attempt's result: the policy classifies it, and a timeout
// overrun fails the attempt whatever it returns.
//
// Use returns an error wrapping rdq.ErrInvalid, and adds nothing, if a
// middleware is nil or the worker has started.
func (w *Worker) Use(mw ...func(next Handler) Handler) error {
	for i, m := range mw {
		if m == nil {
			return fmt.Errorf("%w: worker: Use: middleware %d is nil", rdq.ErrInvalid, i)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		return fmt.Errorf("%w: worker: Use after Start; add middleware before starting the worker", rdq.ErrInvalid)
	}
	w.middleware = append(w.middleware, mw...)
	return nil
}

// wrapHandlers applies the middleware to every handler, at Start.
func (w *Worker) wrapHandlers() (err error) {
	if len(w.middleware) == 0 {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("worker: Start: a middleware panicked wrapping a handler: %v", v)
		}
	}()
	wrapped := make(map[string]Handler, len(w.handlers))
	for name, h := range w.handlers {
		for i := len(w.middleware) - 1; i >= 0; i-- {
			if h = w.middleware[i](h); h == nil {
				return fmt.Errorf("%w: worker: Start: middleware %d returned a nil handler for %q", rdq.ErrInvalid, i, name)
			}
		}
		wrapped[name] = h
	}
	w.handlers = wrapped
	return nil
}

// handler returns the handler registered under name; the map is read-only
// once the worker has started.
func (w *Worker) handler(name string) (Handler, bool) {
	h, ok := w.handlers[name]
	return h, ok
}

// checkMigrated reads one task, by a fresh ID no task has, to refuse to
// start on a database that was never migrated: polling it would only log
// the same error every poll interval. Any other failure (the database
// unreachable for now) does not stop the start: the worker rides out
// outages.
func (w *Worker) checkMigrated(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	_, _, err := w.store.Get(cctx, rdq.NewID())
	switch {
	case err == nil, errors.Is(err, store.ErrNotFound):
		return nil
	case errors.Is(err, store.ErrNotMigrated):
		return fmt.Errorf("worker: %w", err)
	default:
		w.log.Warn("the store could not be read at start; claiming will retry", slog.Any("error", err))
		return nil
	}
}

// queueList names the worker's queues for a message: "a", "a, b".
func (w *Worker) queueList() string {
	names := make([]string, len(w.queues))
	for i, q := range w.queues {
		names[i] = strconv.Quote(q.name)
	}
	return strings.Join(names, ", ")
}

// Start starts the worker's loops and returns. The worker runs until Stop;
// ctx bounds only the subscription to notifications and gives its values
// (which handler contexts inherit), not its cancellation, to the worker.
//
// If the store is a store.Notifier, Start subscribes before it returns, so
// a task submitted after Start returns wakes the worker at once; if
// subscribing fails (or ctx ends first), the failure is logged and the
// worker polls while it subscribes again in the background. Start returns
// an error if the worker was already started, no handler is registered
// (wrapping rdq.ErrInvalid: every queue it serves would have nothing to
// run), a middleware failed, or the store holds no rdq tables (wrapping
// store.ErrNotMigrated: migrate it first); a store it cannot reach yet is
// logged, and claiming retries.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		return errors.New("worker: Start on a worker already started or stopped; a Worker runs once")
	}
	if len(w.handlers) == 0 {
		return fmt.Errorf("%w: worker: Start: no handler is registered, so its queues (%s) have nothing to run; call Handle for each handler its tasks name before Start",
			rdq.ErrInvalid, w.queueList())
	}
	if err := w.checkMigrated(ctx); err != nil {
		return err
	}
	if err := w.wrapHandlers(); err != nil {
		return err
	}
	w.state = stateRunning
	w.handlerNames = slices.Sorted(maps.Keys(w.handlers))
	w.spanNames = make(map[string]string, len(w.handlers))
	for name := range w.handlers {
		w.spanNames[name] = "rdq.execute " + name
	}
	for _, q := range w.queues {
		q.metrics = newQueueMetrics(w.handlerNames)
	}

	w.baseCtx, w.cancelBase = context.WithCancel(context.WithoutCancel(ctx))
	w.loopCtx, w.cancelLoops = context.WithCancel(w.baseCtx)
	w.handlerCtx = context.WithoutCancel(w.baseCtx)
	w.stopClaiming = make(chan struct{})
	w.hbStop = make(chan struct{})
	w.stopDone = make(chan struct{})

	w.executors.start()
	w.bg.Add(3)
	go w.completer.run()
	go w.heartbeatLoop()
	go w.expiryLoop()
	if w.registryStore != nil {
		w.registry = w.newRegistry(w.registryStore)
		w.bg.Add(1)
		go func() {
			w.registry.refresh()
			w.registry.loop()
		}()
	}

	for _, q := range w.queues {
		w.loops.Add(1)
		go w.fetchLoop(q)
	}
	n, notifies := store.NotifierOf(w.store)
	if notifies {
		subCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		ch, err := w.subscribe(subCtx, n)
		cancel()
		if err != nil {
			w.log.Warn("subscribing to notifications failed; polling meanwhile", slog.Any("error", err))
		}
		w.loops.Add(1)
		go w.notificationLoop(n, ch)
	}
	if w.reclaimInterval != Disabled || w.purgeInterval != Disabled {
		w.loops.Add(1)
		go w.maintenanceLoop()
	}
	// What the store offers decides how the worker runs: a store wrapper
	// that does not unwrap (store.Wrapper) hides it, and the worker then
	// polls and sends every retry back to its queue.
	w.log.Info("worker started", slog.Any("queues", w.queueNames),
		slog.Bool("notifications", notifies), slog.Bool("retries_in_place", w.retrier != nil))
	return nil
}

// Stop shuts the worker down gracefully: it stops claiming, then waits for
// running handlers to return until ctx is done. Handlers still running then
// have their context cancelled (context.Cause is ErrStopping); their tasks
// are released, due again at once, without counting an attempt. Handlers
// that ignore cancellation for more than a second are abandoned: whatever
// they return later is discarded. Finished results are flushed to the store
// before Stop returns, and every goroutine of the worker (except abandoned
// handlers) has exited.
//
// Stop returns nil when every handler finished within the grace period, and
// otherwise an error wrapping ctx.Err() (and any error from releasing).
// Calling Stop on a worker that never started returns nil (and the worker
// can no longer start); calling it again, or concurrently, waits until the
// first call has finished (or ctx is done) and returns nil.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	switch w.state {
	case stateNew:
		w.state = stateStopped
		w.mu.Unlock()
		return nil
	case stateStopping, stateStopped:
		done := w.stopDone
		w.mu.Unlock()
		if done == nil {
			return nil
		}
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("worker: waiting for another Stop: %w", ctx.Err())
		}
	}
	w.state = stateStopping
	close(w.stopClaiming)
	w.cancelLoops()
	w.mu.Unlock()

	w.log.Info("worker stopping")
	w.loops.Wait()

	done := make(chan struct{})
	go func() {
		w.execs.Wait()
		close(done)
	}()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		w.leases.cancelAll(ErrStopping)
		select {
		case <-done:
		case <-time.After(abandonAfter):
		}
		n, err := w.releaseRemaining()
		errs = append(errs, fmt.Errorf("worker: grace period over, released %d tasks: %w", n, ctx.Err()))
		if err != nil {
			errs = append(errs, err)
		}
	}

	w.executors.stop()
	w.leases.completing.Wait()
	w.completer.close()
	close(w.hbStop)
	w.bg.Wait()
	if w.registry != nil {
		w.registry.deregister()
	}
	w.leases.cancelAll(ErrStopping)
	w.cancelBase()

	w.mu.Lock()
	w.state = stateStopped
	w.mu.Unlock()
	close(w.stopDone)
	w.log.Info("worker stopped")
	return errors.Join(errs...)
}

// releaseRemaining releases the leases of executions interrupted by the end
// of the grace period, and abandons executions still running.
func (w *Worker) releaseRemaining() (int, error) {
	execs := w.leases.takeForRelease()
	if len(execs) == 0 {
		return 0, nil
	}
	return len(execs), w.release(execs)
}

// release gives back the leases of execs without counting an attempt and
// logs each.
func (w *Worker) release(execs []*execution) error {
	leases := make([]store.Lease, len(execs))
	for i, e := range execs {
		leases[i] = e.lease
	}
	ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
	defer cancel()
	errs, err := w.store.Release(ctx, store.ReleaseParams{Leases: leases})
	if err != nil {
		for _, e := range execs {
			w.logTask(slog.LevelError, "release failed; the lease will expire and the task be reclaimed", e, slog.Any("error", err))
		}
		return fmt.Errorf("worker: releasing %d tasks: %w", len(execs), err)
	}
	if len(errs) != len(execs) {
		return fmt.Errorf("worker: store returned %d results releasing %d tasks", len(errs), len(execs))
	}
	for i, e := range execs {
		switch {
		case errs[i] == nil:
			w.metrics.released.WithLabelValues(e.q.name).Inc()
			w.logTask(slog.LevelInfo, "task released", e)
		case errors.Is(errs[i], store.ErrLeaseLost):
			w.metrics.leaseLost.WithLabelValues(e.q.name).Inc()
			w.logTask(slog.LevelWarn, "lease lost before release", e)
		default:
			w.logTask(slog.LevelError, "release failed", e, slog.Any("error", errs[i]))
		}
	}
	return nil
}

// logTask logs a transition of e's task with the standard keys.
func (w *Worker) logTask(level slog.Level, msg string, e *execution, attrs ...slog.Attr) {
	w.logTaskFields(level, msg, e.lease.ID, e.q.name, e.handler, e.attempt, attrs...)
}

func (w *Worker) logTaskFields(level slog.Level, msg string, id rdq.ID, queue, handler string, attempt int, attrs ...slog.Attr) {
	if !w.log.Enabled(w.baseCtx, level) {
		return
	}
	all := make([]slog.Attr, 0, 4+len(attrs))
	all = append(all,
		slog.String("task_id", id.String()),
		slog.String("queue", queue),
		slog.String("handler", handler),
		slog.Int("attempt", attempt),
	)
	all = append(all, attrs...)
	w.log.LogAttrs(w.baseCtx, level, msg, all...)
}
