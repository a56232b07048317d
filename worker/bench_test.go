package worker_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// BenchmarkEndToEnd measures the whole path on PostgreSQL: submit b.N tasks
// in batches, workers claim them, run a no-op handler and finish them, with
// an attempt row written for each. It reports tasks/s from the first submit
// to the last finish written. Sized for a 2-core machine running the
// database too:
//
//	go test -run '^$' -bench BenchmarkEndToEnd -benchtime 20000x ./worker/
func BenchmarkEndToEnd(b *testing.B) {
	const (
		submitBatch = 500
		workers     = 2
	)
	st, _ := pgtest.NewStore(b)
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
			Logger:          testLogger(),
			Queues:          map[string]worker.QueueConfig{"bench": {Concurrency: 200}},
			PollInterval:    50 * time.Millisecond,
			ReclaimInterval: worker.Disabled,
			PurgeInterval:   worker.Disabled,
		})
		if err != nil {
			b.Fatal(err)
		}
		w.Handle("noop", noop)
		ws[i] = w
	}
	batch := make([]client.Task, 0, submitBatch)
	ctx := context.Background()

	b.ResetTimer()
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
	b.ReportMetric(float64(end.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(int64(end.HeapInuse)-int64(half.HeapInuse))/(1<<20), "heap-growth-MiB")

	if admin, ok := any(st).(store.Admin); ok {
		stats, err := admin.Stats(ctx, store.StatsParams{SucceededWindow: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		var succeeded int64
		for _, s := range stats {
			succeeded += s.Succeeded
		}
		if succeeded != total || executed.Load() != total {
			b.Fatalf("%d succeeded and %d executions for %d tasks", succeeded, executed.Load(), total)
		}
	}
}
