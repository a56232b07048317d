package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var (
	_ store.Pauser           = (*Store)(nil)
	_ store.Snoozer          = (*Store)(nil)
	_ store.InPlaceRetrier   = (*Store)(nil)
	_ store.NotDueCounter    = (*Store)(nil)
	_ store.DeadHistogrammer = (*Store)(nil)
	_ store.DeadGroupKeyer   = (*Store)(nil)
)

// PauseQueue implements store.Pauser: claims pass over a paused queue's
// tasks until ResumeQueue.
func (s *Store) PauseQueue(ctx context.Context, p store.PauseParams) error {
	return s.pause(ctx, "pause", p)
}

// ResumeQueue implements store.Pauser, and notifies the queue's workers.
func (s *Store) ResumeQueue(ctx context.Context, p store.PauseParams) error {
	return s.pause(ctx, "resume", p)
}

func (s *Store) pause(ctx context.Context, action string, p store.PauseParams) error {
	if err := rdq.ValidateName("queue", p.Queue); err != nil {
		return fmt.Errorf("redisstore: %s: %w", action, err)
	}
	filter, err := json.Marshal(map[string]string{"queue": p.Queue})
	if err != nil {
		return fmt.Errorf("redisstore: %s: %w", action, err)
	}
	if err := s.addQueues(ctx, p.Queue); err != nil {
		return fmt.Errorf("redisstore: %s queue %s: %w", action, p.Queue, err)
	}
	if _, err := s.runAudited(ctx, scriptPause, p.Queue, "", p.Queue, action, p.Actor, p.Reason, string(filter)); err != nil {
		return fmt.Errorf("redisstore: %s queue %s: %w", action, p.Queue, err)
	}
	return nil
}

// PausedQueues implements store.Pauser.
func (s *Store) PausedQueues(ctx context.Context) ([]string, error) {
	qs, err := s.allQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: paused queues: %w", err)
	}
	cmds := make([]*redis.IntCmd, len(qs))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range qs {
			cmds[i] = p.Exists(ctx, s.prefix(q)+":paused")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: paused queues: %w", err)
	}
	out := []string{}
	for i, c := range cmds {
		if c.Val() == 1 {
			out = append(out, qs[i])
		}
	}
	return out, nil
}

// Snooze implements store.Snoozer.
func (s *Store) Snooze(ctx context.Context, p store.SnoozeParams) ([]error, error) {
	if len(p.Snoozes) == 0 {
		return nil, nil
	}
	ids := make([]rdq.ID, len(p.Snoozes))
	for i, it := range p.Snoozes {
		ids[i] = it.ID
	}
	qs, err := s.queuesOfLeased(ctx, ids, true)
	if err != nil {
		return nil, fmt.Errorf("redisstore: snooze: %w", err)
	}
	errs, err := s.leaseBatch(ctx, scriptSnooze, qs, false, []any{nowArg(p.Now)}, func(i int) []any {
		it := p.Snoozes[i]
		return []any{it.ID.String(), it.Token, micros(max(it.Delay, 0))}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: snooze: %w", err)
	}
	return errs, nil
}

// RetryInPlace implements store.InPlaceRetrier. A task of a paused queue
// is left PENDING, due after its RetryIn.
func (s *Store) RetryInPlace(ctx context.Context, p store.RetryInPlaceParams) ([]store.RetryInPlaceResult, error) {
	if p.Lease <= 0 {
		return nil, fmt.Errorf("%w: redisstore: retry in place needs a positive lease (got %s)", rdq.ErrInvalid, p.Lease)
	}
	out := make([]store.RetryInPlaceResult, len(p.Retries))
	var sent []int
	var ids []rdq.ID
	for i, c := range p.Retries {
		if c.Status != rdq.StatusPending || c.Attempt == nil || c.Attempt.Outcome != rdq.OutcomeRetryableFailure || c.RetryIn < 0 {
			out[i].Err = fmt.Errorf("%w: redisstore: retry in place of task %s is not a retry (status %s, RetryIn %s, an attempt with outcome %s wanted)",
				rdq.ErrInvalid, c.ID, c.Status, c.RetryIn, rdq.OutcomeRetryableFailure)
			continue
		}
		sent = append(sent, i)
		ids = append(ids, c.ID)
	}
	if len(sent) == 0 {
		return out, nil
	}
	qs, err := s.queuesOfLeased(ctx, ids, false)
	if err != nil {
		return nil, fmt.Errorf("redisstore: retry in place: %w", err)
	}
	for j, q := range qs {
		if q == "" {
			out[sent[j]].Err = store.ErrLeaseLost
		}
	}
	order, idx := groups(qs)
	err = parallel(ctx, order, func(ctx context.Context, q string) error {
		args := make([]any, 0, 3+10*len(idx[q]))
		args = append(args, nowArg(p.Now), micros(p.Lease), len(idx[q]))
		for _, j := range idx[q] {
			c := p.Retries[sent[j]]
			a := c.Attempt
			args = append(args, c.ID.String(), c.Token, micros(c.RetryIn), string(a.Outcome), cut(a.Failure.Type), a.Failure.Message,
				a.Failure.Stack, cut(a.Failure.Fingerprint), a.WorkerID, micros(max(a.Duration, 0)))
		}
		res, err := s.runQ(ctx, scriptRetryInPlace, q, args...)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q, err)
		}
		rows, _ := res.([]any)
		if len(rows) != len(idx[q]) {
			return fmt.Errorf("queue %s: %d results for %d items", q, len(rows), len(idx[q]))
		}
		for k, j := range idx[q] {
			i := sent[j]
			row, _ := rows[k].([]any)
			if len(row) == 0 {
				return fmt.Errorf("empty result")
			}
			switch row[0] {
			case int64(0):
				out[i].Err = store.ErrLeaseLost
			case int64(1):
				if len(row) != 2 {
					return fmt.Errorf("malformed result of %d elements", len(row))
				}
				v, _ := row[1].([]any)
				t, err := decodeRow(v)
				if err != nil {
					return err
				}
				out[i].Task = t
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: retry in place: %w", err)
	}
	return out, nil
}

func (s *Store) NotDueCounts(ctx context.Context, now *time.Time) (map[string]int64, error) {
	qs, err := s.allQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: not-due counts: %w", err)
	}
	var mu sync.Mutex
	out := make(map[string]int64)
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptNotDue, q, nowArg(now))
		if err != nil {
			return err
		}
		if n, _ := res.(int64); n > 0 {
			mu.Lock()
			out[q] = n
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: not-due counts: %w", err)
	}
	return out, nil
}

func (s *Store) DeadHistogram(ctx context.Context, since time.Time, width time.Duration, buckets int, fingerprints []string) (map[string][]int64, error) {
	if width < time.Microsecond || buckets < 1 || buckets > store.MaxHistogramBuckets {
		return nil, fmt.Errorf("%w: redisstore: dead histogram of %d buckets of %s; want 1 to %d buckets of at least 1µs", rdq.ErrInvalid, buckets, width, store.MaxHistogramBuckets)
	}
	args := []any{since.UnixMicro(), width.Microseconds(), buckets, len(fingerprints)}
	for _, f := range fingerprints {
		args = append(args, f)
	}
	keys := fingerprints
	if len(keys) == 0 {
		keys = []string{""}
	}
	out := make(map[string][]int64, len(keys))
	for _, k := range keys {
		out[k] = make([]int64, buckets)
	}
	qs, err := s.allQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: dead histogram: %w", err)
	}
	var mu sync.Mutex
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptDeadHistogram, q, args...)
		if err != nil {
			return err
		}
		rows, _ := res.([]any)
		if len(rows) != len(keys) {
			return fmt.Errorf("queue %s: %d series for %d keys", q, len(rows), len(keys))
		}
		mu.Lock()
		defer mu.Unlock()
		for i, r := range rows {
			v, _ := r.([]any)
			for j, c := range v {
				if j < buckets {
					n, _ := c.(int64)
					out[keys[i]][j] += n
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: dead histogram: %w", err)
	}
	return out, nil
}

func (s *Store) DeadGroupKeys(ctx context.Context, fingerprints []string) (map[string][][2]string, error) {
	out := map[string][][2]string{}
	if len(fingerprints) == 0 {
		return out, nil
	}
	args := make([]any, len(fingerprints))
	for i, f := range fingerprints {
		args[i] = f
	}
	qs, err := s.allQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: dead group keys: %w", err)
	}
	var mu sync.Mutex
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptDeadGroupKeys, q, args...)
		if err != nil {
			return err
		}
		rows, _ := res.([]any)
		if len(rows) != len(fingerprints) {
			return fmt.Errorf("queue %s: %d results for %d fingerprints", q, len(rows), len(fingerprints))
		}
		mu.Lock()
		defer mu.Unlock()
		for i, r := range rows {
			v, _ := r.([]any)
			for j := 0; j+1 < len(v); j += 2 {
				out[fingerprints[i]] = append(out[fingerprints[i]], [2]string{q, str(v[j])})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: dead group keys: %w", err)
	}
	for _, pairs := range out {
		slices.SortFunc(pairs, func(a, b [2]string) int {
			if c := strings.Compare(a[0], b[0]); c != 0 {
				return c
			}
			return strings.Compare(a[1], b[1])
		})
	}
	return out, nil
}
