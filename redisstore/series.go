package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq/store"
)

var _ store.SeriesReader = (*Store)(nil)

// Series implements store.SeriesReader. The counts are kept as the
// attempts are recorded, not rolled up when read: every script that
// records an attempt or dead-letters a task adds it to its queue's
// counter hashes of the minute and the hour (P:sm:MINUTE, P:sh:HOUR,
// fields kind and handler; see tally in scripts.go), one HINCRBY per key
// and field a batch touches, and a hash expires SeriesRetention (and an
// hour) after it was created. So every minute is final when read, a
// count stays when its task is purged, and a read costs one HGETALL per
// queue and bucket, in one pipelined round trip, whatever the traffic.
func (s *Store) Series(ctx context.Context, p store.SeriesParams) (store.Series, error) {
	if err := store.ValidateSeries(p); err != nil {
		return store.Series{}, fmt.Errorf("redisstore: %w", err)
	}
	now, err := s.clock(ctx, p.Now)
	if err != nil {
		return store.Series{}, fmt.Errorf("redisstore: series: %w", err)
	}
	start := store.SeriesStart(p, now)
	out := store.Series{Start: start, Width: p.Width}
	queues := []string{p.Queue}
	if p.Queue == "" {
		if queues, err = s.c.SMembers(ctx, s.ns+":queues").Result(); err != nil {
			return store.Series{}, fmt.Errorf("redisstore: series: queues: %w", err)
		}
	}
	kind, unit := ":sm:", int64(time.Minute/time.Microsecond)
	if p.Width == time.Hour {
		kind, unit = ":sh:", int64(time.Hour/time.Microsecond)
	}
	first := start.UnixMicro() / unit
	pipe := s.c.Pipeline()
	cmds := make([][]*redis.MapStringStringCmd, len(queues))
	for i, q := range queues {
		cmds[i] = make([]*redis.MapStringStringCmd, p.Buckets)
		for b := range p.Buckets {
			cmds[i][b] = pipe.HGetAll(ctx, s.prefix(q)+kind+strconv.FormatInt(first+int64(b), 10))
		}
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return store.Series{}, fmt.Errorf("redisstore: series: %w", err)
		}
	}
	for i, q := range queues {
		lines := map[string][]store.SeriesCounts{}
		for b, cmd := range cmds[i] {
			for f, v := range cmd.Val() {
				if len(f) < 1 {
					continue
				}
				h := f[1:]
				if p.Handler != "" && h != p.Handler {
					continue
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return store.Series{}, fmt.Errorf("redisstore: series: queue %s, field %q: count %q: %w", q, f, v, err)
				}
				l := lines[h]
				if l == nil {
					l = make([]store.SeriesCounts, p.Buckets)
					lines[h] = l
				}
				c := &l[b]
				switch f[0] {
				case 'S':
					c.Successes += n
					c.Attempts += n
				case 'R':
					c.Retryable += n
					c.Attempts += n
				case 'P':
					c.Permanent += n
					c.Attempts += n
				case 'D':
					c.DeadLettered += n
				default:
					return store.Series{}, fmt.Errorf("redisstore: series: queue %s: unknown counter field %q", q, f)
				}
			}
		}
		for h, counts := range lines {
			out.Lines = append(out.Lines, store.SeriesLine{Queue: q, Handler: h, Counts: counts})
		}
	}
	store.SortSeriesLines(out.Lines)
	return out, nil
}

// clock returns now, or the server's clock when now is nil.
func (s *Store) clock(ctx context.Context, now *time.Time) (time.Time, error) {
	if now != nil {
		return *now, nil
	}
	t, err := s.c.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the server's clock: %w", err)
	}
	return t, nil
}
