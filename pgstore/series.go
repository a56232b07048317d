package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq/store"
)

// The series statements run as unnamed statements
// (pgx.QueryExecModeExec), planned for their arguments on every call: the
// generic plan of a prepared statement, which PostgreSQL may switch to
// after five calls, reads the recent history through a parallel bitmap
// scan instead of the range of attempts_finished_idx.

// seriesRollupStep bounds the minutes with attempts one Series call rolls
// up, the newest first (quiet ones cost an index probe each and are all
// marked); seriesHistoryMinutes bounds how far before store.SeriesLag a read
// counts minutes not rolled up yet from the history. Together they bound a
// read's work whatever is left to roll up (after an upgrade, or a long
// spell without reads): what lies further back is left out of the read,
// and Series.PartialUntil says so, until later reads have rolled it up.
const (
	seriesRollupStep     = 5
	seriesHistoryMinutes = 10
)

// Series counts attempts and their outcomes per bucket, queue and handler
// (store.SeriesReader). When complete minutes of the window (older than
// store.SeriesLag) are not rolled up yet (sqlSeriesPending), it rolls the
// newest seriesRollupStep of them with attempts into counter rows and
// marks the quiet ones (sqlSeriesRollup), and rolls the complete hours
// into hour rows (sqlSeriesRollupHours), unless another
// call of the schema is rolling up: then it reads what is there. The read
// (sqlSeries) takes those rows, and counts from the history the minutes
// since store.SeriesLag and those not rolled up within the
// seriesHistoryMinutes before. Nothing on the path of claims and finishes
// is involved.
func (s *Store) Series(ctx context.Context, p store.SeriesParams) (store.Series, error) {
	if err := store.ValidateSeries(p); err != nil {
		return store.Series{}, err
	}
	var now time.Time
	if err := s.pool.QueryRow(ctx, s.q.seriesClock, p.Now).Scan(&now); err != nil {
		return store.Series{}, fmt.Errorf("pgstore: series: reading the clock: %w", err)
	}
	pl := store.PlanSeries(p, now)
	history := pl.Rolled.Add(-seriesHistoryMinutes * time.Minute)
	if history.Before(pl.MinutesFrom) {
		history = pl.MinutesFrom
	}
	left, err := s.seriesPending(ctx, pl, history)
	if err != nil {
		return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
	}
	if left.minutes > 0 || left.hours > 0 {
		var rolled bool
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
			rolled, err = s.rollup(ctx, tx, pl)
			return err
		}); err != nil {
			return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
		}
		if rolled {
			if left, err = s.seriesPending(ctx, pl, history); err != nil {
				return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
			}
		}
	}
	from := pl.Rolled
	if left.oldestRecent != nil {
		from = *left.oldestRecent
	}
	out := store.Series{Start: pl.Start, Width: p.Width}
	if left.newestOlder != nil {
		out.PartialUntil = left.newestOlder.Add(time.Minute)
	}
	rows, err := s.pool.Query(ctx, s.q.series, pgx.QueryExecModeExec, pl.Start, pl.HoursFrom, pl.HoursTo, pl.Rolled, pl.End,
		p.Width.Seconds(), p.Queue, p.Handler, from, left.notDone)
	if err != nil {
		return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			q, h string
			b    int
			c    store.SeriesCounts
		)
		if err := rows.Scan(&q, &h, &b, &c.Attempts, &c.Successes, &c.Retryable, &c.Permanent, &c.DeadLettered); err != nil {
			return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
		}
		if b < 0 || b >= p.Buckets {
			continue
		}
		if n := len(out.Lines); n == 0 || out.Lines[n-1].Queue != q || out.Lines[n-1].Handler != h {
			out.Lines = append(out.Lines, store.SeriesLine{Queue: q, Handler: h, Counts: make([]store.SeriesCounts, p.Buckets)})
		}
		l := &out.Lines[len(out.Lines)-1]
		l.Counts[b] = l.Counts[b].Add(c)
	}
	if err := rows.Err(); err != nil {
		return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
	}
	store.SortSeriesLines(out.Lines)
	return out, nil
}

// seriesLeft is what is left to roll up for a read (sqlSeriesPending).
type seriesLeft struct {
	minutes, hours int64
	// oldestRecent is the oldest minute not rolled up within the
	// seriesHistoryMinutes before SeriesPlan.Rolled; newestOlder the newest
	// one before those.
	oldestRecent, newestOlder *time.Time
	// notDone lists the hours of the plan not rolled up.
	notDone []time.Time
}

// seriesPending reads what is left to roll up for pl; the minutes from
// history on are counted from the history by the read.
func (s *Store) seriesPending(ctx context.Context, pl store.SeriesPlan, history time.Time) (seriesLeft, error) {
	var l seriesLeft
	if err := s.pool.QueryRow(ctx, s.q.seriesPending, pgx.QueryExecModeExec, pl.MinutesFrom, pl.Rolled, history, pl.HoursFrom, pl.HoursTo).
		Scan(&l.minutes, &l.oldestRecent, &l.newestOlder, &l.hours, &l.notDone); err != nil {
		return l, fmt.Errorf("reading what is left to roll up: %w", err)
	}
	return l, nil
}

// rollup rolls up, in tx, the quiet minutes of pl not rolled up yet and
// the newest seriesRollupStep others, and the hours of pl whose every
// minute is. It takes a
// transaction-scoped advisory lock keyed on the schema if it is free, so
// that one rollup runs at a time (two inserting the same rows in different
// orders could deadlock) and no reader waits for one; without the lock it
// does nothing and reports false.
func (s *Store) rollup(ctx context.Context, tx pgx.Tx, pl store.SeriesPlan) (bool, error) {
	var locked bool
	if err := tx.QueryRow(ctx, sqlSeriesLock, seriesLockKey(s.schema)).Scan(&locked); err != nil {
		return false, fmt.Errorf("taking the rollup lock: %w", err)
	}
	if !locked {
		return false, nil
	}
	// The planner's guess at what generate_series yields can put a
	// rollup past jit_above_cost; compiling it would cost more than it.
	if _, err := tx.Exec(ctx, sqlJITOff); err != nil {
		return false, fmt.Errorf("turning JIT off: %w", err)
	}
	var n int64
	if err := tx.QueryRow(ctx, s.q.seriesRollup, pgx.QueryExecModeExec, pl.MinutesFrom, pl.Rolled, pl.Keep, seriesRollupStep).Scan(&n); err != nil {
		return false, fmt.Errorf("rolling up the minutes from %s to %s: %w",
			pl.MinutesFrom.UTC().Format(time.RFC3339), pl.Rolled.UTC().Format(time.RFC3339), err)
	}
	if pl.HoursFrom.Before(pl.HoursTo) {
		if err := tx.QueryRow(ctx, s.q.seriesRollupHours, pgx.QueryExecModeExec, pl.HoursFrom, pl.HoursTo, pl.Keep).Scan(&n); err != nil {
			return false, fmt.Errorf("rolling up the hours from %s to %s: %w",
				pl.HoursFrom.UTC().Format(time.RFC3339), pl.HoursTo.UTC().Format(time.RFC3339), err)
		}
	}
	return true, nil
}

// seriesLockKey is the advisory lock that serializes the rollups of one
// schema.
func seriesLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("rdq/pgstore/series:" + schema))
	return int64(h.Sum64())
}

var _ store.SeriesReader = (*Store)(nil)
