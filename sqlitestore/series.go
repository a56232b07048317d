package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/srjn45/rdq/store"
)

// Series counts attempts and their outcomes per bucket, queue and handler
// (store.SeriesReader). When complete minutes of the window (older than
// store.SeriesLag) are not rolled up yet, one write transaction rolls them
// into counter rows, and for a window of hours another rolls the complete
// hours into hour rows; the read then takes those rows and counts the
// minutes after them from the attempt history. Nothing on the path of
// claims and finishes is involved.
func (s *Store) Series(ctx context.Context, p store.SeriesParams) (store.Series, error) {
	if err := store.ValidateSeries(p); err != nil {
		return store.Series{}, err
	}
	pl := store.PlanSeries(p, fromMicros(clock(p.Now)))
	if err := s.rollup(ctx, minuteRollup, pl.MinutesFrom, pl.Rolled, pl.Keep); err != nil {
		return store.Series{}, fmt.Errorf("sqlitestore: series: rolling up the minutes from %s to %s: %w",
			pl.MinutesFrom.Format(time.RFC3339), pl.Rolled.Format(time.RFC3339), err)
	}
	if err := s.rollup(ctx, hourRollup, pl.HoursFrom, pl.HoursTo, pl.Keep); err != nil {
		return store.Series{}, fmt.Errorf("sqlitestore: series: rolling up the hours from %s to %s: %w",
			pl.HoursFrom.Format(time.RFC3339), pl.HoursTo.Format(time.RFC3339), err)
	}
	var out store.Series
	err := s.read(ctx, func(tx *sql.Tx) error {
		out = store.Series{Start: pl.Start, Width: p.Width}
		rows, err := tx.QueryContext(ctx, sqlSeries, pl.Start.UnixMicro(), pl.HoursFrom.UnixMicro(), pl.HoursTo.UnixMicro(),
			pl.Rolled.UnixMicro(), pl.End.UnixMicro(), p.Width.Microseconds(), p.Queue, p.Handler)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				q, h string
				b    int64
				c    store.SeriesCounts
			)
			if err := rows.Scan(&q, &h, &b, &c.Attempts, &c.Successes, &c.Retryable, &c.Permanent, &c.DeadLettered); err != nil {
				return err
			}
			if b < 0 || b >= int64(p.Buckets) {
				continue
			}
			if n := len(out.Lines); n == 0 || out.Lines[n-1].Queue != q || out.Lines[n-1].Handler != h {
				out.Lines = append(out.Lines, store.SeriesLine{Queue: q, Handler: h, Counts: make([]store.SeriesCounts, p.Buckets)})
			}
			l := &out.Lines[len(out.Lines)-1]
			l.Counts[b] = l.Counts[b].Add(c)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return store.Series{}, fmt.Errorf("sqlitestore: series: %w", err)
	}
	store.SortSeriesLines(out.Lines)
	return out, nil
}

// rollupKind is one level of counters: minutes from the history, or hours
// from the minutes.
type rollupKind struct {
	width                    time.Duration
	done, roll, mark         string
	pruneCounts, pruneMarked string
}

var (
	minuteRollup = rollupKind{time.Minute, sqlSeriesMinutesDone, sqlSeriesRollup, sqlSeriesMark,
		sqlSeriesPruneCounts, sqlSeriesPruneMinutes}
	hourRollup = rollupKind{time.Hour, sqlSeriesHoursDone, sqlSeriesRollupHours, sqlSeriesMarkHours,
		sqlSeriesPruneHours, sqlSeriesPruneHoursDone}
)

// rollup rolls the intervals of k in [from, to) not rolled up yet into
// their counters and marks them done, and drops those before keep. It
// looks for missing intervals in a read first, so that reads of a series
// whose intervals are all done take no write lock.
func (s *Store) rollup(ctx context.Context, k rollupKind, from, to, keep time.Time) error {
	if !from.Before(to) {
		return nil
	}
	todo := func(tx *sql.Tx) ([]int64, error) {
		rows, err := tx.QueryContext(ctx, k.done, from.UnixMicro(), to.UnixMicro())
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		done := map[int64]bool{}
		for rows.Next() {
			var m int64
			if err := rows.Scan(&m); err != nil {
				return nil, err
			}
			done[m] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		var out []int64
		for m := from; m.Before(to); m = m.Add(k.width) {
			if !done[m.UnixMicro()] {
				out = append(out, m.UnixMicro())
			}
		}
		return out, nil
	}
	var missing []int64
	if err := s.read(ctx, func(tx *sql.Tx) (err error) {
		missing, err = todo(tx)
		return err
	}); err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	return s.write(ctx, func(tx *sql.Tx, _ int64) error {
		// Another writer may have rolled some up meanwhile.
		missing, err := todo(tx)
		if err != nil || len(missing) == 0 {
			return err
		}
		j, err := json.Marshal(missing)
		if err != nil {
			return err
		}
		lo, hi := missing[0], missing[len(missing)-1]+k.width.Microseconds()
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{k.roll, []any{lo, hi, string(j)}},
			{k.mark, []any{string(j)}},
			{k.pruneCounts, []any{keep.UnixMicro()}},
			{k.pruneMarked, []any{keep.UnixMicro()}},
		} {
			if _, err := tx.ExecContext(ctx, st.sql, st.args...); err != nil {
				return err
			}
		}
		return nil
	})
}

var _ store.SeriesReader = (*Store)(nil)
