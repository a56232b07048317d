package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/benchtest"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// benchDeadTasks is how many dead tasks the dead-letter benchmarks seed:
// RDQ_BENCH_DEAD_TASKS, or 100,000. Set it to 1000000 to check the design
// targets (a DLQ page in milliseconds, a bulk redrive well under a minute).
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

// seedDeadBulk inserts n dead tasks (50 queues, 20 handlers, 10 error
// types, 200 fingerprints, dead over the last 30 days) with one attempt each.
func seedDeadBulk(b *testing.B, s *pgstore.Store, n int) {
	b.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(b)
	schema := s.Schema()
	_, err := pool.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.tasks (id, queue, handler, payload, status, attempts, last_attempt_number,
                         next_attempt_at, created_at, updated_at, finished_at,
                         last_error_type, last_error_message, last_error_fingerprint)
SELECT md5(i::text)::uuid, 'queue-' || (i %% 50), 'handler-' || (i %% 20), '{"n":1}'::bytea,
       'DEAD', 1, 1, now(), now(), now(), now() - random() * interval '30 days',
       'type-' || (i %% 10), 'order ' || i || ' failed: upstream said no', 'fp-' || (i %% 200)
FROM generate_series(1, $1) AS i`, schema), n)
	if err != nil {
		b.Fatal(err)
	}
	_, err = pool.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.attempts (task_id, number, life, outcome, error_type, message, worker_id, started_at, finished_at)
SELECT t.id, 1, 0, 'PERMANENT_FAILURE', t.last_error_type, t.last_error_message, 'w', t.finished_at, t.finished_at
FROM %[1]s.tasks t`, schema))
	if err != nil {
		b.Fatal(err)
	}
	// The seed bypassed the store: count the dead tasks into its summary.
	if err := s.RecountDead(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf("VACUUM ANALYZE %[1]s.tasks, %[1]s.dead_counts", schema)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDeadLetter measures dead-letter browsing and bulk redrive at
// RDQ_BENCH_DEAD_TASKS dead tasks.
func BenchmarkDeadLetter(b *testing.B) {
	n := benchDeadTasks(b)
	s, _ := pgtest.NewStore(b)
	seedDeadBulk(b, s, n)
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
			// Up to page 10 of 50: keyset paging reads the same amount at
			// any depth.
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
	b.Run("RedriveDead/all", func(b *testing.B) {
		pool := pgtest.Pool(b)
		for b.Loop() {
			benchtest.RedriveAllDead(ctx, b, s, 10_000, n)
			b.StopTimer()
			if _, err := pool.Exec(ctx, fmt.Sprintf(
				"UPDATE %s.tasks SET status = 'DEAD', finished_at = now(), life = 0", s.Schema())); err != nil {
				b.Fatal(err)
			}
			if err := s.RecountDead(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, fmt.Sprintf("VACUUM ANALYZE %s.tasks", s.Schema())); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(n), "tasks/op")
	})
}

// BenchmarkCycle measures the hot path a batch at a time (see
// benchtest.Cycle): three round trips per batch.
func BenchmarkCycle(b *testing.B) {
	s, _ := pgtest.NewStore(b)
	benchtest.Cycle(b, s)
}

// BenchmarkRetryCycle measures the failure path a batch at a time (see
// benchtest.RetryCycle): a claim and a finish per attempt, four retries and
// a dead letter per task.
//
//	go test -run '^$' -bench RetryCycle -benchtime 40x ./pgstore/
func BenchmarkRetryCycle(b *testing.B) {
	s, _ := pgtest.NewStore(b)
	benchtest.RetryCycle(b, s)
}
