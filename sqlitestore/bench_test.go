package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/benchtest"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// Benchmarks of the SQLite store, on a file in the test's temporary
// directory (synchronous=FULL: every commit is fsynced). Run them without
// the race detector, e.g.
//
//	go test -run '^$' -bench 'EndToEnd' -benchtime 20000x ./sqlitestore/
//	go test -run '^$' -bench 'Cycle|Enqueue|Claim|Finish|Heartbeat|Get' -benchtime 2000x ./sqlitestore/
//	go test -run '^$' -bench 'DeadLetter' ./sqlitestore/
//
// BenchmarkEndToEnd mirrors the worker package's PostgreSQL benchmark, and
// BenchmarkCycle and BenchmarkDeadLetter pgstore's, under the same names,
// so the two backends can be compared side by side.

// BenchmarkEndToEnd measures the whole path on SQLite (see
// benchtest.EndToEnd), as the worker package's benchmark does on PostgreSQL.
func BenchmarkEndToEnd(b *testing.B) {
	st, _ := newStore(b)
	benchtest.EndToEnd(b, st)
}

// benchBatch is the batch size of the store-level benchmarks.
const benchBatch = 100

// BenchmarkCycle measures the hot path a batch at a time (see
// benchtest.Cycle), as pgstore's benchmark of the same name does.
func BenchmarkCycle(b *testing.B) {
	st, _ := newStore(b)
	benchtest.Cycle(b, st)
}

// BenchmarkEnqueue: one Enqueue of benchBatch tasks per iteration.
func BenchmarkEnqueue(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: newTasks("bench", benchBatch)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkClaim: one Claim of up to benchBatch tasks per iteration, from a
// queue filled beforehand.
func BenchmarkClaim(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
	fill(b, s, "bench", b.N*benchBatch)
	b.ResetTimer()
	for range b.N {
		got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"bench"}, Limit: benchBatch, Lease: time.Minute, WorkerID: "w"})
		if err != nil || len(got) != benchBatch {
			b.Fatalf("Claim: %d, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkFinish: one Finish of benchBatch completions, each with an
// attempt, per iteration.
func BenchmarkFinish(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
	fill(b, s, "bench", b.N*benchBatch)
	batches := make([][]store.Completion, b.N)
	for i := range batches {
		got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"bench"}, Limit: benchBatch, Lease: time.Hour, WorkerID: "w"})
		if err != nil {
			b.Fatal(err)
		}
		batches[i] = benchtest.SucceedAll(got)
	}
	b.ResetTimer()
	for i := range b.N {
		benchtest.FinishAll(b, s, batches[i])
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkHeartbeat: one Heartbeat of benchBatch leases per iteration.
func BenchmarkHeartbeat(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
	fill(b, s, "bench", benchBatch)
	got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"bench"}, Limit: benchBatch, Lease: time.Minute, WorkerID: "w"})
	if err != nil {
		b.Fatal(err)
	}
	leases := make([]store.Lease, len(got))
	for i, t := range got {
		leases[i] = store.Lease{ID: t.ID, Token: t.LeaseToken}
	}
	b.ResetTimer()
	for range b.N {
		errs, err := s.Heartbeat(ctx, store.HeartbeatParams{Leases: leases, Extend: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet: one Get (task and history) per iteration.
func BenchmarkGet(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
	ts := newTasks("bench", 1)
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: ts}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, _, err := s.Get(ctx, ts[0].ID); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDeadTasks is how many dead tasks the dead-letter benchmarks seed:
// RDQ_BENCH_DEAD_TASKS, or 100,000 (as in pgstore's benchmarks). Set it to
// 1000000 to check the design targets.
func benchDeadTasks(b *testing.B) int {
	if v := os.Getenv("RDQ_BENCH_DEAD_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("RDQ_BENCH_DEAD_TASKS=%q: want a positive number", v)
		}
		return n
	}
	return 100_000
}

// seedDeadBulk inserts n dead tasks straight into the file, shaped as
// pgstore's benchmark seeds them (50 queues, 20 handlers, 10 error types,
// 200 fingerprints, dead over the last 30 days), with one attempt each.
func seedDeadBulk(b testing.TB, path string, n int) {
	b.Helper()
	db := rawDB(b, path)
	now := time.Now().UnixMicro()
	month := (30 * 24 * time.Hour).Microseconds()
	stmts := []string{
		`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
INSERT INTO rdq_tasks (id, queue, handler, payload, status, attempts, next_attempt_at, created_at, updated_at,
	finished_at, last_error_type, last_error_message, last_error_fingerprint)
SELECT randomblob(16), 'queue-' || (i % 50), 'handler-' || (i % 20), CAST('{"n":1}' AS BLOB), 'DEAD', 1, ?2, ?2, ?2,
	?2 - (random() & 9223372036854775807) % ?3, 'type-' || (i % 10), 'order ' || i || ' failed: upstream said no',
	'fp-' || (i % 200)
FROM s`,
		`INSERT INTO rdq_attempts (task_id, number, life, outcome, error_type, message, worker_id, started_at, finished_at)
SELECT id, 1, 0, 'PERMANENT_FAILURE', last_error_type, last_error_message, 'w', finished_at, finished_at FROM rdq_tasks`,
	}
	if _, err := db.Exec(stmts[0], n, now, month); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(stmts[1]); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDeadLetter measures dead-letter browsing and bulk redrive at
// RDQ_BENCH_DEAD_TASKS dead tasks, with the sub-benchmarks of pgstore's
// benchmark of the same name.
func BenchmarkDeadLetter(b *testing.B) {
	n := benchDeadTasks(b)
	s, path := newStore(b)
	seedDeadBulk(b, path, n)
	ctx := context.Background()

	pages := []struct {
		name string
		f    store.DeadFilter
	}{
		{"all", store.DeadFilter{}},
		{"queue", store.DeadFilter{Queue: "queue-7"}},
		{"handler", store.DeadFilter{Handler: "handler-3"}},
		{"error_type", store.DeadFilter{ErrorType: "type-4"}},
		{"fingerprint", store.DeadFilter{Fingerprint: "fp-11"}},
		{"time_range", store.DeadFilter{DeadAfter: time.Now().Add(-20 * 24 * time.Hour), DeadBefore: time.Now().Add(-10 * 24 * time.Hour)}},
		{"message", store.DeadFilter{MessageContains: "ORDER 12"}},
	}
	for _, pg := range pages {
		b.Run("ListDead/page10/"+pg.name, func(b *testing.B) {
			// Page 10 of 50: keyset paging reads the same amount at any
			// depth.
			var after *store.Cursor
			for range 9 {
				got, err := s.ListDead(ctx, store.ListDeadParams{Filter: pg.f, After: after, Limit: 50})
				if err != nil {
					b.Fatal(err)
				}
				if len(got) < 50 {
					break
				}
				c := store.CursorOf(got[len(got)-1])
				after = &c
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.ListDead(ctx, store.ListDeadParams{Filter: pg.f, After: after, Limit: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("CountDead/queue", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.CountDead(ctx, store.DeadFilter{Queue: "queue-7"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DeadGroups/queue", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.DeadGroups(ctx, store.DeadFilter{Queue: "queue-7"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A bulk redrive of everything, in calls of the store's own chunk size
	// (what package dlq passes by default) and, for comparison, of 10,000.
	for _, r := range []struct {
		name  string
		limit int
	}{{"RedriveDead/all", s.BulkChunkSize()}, {"RedriveDead/all-limit10000", 10_000}} {
		b.Run(r.name, func(b *testing.B) {
			db := rawDB(b, path)
			for b.Loop() {
				benchtest.RedriveAllDead(ctx, b, s, r.limit, n)
				b.StopTimer()
				// Dead again, at random times of the last 30 days as
				// seeded, for the next iteration or sub-benchmark.
				if _, err := db.Exec(`UPDATE rdq_tasks SET status = 'DEAD', life = 0, held = 0,
	finished_at = ?1 - (random() & 9223372036854775807) % ?2`, time.Now().UnixMicro(), (30 * 24 * time.Hour).Microseconds()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n), "tasks/op")
			b.ReportMetric(float64(r.limit), "tasks/call")
		})
	}
}

// fill enqueues n due tasks into queue.
func fill(b *testing.B, s *sqlitestore.Store, queue string, n int) {
	b.Helper()
	ctx := context.Background()
	for n > 0 {
		k := min(n, 1000)
		if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: newTasks(queue, k)}); err != nil {
			b.Fatal(err)
		}
		n -= k
	}
}
