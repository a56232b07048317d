package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq/store"
)

// Series counts attempts and their outcomes per bucket, queue and handler
// (store.SeriesReader). It first rolls the complete minutes of the window
// (older than store.SeriesLag) that are not rolled up yet into counter rows
// (sqlSeriesRollup), and for a window of hours the complete hours into
// hour rows (sqlSeriesRollupHours), one rollup at a time per schema; then
// it reads those rows and counts
// the minutes after them from the attempt history (sqlSeries). Nothing on
// the path of claims and finishes is involved.
func (s *Store) Series(ctx context.Context, p store.SeriesParams) (store.Series, error) {
	if err := store.ValidateSeries(p); err != nil {
		return store.Series{}, err
	}
	var now time.Time
	if err := s.pool.QueryRow(ctx, s.q.seriesClock, p.Now).Scan(&now); err != nil {
		return store.Series{}, fmt.Errorf("pgstore: series: reading the clock: %w", err)
	}
	pl := store.PlanSeries(p, now)
	if pl.MinutesFrom.Before(pl.Rolled) {
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.rollup(ctx, tx, pl) }); err != nil {
			return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
		}
	}
	rows, err := s.pool.Query(ctx, s.q.series, pl.Start, pl.HoursFrom, pl.HoursTo, pl.Rolled, pl.End,
		p.Width.Seconds(), p.Queue, p.Handler)
	if err != nil {
		return store.Series{}, fmt.Errorf("pgstore: series: %w", err)
	}
	defer rows.Close()
	out := store.Series{Start: pl.Start, Width: p.Width}
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

// rollup rolls up the complete minutes and hours of pl in tx. It holds a
// transaction-scoped advisory lock keyed on the schema, so that racing
// rollups run one after the other: each inserts many rows, and two
// inserting the same rows in different orders could deadlock. The later
// one finds the work done.
func (s *Store) rollup(ctx context.Context, tx pgx.Tx, pl store.SeriesPlan) error {
	if _, err := tx.Exec(ctx, sqlSeriesLock, seriesLockKey(s.schema)); err != nil {
		return fmt.Errorf("taking the rollup lock: %w", err)
	}
	var n int64
	if err := tx.QueryRow(ctx, s.q.seriesRollup, pl.MinutesFrom, pl.Rolled, pl.Keep).Scan(&n); err != nil {
		return fmt.Errorf("rolling up the minutes from %s to %s: %w",
			pl.MinutesFrom.UTC().Format(time.RFC3339), pl.Rolled.UTC().Format(time.RFC3339), err)
	}
	if pl.HoursFrom.Before(pl.HoursTo) {
		if err := tx.QueryRow(ctx, s.q.seriesRollupHours, pl.HoursFrom, pl.HoursTo, pl.Keep).Scan(&n); err != nil {
			return fmt.Errorf("rolling up the hours from %s to %s: %w",
				pl.HoursFrom.UTC().Format(time.RFC3339), pl.HoursTo.UTC().Format(time.RFC3339), err)
		}
	}
	return nil
}

// seriesLockKey is the advisory lock that serializes the rollups of one
// schema.
func seriesLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("rdq/pgstore/series:" + schema))
	return int64(h.Sum64())
}

var _ store.SeriesReader = (*Store)(nil)
