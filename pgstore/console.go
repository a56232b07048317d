package pgstore

import (
	"context"
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
// now (nil: the database's clock): retries waiting out their backoff and
// delayed tasks. Queues with none are absent.
func (s *Store) NotDueCounts(ctx context.Context, now *time.Time) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, s.q.notDueCounts, now)
	if err != nil {
		return nil, fmt.Errorf("pgstore: counting tasks not due: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("pgstore: counting tasks not due: %w", err)
		}
		out[q] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: counting tasks not due: %w", err)
	}
	return out, nil
}

// WaitingCounts returns, per queue, the PENDING tasks not due yet at now
// (nil: the database's clock) split into retrying and scheduled, and the
// held ones (see store.WaitingCounts). Queues with none are absent.
func (s *Store) WaitingCounts(ctx context.Context, now *time.Time) (map[string]store.WaitingCounts, error) {
	rows, err := s.pool.Query(ctx, s.q.waitingCounts, now)
	if err != nil {
		return nil, fmt.Errorf("pgstore: counting waiting tasks: %w", err)
	}
	defer rows.Close()
	out := map[string]store.WaitingCounts{}
	for rows.Next() {
		var q string
		var c store.WaitingCounts
		if err := rows.Scan(&q, &c.Retrying, &c.Scheduled, &c.Held); err != nil {
			return nil, fmt.Errorf("pgstore: counting waiting tasks: %w", err)
		}
		out[q] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: counting waiting tasks: %w", err)
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
	rows, err := s.pool.Query(ctx, s.q.groupOrigins, fingerprints)
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading the origins of failure groups: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var f string
		var at time.Time
		if err := rows.Scan(&f, &at); err != nil {
			return nil, fmt.Errorf("pgstore: reading the origins of failure groups: %w", err)
		}
		out[f] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: reading the origins of failure groups: %w", err)
	}
	return out, nil
}

// DeadHistogram counts the tasks that went dead in buckets consecutive
// intervals of width starting at since. With no fingerprints the result has
// one entry, keyed "", over every dead task; otherwise one entry per given
// fingerprint (lower-case hexadecimal, as store.Group reports them). Each
// slice has buckets elements. Tasks that left the dead-letter queue
// (redriven or purged) are not counted.
func (s *Store) DeadHistogram(ctx context.Context, since time.Time, width time.Duration, buckets int, fingerprints []string) (map[string][]int64, error) {
	if width < time.Microsecond || buckets <= 0 || buckets > store.MaxHistogramBuckets {
		return nil, fmt.Errorf("%w: pgstore: dead histogram: width %s and %d buckets: use a width of at least 1µs and 1 to %d buckets",
			rdq.ErrInvalid, width, buckets, store.MaxHistogramBuckets)
	}
	until := since.Add(width * time.Duration(buckets))
	out := map[string][]int64{}
	q := s.q.deadHistogram
	args := []any{since, until, width.Seconds()}
	if len(fingerprints) == 0 {
		out[""] = make([]int64, buckets)
	} else {
		for _, f := range fingerprints {
			out[f] = make([]int64, buckets)
		}
		q = s.q.deadHistogramByFingerprint
		args = append(args, fingerprints)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: dead histogram: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fp string
		var b int
		var n int64
		if err := rows.Scan(&fp, &b, &n); err != nil {
			return nil, fmt.Errorf("pgstore: dead histogram: %w", err)
		}
		if h, ok := out[fp]; ok && b >= 0 && b < buckets {
			h[b] += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: dead histogram: %w", err)
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
	rows, err := s.pool.Query(ctx, s.q.deadGroupKeys, fingerprints)
	if err != nil {
		return nil, fmt.Errorf("pgstore: dead group keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fp, q, h string
		if err := rows.Scan(&fp, &q, &h); err != nil {
			return nil, fmt.Errorf("pgstore: dead group keys: %w", err)
		}
		out[fp] = append(out[fp], [2]string{q, h})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: dead group keys: %w", err)
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
