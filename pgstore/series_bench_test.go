package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// seedSeriesBulk inserts n tasks that finished over the 24 hours before
// the database's now, in 50 queues and 20 handlers: half dead after three
// attempts (two retryable failures a minute apart, then a permanent one),
// half succeeded at their first attempt (recorded in the task row, as
// sqlFinish records it, with no attempts row).
func seedSeriesBulk(b *testing.B, s *pgstore.Store, n int) {
	b.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(b)
	schema := s.Schema()
	for _, q := range []struct {
		sql  string
		args []any
	}{{`
INSERT INTO %[1]s.tasks (id, queue, handler, payload, status, attempts, last_attempt_number,
                         next_attempt_at, created_at, updated_at, finished_at, claimed_at, lease_owner,
                         last_error_type, last_error_message, last_error_fingerprint)
SELECT md5(i::text)::uuid, 'queue-' || (i %% 50), 'handler-' || (i %% 20), '{"n":1}'::bytea,
       CASE WHEN i %% 2 = 0 THEN 'DEAD' ELSE 'SUCCEEDED' END, CASE WHEN i %% 2 = 0 THEN 3 ELSE 1 END,
       CASE WHEN i %% 2 = 0 THEN 3 ELSE 1 END, g.at, g.at, g.at, g.at, g.at, 'w',
       CASE WHEN i %% 2 = 0 THEN 'type-' || (i %% 10) ELSE '' END,
       CASE WHEN i %% 2 = 0 THEN 'order ' || i || ' failed' ELSE '' END,
       CASE WHEN i %% 2 = 0 THEN 'fp-' || (i %% 200) ELSE '' END
FROM generate_series(1, $1) AS i
CROSS JOIN LATERAL (SELECT now() - (i::float8 / $1) * interval '24 hours' AS at) AS g`, []any{n}}, {`
INSERT INTO %[1]s.attempts (task_id, number, life, outcome, error_type, message, worker_id, started_at, finished_at)
SELECT t.id, a.n, 0, CASE WHEN a.n < 3 THEN 'RETRYABLE_FAILURE' ELSE 'PERMANENT_FAILURE' END,
       t.last_error_type, t.last_error_message, 'w',
       t.finished_at - (3 - a.n) * interval '1 minute', t.finished_at - (3 - a.n) * interval '1 minute'
FROM %[1]s.tasks t CROSS JOIN generate_series(1, 3) AS a(n)
WHERE t.status = 'DEAD'`, nil},
		{`VACUUM ANALYZE %[1]s.tasks, %[1]s.attempts`, nil},
	} {
		if _, err := pool.Exec(ctx, fmt.Sprintf(q.sql, schema), q.args...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSeries measures store.SeriesReader at RDQ_BENCH_DEAD_TASKS
// tasks (100,000 by default) finished over the last 24 hours:
//
//	RDQ_BENCH_DEAD_TASKS=1000000 go test -run '^$' -bench Series -benchtime 20x ./pgstore/
//
// first-read-after-a-day is the first read of a day by the hour with none
// of the history rolled up, as after an upgrade: it rolls up a bounded
// part of it. catch-up-24h is every read until the day is rolled up. The
// other reads run once the counters exist, as every later one does: they
// read the counters and the last few minutes of history.
func BenchmarkSeries(b *testing.B) {
	n := benchDeadTasks(b)
	s, _ := pgtest.NewStore(b)
	seedSeriesBulk(b, s, n)
	ctx := context.Background()
	pool := pgtest.Pool(b)
	hours := store.SeriesParams{Width: time.Hour, Buckets: 24}
	forget := func(b *testing.B) {
		b.Helper()
		if _, err := pool.Exec(ctx, fmt.Sprintf("TRUNCATE %[1]s.series_counts, %[1]s.series_minutes, %[1]s.series_hours, %[1]s.series_hours_done", s.Schema())); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("first-read-after-a-day", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			forget(b)
			b.StartTimer()
			got, err := s.Series(ctx, hours)
			if err != nil {
				b.Fatal(err)
			}
			if got.PartialUntil.IsZero() {
				b.Fatal("the first read of a day is complete")
			}
		}
	})
	b.Run("catch-up-24h", func(b *testing.B) {
		reads := 0
		for b.Loop() {
			b.StopTimer()
			forget(b)
			b.StartTimer()
			for {
				got, err := s.Series(ctx, hours)
				if err != nil {
					b.Fatal(err)
				}
				reads++
				if got.PartialUntil.IsZero() {
					break
				}
			}
		}
		b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
	})
	for _, r := range []struct {
		name string
		p    store.SeriesParams
	}{
		{"minutes-60", store.SeriesParams{Width: time.Minute, Buckets: 60}},
		{"hours-24", hours},
		{"minutes-60-queue", store.SeriesParams{Width: time.Minute, Buckets: 60, Queue: "queue-7"}},
		{"minutes-1440", store.SeriesParams{Width: time.Minute, Buckets: 1440}},
	} {
		// Once the counters exist: read until nothing is left to roll up.
		for _, p := range []store.SeriesParams{hours, r.p} {
			for reads := 1; ; reads++ {
				got, err := s.Series(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				if got.PartialUntil.IsZero() {
					break
				}
				if reads == 100000 {
					b.Fatalf("the series is still partial after %d reads", reads)
				}
			}
		}
		b.Run(r.name, func(b *testing.B) {
			var lines int
			for b.Loop() {
				got, err := s.Series(ctx, r.p)
				if err != nil {
					b.Fatal(err)
				}
				lines = len(got.Lines)
			}
			if lines == 0 {
				b.Fatal("the series is empty")
			}
		})
	}
}
