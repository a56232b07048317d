package redisstore_test

// Benchmarks of a many-queue drain: RDQ_BENCH_DRAIN_TASKS tasks (default
// 2,000) over 16 queues are enqueued in batches of 100, then drained by 8
// consumers, each claiming up to 32 tasks across all 16 queues and
// finishing them as succeeded. Each run is one drain, on the standalone
// test server, on the test Redis Cluster (3 masters), and on the cluster
// with WaitReplicas 1:
//
//	RDQ_BENCH_DRAIN_TASKS=100000 go test -run '^$' -bench 'Drain' -benchtime 1x ./redisstore/
//
// Besides the time, each reports tasks/s and the servers' CPU time per
// task (INFO cpu, used_cpu_sys plus used_cpu_user, summed over the
// masters), in µs.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
)

func BenchmarkDrain(b *testing.B) {
	n := 2000
	if v := os.Getenv("RDQ_BENCH_DRAIN_TASKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("RDQ_BENCH_DRAIN_TASKS=%q: want a positive number", v)
		}
	}
	b.Run("standalone", func(b *testing.B) {
		c := client(b)
		b.Cleanup(func() {
			if err := c.Close(); err != nil {
				b.Error(err)
			}
		})
		drainBench(b, c, n, 0)
	})
	for _, wait := range []int{0, 1} {
		b.Run(fmt.Sprintf("cluster-3-masters/wait-%d", wait), func(b *testing.B) {
			c := clusterClient(b)
			b.Cleanup(func() {
				if err := c.Close(); err != nil {
					b.Error(err)
				}
			})
			drainBench(b, c, n, wait)
		})
	}
}

func drainBench(b *testing.B, c redis.UniversalClient, n, wait int) {
	const nq, consumers, limit, batch = 16, 8, 32, 100
	queues := make([]string, nq)
	for i := range queues {
		queues[i] = "queue-" + strconv.Itoa(i)
	}
	ctx := b.Context()
	for b.Loop() {
		b.StopTimer()
		ns := namespace(b, c)
		s, err := redisstore.New(c, redisstore.Config{Namespace: ns, WaitReplicas: wait})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i += batch {
			ts := make([]store.NewTask, 0, batch)
			for j := i; j < min(i+batch, n); j++ {
				ts = append(ts, store.NewTask{ID: rdq.NewID(), Queue: queues[j%nq], Handler: "h", Payload: []byte(`{"n":1}`), MaxAttempts: 3})
			}
			if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: ts}); err != nil {
				b.Fatal(err)
			}
		}
		cpu0 := serverCPU(b, c)
		b.StartTimer()
		start := time.Now()
		var done sync.WaitGroup
		var mu sync.Mutex
		finished := 0
		errs := make(chan error, consumers)
		for range consumers {
			done.Add(1)
			go func() {
				defer done.Done()
				for {
					tasks, err := s.Claim(ctx, store.ClaimParams{Queues: queues, Limit: limit, Lease: time.Minute, WorkerID: "bench"})
					if err != nil {
						errs <- err
						return
					}
					if len(tasks) == 0 {
						return
					}
					cs := make([]store.Completion, len(tasks))
					for i, t := range tasks {
						cs[i] = store.Completion{Lease: store.Lease{ID: t.ID, Token: t.LeaseToken}, Status: rdq.StatusSucceeded,
							Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "bench"}}
					}
					res, err := s.Finish(ctx, store.FinishParams{Completions: cs})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for _, e := range res {
						if e == nil {
							finished++
						}
					}
					mu.Unlock()
				}
			}()
		}
		done.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		if finished != n {
			b.Fatalf("%d of %d tasks finished", finished, n)
		}
		cpu := serverCPU(b, c) - cpu0
		b.ReportMetric(float64(n)/elapsed.Seconds(), "tasks/s")
		b.ReportMetric(cpu.Seconds()*1e6/float64(n), "server-cpu-µs/task")
		b.StartTimer()
	}
}

// serverCPU sums used_cpu_sys and used_cpu_user of INFO cpu over the
// server, or every master of a cluster.
func serverCPU(b *testing.B, c redis.UniversalClient) time.Duration {
	b.Helper()
	var mu sync.Mutex
	var total float64
	read := func(ctx context.Context, node redis.UniversalClient) error {
		info, err := node.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
			v, err := strconv.ParseFloat(strings.TrimSpace(infoField(info, f)), 64)
			if err != nil {
				return fmt.Errorf("INFO cpu %s: %w", f, err)
			}
			mu.Lock()
			total += v
			mu.Unlock()
		}
		return nil
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(b.Context(), func(ctx context.Context, node *redis.Client) error { return read(ctx, node) })
	} else {
		err = read(b.Context(), c)
	}
	if err != nil {
		b.Fatalf("reading the servers' CPU time: %v", err)
	}
	return time.Duration(total * float64(time.Second))
}
