package redisstore_test

// Benchmarks of the dead-letter queue's reads on Redis, one page (50
// tasks) or one count per filter kind, over RDQ_BENCH_DEAD dead tasks
// (default 20,000) seeded through Enqueue:
//
//	RDQ_BENCH_DEAD=100000 go test -run '^$' -bench 'DLQ' -benchtime 200x ./redisstore/
//
// The data: 10 queues, 20 handlers, 8 error types, 200 fingerprints, dead
// times a second apart, a unique message per task; a tenth of the tasks
// carry the rare message word "zebra".

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func BenchmarkDLQ(b *testing.B) {
	n := 20000
	if v := os.Getenv("RDQ_BENCH_DEAD"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("RDQ_BENCH_DEAD=%q: want a positive number", v)
		}
	}
	s, _ := openStore(b)
	ctx := b.Context()
	end := time.Now().UTC().Truncate(time.Second)
	const batch = 1000
	for i := 0; i < n; i += batch {
		at := end.Add(-time.Duration(i/batch) * time.Second)
		ts := make([]store.NewTask, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			typ := fmt.Sprintf("type-%d", j%8)
			msg := fmt.Sprintf("%s: failure variant %d for order %d", typ, (j/8)%25, j)
			if j%10 == 0 {
				msg += " zebra"
			}
			ts = append(ts, store.NewTask{ID: rdq.NewID(), Queue: fmt.Sprintf("queue-%d", j%10), Handler: fmt.Sprintf("handler-%d", j%20),
				FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, WorkerID: "seed",
					Failure: rdq.Failure{Type: typ, Message: msg, Fingerprint: fmt.Sprintf("%016x", (j%8)*32+(j/8)%25)}}})
		}
		if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: ts, Now: &at}); err != nil {
			b.Fatal(err)
		}
	}
	filters := []struct {
		name string
		f    store.DeadFilter
	}{
		{"none", store.DeadFilter{}},
		{"queue", store.DeadFilter{Queue: "queue-3"}},
		{"handler", store.DeadFilter{Handler: "handler-7"}},
		{"error-type", store.DeadFilter{ErrorType: "type-5"}},
		{"fingerprint", store.DeadFilter{Fingerprint: fmt.Sprintf("%016x", 5*32+3)}},
		{"time-range", store.DeadFilter{DeadAfter: end.Add(-time.Duration(n/batch/2) * time.Second), DeadBefore: end.Add(-time.Duration(n/batch/4) * time.Second)}},
		{"message", store.DeadFilter{MessageContains: "ZEBRA"}},
		{"life", store.DeadFilter{LifeBelow: 1}},
	}
	for _, f := range filters {
		b.Run("page/"+f.name, func(b *testing.B) {
			for b.Loop() {
				page, err := s.ListDead(ctx, store.ListDeadParams{Filter: f.f, Limit: 50})
				if err != nil || len(page) == 0 {
					b.Fatalf("ListDead(%s) = %d tasks, %v", f.name, len(page), err)
				}
			}
		})
	}
	for _, f := range filters {
		b.Run("count/"+f.name, func(b *testing.B) {
			for b.Loop() {
				if c, err := s.CountDead(ctx, f.f); err != nil || c == 0 {
					b.Fatalf("CountDead(%s) = %d, %v", f.name, c, err)
				}
			}
		})
	}
	b.Run("groups", func(b *testing.B) {
		for b.Loop() {
			if g, err := s.DeadGroups(ctx, store.DeadFilter{}); err != nil || len(g) != 200 {
				b.Fatalf("DeadGroups = %d groups, %v; want 200", len(g), err)
			}
		}
	})
}
