package worker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// Errors whose methods misbehave, as user code's errors may.

// nilPtrErr's Error dereferences its receiver: a nil *nilPtrErr returned as
// error panics when described.
type nilPtrErr struct{ msg string }

func (e *nilPtrErr) Error() string { return e.msg }

type errorPanics struct{}

func (errorPanics) Error() string { panic("Error() exploded") }

type typePanics struct{}

func (typePanics) Error() string     { return "a fine message" }
func (typePanics) ErrorType() string { panic("ErrorType() exploded") }

type unwrapPanics struct{}

func (unwrapPanics) Error() string { return "unwrap me" }
func (unwrapPanics) Unwrap() error { panic("Unwrap() exploded") }

// typedErr has a chosen type and message.
type typedErr struct{ typ, msg string }

func (e typedErr) Error() string     { return e.msg }
func (e typedErr) ErrorType() string { return e.typ }

var errClassifyBomb = errors.New("this error makes Classify panic")

// Texts of a mebibyte, built once.
var (
	mibOfM = strings.Repeat("m", mib)
	mibOfT = strings.Repeat("t", mib)
)

// hostileCase is a handler that misbehaves, and what its attempt must say.
type hostileCase struct {
	handler  worker.Handler
	wantType string
	check    func(a rdq.Attempt) error
}

const (
	// hostileTimeout is long enough that no ordinary handler reaches it
	// on a loaded machine.
	hostileTimeout = 2 * time.Second
	mib            = 1 << 20
)

// sleepIgnoringContext blocks for d without looking at any context.
func sleepIgnoringContext(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

func contains(field, s, sub string) error {
	if !strings.Contains(s, sub) {
		return fmt.Errorf("%s %q does not contain %q", field, s, sub)
	}
	return nil
}

func hostileCases() map[string]hostileCase {
	return map[string]hostileCase{
		"typed-nil": {
			handler: func(ctx context.Context, t *rdq.Task) error {
				var e *nilPtrErr
				return e
			},
			wantType: "error_method_panicked",
			check: func(a rdq.Attempt) error {
				return errors.Join(contains("message", a.Message, "nil *worker_test.nilPtrErr"), contains("stack", a.Stack, "nilPtrErr"))
			},
		},
		"error-panics": {
			handler:  func(ctx context.Context, t *rdq.Task) error { return errorPanics{} },
			wantType: "error_method_panicked",
			check: func(a rdq.Attempt) error {
				return errors.Join(contains("message", a.Message, "Error() exploded"), contains("stack", a.Stack, "errorPanics"))
			},
		},
		"type-panics": {
			handler:  func(ctx context.Context, t *rdq.Task) error { return typePanics{} },
			wantType: "error_method_panicked",
			check:    func(a rdq.Attempt) error { return contains("message", a.Message, "ErrorType() exploded") },
		},
		"unwrap-panics": {
			handler:  func(ctx context.Context, t *rdq.Task) error { return fmt.Errorf("wrapped: %w", unwrapPanics{}) },
			wantType: "error_method_panicked",
			check:    func(a rdq.Attempt) error { return contains("message", a.Message, "Unwrap() exploded") },
		},
		"classify-panics": {
			handler:  func(ctx context.Context, t *rdq.Task) error { return errClassifyBomb },
			wantType: "classify_panicked",
			check: func(a rdq.Attempt) error {
				return errors.Join(contains("message", a.Message, "Classify"), contains("stack", a.Stack, "hostileQueues"))
			},
		},
		"handler-panics": {
			handler:  func(ctx context.Context, t *rdq.Task) error { panic("handler exploded") },
			wantType: "panic",
			check:    func(a rdq.Attempt) error { return contains("message", a.Message, "handler exploded") },
		},
		"huge-message": {
			handler: func(ctx context.Context, t *rdq.Task) error {
				return typedErr{typ: "huge_message", msg: mibOfM}
			},
			wantType: "huge_message",
			check: func(a rdq.Attempt) error {
				if len(a.Message) > rdq.MaxMessageBytes {
					return fmt.Errorf("message is %d bytes", len(a.Message))
				}
				return contains("message", a.Message, "truncated")
			},
		},
		"huge-type": {
			handler: func(ctx context.Context, t *rdq.Task) error {
				return typedErr{typ: mibOfT, msg: "a one-mebibyte error type"}
			},
			check: func(a rdq.Attempt) error {
				if len(a.ErrorType) > rdq.MaxErrorTypeLength || !strings.HasPrefix(a.ErrorType, "tttt") {
					return fmt.Errorf("error type is %d bytes, starting %.10q", len(a.ErrorType), a.ErrorType)
				}
				return contains("message", a.Message, "one-mebibyte")
			},
		},
		"bad-text": {
			handler: func(ctx context.Context, t *rdq.Task) error {
				return typedErr{typ: "bad\xff\x00type", msg: "bad\xfemessage\x00end"}
			},
			check: func(a rdq.Attempt) error {
				for field, s := range map[string]string{"type": a.ErrorType, "message": a.Message} {
					if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
						return fmt.Errorf("%s %q is not clean text", field, s)
					}
				}
				return errors.Join(contains("type", a.ErrorType, "bad"), contains("message", a.Message, "end"))
			},
		},
		"goexit": {
			handler: func(ctx context.Context, t *rdq.Task) error {
				runtime.Goexit()
				return nil
			},
			wantType: "handler_goexit",
			check:    func(a rdq.Attempt) error { return contains("stack", a.Stack, "hostileCases") },
		},
		"ignores-timeout-nil": {
			handler: func(ctx context.Context, t *rdq.Task) error {
				sleepIgnoringContext(hostileTimeout + time.Second)
				return nil
			},
			wantType: "timeout",
			check:    func(a rdq.Attempt) error { return contains("message", a.Message, "ignored its context") },
		},
		"ignores-timeout-error": {
			handler: func(ctx context.Context, t *rdq.Task) error {
				sleepIgnoringContext(hostileTimeout + time.Second)
				return typedErr{typ: "own_type", msg: "returned late"}
			},
			wantType: "timeout",
			check:    func(a rdq.Attempt) error { return contains("message", a.Message, "ignored its context") },
		},
	}
}

// hostileQueues: "mixed" runs ordinary and hostile tasks together, one
// attempt each; "lease" runs the task whose lease the test takes away.
func hostileQueues() map[string]worker.QueueConfig {
	policy := fastPolicy(1)
	policy.Classify = func(err error) rdq.Class {
		if errors.Is(err, errClassifyBomb) {
			panic("Classify exploded")
		}
		return rdq.ClassDefault
	}
	return map[string]worker.QueueConfig{
		"mixed": {Policy: policy, Concurrency: 16, Timeout: hostileTimeout, Lease: 10 * time.Second},
		"lease": {Policy: fastPolicy(1), Concurrency: 1, Lease: 20 * time.Second, HeartbeatInterval: 100 * time.Millisecond},
	}
}

// TestHostileHandlers runs handlers that do everything a handler should not
// (typed-nil errors, panicking error methods and Classify, huge and invalid
// text, Goexit, ignoring their timeout, returning after their lease was
// taken) among ordinary tasks in the same batches, on PostgreSQL
// (sqlitestore's tests run the same suite on SQLite). Every ordinary task
// succeeds on its first attempt, every hostile one ends DEAD with an
// attempt naming what it did, and the worker keeps working.
func TestHostileHandlers(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	testHostileHandlers(t, st)
}

type hostileStore interface {
	store.Store
	Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error)
}

func testHostileHandlers(t *testing.T, st hostileStore) {
	ctx := context.Background()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cases := hostileCases()
	ordinary := newCounter()
	handlers := map[string]worker.Handler{
		"ordinary": func(ctx context.Context, task *rdq.Task) error {
			ordinary.inc(task.ID)
			return nil
		},
	}
	for name, hc := range cases {
		handlers[name] = hc.handler
	}

	// The lease case: the handler waits while the test takes its lease
	// away (as a reclaiming worker would after an expiry), then returns a
	// late result that must not count.
	leaseStarted := make(chan *rdq.Task, 1)
	leaseCause := make(chan error, 1)
	handlers["late-after-lost-lease"] = func(ctx context.Context, task *rdq.Task) error {
		leaseStarted <- task
		select {
		case <-ctx.Done():
			leaseCause <- context.Cause(ctx)
		case <-time.After(20 * time.Second):
			leaseCause <- errors.New("the handler's context was never cancelled")
		}
		return nil // a late "success"
	}

	e := &env{t: t, c: c}
	cfg := worker.Config{Store: st, Queues: hostileQueues(), FinishBatchSize: 64, FinishInterval: 20 * time.Millisecond}
	e.newWorker(cfg, handlers)

	var batch []client.Task
	var hostileIDs []rdq.ID
	hostileName := map[rdq.ID]string{}
	for range 3 {
		for name := range cases {
			batch = append(batch, client.Task{Queue: "mixed", Handler: name})
			for range 8 {
				batch = append(batch, client.Task{Queue: "mixed", Handler: "ordinary"})
			}
		}
	}
	batch = append(batch, client.Task{Queue: "lease", Handler: "late-after-lost-lease"})
	res, err := c.SubmitMany(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var ordinaryIDs []rdq.ID
	var leaseID rdq.ID
	for i, r := range res {
		switch h := batch[i].Handler; h {
		case "ordinary":
			ordinaryIDs = append(ordinaryIDs, r.Task.ID)
		case "late-after-lost-lease":
			leaseID = r.Task.ID
		default:
			hostileIDs = append(hostileIDs, r.Task.ID)
			hostileName[r.Task.ID] = h
		}
	}

	// Take the lease away: reclaim the task as if its lease had expired,
	// and dead-letter it, as another worker would.
	started := recv(t, leaseStarted, 10*time.Second, "the lease handler to start")
	reclaimAt := time.Now().Add(time.Hour)
	reclaimed, err := st.ReclaimExpired(ctx, store.ReclaimParams{Queues: []string{"lease"}, Limit: 10, Lease: time.Minute, WorkerID: "thief", Now: &reclaimAt})
	if err != nil || len(reclaimed) != 1 || reclaimed[0].ID != started.ID {
		task, attempts, gerr := st.Get(ctx, started.ID)
		t.Fatalf("reclaiming the lease task: %v, %v; the task is %+v with attempts %+v (%v)", reclaimed, err, task, attempts, gerr)
	}
	errs, err := st.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: started.ID, Token: reclaimed[0].LeaseToken}, Status: rdq.StatusDead,
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("dead-lettering the reclaimed task: %v %v", errs, err)
	}
	if cause := recv(t, leaseCause, 15*time.Second, "the lease handler's cancellation"); !errors.Is(cause, store.ErrLeaseLost) {
		t.Errorf("the lease handler's context ended with %v, want store.ErrLeaseLost", cause)
	}

	get := func(id rdq.ID) (*rdq.Task, []rdq.Attempt) {
		t.Helper()
		task, attempts, err := st.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		return task, attempts
	}
	waitFor(t, 30*time.Second, func() error {
		for _, id := range append(append([]rdq.ID{}, ordinaryIDs...), hostileIDs...) {
			if task, _ := get(id); task.Status != rdq.StatusSucceeded && task.Status != rdq.StatusDead {
				return fmt.Errorf("task %s (%s) is %s", id, task.Handler, task.Status)
			}
		}
		return nil
	})

	for _, id := range ordinaryIDs {
		task, attempts := get(id)
		if task.Status != rdq.StatusSucceeded || len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomeSuccess || ordinary.get(id) != 1 {
			t.Errorf("ordinary task %s: %s after %d runs, attempts %+v; want SUCCEEDED on its first attempt", id, task.Status, ordinary.get(id), attempts)
		}
	}
	for _, id := range hostileIDs {
		name := hostileName[id]
		hc := cases[name]
		task, attempts := get(id)
		if task.Status != rdq.StatusDead || len(attempts) != 1 {
			t.Errorf("%s: task %s is %s with attempts %+v; want DEAD after one attempt", name, id, task.Status, attempts)
			continue
		}
		a := attempts[0]
		if a.Outcome != rdq.OutcomeRetryableFailure {
			t.Errorf("%s: outcome %s, want %s", name, a.Outcome, rdq.OutcomeRetryableFailure)
		}
		if hc.wantType != "" && a.ErrorType != hc.wantType {
			t.Errorf("%s: error type %.60q, want %q (message %.200q)", name, a.ErrorType, hc.wantType, a.Message)
		}
		if hc.check != nil {
			if err := hc.check(a); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if task.LastError.Type != a.ErrorType {
			t.Errorf("%s: task's last error type %.60q, attempt's %.60q", name, task.LastError.Type, a.ErrorType)
		}
	}

	// The late result after the lost lease changed nothing: the lost
	// execution is recorded as LEASE_EXPIRED and the task stays DEAD.
	waitFor(t, 10*time.Second, func() error {
		task, attempts := get(leaseID)
		if task.Status != rdq.StatusDead || len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomeLeaseExpired || attempts[0].ErrorType != "lease_expired" {
			return fmt.Errorf("lease task is %s with attempts %+v; want DEAD with one LEASE_EXPIRED attempt", task.Status, attempts)
		}
		return nil
	})

	// The worker is alive and still working.
	var more []client.Task
	for range 10 {
		more = append(more, client.Task{Queue: "mixed", Handler: "ordinary"})
	}
	res, err = c.SubmitMany(ctx, more)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		for _, r := range res {
			if task, _ := get(r.Task.ID); task.Status != rdq.StatusSucceeded {
				return fmt.Errorf("task %s is %s", r.Task.ID, task.Status)
			}
		}
		return nil
	})
}
