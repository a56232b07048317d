package benchtest

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// OutageConfig sizes Outage.
type OutageConfig struct {
	// Tasks are submitted at the start, all due at once.
	Tasks int
	// Down is how long the downstream fails every call, from the start.
	Down time.Duration
	// UntilDead keeps the downstream down after Down until every task is
	// dead: the outage then lasts as long as retrying without a breaker
	// takes to spend every budget, however fast the machine is.
	UntilDead bool
	// Policy is the queue's retry policy.
	Policy rdq.Policy
	// Breaker, if set, turns the queue's circuit breaker on.
	Breaker *worker.Breaker
	// Workers and Concurrency size the workers (two of 50 when zero).
	Workers     int
	Concurrency int
	// Logger receives the workers' logs; nil discards them.
	Logger *slog.Logger
}

// OutageResult is what Outage measured.
type OutageResult struct {
	// Succeeded and Dead count the tasks at the end.
	Succeeded, Dead int64
	// OutageAttempts counts the handler calls while the downstream was
	// down; Attempts counts them all.
	OutageAttempts, Attempts int64
	// Down is how long the outage lasted.
	Down time.Duration
	// Elapsed is from the first submit until every task finished.
	Elapsed time.Duration
}

// Outage runs a downstream outage on st: Tasks tasks are submitted at
// once; their handler fails (a retryable error) for every call during the
// outage (Down, or longer with UntilDead) and succeeds afterwards; workers retry them on Policy. It waits until
// every task has succeeded or is dead, and reports the outcome. st must
// implement store.Admin (to count the outcome).
func Outage(tb testing.TB, st store.Store, cfg OutageConfig) OutageResult {
	tb.Helper()
	admin, ok := store.AdminOf(st)
	if !ok {
		tb.Fatalf("store %T does not implement store.Admin", st)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 50
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx := context.Background()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		tb.Fatal(err)
	}
	var up atomic.Bool
	var outageCalls, calls atomic.Int64
	errDown := errors.New("downstream unavailable: connection refused")
	call := func(ctx context.Context, t *rdq.Task) error {
		calls.Add(1)
		if !up.Load() {
			outageCalls.Add(1)
			return errDown
		}
		return nil
	}
	ws := make([]*worker.Worker, cfg.Workers)
	for i := range ws {
		w, err := worker.New(worker.Config{
			Store:  st,
			Logger: logger,
			Queues: map[string]worker.QueueConfig{"storm": {
				Concurrency: cfg.Concurrency, Policy: cfg.Policy, Breaker: cfg.Breaker,
			}},
			PollInterval:    50 * time.Millisecond,
			ReclaimInterval: worker.Disabled,
			PurgeInterval:   worker.Disabled,
		})
		if err != nil {
			tb.Fatal(err)
		}
		if err := w.Handle("call", call); err != nil {
			tb.Fatal(err)
		}
		ws[i] = w
	}
	start := time.Now()
	var down time.Duration
	batch := make([]client.Task, 0, 500)
	for i := range cfg.Tasks {
		batch = append(batch, client.Task{Queue: "storm", Handler: "call", Payload: []byte(`{"n":1}`)})
		if len(batch) == cap(batch) || i == cfg.Tasks-1 {
			if _, err := c.SubmitMany(ctx, batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for _, w := range ws {
		if err := w.Start(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	defer func() {
		for _, w := range ws {
			stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
			if err := w.Stop(stopCtx); err != nil {
				tb.Error(err)
			}
			cancel()
		}
	}()
	// Poll until nothing is pending or in flight after the recovery.
	deadline := time.Now().Add(cfg.Down + 5*time.Minute)
	for {
		stats, err := admin.Stats(ctx, store.StatsParams{SucceededWindow: time.Hour})
		if err != nil {
			tb.Fatal(err)
		}
		var res OutageResult
		open := int64(0)
		for _, s := range stats {
			if s.Queue == "storm" {
				open = s.Pending + s.InFlight
				res.Succeeded, res.Dead = s.Succeeded, s.Dead
			}
		}
		if !up.Load() && time.Since(start) >= cfg.Down && (!cfg.UntilDead || res.Dead == int64(cfg.Tasks)) {
			down = time.Since(start)
			up.Store(true)
		}
		if up.Load() && open == 0 && res.Succeeded+res.Dead == int64(cfg.Tasks) {
			res.Elapsed, res.Down = time.Since(start), down
			res.OutageAttempts, res.Attempts = outageCalls.Load(), calls.Load()
			return res
		}
		if time.Now().After(deadline) {
			tb.Fatalf("tasks still open after the outage and 5 minutes: %d open, %d succeeded, %d dead", open, res.Succeeded, res.Dead)
		}
		time.Sleep(10 * time.Millisecond) // polling interval of the conditions above
	}
}
