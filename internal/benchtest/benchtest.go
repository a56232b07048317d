// Package benchtest holds the benchmarks every store runs the same way, so
// their figures compare side by side: the end-to-end path through the real
// client and worker, and the store's hot path a batch at a time.
package benchtest

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/workload"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// EndToEnd measures the whole path on st: submit b.N tasks in batches of
// 500, two workers (concurrency 200 each) claim them, run a no-op handler
// and finish them, each with its success in its history. It reports tasks/s
// from the first submit to the last finish written, the process's CPU time
// per task over the same span (cpu-µs/task, where getrusage exists), and
// the heap after a collection at the end (heap-MiB) and its growth over the
// second half of the run (heap-growth-MiB): flat memory keeps both the same
// at any b.N.
// A store that implements store.Admin is checked to hold b.N succeeded
// tasks in the queue "bench" afterwards.
func EndToEnd(b *testing.B, st store.Store) {
	const (
		submitBatch = 500
		workers     = 2
	)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	total := int64(b.N)
	var executed atomic.Int64
	allRan, halfRan := make(chan struct{}), make(chan struct{})
	noop := func(ctx context.Context, t *rdq.Task) error {
		n := executed.Add(1)
		if n == (total+1)/2 {
			close(halfRan)
		}
		if n == total {
			close(allRan)
		}
		return nil
	}
	ws := make([]*worker.Worker, workers)
	for i := range ws {
		w, err := worker.New(worker.Config{
			Store:           st,
			Logger:          slog.New(slog.DiscardHandler),
			Queues:          map[string]worker.QueueConfig{"bench": {Concurrency: 200}},
			PollInterval:    50 * time.Millisecond,
			ReclaimInterval: worker.Disabled,
			PurgeInterval:   worker.Disabled,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Handle("noop", noop); err != nil {
			b.Fatal(err)
		}
		ws[i] = w
	}
	batch := make([]client.Task, 0, submitBatch)
	ctx := context.Background()

	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	start := time.Now()
	for _, w := range ws {
		if err := w.Start(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		batch = append(batch, client.Task{Queue: "bench", Handler: "noop", Payload: []byte(`{"n":1}`)})
		if len(batch) == submitBatch || i == b.N-1 {
			if _, err := c.SubmitMany(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// The workers' heap at half way and at the end, after a collection:
	// flat memory means the end is no larger however many tasks ran.
	var half, end runtime.MemStats
	<-halfRan
	runtime.GC()
	runtime.ReadMemStats(&half)
	select {
	case <-allRan:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d tasks ran", executed.Load(), b.N)
	}
	runtime.GC()
	runtime.ReadMemStats(&end)
	for _, w := range ws {
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := w.Stop(stopCtx) // returns once every result is written
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tasks/s")
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/task")
	}
	b.ReportMetric(float64(end.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(int64(end.HeapInuse)-int64(half.HeapInuse))/(1<<20), "heap-growth-MiB")

	if admin, ok := store.AdminOf(st); ok {
		stats, err := admin.Stats(ctx, store.StatsParams{SucceededWindow: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		var succeeded int64
		for _, s := range stats {
			if s.Queue == "bench" {
				succeeded += s.Succeeded
			}
		}
		if succeeded != total || executed.Load() != total {
			b.Fatalf("%d succeeded and %d executions for %d tasks", succeeded, executed.Load(), total)
		}
	}
}

// Cycle measures a store's hot path a batch at a time: per iteration, 100
// tasks are enqueued, claimed and finished with an attempt each (three
// calls). It reports tasks/s.
func Cycle(b *testing.B, st store.Store) {
	const batch = 100
	ctx := context.Background()
	tasks := make([]store.NewTask, batch)
	b.ResetTimer()
	for b.Loop() {
		for i := range tasks {
			tasks[i] = store.NewTask{ID: rdq.NewID(), Queue: "bench", Handler: "h", Payload: []byte(`{"n":1}`)}
		}
		if _, err := st.Enqueue(ctx, store.EnqueueParams{Tasks: tasks}); err != nil {
			b.Fatal(err)
		}
		claimed, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"bench"}, Limit: batch, Lease: time.Minute, WorkerID: "w"})
		if err != nil || len(claimed) != batch {
			b.Fatalf("Claim: %d tasks, %v", len(claimed), err)
		}
		FinishAll(b, st, SucceedAll(claimed))
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// RetryCycle measures the failure path a batch at a time: a batch of 100
// tasks is enqueued, then claimed and failed four times, each failure
// recorded as an attempt and retried at once, and claimed a fifth time and
// dead-lettered: an attempt is a claim and a finish, as in a failure storm.
// It reports attempts/s.
func RetryCycle(b *testing.B, st store.Store) {
	const (
		batch    = 100
		attempts = 5
	)
	ctx := context.Background()
	tasks := make([]store.NewTask, batch)
	b.ResetTimer()
	for b.Loop() {
		for i := range tasks {
			tasks[i] = store.NewTask{ID: rdq.NewID(), Queue: "bench", Handler: "h", Payload: []byte(`{"n":1}`)}
		}
		if _, err := st.Enqueue(ctx, store.EnqueueParams{Tasks: tasks}); err != nil {
			b.Fatal(err)
		}
		for n := 1; n <= attempts; n++ {
			claimed, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"bench"}, Limit: batch, Lease: time.Minute, WorkerID: "w"})
			if err != nil || len(claimed) != batch {
				b.Fatalf("Claim: %d tasks, %v", len(claimed), err)
			}
			status := rdq.StatusPending
			if n == attempts {
				status = rdq.StatusDead
			}
			cs := make([]store.Completion, len(claimed))
			for i, t := range claimed {
				cs[i] = store.Completion{
					Lease:  store.Lease{ID: t.ID, Token: t.LeaseToken},
					Status: status,
					Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, WorkerID: "w", Duration: time.Millisecond,
						Failure: rdq.Failure{Type: "unavailable", Message: "downstream unavailable", Fingerprint: "f"}},
				}
			}
			FinishAll(b, st, cs)
		}
	}
	b.ReportMetric(float64(batch*attempts*b.N)/b.Elapsed().Seconds(), "attempts/s")
}

// SucceedAll returns a successful completion, with its attempt, for each
// claimed task.
func SucceedAll(ts []*rdq.Task) []store.Completion {
	cs := make([]store.Completion, len(ts))
	for i, t := range ts {
		cs[i] = store.Completion{
			Lease:   store.Lease{ID: t.ID, Token: t.LeaseToken},
			Status:  rdq.StatusSucceeded,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w", Duration: time.Millisecond},
		}
	}
	return cs
}

// FinishAll finishes cs on st and fails the benchmark on any error, per
// item or whole.
func FinishAll(b *testing.B, st store.Store, cs []store.Completion) {
	b.Helper()
	errs, err := st.Finish(context.Background(), store.FinishParams{Completions: cs})
	if err != nil {
		b.Fatal(err)
	}
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}

// Workload runs a workload of package workload with b.N tasks on st (two
// workers of 200 handlers, storm tasks making 5 attempts) and reports
// tasks/s and attempts/s, from the first submit to the last result written.
// The run checks its outcome: every task succeeded, or (storm) every task
// is dead with all its attempts in its history.
func Workload(b *testing.B, st store.Store, kind workload.Kind) {
	b.ResetTimer()
	res, err := workload.Run(context.Background(), workload.Config{
		Store: st, Queue: "bench-" + string(kind), Kind: kind, Tasks: b.N,
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.TasksPerSecond, "tasks/s")
	b.ReportMetric(res.AttemptsPerSecond, "attempts/s")
}

// RedriveAllDead redrives every dead task of st, in calls of up to limit
// tasks, until a call finds none, and fails b unless want were redriven.
func RedriveAllDead(ctx context.Context, b *testing.B, st store.Admin, limit, want int) {
	b.Helper()
	var total int64
	for {
		res, err := st.RedriveDead(ctx, store.RedriveDeadParams{Limit: limit, Actor: "bench", Spread: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		if res.Redriven == 0 {
			break
		}
		total += res.Redriven
	}
	if total != int64(want) {
		b.Fatalf("redrove %d of %d", total, want)
	}
}
