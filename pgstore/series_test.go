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

// TestSeriesCatchUpIsBounded plants a day of attempts, one a minute, with
// nothing rolled up (as after an upgrade), and checks that each read rolls
// up at most pgstore.SeriesRollupStep minutes and is right from its
// PartialUntil on, that a read while another holds the rollup lock rolls
// up nothing and does not wait, and that repeated reads complete the day.
func TestSeriesCatchUpIsBounded(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	now := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	const day = 24 * 60
	// Task i failed its one attempt i minutes and 10 seconds before now,
	// in queue q(i % 3).
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.tasks (id, queue, handler, payload, status, attempts, last_attempt_number,
                         next_attempt_at, created_at, updated_at, finished_at)
SELECT md5('series' || i)::uuid, 'q' || (i %% 3), 'h', '{}'::bytea, 'DEAD', 1, 1, g.at, g.at, g.at, g.at
FROM generate_series(0, $2::int - 1) AS i
CROSS JOIN LATERAL (SELECT $1::timestamptz - i * interval '1 minute' - interval '10 seconds' AS at) AS g;
`, schema), now, day); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.attempts (task_id, number, life, outcome, error_type, message, worker_id, started_at, finished_at)
SELECT t.id, 1, 0, 'PERMANENT_FAILURE', 'e', 'failed', 'w', t.finished_at, t.finished_at FROM %[1]s.tasks AS t`, schema)); err != nil {
		t.Fatal(err)
	}
	rolled := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.series_minutes", schema)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	p := store.SeriesParams{Width: time.Hour, Buckets: 24, Now: &now}
	start := store.SeriesStart(p, now)
	// want counts the planted attempts of each bucket at and after from.
	want := func(from time.Time) (n int64) {
		for i := range day {
			at := now.Add(-time.Duration(i)*time.Minute - 10*time.Second)
			if !at.Before(start) && !at.Before(from) {
				n++
			}
		}
		return n
	}
	got := func(sr store.Series, from time.Time) (n int64) {
		for _, l := range sr.Lines {
			for b, c := range l.Counts {
				if !start.Add(time.Duration(b) * p.Width).Before(from) {
					n += c.Attempts
				}
			}
		}
		return n
	}
	bucketStart := func(at time.Time) time.Time {
		if at.IsZero() {
			return start
		}
		return start.Add(((at.Sub(start) + p.Width - 1) / p.Width) * p.Width)
	}

	// A read while another holds the rollup lock reads what is there.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", pgstore.SeriesLockKey(s)); err != nil {
		t.Fatal(err)
	}
	lockedCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	locked, err := s.Series(lockedCtx, p)
	cancel()
	if err != nil {
		t.Fatalf("Series while the rollup lock is held: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rolled(); n != 0 {
		t.Fatalf("a read without the lock rolled up %d minutes", n)
	}
	if locked.PartialUntil.IsZero() {
		t.Fatal("a read with a day left to roll up is not partial")
	}
	if g, w := got(locked, bucketStart(locked.PartialUntil)), want(bucketStart(locked.PartialUntil)); g != w {
		t.Fatalf("without the lock: %d attempts from %s, want %d", g, locked.PartialUntil, w)
	}
	if g, w := got(locked, start), want(start); g == w {
		t.Fatalf("the read without the lock counted all %d attempts of the day", g)
	}

	reads, before := 0, 0
	for {
		sr, err := s.Series(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		reads++
		after := rolled()
		if after-before > pgstore.SeriesRollupStep {
			t.Fatalf("read %d rolled up %d minutes, more than %d", reads, after-before, pgstore.SeriesRollupStep)
		}
		if after == before && !sr.PartialUntil.IsZero() {
			t.Fatalf("read %d made no progress, partial until %s", reads, sr.PartialUntil)
		}
		before = after
		from := bucketStart(sr.PartialUntil)
		if g, w := got(sr, from), want(from); g != w {
			t.Fatalf("read %d: %d attempts from %s (partial until %s), want %d", reads, g, from, sr.PartialUntil, w)
		}
		if sr.PartialUntil.IsZero() {
			break
		}
		if reads > day {
			t.Fatalf("still partial after %d reads", reads)
		}
	}
	// The first reads had a day to roll up: more than one step of it.
	if most := day/pgstore.SeriesRollupStep + 2; reads < 2 || reads > most {
		t.Fatalf("the catch-up took %d reads, want 2 to %d", reads, most)
	}
	var hours int
	if err := pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.series_hours_done", schema)).Scan(&hours); err != nil {
		t.Fatal(err)
	}
	if hours < 22 {
		t.Fatalf("%d hours rolled up after the catch-up, want the 22 or 23 complete ones", hours)
	}
}
