package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/leakcheck"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/worker"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

// env is one test's store and client.
type env struct {
	t  *testing.T
	st *pgstore.Store
	c  *client.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return &env{t: t, st: st, c: c}
}

// testLogger discards logs unless the tests run verbosely.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// fastPolicy retries quickly, without jitter.
func fastPolicy(maxAttempts int) rdq.Policy {
	return rdq.Policy{
		MaxAttempts:    maxAttempts,
		InitialBackoff: 5 * time.Millisecond,
		Multiplier:     1,
		MaxBackoff:     5 * time.Millisecond,
		Jitter:         rdq.NoJitter,
	}
}

// newWorker creates a worker on e's store with test-friendly defaults
// (fast polling and finishing, maintenance off unless cfg turns it on),
// registers handlers, starts it and stops it when the test ends.
func (e *env) newWorker(cfg worker.Config, handlers map[string]worker.Handler) *worker.Worker {
	e.t.Helper()
	w := e.createWorker(cfg, handlers)
	if err := w.Start(context.Background()); err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			e.t.Errorf("Stop: %v", err)
		}
	})
	return w
}

// createWorker is newWorker without Start and the automatic Stop.
func (e *env) createWorker(cfg worker.Config, handlers map[string]worker.Handler) *worker.Worker {
	e.t.Helper()
	if cfg.Store == nil {
		cfg.Store = e.st
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.ReclaimInterval == 0 {
		cfg.ReclaimInterval = worker.Disabled
	}
	if cfg.PurgeInterval == 0 {
		cfg.PurgeInterval = worker.Disabled
	}
	if cfg.FinishInterval == 0 {
		cfg.FinishInterval = 2 * time.Millisecond
	}
	w, err := worker.New(cfg)
	if err != nil {
		e.t.Fatalf("worker.New: %v", err)
	}
	for name, h := range handlers {
		if err := w.Handle(name, h); err != nil {
			e.t.Fatalf("Handle(%q): %v", name, err)
		}
	}
	return w
}

func (e *env) submit(task client.Task) rdq.ID {
	e.t.Helper()
	res, err := e.c.Submit(context.Background(), task)
	if err != nil {
		e.t.Fatalf("Submit: %v", err)
	}
	return res.Task.ID
}

func (e *env) get(id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	e.t.Helper()
	task, attempts, err := e.st.Get(context.Background(), id)
	if err != nil {
		e.t.Fatalf("Get %s: %v", id, err)
	}
	return task, attempts
}

// waitStatus waits until task id has status, and returns it with its
// attempts.
func (e *env) waitStatus(id rdq.ID, status rdq.Status, timeout time.Duration) (*rdq.Task, []rdq.Attempt) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		task, attempts := e.get(id)
		if task.Status == status {
			return task, attempts
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("task %s is %s with %d attempts after %s, want %s; attempts: %+v", id, task.Status, task.Attempts, timeout, status, attempts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor polls cond until it returns nil or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		panic("unreachable")
	}
}

// counter counts calls per task.
type counter struct {
	mu sync.Mutex
	n  map[rdq.ID]int
}

func newCounter() *counter { return &counter{n: make(map[rdq.ID]int)} }

func (c *counter) inc(id rdq.ID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[id]++
	return c.n[id]
}

func (c *counter) get(id rdq.ID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := 0
	for _, v := range c.n {
		s += v
	}
	return s
}

var errFlaky = errors.New("downstream unavailable")

// checkAttempts compares the outcomes of attempts with want and checks
// numbering.
func checkAttempts(t *testing.T, attempts []rdq.Attempt, want ...rdq.Outcome) {
	t.Helper()
	if len(attempts) != len(want) {
		t.Fatalf("got %d attempts, want %d: %+v", len(attempts), len(want), attempts)
	}
	for i, a := range attempts {
		if a.Number != i+1 {
			t.Errorf("attempt %d has number %d", i+1, a.Number)
		}
		if a.Outcome != want[i] {
			t.Errorf("attempt %d: outcome %s, want %s (%s: %s)", i+1, a.Outcome, want[i], a.ErrorType, a.Message)
		}
		if a.FinishedAt.Before(a.StartedAt) {
			t.Errorf("attempt %d finished (%v) before it started (%v)", i+1, a.FinishedAt, a.StartedAt)
		}
	}
}

// logWatch is a slog handler recording messages, so a test can wait for
// the worker to log a transition instead of sleeping.
type logWatch struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (l *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logWatch) WithGroup(string) slog.Handler            { return l }
func (l *logWatch) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

// count returns how many records had message msg.
func (l *logWatch) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// wait waits until msg has been logged.
func (l *logWatch) wait(t *testing.T, msg string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() error {
		if l.count(msg) == 0 {
			return errors.New("not logged yet: " + msg)
		}
		return nil
	})
}
