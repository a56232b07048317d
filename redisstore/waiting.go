package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq/store"
)

var _ store.WaitingCounter = (*Store)(nil)

// waitingBudget bounds the tasks one scriptWaiting call walks, so no
// call holds the server for long.
const waitingBudget = 5000

// WaitingCounts implements store.WaitingCounter. Held costs O(1) per
// paused handler (the size of its waiting set). Retrying and Scheduled
// walk the tasks not due yet, one field read each: O(log n + m) per
// handler for m tasks not due, in scripts of at most 5,000 tasks. The
// calls for one queue are not one snapshot: a task that becomes due, is
// claimed or is added between two calls of a long walk may be counted
// twice or missed.
func (s *Store) WaitingCounts(ctx context.Context, now *time.Time) (map[string]store.WaitingCounts, error) {
	at, err := s.clock(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("redisstore: waiting counts: %w", err)
	}
	nowArg := nowArg(&at)
	queues, err := s.c.SMembers(ctx, s.ns+":queues").Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: waiting counts: queues: %w", err)
	}
	slices.Sort(queues)
	pipe := s.c.Pipeline()
	hcmds := make([]*redis.StringSliceCmd, len(queues))
	for i, q := range queues {
		hcmds[i] = pipe.SMembers(ctx, s.prefix(q)+":handlers")
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redisstore: waiting counts: handlers: %w", err)
		}
	}
	out := map[string]store.WaitingCounts{}
	for i, q := range queues {
		var w store.WaitingCounts
		for _, h := range hcmds[i].Val() {
			for from := int64(-1); ; {
				res, err := s.runQ(ctx, scriptWaiting, q, nowArg, h, strconv.FormatInt(from, 10), waitingBudget)
				if err != nil {
					return nil, fmt.Errorf("redisstore: waiting counts of queue %s, handler %s: %w", q, h, err)
				}
				r, _ := res.([]any)
				if len(r) != 4 {
					return nil, fmt.Errorf("redisstore: waiting counts of queue %s, handler %s: malformed reply", q, h)
				}
				held, _ := r[0].(int64)
				retrying, _ := r[1].(int64)
				scheduled, _ := r[2].(int64)
				w.Held += held
				w.Retrying += retrying
				w.Scheduled += scheduled
				if from, _ = r[3].(int64); from < 0 {
					break
				}
			}
		}
		if w != (store.WaitingCounts{}) {
			out[q] = w
		}
	}
	return out, nil
}
