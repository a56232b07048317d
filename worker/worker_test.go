package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

func TestRetryThenSuccess(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var seen []int
	w := e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(5)}},
	}, map[string]worker.Handler{
		"flaky": func(ctx context.Context, task *rdq.Task) error {
			mu.Lock()
			seen = append(seen, task.NextAttempt())
			mu.Unlock()
			if task.NextAttempt() <= 2 {
				return fmt.Errorf("call %d: %w", task.NextAttempt(), errFlaky)
			}
			return nil
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "flaky", Payload: []byte("x")})
	task, attempts := e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)

	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure, rdq.OutcomeSuccess)
	if task.Attempts != 3 || task.FinishedAt.IsZero() {
		t.Errorf("task: attempts %d finished %v, want 3 and set", task.Attempts, task.FinishedAt)
	}
	mu.Lock()
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Errorf("handler saw attempts %v, want [1 2 3]", seen)
	}
	mu.Unlock()
	for i, a := range attempts {
		if a.WorkerID != w.ID() || a.Life != 0 {
			t.Errorf("attempt %d: worker %q life %d, want %q 0", a.Number, a.WorkerID, a.Life, w.ID())
		}
		if i > 0 && a.LeaseToken <= attempts[i-1].LeaseToken {
			t.Errorf("lease tokens not increasing: %d then %d", attempts[i-1].LeaseToken, a.LeaseToken)
		}
	}
	if a := attempts[0]; a.ErrorType != "*errors.errorString" || a.Message != "call 1: downstream unavailable" {
		t.Errorf("attempt 1 recorded %s %q", a.ErrorType, a.Message)
	}
	if attempts[2].ErrorType != "" || attempts[2].Message != "" {
		t.Errorf("success recorded an error: %+v", attempts[2])
	}
}

func TestAlwaysFailingGoesDead(t *testing.T) {
	e := newEnv(t)
	calls := newCounter()
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(3)}},
	}, map[string]worker.Handler{
		"broken": func(ctx context.Context, task *rdq.Task) error {
			calls.inc(task.ID)
			return errFlaky
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "broken"})
	task, attempts := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure)
	if task.Attempts != 3 || task.FinishedAt.IsZero() {
		t.Errorf("dead task: attempts %d finished %v", task.Attempts, task.FinishedAt)
	}
	if task.LastError.Message != "downstream unavailable" || task.LastError.Fingerprint == "" {
		t.Errorf("last error %+v", task.LastError)
	}
	if n := calls.get(id); n != 3 {
		t.Errorf("handler ran %d times, want 3", n)
	}

	// A first failure recorded by the client counts against MaxAttempts.
	id = e.submit(client.Task{Queue: "q", Handler: "broken", FirstFailure: errFlaky})
	_, attempts = e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure)
	if attempts[0].WorkerID != client.DefaultID || calls.get(id) != 2 {
		t.Errorf("first failure by %q, handler ran %d times; want %q and 2", attempts[0].WorkerID, calls.get(id), client.DefaultID)
	}
}

func TestPermanentGoesDeadAtOnce(t *testing.T) {
	e := newEnv(t)
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(10)}},
	}, map[string]worker.Handler{
		"validate": func(ctx context.Context, task *rdq.Task) error {
			return rdq.Permanent(errors.New("invalid address"))
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "validate"})
	task, attempts := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomePermanentFailure)
	if attempts[0].Message != "invalid address" || task.Attempts != 1 {
		t.Errorf("permanent failure recorded as %+v (task attempts %d)", attempts[0], task.Attempts)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	e := newEnv(t)
	const after = 300 * time.Millisecond
	e.newWorker(worker.Config{
		// The policy's backoff is an hour: only RetryAfter can bring the
		// second attempt within the test's time.
		Queues: map[string]worker.QueueConfig{"q": {Policy: rdq.Policy{MaxAttempts: 3, InitialBackoff: time.Hour, Jitter: rdq.NoJitter}}},
	}, map[string]worker.Handler{
		"rate-limited": func(ctx context.Context, task *rdq.Task) error {
			if task.NextAttempt() == 1 {
				return rdq.RetryAfter(after, errors.New("429 too many requests"))
			}
			return nil
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "rate-limited"})
	_, attempts := e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure, rdq.OutcomeSuccess)
	if gap := attempts[1].StartedAt.Sub(attempts[0].FinishedAt); gap < after-5*time.Millisecond {
		t.Errorf("second attempt started %s after the first finished, want at least %s", gap, after)
	}
}

func TestPanicRecordedWithStack(t *testing.T) {
	e := newEnv(t)
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(1)}},
	}, map[string]worker.Handler{
		"panicky": func(ctx context.Context, task *rdq.Task) error {
			var m map[string]int
			//lint:ignore SA5000 the handler panics on purpose, with a runtime error
			m["boom"]++ // assignment to entry in nil map
			return nil
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "panicky"})
	_, attempts := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure)
	a := attempts[0]
	if a.ErrorType != "panic" || !strings.Contains(a.Message, "assignment to entry in nil map") {
		t.Errorf("panic recorded as %s %q", a.ErrorType, a.Message)
	}
	if !strings.Contains(a.Stack, "worker_test.go") || !strings.Contains(a.Stack, "TestPanicRecordedWithStack") {
		t.Errorf("stack does not show the panicking handler:\n%s", a.Stack)
	}
}

func TestTimeoutRecorded(t *testing.T) {
	e := newEnv(t)
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(1), Timeout: 50 * time.Millisecond}},
	}, map[string]worker.Handler{
		"slow": func(ctx context.Context, task *rdq.Task) error {
			<-ctx.Done()
			return ctx.Err()
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "slow"})
	_, attempts := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure)
	if a := attempts[0]; a.ErrorType != "timeout" || a.Message != "handler timed out after 50ms" {
		t.Errorf("timeout recorded as %s %q", a.ErrorType, a.Message)
	}
}

// TestUnregisteredHandlerWaits is a rolling deploy: a worker of the old
// version lacks handler "new"; the tasks of "new" wait, PENDING with their
// budget untouched, while it runs the tasks it knows (even those due after
// them), until a worker that has "new" runs them.
func TestUnregisteredHandlerWaits(t *testing.T) {
	e := newEnv(t)
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(5)}},
	}, map[string]worker.Handler{
		"known": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	fresh := e.submit(client.Task{Queue: "q", Handler: "new"})
	known := e.submit(client.Task{Queue: "q", Handler: "known"})
	e.waitStatus(known, rdq.StatusSucceeded, 10*time.Second)
	if task, _ := e.get(fresh); task.Status != rdq.StatusPending || task.Attempts != 0 || task.LeaseToken != 0 {
		t.Fatalf("task of the unregistered handler after the worker ran a later task: %s, attempts %d, token %d; want PENDING, 0, 0",
			task.Status, task.Attempts, task.LeaseToken)
	}
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(5)}},
	}, map[string]worker.Handler{
		"new": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	_, attempts := e.waitStatus(fresh, rdq.StatusSucceeded, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeSuccess)
}

func TestGracefulStopWaitsForHandlers(t *testing.T) {
	e := newEnv(t)
	started := make(chan struct{}, 1)
	w := e.createWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {}},
	}, map[string]worker.Handler{
		"slow": func(ctx context.Context, task *rdq.Task) error {
			started <- struct{}{}
			select {
			case <-time.After(200 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := e.submit(client.Task{Queue: "q", Handler: "slow"})
	recv(t, started, 5*time.Second, "handler start")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// Stop returns after the result is written.
	task, attempts := e.get(id)
	if task.Status != rdq.StatusSucceeded {
		t.Fatalf("after Stop the task is %s, want SUCCEEDED", task.Status)
	}
	checkAttempts(t, attempts, rdq.OutcomeSuccess)
	if err := w.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestGracefulStopReleasesWithoutCountingAttempt(t *testing.T) {
	e := newEnv(t)
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	w := e.createWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {}},
	}, map[string]worker.Handler{
		"blocking": func(ctx context.Context, task *rdq.Task) error {
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		},
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := e.submit(client.Task{Queue: "q", Handler: "blocking"})
	recv(t, started, 5*time.Second, "handler start")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := w.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "released 1 tasks") {
		t.Fatalf("Stop after the grace period: got %v, want DeadlineExceeded reporting 1 released task", err)
	}
	if cause := recv(t, causes, time.Second, "handler cancellation"); !errors.Is(cause, worker.ErrStopping) {
		t.Errorf("handler context cause %v, want ErrStopping", cause)
	}
	task, attempts := e.get(id)
	if task.Status != rdq.StatusPending || task.Attempts != 0 || len(attempts) != 0 {
		t.Errorf("released task: status %s attempts %d history %d, want PENDING 0 0", task.Status, task.Attempts, len(attempts))
	}
	if time.Until(task.NextAttemptAt) > time.Second {
		t.Errorf("released task due at %v, want now", task.NextAttemptAt)
	}
}

func TestStopAbandonsHandlerIgnoringCancellation(t *testing.T) {
	e := newEnv(t)
	started := make(chan struct{}, 1)
	unblock := make(chan struct{})
	returned := make(chan struct{})
	logs := &logWatch{}
	w := e.createWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {}},
		Logger: slog.New(logs),
	}, map[string]worker.Handler{
		"stubborn": func(ctx context.Context, task *rdq.Task) error {
			defer close(returned)
			started <- struct{}{}
			<-unblock // ignores ctx
			return nil
		},
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := e.submit(client.Task{Queue: "q", Handler: "stubborn"})
	recv(t, started, 5*time.Second, "handler start")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: got %v, want DeadlineExceeded", err)
	}
	task, _ := e.get(id)
	if task.Status != rdq.StatusPending || task.Attempts != 0 {
		t.Fatalf("after Stop the task is %s with %d attempts, want released (PENDING, 0)", task.Status, task.Attempts)
	}
	// The abandoned handler's late success is discarded.
	close(unblock)
	recv(t, returned, 5*time.Second, "handler return")
	logs.wait(t, "handler returned after its task was released at shutdown; result discarded", 5*time.Second)
	task, attempts := e.get(id)
	if task.Status != rdq.StatusPending || task.Attempts != 0 || len(attempts) != 0 {
		t.Errorf("late result was recorded: %s, attempts %d, history %+v", task.Status, task.Attempts, attempts)
	}
}

func TestLeaseLostCancelsHandler(t *testing.T) {
	e := newEnv(t)
	started := make(chan rdq.ID, 1)
	causes := make(chan error, 1)
	logs := &logWatch{}
	w := e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Lease: 2 * time.Second, HeartbeatInterval: 50 * time.Millisecond}},
		Logger: slog.New(logs),
	}, map[string]worker.Handler{
		"long": func(ctx context.Context, task *rdq.Task) error {
			started <- task.ID
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil // a result after losing the lease is discarded
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "long"})
	recv(t, started, 5*time.Second, "handler start")

	// Another worker takes the task over, as if the lease had expired.
	future := time.Now().Add(time.Hour)
	taken, err := e.st.ReclaimExpired(context.Background(), store.ReclaimParams{
		Queues: []string{"q"}, Limit: 10, Lease: time.Hour, WorkerID: "usurper", Now: &future,
	})
	if err != nil || len(taken) != 1 {
		t.Fatalf("ReclaimExpired: %v, %d tasks", err, len(taken))
	}
	if cause := recv(t, causes, 5*time.Second, "handler cancellation"); !errors.Is(cause, store.ErrLeaseLost) {
		t.Errorf("handler context cause %v, want store.ErrLeaseLost", cause)
	}
	// The handler's late result is processed, and discarded.
	logs.wait(t, "handler returned after its lease was lost; result discarded (the task belongs to a newer execution)", 5*time.Second)
	task, attempts := e.get(id)
	if task.Status != rdq.StatusInFlight || task.LeaseOwner != "usurper" {
		t.Errorf("task %s owned by %q, want IN_FLIGHT owned by usurper", task.Status, task.LeaseOwner)
	}
	checkAttempts(t, attempts, rdq.OutcomeLeaseExpired)
	if attempts[0].WorkerID != w.ID() {
		t.Errorf("lost execution recorded for %q, want %q", attempts[0].WorkerID, w.ID())
	}
}

// Every worker executes tasks: each worker's first execution waits until
// every worker has one, which a worker that claims everything never lets
// happen.
func TestManyWorkersRunEachTaskOnce(t *testing.T) {
	e := newEnv(t)
	const workers, tasks = 3, 300
	calls := newCounter()
	var (
		gateMu  sync.Mutex
		started = map[int]bool{}
		allIn   = make(chan struct{})
	)
	handlerOf := func(w int) worker.Handler {
		return func(ctx context.Context, task *rdq.Task) error {
			calls.inc(task.ID)
			gateMu.Lock()
			if !started[w] {
				started[w] = true
				if len(started) == workers {
					close(allIn)
				}
			}
			gateMu.Unlock()
			select {
			case <-allIn:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	ws := make([]*worker.Worker, workers)
	for i := range ws {
		ws[i] = e.createWorker(worker.Config{
			Queues:          map[string]worker.QueueConfig{"q": {Concurrency: 4}},
			ReclaimInterval: 100 * time.Millisecond, // maintenance from every worker must not disturb
		}, map[string]worker.Handler{"count": handlerOf(i)})
		if err := ws[i].Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		for _, w := range ws { // after a failure: cancel the waiting handlers
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := w.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
			cancel()
		}
	})
	batch := make([]client.Task, tasks)
	for i := range batch {
		batch[i] = client.Task{Queue: "q", Handler: "count", Payload: []byte(fmt.Sprint(i))}
	}
	res, err := e.c.SubmitMany(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() error {
		if n := calls.total(); n < tasks {
			gateMu.Lock()
			defer gateMu.Unlock()
			return fmt.Errorf("%d of %d executions; workers executing: %v of %d", n, tasks, started, workers)
		}
		return nil
	})
	stopped = true
	for _, w := range ws {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := w.Stop(ctx)
		cancel()
		if err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
	if n := calls.total(); n != tasks {
		t.Errorf("%d executions for %d tasks", n, tasks)
	}
	owners := map[string]int{}
	for _, r := range res {
		if n := calls.get(r.Task.ID); n != 1 {
			t.Errorf("task %s ran %d times", r.Task.ID, n)
		}
		task, attempts := e.get(r.Task.ID)
		if task.Status != rdq.StatusSucceeded || len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomeSuccess {
			t.Errorf("task %s: %s with attempts %+v", task.ID, task.Status, attempts)
			continue
		}
		owners[attempts[0].WorkerID]++
	}
	if len(owners) != workers {
		t.Errorf("%d of %d workers executed tasks: %v", len(owners), workers, owners)
	}
}

func TestHeartbeatKeepsLongTaskAlive(t *testing.T) {
	e := newEnv(t)
	calls := newCounter()
	// The handler outlives two leases; the lease leaves a heartbeat thirty
	// chances to land, and outlasts the database stalls of a machine
	// running the whole suite at once (a 2s lease once expired while the
	// result's write and the heartbeats waited on the database).
	const lease = 3 * time.Second
	qc := worker.QueueConfig{Policy: fastPolicy(5), Lease: lease, HeartbeatInterval: 100 * time.Millisecond}
	handlers := map[string]worker.Handler{
		"long": func(ctx context.Context, task *rdq.Task) error {
			calls.inc(task.ID)
			select {
			case <-time.After(2 * lease):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}
	// Two workers, both reclaiming expired leases often: neither may
	// take the running task away.
	for range 2 {
		e.newWorker(worker.Config{Queues: map[string]worker.QueueConfig{"q": qc}, ReclaimInterval: 50 * time.Millisecond}, handlers)
	}
	id := e.submit(client.Task{Queue: "q", Handler: "long"})
	_, attempts := e.waitStatus(id, rdq.StatusSucceeded, 30*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeSuccess)
	if d := attempts[0].FinishedAt.Sub(attempts[0].StartedAt); d < 2*lease {
		t.Errorf("attempt lasted %s, want at least %s (two leases)", d, 2*lease)
	}
	if n := calls.get(id); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestReclaimExpiredLeaseOfCrashedWorker(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	retryID := e.submit(client.Task{Queue: "retry", Handler: "ok"})
	deadID := e.submit(client.Task{Queue: "once", Handler: "ok"})
	// A worker claims both and crashes: it never heartbeats or finishes.
	claimed, err := e.st.Claim(ctx, store.ClaimParams{Queues: []string{"retry", "once"}, Limit: 10, Lease: 100 * time.Millisecond, WorkerID: "crashed-worker"})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("Claim: %v, %d tasks", err, len(claimed))
	}
	calls := newCounter()
	w := e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{
			"retry": {Policy: fastPolicy(3)},
			"once":  {Policy: fastPolicy(1)},
		},
		ReclaimInterval: 50 * time.Millisecond,
	}, map[string]worker.Handler{
		"ok": func(ctx context.Context, task *rdq.Task) error {
			calls.inc(task.ID)
			return nil
		},
	})

	_, attempts := e.waitStatus(retryID, rdq.StatusSucceeded, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeLeaseExpired, rdq.OutcomeSuccess)
	if attempts[0].WorkerID != "crashed-worker" || attempts[0].ErrorType != "lease_expired" || attempts[1].WorkerID != w.ID() {
		t.Errorf("attempts %+v", attempts)
	}

	task, attempts := e.waitStatus(deadID, rdq.StatusDead, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeLeaseExpired)
	if calls.get(deadID) != 0 || task.Attempts != 1 || task.LastError.Type != "lease_expired" {
		t.Errorf("exhausted task: ran %d times, attempts %d, last error %+v", calls.get(deadID), task.Attempts, task.LastError)
	}
}

func TestPurgeSucceeded(t *testing.T) {
	e := newEnv(t)
	e.newWorker(worker.Config{
		Queues:        map[string]worker.QueueConfig{"q": {}},
		PurgeInterval: 50 * time.Millisecond,
		SucceededTTL:  time.Millisecond,
	}, map[string]worker.Handler{
		"ok": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	kept := e.submit(client.Task{Queue: "q", Handler: "ok", Delay: time.Hour})
	id := e.submit(client.Task{Queue: "q", Handler: "ok"})
	waitFor(t, 10*time.Second, func() error {
		_, _, err := e.st.Get(context.Background(), id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("task still there (%v)", err)
	})
	if task, _ := e.get(kept); task.Status != rdq.StatusPending {
		t.Errorf("a pending task was touched by the purge: %s", task.Status)
	}
	admin, ok := store.AdminOf(e.st)
	if !ok {
		t.Fatal("the store does not implement store.Admin")
	}
	entries, err := admin.ListAudit(context.Background(), store.ListAuditParams{Action: "retention", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || entries[0].Actor != worker.PurgeActor {
		t.Errorf("audit entries %+v, want a retention entry by %s", entries, worker.PurgeActor)
	}
}

func TestNotificationWakesWorker(t *testing.T) {
	e := newEnv(t)
	if _, ok := store.NotifierOf(e.st); !ok {
		t.Fatal("the test store does not implement store.Notifier; this test needs one that does")
	}
	claims := &watchedStore{Store: e.st}
	e.newWorker(worker.Config{
		Store:        claims,
		Queues:       map[string]worker.QueueConfig{"q": {}},
		PollInterval: time.Hour, // only a notification can wake the worker
	}, map[string]worker.Handler{
		"ok": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	// Start returned, so the worker is subscribed; once its first poll
	// is over, only a notification can make it claim again.
	claims.waitFirstClaim(t)
	id := e.submit(client.Task{Queue: "q", Handler: "ok"})
	e.waitStatus(id, rdq.StatusSucceeded, 5*time.Second)
}

// watchedStore counts finished claims, and takes delay to subscribe to
// notifications, as a store on a slow network does.
type watchedStore struct {
	*pgstore.Store
	delay  time.Duration
	claims atomic.Int64
}

func (s *watchedStore) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	defer s.claims.Add(1)
	return s.Store.Claim(ctx, p)
}

func (s *watchedStore) Notifications(ctx context.Context) (<-chan string, error) {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return s.Store.Notifications(ctx)
}

// waitFirstClaim waits until the worker's first poll is over.
func (s *watchedStore) waitFirstClaim(t *testing.T) {
	t.Helper()
	waitFor(t, 5*time.Second, func() error {
		if s.claims.Load() == 0 {
			return errors.New("no claim finished yet")
		}
		return nil
	})
}

// TestStartReturnsOnceSubscribed submits a task once Start has returned and
// the first poll is over, on a store slow to subscribe and a worker that
// never polls again: only a subscription made before Start returned can
// wake the worker for it.
func TestStartReturnsOnceSubscribed(t *testing.T) {
	e := newEnv(t)
	st := &watchedStore{Store: e.st, delay: 500 * time.Millisecond}
	e.newWorker(worker.Config{
		Store:        st,
		Queues:       map[string]worker.QueueConfig{"q": {}},
		PollInterval: time.Hour,
	}, map[string]worker.Handler{
		"ok": func(ctx context.Context, task *rdq.Task) error { return nil },
	})
	st.waitFirstClaim(t)
	id := e.submit(client.Task{Queue: "q", Handler: "ok"})
	e.waitStatus(id, rdq.StatusSucceeded, 5*time.Second)
}

func TestSpanJoinsSubmitterTrace(t *testing.T) {
	e := newEnv(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	prop := propagation.TraceContext{}
	c, err := client.New(client.Config{Store: e.st, Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	e.newWorker(worker.Config{
		Queues:         map[string]worker.QueueConfig{"q": {Policy: fastPolicy(3)}},
		TracerProvider: tp,
		Propagator:     prop,
	}, map[string]worker.Handler{
		"traced": func(ctx context.Context, task *rdq.Task) error {
			if !trace.SpanContextFromContext(ctx).IsValid() {
				return rdq.Permanent(errors.New("no span in handler context"))
			}
			if task.NextAttempt() == 1 {
				return errFlaky
			}
			return nil
		},
	})

	ctx, submitSpan := tp.Tracer("test").Start(context.Background(), "submit")
	res, err := c.Submit(ctx, client.Task{Queue: "q", Handler: "traced"})
	submitSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(res.Task.ID, rdq.StatusSucceeded, 10*time.Second)
	waitFor(t, 5*time.Second, func() error {
		var spans []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "rdq.execute traced" {
				spans = append(spans, s)
			}
		}
		if len(spans) != 2 {
			return fmt.Errorf("%d execution spans, want 2", len(spans))
		}
		for _, s := range spans {
			if s.Parent().TraceID() != submitSpan.SpanContext().TraceID() || s.Parent().SpanID() != submitSpan.SpanContext().SpanID() {
				t.Errorf("span parent %v, want the submit span %v", s.Parent(), submitSpan.SpanContext())
			}
			if s.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("span kind %v", s.SpanKind())
			}
		}
		return nil
	})
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	handlers := map[string]worker.Handler{
		"flaky": func(ctx context.Context, task *rdq.Task) error {
			if task.NextAttempt() == 1 {
				return errFlaky
			}
			return nil
		},
		"bad": func(ctx context.Context, task *rdq.Task) error { return rdq.Permanent(errFlaky) },
	}
	cfg := worker.Config{Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(3)}}, Metrics: reg}
	e.newWorker(cfg, handlers)
	e.newWorker(cfg, handlers) // a second worker shares the collectors
	e.submit(client.Task{Queue: "q", Handler: "flaky"})
	e.submit(client.Task{Queue: "q", Handler: "bad"})
	want := `
# HELP rdq_worker_attempts_total Attempts recorded, by queue and outcome (SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED).
# TYPE rdq_worker_attempts_total counter
rdq_worker_attempts_total{outcome="PERMANENT_FAILURE",queue="q"} 1
rdq_worker_attempts_total{outcome="RETRYABLE_FAILURE",queue="q"} 1
rdq_worker_attempts_total{outcome="SUCCESS",queue="q"} 1
# HELP rdq_worker_dead_lettered_total Tasks moved to the dead-letter queue, by queue.
# TYPE rdq_worker_dead_lettered_total counter
rdq_worker_dead_lettered_total{queue="q"} 1
# HELP rdq_worker_in_flight Handlers running now, by queue.
# TYPE rdq_worker_in_flight gauge
rdq_worker_in_flight{queue="q"} 0
`
	waitFor(t, 10*time.Second, func() error {
		return testutil.GatherAndCompare(reg, strings.NewReader(want),
			"rdq_worker_attempts_total", "rdq_worker_dead_lettered_total", "rdq_worker_in_flight")
	})
	if n, err := testutil.GatherAndCount(reg, "rdq_worker_handler_duration_seconds", "rdq_worker_claim_duration_seconds"); err != nil || n == 0 {
		t.Errorf("histograms: %d series, %v", n, err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogsTransitionsWithoutPayload(t *testing.T) {
	e := newEnv(t)
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(2)}},
		Logger: logger,
	}, map[string]worker.Handler{
		"ok":   func(ctx context.Context, task *rdq.Task) error { return nil },
		"fail": func(ctx context.Context, task *rdq.Task) error { return errFlaky },
	})
	const secret = "card-4111111111111111"
	okID := e.submit(client.Task{Queue: "q", Handler: "ok", Payload: []byte(secret)})
	failID := e.submit(client.Task{Queue: "q", Handler: "fail", Payload: []byte(secret)})
	e.waitStatus(okID, rdq.StatusSucceeded, 10*time.Second)
	e.waitStatus(failID, rdq.StatusDead, 10*time.Second)

	msgs := map[string]bool{}
	waitFor(t, 5*time.Second, func() error {
		msgs = map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				return fmt.Errorf("log line %q: %v", line, err)
			}
			if rec["worker_id"] != w.ID() {
				t.Errorf("log record without worker_id: %s", line)
			}
			if _, ok := rec["task_id"]; !ok {
				continue
			}
			for _, k := range []string{"queue", "handler", "attempt"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("task log record without %s: %s", k, line)
				}
			}
			msgs[rec["msg"].(string)] = true
		}
		for _, m := range []string{"task claimed", "task succeeded", "attempt failed; retry scheduled", "task dead-lettered"} {
			if !msgs[m] {
				return fmt.Errorf("no %q record; got %v", m, msgs)
			}
		}
		return nil
	})
	if strings.Contains(buf.String(), secret) {
		t.Errorf("the payload was logged")
	}
}

func TestConfigValidation(t *testing.T) {
	okQueues := map[string]worker.QueueConfig{"q": {}}
	cases := []struct {
		name string
		cfg  worker.Config
		want string
	}{
		{"no store", worker.Config{Queues: okQueues}, "Store is nil"},
		{"bad queue", worker.Config{Queues: map[string]worker.QueueConfig{"a b": {}}}, `queue name "a b"`},
		{"heartbeat", worker.Config{Queues: map[string]worker.QueueConfig{"q": {Lease: time.Second, HeartbeatInterval: time.Second}}}, "must be shorter than Lease"},
		{"policy", worker.Config{Queues: map[string]worker.QueueConfig{"q": {Policy: rdq.Policy{Multiplier: 0.5}}}}, "Multiplier"},
		{"concurrency", worker.Config{Queues: map[string]worker.QueueConfig{"q": {Concurrency: -1}}}, "Concurrency -1"},
		{"timeout", worker.Config{Queues: map[string]worker.QueueConfig{"q": {Timeout: -2}}}, "NoTimeout"},
		{"poll", worker.Config{Queues: okQueues, PollInterval: -time.Second}, "PollInterval"},
	}
	fake := nopStore{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if tc.name != "no store" {
				cfg.Store = fake
			}
			_, err := worker.New(cfg)
			if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := worker.New(worker.Config{Store: fake}); !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "Queues is empty") {
		t.Errorf("no queues: %v", err)
	}
}

func TestHandleRejectsMisuse(t *testing.T) {
	w, err := worker.New(worker.Config{Store: nopStore{}, Queues: map[string]worker.QueueConfig{"q": {}}, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(ctx context.Context, task *rdq.Task) error { return nil }
	mustFail := func(what, want string, err error) {
		t.Helper()
		if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want ErrInvalid mentioning %q", what, err, want)
		}
	}
	if err := w.Handle("send", ok); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	mustFail("duplicate name", "already registered", w.Handle("send", ok))
	mustFail("invalid name", `"not valid" contains ' '`, w.Handle("not valid", ok))
	mustFail("empty name", "name is empty", w.Handle("", ok))
	mustFail("nil handler", "handler is nil", w.Handle("other", nil))
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustFail("Handle after Start", "after Start", w.Handle("late", ok))
	if err := w.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// nopStore is a store with nothing in it, for tests that do not reach the
// database.
type nopStore struct{}

func (nopStore) Enqueue(context.Context, store.EnqueueParams) ([]store.EnqueueResult, error) {
	return nil, errors.New("nopStore: enqueue")
}
func (nopStore) Claim(context.Context, store.ClaimParams) ([]*rdq.Task, error) { return nil, nil }
func (nopStore) Heartbeat(_ context.Context, p store.HeartbeatParams) ([]error, error) {
	return make([]error, len(p.Leases)), nil
}
func (nopStore) Finish(_ context.Context, p store.FinishParams) ([]error, error) {
	return make([]error, len(p.Completions)), nil
}
func (nopStore) Release(_ context.Context, p store.ReleaseParams) ([]error, error) {
	return make([]error, len(p.Leases)), nil
}
func (nopStore) ReclaimExpired(context.Context, store.ReclaimParams) ([]*rdq.Task, error) {
	return nil, nil
}
func (nopStore) Get(context.Context, rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	return nil, nil, store.ErrNotFound
}
func (nopStore) Redrive(_ context.Context, p store.RedriveParams) ([]error, error) {
	return make([]error, len(p.IDs)), nil
}
func (nopStore) PurgeSucceeded(context.Context, store.PurgeSucceededParams) (int64, error) {
	return 0, nil
}

// TestStartWithoutHandlersFails: a worker with no handler would claim
// every task of its queues and dead-letter it as unknown_handler; Start
// refuses it and names the queues, and the tasks stay pending with their
// budget untouched.
func TestStartWithoutHandlersFails(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	id := e.submit(client.Task{Queue: "deploy", Handler: "b", Payload: []byte("{}")})
	w := e.createWorker(worker.Config{Queues: map[string]worker.QueueConfig{"deploy": {}}}, nil)
	err := w.Start(ctx)
	if err == nil {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			t.Error(err)
		}
	}
	if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "no handler is registered") || !strings.Contains(err.Error(), `"deploy"`) {
		t.Fatalf("Start with no handler: %v, want an error wrapping rdq.ErrInvalid that says no handler is registered and names queue \"deploy\"", err)
	}
	task, _ := e.get(id)
	if task.Status != rdq.StatusPending || task.Attempts != 0 {
		t.Fatalf("task after the refused Start: %s with %d attempts, want PENDING with 0", task.Status, task.Attempts)
	}
}

// TestStartLogsWhatTheStoreOffers checks that "worker started" says whether
// the worker found the store's notifications and retries in place, which a
// store wrapper that does not unwrap hides.
func TestStartLogsWhatTheStoreOffers(t *testing.T) {
	e := newEnv(t)
	for name, c := range map[string]struct {
		st   store.Store
		want bool
	}{
		"the store":               {e.st, true},
		"a wrapper that hides it": {plainStore{e.st}, false},
	} {
		t.Run(name, func(t *testing.T) {
			var buf syncBuffer
			w := e.newWorker(worker.Config{
				Store:  c.st,
				Queues: map[string]worker.QueueConfig{"q": {}},
				Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
			}, map[string]worker.Handler{"h": func(context.Context, *rdq.Task) error { return nil }})
			var started map[string]any
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] == "worker started" && rec["worker_id"] == w.ID() {
					started = rec
				}
			}
			if started == nil {
				t.Fatalf("no \"worker started\" record in:\n%s", buf.String())
			}
			for _, key := range []string{"notifications", "retries_in_place"} {
				if started[key] != c.want {
					t.Errorf("%s = %v, want %v", key, started[key], c.want)
				}
			}
		})
	}
}
