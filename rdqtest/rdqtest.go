// Package rdqtest helps test code that uses rdq.
//
// Unit tests of handlers need no store: Run executes a handler on a task
// exactly as a worker does (the worker package itself runs it: panic
// recovery, timeouts, the queue's policy and fingerprint) and returns the
// classified result of the attempt:
//
//	res := rdqtest.Run(t, sendWelcome, rdq.Task{Payload: []byte(`{"user":42}`)}, rdqtest.Options{})
//	if !res.Retried() || res.RetryIn != 30*time.Second { ... }
//
// Integration tests get a throwaway store: NewStore opens a migrated SQLite
// database in the test's temporary directory, closed when the test ends,
// and remembers every task submitted to it, so a test can check what the
// code under test submitted:
//
//	st := rdqtest.NewStore(t)
//	c, _ := client.New(client.Config{Store: st})
//	checkout(ctx, c) // the code under test
//	task := st.RequireSubmitted(t, "emails", []byte(`{"user":42}`))
package rdqtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// TB is the part of testing.TB the helpers use; *testing.T, *testing.B
// and *testing.F implement it.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Defaults for the task given to Run.
const (
	DefaultQueue   = "rdqtest"
	DefaultHandler = "handler"
)

// Options configure Run.
type Options struct {
	// Policy is the queue's retry policy; the zero Policy uses rdq's
	// defaults, as a worker does.
	Policy rdq.Policy
	// Timeout bounds the execution as worker.QueueConfig.Timeout does:
	// zero means worker.DefaultTimeout, worker.NoTimeout none.
	Timeout time.Duration
	// Context is the parent of the handler's context (its values reach
	// the handler). Nil means context.Background().
	Context context.Context
}

// Result is the classified outcome of one execution, as the worker would
// record it.
type Result struct {
	// Status is what the task becomes: rdq.StatusSucceeded,
	// rdq.StatusPending (retried after RetryIn) or rdq.StatusDead.
	Status rdq.Status
	// Outcome is the attempt's recorded outcome.
	Outcome rdq.Outcome
	// RetryIn is the delay before the next attempt when Status is
	// rdq.StatusPending: the policy's backoff, or a rdq.RetryAfter
	// request.
	RetryIn time.Duration
	// Failure is the recorded failure (type, message, stack, fingerprint);
	// zero on success.
	Failure rdq.Failure
	// Err is what the handler returned; nil when it succeeded, panicked
	// or did not return (runtime.Goexit).
	Err error
	// Duration is how long the handler ran.
	Duration time.Duration
	// Snoozed reports a snooze (rdq.Snooze) that spent no attempt: Status
	// is rdq.StatusPending, RetryIn the snooze's delay, and no attempt was
	// recorded (Outcome and Failure are zero). A snooze beyond the
	// policy's MaxSnoozes (counted from the task's Snoozes) is a failed
	// attempt instead, of type "snoozed".
	Snoozed bool
}

// Succeeded reports whether the attempt succeeded.
func (r Result) Succeeded() bool { return r.Status == rdq.StatusSucceeded }

// Retried reports whether the task is retried (after RetryIn).
func (r Result) Retried() bool { return r.Status == rdq.StatusPending }

// Dead reports whether the task goes to the dead-letter queue, because the
// failure was permanent or the attempts are exhausted.
func (r Result) Dead() bool { return r.Status == rdq.StatusDead }

// Permanent reports whether the failure was classified permanent
// (rdq.Permanent or the policy's Classify).
func (r Result) Permanent() bool { return r.Outcome == rdq.OutcomePermanentFailure }

// Panicked reports whether the handler panicked; Failure.Stack holds the
// stack.
func (r Result) Panicked() bool { return r.Failure.Type == "panic" }

// TimedOut reports whether the handler outlived its timeout.
func (r Result) TimedOut() bool { return r.Failure.Type == "timeout" }

// String summarises the result for test failure messages.
func (r Result) String() string {
	switch {
	case r.Snoozed:
		return fmt.Sprintf("snoozed for %s", r.RetryIn)
	}
	switch r.Status {
	case rdq.StatusSucceeded:
		return "succeeded"
	case rdq.StatusPending:
		return fmt.Sprintf("retry in %s after %s: %s", r.RetryIn, r.Failure.Type, r.Failure.Message)
	}
	return fmt.Sprintf("dead (%s) after %s: %s", r.Outcome, r.Failure.Type, r.Failure.Message)
}

// Run executes h on task once, as attempt task.Attempts+1 of the task's
// life, through a worker.Worker (on a one-task store in memory, so nothing
// is persisted) configured with opts, and returns the classified result.
// Empty Queue and Handler take DefaultQueue and DefaultHandler, a zero ID a
// new one. Run fails the test (tb.Fatal) if the worker cannot be set up or
// the execution does not finish within the timeout plus a minute.
func Run(tb TB, h worker.Handler, task rdq.Task, opts Options) Result {
	tb.Helper()
	if task.Queue == "" {
		task.Queue = DefaultQueue
	}
	if task.Handler == "" {
		task.Handler = DefaultHandler
	}
	if task.ID.IsZero() {
		task.ID = rdq.NewID()
	}
	task.Status = rdq.StatusPending
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}

	st := &oneTaskStore{task: task, done: make(chan struct{})}
	w, err := worker.New(worker.Config{
		Store:           st,
		ID:              "rdqtest",
		Logger:          slog.New(slog.DiscardHandler),
		Queues:          map[string]worker.QueueConfig{task.Queue: {Policy: opts.Policy, Concurrency: 1, Timeout: opts.Timeout}},
		PollInterval:    time.Hour, // the first claim happens at start
		ReclaimInterval: worker.Disabled,
		PurgeInterval:   worker.Disabled,
		FinishInterval:  time.Millisecond,
	})
	if err != nil {
		tb.Fatalf("rdqtest: %v", err)
	}
	var returned error
	err = w.Handle(task.Handler, func(ctx context.Context, t *rdq.Task) error {
		returned = h(ctx, t)
		return returned
	})
	if err != nil {
		tb.Fatalf("rdqtest: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		tb.Fatalf("rdqtest: starting the worker: %v", err)
	}
	wait := time.Minute
	if opts.Timeout > 0 {
		wait += opts.Timeout
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-st.done:
	case <-timer.C:
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	stopErr := w.Stop(stopCtx)

	st.mu.Lock()
	defer st.mu.Unlock()
	if st.completion == nil {
		tb.Fatalf("rdqtest: the handler did not finish within %s (stop: %v)", wait, stopErr)
	}
	c := st.completion
	res := Result{Status: c.Status, RetryIn: c.RetryIn, Err: returned, Snoozed: st.snoozed}
	if c.Attempt != nil {
		res.Outcome, res.Failure, res.Duration = c.Attempt.Outcome, c.Attempt.Failure, c.Attempt.Duration
	}
	return res
}

// errNotSupported is returned by the methods a worker running one task
// never calls.
var errNotSupported = errors.New("rdqtest: not supported by the one-task store Run uses")

// oneTaskStore is the store.Store behind Run: it hands out its task once
// and keeps the completion the worker writes.
type oneTaskStore struct {
	mu         sync.Mutex
	task       rdq.Task
	claimed    bool
	completion *store.Completion
	snoozed    bool
	done       chan struct{}
}

// Snooze implements store.Snoozer: it keeps the snooze as the completion.
func (s *oneTaskStore) Snooze(_ context.Context, p store.SnoozeParams) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(p.Snoozes))
	for i, sn := range p.Snoozes {
		if s.completion != nil || sn.ID != s.task.ID || sn.Token != s.task.LeaseToken {
			errs[i] = store.ErrLeaseLost
			continue
		}
		s.completion = &store.Completion{Lease: sn.Lease, Status: rdq.StatusPending, RetryIn: max(sn.Delay, 0)}
		s.snoozed = true
		close(s.done)
	}
	return errs, nil
}

func (s *oneTaskStore) Claim(_ context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed {
		return nil, nil
	}
	s.claimed = true
	t := s.task
	t.Status = rdq.StatusInFlight
	t.LeaseToken++
	t.LeaseOwner = p.WorkerID
	now := time.Now()
	t.LeaseExpiresAt = now.Add(p.Lease)
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	t.UpdatedAt = now
	s.task = t
	return []*rdq.Task{&t}, nil
}

func (s *oneTaskStore) Heartbeat(_ context.Context, p store.HeartbeatParams) ([]error, error) {
	return make([]error, len(p.Leases)), nil
}

func (s *oneTaskStore) Finish(_ context.Context, p store.FinishParams) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(p.Completions))
	for i, c := range p.Completions {
		if s.completion != nil || c.ID != s.task.ID || c.Token != s.task.LeaseToken {
			errs[i] = store.ErrLeaseLost
			continue
		}
		s.completion = &c
		close(s.done)
	}
	return errs, nil
}

func (s *oneTaskStore) Release(_ context.Context, p store.ReleaseParams) ([]error, error) {
	return make([]error, len(p.Leases)), nil
}

func (s *oneTaskStore) ReclaimExpired(context.Context, store.ReclaimParams) ([]*rdq.Task, error) {
	return nil, nil
}

func (s *oneTaskStore) PurgeSucceeded(context.Context, store.PurgeSucceededParams) (int64, error) {
	return 0, nil
}

func (s *oneTaskStore) Enqueue(context.Context, store.EnqueueParams) ([]store.EnqueueResult, error) {
	return nil, errNotSupported
}

func (s *oneTaskStore) Get(context.Context, rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	return nil, nil, errNotSupported
}
