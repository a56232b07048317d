package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// The methods in this file serve operator consoles (store.NotDueCounter,
// store.WaitingCounter, store.GroupOriginReader, store.DeadHistogrammer
// and store.DeadGroupKeyer, which package console
// finds with their accessors). They read only; each query is served by an
// index named in sql.go.

// NotDueCounts returns, per queue, how many PENDING tasks are not due yet at
// now (nil: the current time): retries waiting out their backoff and
// delayed tasks. Queues with none are absent.
func (s *Store) NotDueCounts(ctx context.Context, now *time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		clear(out)
		rows, err := tx.QueryContext(ctx, sqlNotDueCounts, clock(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q string
			var n int64
			if err := rows.Scan(&q, &n); err != nil {
				return err
			}
			out[q] = n
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: counting tasks not due: %w", err)
	}
	return out, nil
}

// WaitingCounts returns, per queue, the PENDING tasks not due yet at now
// (nil: the current time) split into retrying and scheduled, and the held
// ones (see store.WaitingCounts). Queues with none are absent.
func (s *Store) WaitingCounts(ctx context.Context, now *time.Time) (map[string]store.WaitingCounts, error) {
	out := map[string]store.WaitingCounts{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		clear(out)
		rows, err := tx.QueryContext(ctx, sqlWaitingCounts, clock(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q string
			var c store.WaitingCounts
			if err := rows.Scan(&q, &c.Retrying, &c.Scheduled, &c.Held); err != nil {
				return err
			}
			out[q] = c
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: counting waiting tasks: %w", err)
	}
	return out, nil
}

// GroupOrigins returns, per given fingerprint, when the failure first
// happened to the group's earliest dead task (see
// store.GroupOriginReader). Fingerprints without a dead task are absent.
func (s *Store) GroupOrigins(ctx context.Context, fingerprints []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(fingerprints) == 0 {
		return out, nil
	}
	arg, err := json.Marshal(fingerprints)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: reading the origins of failure groups: %w", err)
	}
	err = s.read(ctx, func(tx *sql.Tx) error {
		clear(out)
		rows, err := tx.QueryContext(ctx, sqlGroupOrigins, string(arg))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f string
			var at int64
			if err := rows.Scan(&f, &at); err != nil {
				return err
			}
			out[f] = fromMicros(at)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: reading the origins of failure groups: %w", err)
	}
	return out, nil
}

// DeadHistogram counts the tasks that went dead in buckets consecutive
// intervals of width starting at since. With no fingerprints the result has
// one entry, keyed "", over every dead task; otherwise one entry per given
// fingerprint. Each slice has buckets elements. Tasks that left the
// dead-letter queue (redriven or purged) are not counted.
func (s *Store) DeadHistogram(ctx context.Context, since time.Time, width time.Duration, buckets int, fingerprints []string) (map[string][]int64, error) {
	if width < time.Microsecond || buckets <= 0 || buckets > store.MaxHistogramBuckets {
		return nil, fmt.Errorf("%w: sqlitestore: dead histogram: width %s and %d buckets: use a width of at least 1µs and 1 to %d buckets",
			rdq.ErrInvalid, width, buckets, store.MaxHistogramBuckets)
	}
	from := since.UnixMicro()
	w := width.Microseconds()
	until := from + w*int64(buckets)
	out := map[string][]int64{}
	q := sqlDeadHistogram
	args := []any{from, until, w}
	if len(fingerprints) == 0 {
		out[""] = nil
	} else {
		for _, f := range fingerprints {
			out[f] = nil
		}
		j, err := json.Marshal(fingerprints)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: dead histogram: %w", err)
		}
		q = sqlDeadHistogramByFingerprint
		args = append(args, string(j))
	}
	err := s.read(ctx, func(tx *sql.Tx) error {
		for k := range out {
			out[k] = make([]int64, buckets)
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var fp string
			var b, n int64
			if err := rows.Scan(&fp, &b, &n); err != nil {
				return err
			}
			if h, ok := out[fp]; ok && b >= 0 && b < int64(buckets) {
				h[b] += n
			}
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: dead histogram: %w", err)
	}
	return out, nil
}

// DeadGroupKeys returns, for each given fingerprint, the queues and
// handlers its dead tasks belong to, as (queue, handler) pairs sorted.
// Fingerprints without dead tasks are absent.
func (s *Store) DeadGroupKeys(ctx context.Context, fingerprints []string) (map[string][][2]string, error) {
	out := map[string][][2]string{}
	if len(fingerprints) == 0 {
		return out, nil
	}
	j, err := json.Marshal(fingerprints)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: dead group keys: %w", err)
	}
	err = s.read(ctx, func(tx *sql.Tx) error {
		clear(out)
		rows, err := tx.QueryContext(ctx, sqlDeadGroupKeys, string(j))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var fp, q, h string
			if err := rows.Scan(&fp, &q, &h); err != nil {
				return err
			}
			out[fp] = append(out[fp], [2]string{q, h})
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: dead group keys: %w", err)
	}
	return out, nil
}

var (
	_ store.NotDueCounter     = (*Store)(nil)
	_ store.WaitingCounter    = (*Store)(nil)
	_ store.GroupOriginReader = (*Store)(nil)
	_ store.DeadHistogrammer  = (*Store)(nil)
	_ store.DeadGroupKeyer    = (*Store)(nil)
)
