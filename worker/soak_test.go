package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/worker"
)

// TestSoak runs the no-op workload at full rate on PostgreSQL for
// RDQ_SOAK_MINUTES minutes (skipped when unset: it is a measurement, not a
// check for every run), with the succeeded-task purge running as in
// production, and samples the worker process's heap (after a collection)
// and resident set size each minute. Flat memory is a heap that does not
// grow with the tasks run; the test fails if the last sample's heap is more
// than 64 MiB above the first, or a task did not run.
//
//	RDQ_SOAK_MINUTES=10 go test -run TestSoak -v -timeout 20m ./worker/
func TestSoak(t *testing.T) {
	v := os.Getenv("RDQ_SOAK_MINUTES")
	if v == "" {
		t.Skip("set RDQ_SOAK_MINUTES to run the soak")
	}
	minutes, err := strconv.Atoi(v)
	if err != nil || minutes < 1 {
		t.Fatalf("RDQ_SOAK_MINUTES=%q: want a positive number of minutes", v)
	}
	st, _ := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var executed atomic.Int64
	ws := make([]*worker.Worker, 2)
	for i := range ws {
		w, err := worker.New(worker.Config{
			Store: st, Logger: slog.New(slog.DiscardHandler),
			Queues:       map[string]worker.QueueConfig{"soak": {Concurrency: 200}},
			PollInterval: 50 * time.Millisecond, SucceededTTL: 30 * time.Second, PurgeInterval: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Handle("noop", func(context.Context, *rdq.Task) error { executed.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var submitted atomic.Int64
	submitErr := make(chan error, 1)
	go func() {
		batch := make([]client.Task, 500)
		for i := range batch {
			batch[i] = client.Task{Queue: "soak", Handler: "noop", Payload: []byte(`{"n":1}`)}
		}
		for ctx.Err() == nil {
			// Full rate with a bounded backlog: stay at most 20,000
			// tasks ahead of the workers.
			if submitted.Load()-executed.Load() > 20000 {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if _, err := c.SubmitMany(ctx, batch); err != nil {
				if ctx.Err() == nil {
					submitErr <- err
				}
				return
			}
			submitted.Add(int64(len(batch)))
		}
		submitErr <- nil
	}()
	type sample struct {
		heap, rss float64
		tasks     int64
	}
	var samples []sample
	start := time.Now()
	for m := 1; m <= minutes; m++ {
		time.Sleep(time.Until(start.Add(time.Duration(m) * time.Minute)))
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := sample{heap: float64(ms.HeapInuse) / (1 << 20), rss: rssMiB(t), tasks: executed.Load()}
		samples = append(samples, s)
		t.Logf("minute %2d: heap %.1f MiB, RSS %.1f MiB, %d tasks run (%.0f tasks/s so far)",
			m, s.heap, s.rss, s.tasks, float64(s.tasks)/time.Since(start).Seconds())
	}
	cancel()
	if err := <-submitErr; err != nil {
		t.Fatalf("submitting: %v", err)
	}
	waitFor(t, 2*time.Minute, func() error {
		if n, want := executed.Load(), submitted.Load(); n < want {
			return fmt.Errorf("%d of %d submitted tasks ran", n, want)
		}
		return nil
	})
	for _, w := range ws {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		if err := w.Stop(sctx); err != nil {
			t.Error(err)
		}
		scancel()
	}
	if first, last := samples[0], samples[len(samples)-1]; last.heap > first.heap+64 {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB over the soak", first.heap, last.heap)
	}
}

// rssMiB reads this process's resident set size from /proc (Linux).
func rssMiB(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Logf("reading RSS: %v", err)
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
