package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.GroupOriginReader = (*Store)(nil)

// GroupOrigins implements store.GroupOriginReader. The group's earliest
// dead task is the first of each queue's dead tasks of the fingerprint
// (P:df:F, by dead time, then ID) merged across queues; its origin is read
// from its attempt history. A call costs O(queues × fingerprints × log n)
// in two pipelined round trips, plus the attempts of one task per
// fingerprint.
func (s *Store) GroupOrigins(ctx context.Context, fingerprints []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(fingerprints) == 0 {
		return out, nil
	}
	queues, err := s.c.SMembers(ctx, s.ns+":queues").Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: group origins: queues: %w", err)
	}
	if len(queues) == 0 {
		return out, nil
	}
	pipe := s.c.Pipeline()
	firsts := make([][]*redis.ZSliceCmd, len(fingerprints))
	for i, f := range fingerprints {
		firsts[i] = make([]*redis.ZSliceCmd, len(queues))
		for j, q := range queues {
			firsts[i][j] = pipe.ZRangeWithScores(ctx, s.prefix(q)+":df:"+f, 0, 0)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: group origins: %w", err)
	}
	type origin struct {
		f, q, id string
		dead     float64
		task     *redis.SliceCmd
		atts     *redis.StringSliceCmd
	}
	var found []*origin
	for i, f := range fingerprints {
		var best *origin
		for j, q := range queues {
			z := firsts[i][j].Val()
			if len(z) == 0 {
				continue
			}
			id, _ := z[0].Member.(string)
			if best == nil || z[0].Score < best.dead || z[0].Score == best.dead && id < best.id {
				best = &origin{f: f, q: q, id: id, dead: z[0].Score}
			}
		}
		if best != nil {
			found = append(found, best)
		}
	}
	if len(found) == 0 {
		return out, nil
	}
	pipe = s.c.Pipeline()
	for _, o := range found {
		p := s.prefix(o.q)
		o.task = pipe.HMGet(ctx, p+":t:"+o.id, "et", "fi")
		o.atts = pipe.LRange(ctx, p+":a:"+o.id, 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: group origins: %w", err)
	}
	for _, o := range found {
		id, err := rdq.ParseID(o.id)
		if err != nil {
			return nil, fmt.Errorf("redisstore: group origins: task %q of group %s: %w", o.id, o.f, err)
		}
		v := o.task.Val()
		et, _ := v[0].(string)
		fi, _ := v[1].(string)
		if fi == "" {
			continue // purged since its index was read
		}
		at := microTime(fi)
		first := time.Time{}
		for _, rec := range o.atts.Val() {
			a, err := decodeAttempt(id, rec)
			if err != nil {
				return nil, fmt.Errorf("redisstore: group origins: task %s: %w", id, err)
			}
			if a.Outcome != rdq.OutcomeSuccess && a.ErrorType == et && (first.IsZero() || a.FinishedAt.Before(first)) {
				first = a.FinishedAt
			}
		}
		if !first.IsZero() {
			at = first
		}
		out[o.f] = at
	}
	return out, nil
}
