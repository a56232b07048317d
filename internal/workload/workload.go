// Package workload holds the throughput workloads that the benchmarks and
// 'rdq bench' run the same way on any store: no-op tasks, tasks that fail
// once then succeed, and a failure storm where every attempt fails until
// every task is dead. It also measures the raw-SQL ceiling of a PostgreSQL
// queue (Ceiling) so each figure can be read as a share of what the
// database alone can do.
package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// Kind names a workload.
type Kind string

const (
	// NoOp: every task succeeds at its first attempt.
	NoOp Kind = "noop"
	// FailOnce: every task fails its first attempt, is retried at once
	// and succeeds: two attempts per task.
	FailOnce Kind = "fail-once"
	// Storm: every attempt fails; tasks are retried at once until their
	// attempts (Config.Attempts) are spent and they are dead.
	Storm Kind = "storm"
)

// Kinds are the workloads in the order 'rdq bench' runs them.
var Kinds = []Kind{NoOp, FailOnce, Storm}

// Config describes one run.
type Config struct {
	// Store runs the tasks; it must implement store.Admin, which checks
	// the outcome.
	Store store.Store
	// Queue is the queue the tasks go to; use a fresh one per run.
	Queue string
	Kind  Kind
	// Tasks is how many tasks to submit.
	Tasks int
	// Workers, Concurrency (per worker) and Batch (tasks per submit);
	// zero means 2, 200 and 500.
	Workers, Concurrency, Batch int
	// Attempts is the storm's attempts per task; zero means 5.
	Attempts int
	// Logger receives the workers' logs; nil discards them.
	Logger *slog.Logger
	// Midway, if set, runs once, while the workers keep running, when half
	// of the attempts have run (rdq bench's --warm-busy: an ANALYZE while
	// the queue is busy); its error fails the run.
	Midway func(context.Context) error
}

// Result is what a run measured.
type Result struct {
	Kind  Kind
	Tasks int
	// Attempts is how many attempts the handlers ran.
	Attempts int64
	// Submit is the time the submits took; Elapsed runs from the first
	// submit until the last result was written.
	Submit, Elapsed time.Duration
	// TasksPerSecond and AttemptsPerSecond are over Elapsed.
	TasksPerSecond, AttemptsPerSecond float64
	// ProcessCPU is the CPU time this process (the submitting client and
	// the workers) used over Elapsed; zero where the platform does not
	// report it. The database's CPU is not in it.
	ProcessCPU time.Duration
	// Succeeded and Dead count the queue's tasks at the end.
	Succeeded, Dead int64
}

var errStorm = errors.New("downstream unavailable: connection refused")

// immediate retries at once, without jitter.
func immediate(attempts int) rdq.Policy {
	return rdq.Policy{MaxAttempts: attempts, InitialBackoff: time.Microsecond, Multiplier: 1, MaxBackoff: time.Microsecond, Jitter: rdq.NoJitter}
}

// Run submits cfg.Tasks tasks and runs them to their end with workers on
// cfg.Store, and checks the outcome: every task succeeded (NoOp, FailOnce),
// or every task is dead with all its attempts in its history (Storm).
func Run(ctx context.Context, cfg Config) (Result, error) {
	admin, ok := store.AdminOf(cfg.Store)
	if !ok {
		return Result{}, fmt.Errorf("workload: store %T does not implement store.Admin", cfg.Store)
	}
	if cfg.Tasks < 1 {
		return Result{}, fmt.Errorf("%w: workload: %d tasks", rdq.ErrInvalid, cfg.Tasks)
	}
	workers := max(cfg.Workers, 0)
	if workers == 0 {
		workers = 2
	}
	conc := cfg.Concurrency
	if conc <= 0 {
		conc = 200
	}
	batch := cfg.Batch
	if batch <= 0 {
		batch = 500
	}
	attempts := cfg.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var policy rdq.Policy
	var wantAttempts int64
	switch cfg.Kind {
	case NoOp:
		policy, wantAttempts = immediate(1), int64(cfg.Tasks)
	case FailOnce:
		policy, wantAttempts = immediate(2), 2*int64(cfg.Tasks)
	case Storm:
		policy, wantAttempts = immediate(attempts), int64(attempts)*int64(cfg.Tasks)
	default:
		return Result{}, fmt.Errorf("%w: workload: unknown kind %q (use noop, fail-once or storm)", rdq.ErrInvalid, cfg.Kind)
	}

	var calls atomic.Int64
	done := make(chan struct{})
	midway := make(chan error, 1)
	if cfg.Midway == nil {
		midway <- nil
	}
	handler := func(ctx context.Context, t *rdq.Task) error {
		n := calls.Add(1)
		if n == max(wantAttempts/2, 1) && cfg.Midway != nil {
			go func() { midway <- cfg.Midway(context.WithoutCancel(ctx)) }()
		}
		if n == wantAttempts {
			close(done)
		}
		switch {
		case cfg.Kind == Storm:
			return errStorm
		case cfg.Kind == FailOnce && t.Attempts == 0:
			return errStorm
		}
		return nil
	}
	c, err := client.New(client.Config{Store: cfg.Store, ID: "rdq-bench"})
	if err != nil {
		return Result{}, err
	}
	ws := make([]*worker.Worker, 0, workers)
	stopAll := func() error {
		var errs []error
		for _, w := range ws {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			errs = append(errs, w.Stop(sctx)) // returns once every result is written
			cancel()
		}
		return errors.Join(errs...)
	}
	for i := range workers {
		w, err := worker.New(worker.Config{
			Store: cfg.Store, ID: fmt.Sprintf("%s-w%d", cfg.Queue, i), Logger: logger,
			Queues:       map[string]worker.QueueConfig{cfg.Queue: {Concurrency: conc, Policy: policy}},
			PollInterval: 50 * time.Millisecond, ReclaimInterval: worker.Disabled, PurgeInterval: worker.Disabled,
		})
		if err != nil {
			return Result{}, errors.Join(err, stopAll())
		}
		if err := w.Handle("bench", handler); err != nil {
			return Result{}, errors.Join(err, stopAll())
		}
		ws = append(ws, w)
	}
	start, cpuStart := time.Now(), processCPU()
	for _, w := range ws {
		if err := w.Start(ctx); err != nil {
			return Result{}, errors.Join(err, stopAll())
		}
	}
	tasks := make([]client.Task, 0, batch)
	for i := range cfg.Tasks {
		tasks = append(tasks, client.Task{Queue: cfg.Queue, Handler: "bench", Payload: []byte(`{"n":1}`), ContentType: "application/json"})
		if len(tasks) == batch || i == cfg.Tasks-1 {
			if _, err := c.SubmitMany(ctx, tasks); err != nil {
				return Result{}, errors.Join(fmt.Errorf("workload: submitting: %w", err), stopAll())
			}
			tasks = tasks[:0]
		}
	}
	submitted := time.Since(start)
	select {
	case <-done:
	case <-ctx.Done():
		return Result{}, errors.Join(fmt.Errorf("workload: interrupted after %d of %d attempts: %w", calls.Load(), wantAttempts, ctx.Err()), stopAll())
	}
	if err := stopAll(); err != nil {
		return Result{}, fmt.Errorf("workload: stopping workers: %w", err)
	}
	if err := <-midway; err != nil {
		return Result{}, fmt.Errorf("workload: midway: %w", err)
	}
	elapsed := time.Since(start)
	var cpu time.Duration
	if cpuStart > 0 {
		cpu = processCPU() - cpuStart
	}
	res := Result{
		Kind: cfg.Kind, Tasks: cfg.Tasks, Attempts: calls.Load(), Submit: submitted, Elapsed: elapsed, ProcessCPU: cpu,
		TasksPerSecond:    float64(cfg.Tasks) / elapsed.Seconds(),
		AttemptsPerSecond: float64(calls.Load()) / elapsed.Seconds(),
	}
	stats, err := admin.Stats(ctx, store.StatsParams{SucceededWindow: 24 * time.Hour})
	if err != nil {
		return res, fmt.Errorf("workload: reading stats: %w", err)
	}
	for _, s := range stats {
		if s.Queue == cfg.Queue {
			res.Succeeded, res.Dead = s.Succeeded, s.Dead
		}
	}
	switch {
	case res.Attempts != wantAttempts:
		return res, fmt.Errorf("workload %s: %d attempts ran, want %d", cfg.Kind, res.Attempts, wantAttempts)
	case cfg.Kind != Storm && res.Succeeded != int64(cfg.Tasks):
		return res, fmt.Errorf("workload %s: %d of %d tasks succeeded in queue %s", cfg.Kind, res.Succeeded, cfg.Tasks, cfg.Queue)
	case cfg.Kind == Storm && res.Dead != int64(cfg.Tasks):
		return res, fmt.Errorf("workload %s: %d of %d tasks dead in queue %s", cfg.Kind, res.Dead, cfg.Tasks, cfg.Queue)
	}
	if cfg.Kind == Storm {
		if err := checkDead(ctx, cfg.Store, admin, cfg.Queue, cfg.Tasks, attempts); err != nil {
			return res, err
		}
	} else if err := checkSucceeded(ctx, cfg.Store, cfg.Queue, cfg.Kind); err != nil {
		return res, err
	}
	return res, nil
}

// checkSucceeded checks the histories of a sample of queue's succeeded
// tasks, on stores that list live tasks: one success (NoOp), or a
// retryable failure then a success (FailOnce).
func checkSucceeded(ctx context.Context, st store.Store, queue string, kind Kind) error {
	live, ok := store.LiveTasksOf(st)
	if !ok {
		return nil
	}
	want := []rdq.Outcome{rdq.OutcomeSuccess}
	if kind == FailOnce {
		want = []rdq.Outcome{rdq.OutcomeRetryableFailure, rdq.OutcomeSuccess}
	}
	sample, err := live.ListTasks(ctx, store.ListTasksParams{State: store.StateSucceeded, Filter: store.TaskFilter{Queue: queue}, Limit: 50})
	if err != nil {
		return fmt.Errorf("workload: listing succeeded tasks: %w", err)
	}
	if len(sample) == 0 {
		return fmt.Errorf("workload %s: no succeeded task listed in queue %s", kind, queue)
	}
	for _, t := range sample {
		_, history, err := st.Get(ctx, t.ID)
		if err != nil {
			return fmt.Errorf("workload %s: reading task %s: %w", kind, t.ID, err)
		}
		if len(history) != len(want) {
			return fmt.Errorf("workload %s: task %s has %d attempts in its history, want %d", kind, t.ID, len(history), len(want))
		}
		for i, a := range history {
			if a.Number != i+1 || a.Outcome != want[i] || a.WorkerID == "" || a.LeaseToken == 0 || a.FinishedAt.Before(a.StartedAt) {
				return fmt.Errorf("workload %s: task %s attempt %d is %+v, want number %d, %s", kind, t.ID, i+1, a, i+1, want[i])
			}
		}
	}
	return nil
}

// checkDead checks that every dead task of queue counts attempts attempts,
// and that the histories of a sample hold every one of them.
func checkDead(ctx context.Context, st store.Store, admin store.Admin, queue string, tasks, attempts int) error {
	var after *store.Cursor
	seen := 0
	var sample []rdq.ID
	for {
		page, err := admin.ListDead(ctx, store.ListDeadParams{Filter: store.DeadFilter{Queue: queue}, After: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("workload: listing dead tasks: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, t := range page {
			if t.Attempts != attempts {
				return fmt.Errorf("workload storm: dead task %s counts %d attempts, want %d", t.ID, t.Attempts, attempts)
			}
			if seen%max(1, tasks/50) == 0 {
				sample = append(sample, t.ID)
			}
			seen++
		}
		c := store.CursorOf(page[len(page)-1])
		after = &c
	}
	if seen != tasks {
		return fmt.Errorf("workload storm: listed %d dead tasks, want %d", seen, tasks)
	}
	for _, id := range sample {
		_, history, err := st.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("workload storm: reading task %s: %w", id, err)
		}
		if len(history) != attempts {
			return fmt.Errorf("workload storm: task %s has %d attempts in its history, want %d", id, len(history), attempts)
		}
		for i, a := range history {
			if a.Number != i+1 || a.Outcome != rdq.OutcomeRetryableFailure {
				return fmt.Errorf("workload storm: task %s attempt %d is number %d, %s", id, i+1, a.Number, a.Outcome)
			}
		}
	}
	return nil
}
