package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// recordLog is a slog handler keeping each record as "LEVEL message
// key=value ...", so a test can wait for a line and count lines.
type recordLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordLog) WithGroup(string) slog.Handler            { return l }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	return nil
}

// count returns how many lines contain every one of parts.
func (l *recordLog) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
outer:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue outer
			}
		}
		n++
	}
	return n
}

func (e *env) registry() store.WorkerRegistry {
	e.t.Helper()
	reg, ok := store.RegistryOf(e.st)
	if !ok {
		e.t.Fatalf("pgstore does not implement store.WorkerRegistry")
	}
	return reg
}

func (e *env) workers(queue string) []store.WorkerInfo {
	e.t.Helper()
	ws, err := e.registry().Workers(context.Background(), store.WorkersParams{Queue: queue})
	if err != nil {
		e.t.Fatalf("Workers: %v", err)
	}
	return ws
}

// pauseQueue pauses queue so no worker claims its tasks: tasks of a
// handler the worker lacks then wait, whatever the claim does with them.
func (e *env) pauseQueue(queue string) {
	e.t.Helper()
	if err := e.st.PauseQueue(context.Background(), store.PauseParams{Queue: queue, Actor: "test"}); err != nil {
		e.t.Fatalf("PauseQueue: %v", err)
	}
}

const checkedMsg = "looked for tasks no running worker can execute"

func TestWorkerRegistersRefreshesAndDeregisters(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	w := e.newWorker(worker.Config{
		RegistryInterval: 20 * time.Millisecond,
		Queues:           map[string]worker.QueueConfig{"reg-b": {Concurrency: 3}, "reg-a": {Concurrency: 2}},
	}, map[string]worker.Handler{
		"block": func(ctx context.Context, _ *rdq.Task) error {
			started <- struct{}{}
			<-release
			return nil
		},
		"other": func(context.Context, *rdq.Task) error { return nil },
	})
	defer close(release)

	var first store.WorkerInfo
	waitFor(t, 10*time.Second, func() error {
		ws := e.workers("reg-a")
		if len(ws) != 1 {
			return fmt.Errorf("workers of reg-a = %+v, want this worker", ws)
		}
		first = ws[0]
		return nil
	})
	host, _ := os.Hostname()
	if first.ID != w.ID() || first.Host != host || first.PID != os.Getpid() || first.Version == "" ||
		!slices.Equal(first.Queues, []string{"reg-a", "reg-b"}) || !slices.Equal(first.Handlers, []string{"block", "other"}) ||
		first.Slots != 5 || first.Stale {
		t.Fatalf("registered %+v, want ID %s, host %s, pid %d, a version, queues [reg-a reg-b], handlers [block other], 5 slots, live",
			first, w.ID(), host, os.Getpid())
	}

	// Refreshes move LastSeen, keep StartedAt and report what runs.
	e.submit(client.Task{Queue: "reg-b", Handler: "block"})
	recv(t, started, 10*time.Second, "the handler to start")
	waitFor(t, 10*time.Second, func() error {
		ws := e.workers("reg-b")
		if len(ws) != 1 || ws[0].InFlight != 1 || !ws[0].LastSeen.After(first.LastSeen) || !ws[0].StartedAt.Equal(first.StartedAt) {
			return fmt.Errorf("workers of reg-b = %+v, want one refreshed with 1 in flight", ws)
		}
		return nil
	})
	release <- struct{}{}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if ws := e.workers(""); len(ws) != 0 {
		t.Fatalf("workers after a graceful Stop = %+v, want none", ws)
	}
}

func TestWorkerWithoutRegistryOrDisabled(t *testing.T) {
	e := newEnv(t)
	e.newWorker(worker.Config{
		RegistryInterval: worker.Disabled,
		Queues:           map[string]worker.QueueConfig{"unregistered": {}},
	}, map[string]worker.Handler{"a": func(context.Context, *rdq.Task) error { return nil }})
	// A registering worker started after the disabled one is seen, the
	// disabled one never is.
	w2 := e.newWorker(worker.Config{
		RegistryInterval: 20 * time.Millisecond,
		Queues:           map[string]worker.QueueConfig{"unregistered": {}},
	}, map[string]worker.Handler{"a": func(context.Context, *rdq.Task) error { return nil }})
	waitFor(t, 10*time.Second, func() error {
		if ws := e.workers(""); len(ws) != 1 || ws[0].ID != w2.ID() {
			return fmt.Errorf("workers = %+v, want only %s", ws, w2.ID())
		}
		return nil
	})

	_, err := worker.New(worker.Config{
		Store:  struct{ store.Store }{e.st},
		Queues: map[string]worker.QueueConfig{"q": {DeadLetterUnserved: time.Minute}},
	})
	if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "store.WorkerRegistry") {
		t.Errorf("New with DeadLetterUnserved on a store without a registry = %v, want an ErrInvalid naming store.WorkerRegistry", err)
	}
	_, err = worker.New(worker.Config{
		Store: e.st, RegistryInterval: worker.Disabled,
		Queues: map[string]worker.QueueConfig{"q": {DeadLetterUnserved: time.Minute}},
	})
	if !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("New with DeadLetterUnserved and registration disabled = %v, want an error wrapping rdq.ErrInvalid", err)
	}
	_, err = worker.New(worker.Config{Store: e.st, Queues: map[string]worker.QueueConfig{"q": {DeadLetterUnserved: -time.Second}}})
	if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "DeadLetterUnserved") {
		t.Errorf("New with a negative DeadLetterUnserved = %v, want an ErrInvalid naming it", err)
	}
}

func TestWorkerReportsUnservedTasksOnceAndExportsThem(t *testing.T) {
	e := newEnv(t)
	const queue = "deploy"
	e.pauseQueue(queue)
	for range 2 {
		e.submit(client.Task{Queue: queue, Handler: "b"})
	}
	e.submit(client.Task{Queue: queue, Handler: "a"})
	logs := &recordLog{}
	metrics := prometheus.NewRegistry()
	noop := func(context.Context, *rdq.Task) error { return nil }
	e.newWorker(worker.Config{
		RegistryInterval: 5 * time.Millisecond,
		Logger:           slog.New(logs),
		Metrics:          metrics,
		Queues:           map[string]worker.QueueConfig{queue: {}},
	}, map[string]worker.Handler{"a": noop})

	warn := []string{"WARN tasks wait for a handler no running worker has registered", "queue=deploy", "handler=b", "tasks=2"}
	waitFor(t, 10*time.Second, func() error {
		if logs.count(warn...) == 0 {
			return errors.New("the unserved handler b is not logged yet")
		}
		return nil
	})
	gauge := func() (float64, int) {
		fams, err := metrics.Gather()
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		for _, f := range fams {
			if f.GetName() == "rdq_worker_unserved_tasks" {
				for _, m := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["queue"] == queue && labels["handler"] == "b" {
						return m.GetGauge().GetValue(), len(f.GetMetric())
					}
				}
				return 0, len(f.GetMetric())
			}
		}
		return 0, 0
	}
	if v, n := gauge(); v != 2 || n != 1 {
		t.Fatalf("rdq_worker_unserved_tasks{queue=deploy,handler=b} = %v among %d series, want 2 among 1 (a is served)", v, n)
	}
	// Later looks do not repeat the line.
	checks := logs.count(checkedMsg)
	waitFor(t, 10*time.Second, func() error {
		if logs.count(checkedMsg) < checks+5 {
			return errors.New("fewer than 5 further looks")
		}
		return nil
	})
	if n := logs.count(warn[0], "handler=b"); n != 1 {
		t.Fatalf("the unserved handler b was logged %d times over %d looks, want once", n, logs.count(checkedMsg))
	}

	// Once a worker with b is live, the series goes.
	e.newWorker(worker.Config{
		RegistryInterval: 5 * time.Millisecond,
		Queues:           map[string]worker.QueueConfig{queue: {}},
	}, map[string]worker.Handler{"b": noop})
	waitFor(t, 10*time.Second, func() error {
		if _, n := gauge(); n != 0 {
			return fmt.Errorf("%d unserved series still exported", n)
		}
		return nil
	})
	if n, err := testutil.GatherAndCount(metrics, "rdq_worker_unserved_tasks"); err != nil || n != 0 {
		t.Fatalf("rdq_worker_unserved_tasks series = %d, %v; want none", n, err)
	}
}

func TestWorkerDeadLettersUnservedTasksOnlyWhenAsked(t *testing.T) {
	e := newEnv(t)
	e.pauseQueue("strict")
	e.pauseQueue("patient")
	strict := e.submit(client.Task{Queue: "strict", Handler: "gone"})
	served := e.submit(client.Task{Queue: "strict", Handler: "a"})
	patient := e.submit(client.Task{Queue: "patient", Handler: "gone"})
	logs := &recordLog{}
	w := e.newWorker(worker.Config{
		RegistryInterval: 5 * time.Millisecond,
		Logger:           slog.New(logs),
		Queues: map[string]worker.QueueConfig{
			"strict":  {DeadLetterUnserved: 20 * time.Millisecond},
			"patient": {},
		},
	}, map[string]worker.Handler{"a": func(context.Context, *rdq.Task) error { return nil }})

	task, attempts := e.waitStatus(strict, rdq.StatusDead, 10*time.Second)
	if task.LastError.Type != rdq.UnservedHandlerErrorType || !strings.Contains(task.LastError.Message, `handler "gone"`) {
		t.Errorf("last error = %+v, want type %s naming the handler", task.LastError, rdq.UnservedHandlerErrorType)
	}
	checkAttempts(t, attempts, rdq.OutcomePermanentFailure)
	if attempts[0].WorkerID != w.ID() {
		t.Errorf("attempt by %q, want the worker %s", attempts[0].WorkerID, w.ID())
	}
	entries, err := e.st.ListAudit(context.Background(), store.ListAuditParams{Action: "dead_letter_unserved", Limit: 10})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	if len(entries) != 1 || !slices.Equal(entries[0].IDs, []rdq.ID{strict}) || entries[0].Actor != w.ID() {
		t.Fatalf("audit = %+v, want one dead_letter_unserved entry for %s by %s", entries, strict, w.ID())
	}
	if logs.count("dead-lettered tasks of a handler no running worker has registered", "queue=strict", "handler=gone") != 1 {
		t.Errorf("no log line for the dead-lettering")
	}

	// The queue without the option keeps its task waiting, its budget
	// untouched, look after look; so does the served task.
	checks := logs.count(checkedMsg)
	waitFor(t, 10*time.Second, func() error {
		if logs.count(checkedMsg) < checks+5 {
			return errors.New("fewer than 5 further looks")
		}
		return nil
	})
	for _, id := range []rdq.ID{patient, served} {
		if tk, atts := e.get(id); tk.Status != rdq.StatusPending || tk.Attempts != 0 || len(atts) != 0 {
			t.Errorf("task %s is %s with %d attempts, want PENDING with none", id, tk.Status, tk.Attempts)
		}
	}
}

// countingRegistry counts the registry calls a worker makes.
type countingRegistry struct {
	*pgstore.Store
	registers, looks atomic.Int64
}

func (c *countingRegistry) RegisterWorker(ctx context.Context, p store.RegisterWorkerParams) error {
	c.registers.Add(1)
	return c.Store.RegisterWorker(ctx, p)
}

func (c *countingRegistry) UnservedHandlers(ctx context.Context, p store.UnservedParams) ([]store.UnservedHandler, error) {
	c.looks.Add(1)
	return c.Store.UnservedHandlers(ctx, p)
}

// The registry costs no statement per task: a worker that runs 300 tasks
// within one refresh interval registers once and looks for unserved tasks
// never.
func TestWorkerRegistryCostsNothingPerTask(t *testing.T) {
	e := newEnv(t)
	counting := &countingRegistry{Store: e.st}
	done := newCounter()
	e.newWorker(worker.Config{
		Store:            counting,
		RegistryInterval: time.Hour,
		Queues:           map[string]worker.QueueConfig{"cheap": {Concurrency: 20}},
	}, map[string]worker.Handler{"a": func(_ context.Context, task *rdq.Task) error { done.inc(task.ID); return nil }})
	var ids []rdq.ID
	for range 300 {
		ids = append(ids, e.submit(client.Task{Queue: "cheap", Handler: "a"}))
	}
	for _, id := range ids {
		e.waitStatus(id, rdq.StatusSucceeded, 30*time.Second)
	}
	if n := done.total(); n != 300 {
		t.Fatalf("ran %d tasks, want 300", n)
	}
	if r, l := counting.registers.Load(), counting.looks.Load(); r != 1 || l != 0 {
		t.Fatalf("%d registrations and %d looks for 300 tasks within one interval, want 1 and 0", r, l)
	}
}
