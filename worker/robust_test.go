package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// faultStore injects failures into a real store's Finish and Heartbeat.
type faultStore struct {
	*pgstore.Store
	mu       sync.Mutex
	poisoned map[rdq.ID]bool // Finish fails as a whole while it holds one of these
	failed   atomic.Int64    // Finish calls failed on purpose
	hbDown   atomic.Bool     // Heartbeat fails as a whole
}

func (f *faultStore) poison(id rdq.ID, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.poisoned == nil {
		f.poisoned = map[rdq.ID]bool{}
	}
	f.poisoned[id] = on
}

func (f *faultStore) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	f.mu.Lock()
	bad := slices.ContainsFunc(p.Completions, func(c store.Completion) bool { return f.poisoned[c.ID] })
	f.mu.Unlock()
	if bad {
		f.failed.Add(1)
		return nil, errors.New("injected: the store is unreachable for this batch")
	}
	return f.Store.Finish(ctx, p)
}

func (f *faultStore) Heartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	if f.hbDown.Load() {
		return nil, errors.New("injected: heartbeat cannot reach the store")
	}
	return f.Store.Heartbeat(ctx, p)
}

// A task submitted with its first failure under MaxAttempts 1 has spent its
// budget: it goes to the dead-letter queue without its handler running.
func TestExhaustedAtSubmissionNeverRuns(t *testing.T) {
	e := newEnv(t)
	calls := newCounter()
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(1)}},
	}, map[string]worker.Handler{
		"h": func(ctx context.Context, task *rdq.Task) error { calls.inc(task.ID); return nil },
	})
	id := e.submit(client.Task{Queue: "q", Handler: "h", FirstFailure: errors.New("the call that made us submit failed")})
	task, attempts := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	if calls.get(id) != 0 {
		t.Errorf("the handler ran %d times for a task whose attempts were spent", calls.get(id))
	}
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure)
	if task.LastError.Message != "the call that made us submit failed" || task.Attempts != 1 {
		t.Errorf("dead task: attempts %d, last error %+v; want the first failure", task.Attempts, task.LastError)
	}
}

// A result that cannot be written is retried while the lease lasts, and
// does not hold back the results of other tasks meanwhile.
func TestResultRetriedWhileOthersFlow(t *testing.T) {
	e := newEnv(t)
	st := &faultStore{Store: e.st}
	e.newWorker(worker.Config{
		Store:  st,
		Queues: map[string]worker.QueueConfig{"q": {Concurrency: 8}},
	}, map[string]worker.Handler{
		"ok": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	// Poison the first task before it runs: its task ID is known once
	// submitted, and the worker claims it right after.
	id := rdq.NewID()
	st.poison(id, true)
	if _, err := st.Store.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{{ID: id, Queue: "q", Handler: "ok"}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		if st.failed.Load() < 3 {
			return fmt.Errorf("%d failed writes so far", st.failed.Load())
		}
		return nil
	})
	var others []rdq.ID
	for range 20 {
		others = append(others, e.submit(client.Task{Queue: "q", Handler: "ok"}))
	}
	for _, o := range others {
		e.waitStatus(o, rdq.StatusSucceeded, 5*time.Second)
	}
	if task, _ := e.get(id); task.Status != rdq.StatusInFlight {
		t.Fatalf("the poisoned task is %s, want IN_FLIGHT while its result cannot be written", task.Status)
	}
	st.poison(id, false)
	_, attempts := e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeSuccess)
}

// When the lease cannot be renewed, the handler is cancelled before the
// lease expires (after which another worker could take the task), and the
// attempt says why.
func TestUnrenewableLeaseCancelsHandlerBeforeExpiry(t *testing.T) {
	e := newEnv(t)
	st := &faultStore{Store: e.st}
	st.hbDown.Store(true)
	const lease = time.Second
	type cancelled struct {
		cause error
		after time.Duration
	}
	got := make(chan cancelled, 1)
	e.newWorker(worker.Config{
		Store:  st,
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(1), Lease: lease, HeartbeatInterval: 200 * time.Millisecond}},
	}, map[string]worker.Handler{
		"long": func(ctx context.Context, task *rdq.Task) error {
			start := time.Now()
			<-ctx.Done()
			got <- cancelled{context.Cause(ctx), time.Since(start)}
			return ctx.Err()
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "long"})
	c := recv(t, got, 10*time.Second, "the handler's cancellation")
	var le *worker.LeaseExpiringError
	if !errors.As(c.cause, &le) {
		t.Errorf("handler context ended with %v, want a *worker.LeaseExpiringError", c.cause)
	}
	// The handler started after the claim was sent, so the lease expires
	// less than a lease after the handler started.
	if c.after >= lease {
		t.Errorf("handler cancelled %s after it started, not before its %s lease could expire", c.after, lease)
	}
	_, attempts := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure)
	if attempts[0].ErrorType != "lease_unrenewable" {
		t.Errorf("attempt recorded as %s %q, want lease_unrenewable", attempts[0].ErrorType, attempts[0].Message)
	}
}

// Middleware runs in the order added, inside the attempt's span, its
// timeout and its panic guard.
func TestMiddleware(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	mw := func(name string) func(worker.Handler) worker.Handler {
		return func(next worker.Handler) worker.Handler {
			return func(ctx context.Context, task *rdq.Task) error {
				if _, ok := ctx.Deadline(); !ok {
					note(name + ": no deadline")
				}
				if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
					note(name + ": no span")
				}
				note(name + " before")
				if task.Handler == "explodes-in-middleware" && name == "inner" {
					panic("middleware exploded")
				}
				err := next(ctx, task)
				note(name + " after")
				return err
			}
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	w := e.createWorker(worker.Config{
		Queues:         map[string]worker.QueueConfig{"q": {Policy: fastPolicy(1), Timeout: time.Minute}},
		TracerProvider: tp,
	}, map[string]worker.Handler{
		"ok":                     func(ctx context.Context, task *rdq.Task) error { note("handler"); return nil },
		"explodes-in-middleware": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	if err := w.Use(mw("outer"), mw("inner")); err != nil {
		t.Fatal(err)
	}
	if err := w.Use(nil); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("Use(nil): %v, want ErrInvalid", err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if err := w.Use(mw("late")); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("Use after Start: %v, want ErrInvalid", err)
	}
	id := e.submit(client.Task{Queue: "q", Handler: "ok"})
	e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)
	mu.Lock()
	want := []string{"outer before", "inner before", "handler", "inner after", "outer after"}
	if !slices.Equal(order, want) {
		t.Errorf("calls %q, want %q", order, want)
	}
	mu.Unlock()

	id = e.submit(client.Task{Queue: "q", Handler: "explodes-in-middleware"})
	_, attempts := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	if a := attempts[0]; a.ErrorType != "panic" || a.Message != "panic: middleware exploded" || a.Stack == "" {
		t.Errorf("middleware panic recorded as %s %q", a.ErrorType, a.Message)
	}
}

// getFailStore fails every Get with err, to start a worker on a store that
// cannot be read.
type getFailStore struct {
	*pgstore.Store
	err error
}

func (g getFailStore) Get(context.Context, rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	return nil, nil, g.err
}

// A worker refuses to start on a database that was never migrated, which it
// would otherwise poll forever, logging the same error; a store it merely
// cannot reach yet does not stop it from starting.
func TestStartRefusesAnUnmigratedStore(t *testing.T) {
	ctx := context.Background()
	st, err := pgstore.New(pgtest.Pool(t), pgstore.Config{Schema: pgtest.SchemaName(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Store: st, Logger: testLogger(), Queues: map[string]worker.QueueConfig{"q": {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("h", func(context.Context, *rdq.Task) error { return nil }); err != nil {
		t.Fatal(err)
	}
	startErr := w.Start(ctx)
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(startErr, store.ErrNotMigrated) {
		t.Fatalf("Start on an unmigrated schema: %v, want store.ErrNotMigrated", startErr)
	}

	migrated, _ := pgtest.NewStore(t)
	down := getFailStore{Store: migrated, err: errors.New("injected: connection refused")}
	w, err = worker.New(worker.Config{Store: down, Logger: testLogger(), Queues: map[string]worker.QueueConfig{"q": {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("h", func(context.Context, *rdq.Task) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start on a store that cannot be read yet: %v, want a start", err)
	}
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
}

// lostReplyStore commits Finish calls but loses the reply of the first one
// that holds a chosen task, as a connection that drops after the commit
// does.
type lostReplyStore struct {
	*pgstore.Store
	id   rdq.ID
	lost atomic.Bool
}

func (l *lostReplyStore) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	errs, err := l.Store.Finish(ctx, p)
	if err == nil && slices.ContainsFunc(p.Completions, func(c store.Completion) bool { return c.ID == l.id }) && l.lost.CompareAndSwap(false, true) {
		return nil, errors.New("injected: connection reset after the commit")
	}
	return errs, err
}

// A result whose Finish committed but whose reply was lost is recognized as
// written when the retry finds the lease spent: it is counted as the
// attempt it was, not as a lost lease and a discarded result.
func TestLostFinishReplyIsNotALostLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		outcome rdq.Outcome
		status  rdq.Status
	}{
		{"success", nil, rdq.OutcomeSuccess, rdq.StatusSucceeded},
		{"retry", errors.New("downstream timeout"), rdq.OutcomeRetryableFailure, rdq.StatusPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			id := rdq.NewID()
			st := &lostReplyStore{Store: e.st, id: id}
			reg := prometheus.NewRegistry()
			ran := make(chan struct{}, 10)
			e.newWorker(worker.Config{
				Store: st, Metrics: reg,
				Queues: map[string]worker.QueueConfig{"q": {Concurrency: 2, Policy: rdq.Policy{MaxAttempts: 2, InitialBackoff: time.Hour, Multiplier: 1, MaxBackoff: time.Hour, Jitter: rdq.NoJitter}}},
			}, map[string]worker.Handler{
				"h": func(ctx context.Context, task *rdq.Task) error { ran <- struct{}{}; return tc.err },
			})
			if _, err := st.Store.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{{ID: id, Queue: "q", Handler: "h"}}}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, func() error {
				n, err := testutil.GatherAndCount(reg, "rdq_worker_attempts_total")
				if err != nil || n == 0 || !st.lost.Load() {
					return fmt.Errorf("no attempt counted yet (%d series, %v; reply lost: %v)", n, err, st.lost.Load())
				}
				return nil
			})
			task, history := e.get(id)
			if task.Status != tc.status || len(history) != 1 || history[0].Outcome != tc.outcome {
				t.Fatalf("task %s with %d attempts (%v), want %s with one %s attempt", task.Status, len(history), history, tc.status, tc.outcome)
			}
			want := fmt.Sprintf(`
# HELP rdq_worker_attempts_total Attempts recorded, by queue and outcome (SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED).
# TYPE rdq_worker_attempts_total counter
rdq_worker_attempts_total{outcome="%s",queue="q"} 1
`, tc.outcome)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rdq_worker_attempts_total"); err != nil {
				t.Error(err)
			}
			if n, err := testutil.GatherAndCount(reg, "rdq_worker_leases_lost_total"); err != nil || n != 0 {
				t.Errorf("%d lease-lost series (%v), want none: the result was written", n, err)
			}
			if len(ran) != 1 {
				t.Errorf("the handler ran %d times, want once", len(ran))
			}
		})
	}
}

// lostRetryReplyStore commits RetryInPlace calls but loses the reply of the
// first one that holds a chosen task.
type lostRetryReplyStore struct {
	*pgstore.Store
	id   rdq.ID
	lost atomic.Bool
}

func (l *lostRetryReplyStore) RetryInPlace(ctx context.Context, p store.RetryInPlaceParams) ([]store.RetryInPlaceResult, error) {
	results, err := l.Store.RetryInPlace(ctx, p)
	if err == nil && slices.ContainsFunc(p.Retries, func(c store.Completion) bool { return c.ID == l.id }) && l.lost.CompareAndSwap(false, true) {
		return nil, errors.New("injected: connection reset after the commit")
	}
	return results, err
}

// A retry kept in place whose write committed but whose reply was lost is
// recognized, when the write is tried again, as kept under the next lease:
// the next attempt runs under it at once, and no lease is lost or left to
// expire.
func TestLostRetryInPlaceReplyKeepsTheLease(t *testing.T) {
	e := newEnv(t)
	id := rdq.NewID()
	st := &lostRetryReplyStore{Store: e.st, id: id}
	reg := prometheus.NewRegistry()
	calls := newCounter()
	e.newWorker(worker.Config{
		Store: st, Metrics: reg, PollInterval: time.Minute,
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(3)}},
	}, map[string]worker.Handler{
		"h": func(ctx context.Context, task *rdq.Task) error {
			if calls.inc(task.ID) == 1 {
				return errFlaky
			}
			return nil
		},
	})
	if _, err := st.Store.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{{ID: id, Queue: "q", Handler: "h"}}}); err != nil {
		t.Fatal(err)
	}
	task, history := e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)
	if !st.lost.Load() {
		t.Fatal("no retry-in-place reply was lost: the test did not test it")
	}
	checkAttempts(t, history, rdq.OutcomeRetryableFailure, rdq.OutcomeSuccess)
	if history[1].LeaseToken != history[0].LeaseToken+1 || task.Attempts != 2 {
		t.Errorf("attempts under tokens %d then %d (task attempts %d), want consecutive tokens and 2", history[0].LeaseToken, history[1].LeaseToken, task.Attempts)
	}
	if n := calls.get(id); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
	if n, err := testutil.GatherAndCount(reg, "rdq_worker_leases_lost_total", "rdq_worker_results_dropped_total"); err != nil || n != 0 {
		t.Errorf("%d lease-lost or dropped-result series (%v), want none", n, err)
	}
}

// overlap holds each call that enters it until two calls are inside at
// once, or until the test has failed anyway.
type overlap struct {
	inside atomic.Int32
	once   sync.Once
	both   chan struct{} // closed once two calls were inside at once
}

func newOverlap() *overlap { return &overlap{both: make(chan struct{})} }

// enter waits as overlap says; the caller calls the returned leave when its
// call ends.
func (o *overlap) enter() (leave func()) {
	if o.inside.Add(1) >= 2 {
		o.once.Do(func() { close(o.both) })
	}
	select {
	case <-o.both:
	case <-time.After(20 * time.Second): // the test has failed by then
	}
	return func() { o.inside.Add(-1) }
}

// overlapStore holds each Finish call until two are being made at once.
type overlapStore struct {
	*pgstore.Store
	writes *overlap
}

func (s *overlapStore) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	defer s.writes.enter()()
	return s.Store.Finish(ctx, p)
}

// A slow write of results does not hold back the results that arrive
// meanwhile: they are written at the same time, in a batch of their own.
func TestResultsWrittenWhileAWriteIsSlow(t *testing.T) {
	e := newEnv(t)
	st := &overlapStore{Store: e.st, writes: newOverlap()}
	e.newWorker(worker.Config{
		Store:           st,
		Queues:          map[string]worker.QueueConfig{"q": {Concurrency: 4}},
		FinishBatchSize: 1,
	}, map[string]worker.Handler{
		"ok": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	first := e.submit(client.Task{Queue: "q", Handler: "ok"})
	waitFor(t, 10*time.Second, func() error {
		if n := st.writes.inside.Load(); n != 1 {
			return fmt.Errorf("%d Finish calls in progress, want the first one", n)
		}
		return nil
	})
	second := e.submit(client.Task{Queue: "q", Handler: "ok"})
	e.waitStatus(second, rdq.StatusSucceeded, 10*time.Second)
	e.waitStatus(first, rdq.StatusSucceeded, 10*time.Second)
}

// overlapClaimStore holds each claim after the first until two are being
// made at once.
type overlapClaimStore struct {
	*pgstore.Store
	calls  atomic.Int32
	claims *overlap
}

func (s *overlapClaimStore) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	if s.calls.Add(1) > 1 {
		defer s.claims.enter()()
	}
	return s.Store.Claim(ctx, p)
}

// A slow claim does not keep the slots that free meanwhile empty: a second
// claim fills them at the same time.
func TestSlotsFilledWhileAClaimIsSlow(t *testing.T) {
	e := newEnv(t)
	st := &overlapClaimStore{Store: e.st, claims: newOverlap()}
	var started atomic.Int32
	release := make(chan struct{})
	var ids []rdq.ID
	for range 16 {
		ids = append(ids, e.submit(client.Task{Queue: "q", Handler: "h"}))
	}
	e.newWorker(worker.Config{
		Store:  st,
		Queues: map[string]worker.QueueConfig{"q": {Concurrency: 8}},
	}, map[string]worker.Handler{
		"h": func(ctx context.Context, task *rdq.Task) error {
			if started.Add(1) <= 8 {
				<-release
			}
			return nil
		},
	})
	// The first claim fills the 8 slots. Freeing half of them sends a
	// second claim, which the store holds; freeing the rest must send a
	// third while the second is held.
	waitFor(t, 10*time.Second, func() error {
		if n := started.Load(); n != 8 {
			return fmt.Errorf("%d executions started, want 8", n)
		}
		return nil
	})
	for range 4 {
		release <- struct{}{}
	}
	waitFor(t, 10*time.Second, func() error {
		if n := st.claims.inside.Load(); n != 1 {
			return fmt.Errorf("%d claims held, want 1", n)
		}
		return nil
	})
	for range 4 {
		release <- struct{}{}
	}
	for _, id := range ids {
		e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)
	}
}
