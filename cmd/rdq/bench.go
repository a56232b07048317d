package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

func init() {
	usages["bench"] = `
Usage: rdq bench [--tasks N] [--workers N] [--concurrency N] [--batch N]

Measures end-to-end throughput on the chosen database: submit N tasks in
batches, let workers claim them, run a no-op handler and finish them (an
attempt row written for each), and report tasks per second from the first
submit to the last finish written.

The tasks go to a fresh queue named rdq-bench-<random>; they stay as
SUCCEEDED tasks until the workers' succeeded-task retention removes them.
Run it against a scratch database or schema, not production.
`
}

type jsonBench struct {
	Queue          string  `json:"queue"`
	Tasks          int     `json:"tasks"`
	Workers        int     `json:"workers"`
	Concurrency    int     `json:"concurrency"`
	SubmitSeconds  float64 `json:"submit_seconds"`
	TotalSeconds   float64 `json:"total_seconds"`
	SubmitPerSec   float64 `json:"submit_per_second"`
	TasksPerSecond float64 `json:"tasks_per_second"`
	Succeeded      int64   `json:"succeeded"`
}

func (e *env) bench(args []string) error {
	fs := newFlagSet("bench", &e.g, e.stderr, usages["bench"])
	n := fs.Int("tasks", 20000, "tasks to run")
	workers := fs.Int("workers", 2, "workers, each with its own claim loop")
	conc := fs.Int("concurrency", 200, "handlers running at once per worker")
	batch := fs.Int("batch", 500, "tasks per submit call")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("bench takes no arguments (got %q)", pos[0])
	}
	for _, c := range []struct {
		name   string
		v, max int
	}{{"--tasks", *n, 10_000_000}, {"--workers", *workers, 64}, {"--concurrency", *conc, 10000}, {"--batch", *batch, 10000}} {
		if c.v < 1 || c.v > c.max {
			return usageErrorf("%s %d: use 1 to %d", c.name, c.v, c.max)
		}
	}
	b, err := e.openBackend(false)
	if err != nil {
		return err
	}
	defer b.close()
	e.announce(b.desc)

	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("naming the bench queue: %w", err)
	}
	queue := "rdq-bench-" + hex.EncodeToString(suffix[:])
	c, err := client.New(client.Config{Store: b, ID: "rdq-bench"})
	if err != nil {
		return err
	}
	total := int64(*n)
	var executed atomic.Int64
	allRan := make(chan struct{})
	noop := func(ctx context.Context, t *rdq.Task) error {
		if executed.Add(1) == total {
			close(allRan)
		}
		return nil
	}
	quiet := slog.New(slog.DiscardHandler)
	ws := make([]*worker.Worker, 0, *workers)
	stopAll := func() error {
		var errs []error
		for _, w := range ws {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), time.Minute)
			errs = append(errs, w.Stop(ctx)) // returns once every result is written
			cancel()
		}
		return errors.Join(errs...)
	}
	for i := 0; i < *workers; i++ {
		w, err := worker.New(worker.Config{
			Store: b, ID: fmt.Sprintf("%s-w%d", queue, i), Logger: quiet,
			Queues:       map[string]worker.QueueConfig{queue: {Concurrency: *conc}},
			PollInterval: 50 * time.Millisecond, ReclaimInterval: worker.Disabled, PurgeInterval: worker.Disabled,
		})
		if err != nil {
			return errors.Join(err, stopAll())
		}
		if err := w.Handle("noop", noop); err != nil {
			return errors.Join(err, stopAll())
		}
		ws = append(ws, w)
	}

	fmt.Fprintf(e.stderr, "rdq: bench: %s tasks, %d workers × %d concurrent handlers, queue %s\n", fmtCount(total), *workers, *conc, queue)
	start := time.Now()
	for _, w := range ws {
		if err := w.Start(e.ctx); err != nil {
			return errors.Join(err, stopAll())
		}
	}
	tasks := make([]client.Task, 0, *batch)
	for i := 0; i < *n; i++ {
		tasks = append(tasks, client.Task{Queue: queue, Handler: "noop", Payload: []byte(`{"n":1}`), ContentType: "application/json"})
		if len(tasks) == *batch || i == *n-1 {
			if _, err := c.SubmitMany(e.ctx, tasks); err != nil {
				return errors.Join(fmt.Errorf("submitting: %w", err), stopAll())
			}
			tasks = tasks[:0]
		}
	}
	submitted := time.Since(start)
	select {
	case <-allRan:
	case <-e.ctx.Done():
		return errors.Join(fmt.Errorf("bench interrupted after %d of %d executions: %w", executed.Load(), total, e.ctx.Err()), stopAll())
	}
	if err := stopAll(); err != nil {
		return fmt.Errorf("stopping workers: %w", err)
	}
	elapsed := time.Since(start)

	var succeeded int64
	stats, err := b.Stats(e.ctx, store.StatsParams{SucceededWindow: 24 * time.Hour})
	if err != nil {
		return fmt.Errorf("reading stats: %w", err)
	}
	for _, s := range stats {
		if s.Queue == queue {
			succeeded = s.Succeeded
		}
	}
	res := jsonBench{
		Queue: queue, Tasks: *n, Workers: *workers, Concurrency: *conc,
		SubmitSeconds: submitted.Seconds(), TotalSeconds: elapsed.Seconds(),
		SubmitPerSec: float64(total) / submitted.Seconds(), TasksPerSecond: float64(total) / elapsed.Seconds(),
		Succeeded: succeeded,
	}
	if succeeded != total {
		return fmt.Errorf("bench: %d of %d tasks succeeded in queue %s", succeeded, total, queue)
	}
	if e.g.json {
		return writeJSON(e.stdout, res)
	}
	fmt.Fprintf(e.stdout, "submitted %s tasks in %s (%s/s)\n", fmtCount(total), fmtDuration(submitted), fmtCount(int64(res.SubmitPerSec)))
	fmt.Fprintf(e.stdout, "ran and finished all in %s: %s tasks/s end to end\n", fmtDuration(elapsed), fmtCount(int64(res.TasksPerSecond)))
	return nil
}
