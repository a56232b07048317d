package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

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
	if _, err := s.run(ctx, scriptPause, "", p.Queue, action, p.Actor, p.Reason, string(filter)); err != nil {
		return fmt.Errorf("redisstore: %s queue %s: %w", action, p.Queue, err)
	}
	return nil
}

// PausedQueues implements store.Pauser.
func (s *Store) PausedQueues(ctx context.Context) ([]string, error) {
	qs, err := s.c.SMembers(ctx, s.ns+":paused").Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: paused queues: %w", err)
	}
	slices.Sort(qs)
	return qs, nil
}

// Snooze implements store.Snoozer.
func (s *Store) Snooze(ctx context.Context, p store.SnoozeParams) ([]error, error) {
	if len(p.Snoozes) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 2+3*len(p.Snoozes))
	args = append(args, nowArg(p.Now), len(p.Snoozes))
	for _, it := range p.Snoozes {
		args = append(args, it.ID.String(), it.Token, micros(max(it.Delay, 0)))
	}
	res, err := s.run(ctx, scriptSnooze, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: snooze: %w", err)
	}
	return leaseErrs(res, len(p.Snoozes))
}

// RetryInPlace implements store.InPlaceRetrier. A task of a paused queue
// is left PENDING, due after its RetryIn.
func (s *Store) RetryInPlace(ctx context.Context, p store.RetryInPlaceParams) ([]store.RetryInPlaceResult, error) {
	if p.Lease <= 0 {
		return nil, fmt.Errorf("%w: redisstore: retry in place needs a positive lease (got %s)", rdq.ErrInvalid, p.Lease)
	}
	out := make([]store.RetryInPlaceResult, len(p.Retries))
	args := make([]any, 0, 3+10*len(p.Retries))
	args = append(args, nowArg(p.Now), micros(p.Lease), 0)
	var sent []int
	for i, c := range p.Retries {
		if c.Status != rdq.StatusPending || c.Attempt == nil || c.Attempt.Outcome != rdq.OutcomeRetryableFailure || c.RetryIn < 0 {
			out[i].Err = fmt.Errorf("%w: redisstore: retry in place of task %s is not a retry (status %s, RetryIn %s, an attempt with outcome %s wanted)",
				rdq.ErrInvalid, c.ID, c.Status, c.RetryIn, rdq.OutcomeRetryableFailure)
			continue
		}
		a := c.Attempt
		sent = append(sent, i)
		args = append(args, c.ID.String(), c.Token, micros(c.RetryIn), string(a.Outcome), cut(a.Failure.Type), a.Failure.Message,
			a.Failure.Stack, cut(a.Failure.Fingerprint), a.WorkerID, micros(max(a.Duration, 0)))
	}
	if len(sent) == 0 {
		return out, nil
	}
	args[2] = len(sent)
	res, err := s.run(ctx, scriptRetryInPlace, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: retry in place: %w", err)
	}
	rows, _ := res.([]any)
	if len(rows) != len(sent) {
		return nil, fmt.Errorf("redisstore: retry in place: %d results for %d items", len(rows), len(sent))
	}
	for j, i := range sent {
		row, _ := rows[j].([]any)
		if len(row) == 0 {
			return nil, fmt.Errorf("redisstore: retry in place: empty result")
		}
		switch row[0] {
		case int64(0):
			out[i].Err = store.ErrLeaseLost
		case int64(1):
			t, err := decodeTask(row[1:])
			if err != nil {
				return nil, fmt.Errorf("redisstore: retry in place: %w", err)
			}
			out[i].Task = t
		}
	}
	return out, nil
}

// NotDueCounts implements store.NotDueCounter.
func (s *Store) NotDueCounts(ctx context.Context, now *time.Time) (map[string]int64, error) {
	res, err := s.run(ctx, scriptNotDue, nowArg(now))
	if err != nil {
		return nil, fmt.Errorf("redisstore: not-due counts: %w", err)
	}
	rows, _ := res.([]any)
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		v, _ := r.([]any)
		if len(v) != 2 {
			return nil, fmt.Errorf("redisstore: not-due counts: malformed reply")
		}
		n, _ := v[1].(int64)
		out[str(v[0])] = n
	}
	return out, nil
}

// DeadHistogram implements store.DeadHistogrammer: one range count per
// bucket on the dead tasks' (or the fingerprint's) sorted set by finish
// time.
func (s *Store) DeadHistogram(ctx context.Context, since time.Time, width time.Duration, buckets int, fingerprints []string) (map[string][]int64, error) {
	if width < time.Microsecond || buckets < 1 || buckets > store.MaxHistogramBuckets {
		return nil, fmt.Errorf("%w: redisstore: dead histogram of %d buckets of %s; want 1 to %d buckets of at least 1µs", rdq.ErrInvalid, buckets, width, store.MaxHistogramBuckets)
	}
	args := []any{since.UnixMicro(), width.Microseconds(), buckets, len(fingerprints)}
	for _, f := range fingerprints {
		args = append(args, f)
	}
	res, err := s.run(ctx, scriptDeadHistogram, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: dead histogram: %w", err)
	}
	rows, _ := res.([]any)
	keys := fingerprints
	if len(keys) == 0 {
		keys = []string{""}
	}
	if len(rows) != len(keys) {
		return nil, fmt.Errorf("redisstore: dead histogram: %d series for %d keys", len(rows), len(keys))
	}
	out := make(map[string][]int64, len(keys))
	for i, r := range rows {
		v, _ := r.([]any)
		counts := make([]int64, len(v))
		for j, c := range v {
			counts[j], _ = c.(int64)
		}
		out[keys[i]] = counts
	}
	return out, nil
}

// DeadGroupKeys implements store.DeadGroupKeyer from the per-fingerprint
// summaries of queues and handlers kept as tasks go dead and leave.
func (s *Store) DeadGroupKeys(ctx context.Context, fingerprints []string) (map[string][][2]string, error) {
	out := map[string][][2]string{}
	if len(fingerprints) == 0 {
		return out, nil
	}
	args := make([]any, len(fingerprints))
	for i, f := range fingerprints {
		args[i] = f
	}
	res, err := s.run(ctx, scriptDeadGroupKeys, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: dead group keys: %w", err)
	}
	rows, _ := res.([]any)
	if len(rows) != len(fingerprints) {
		return nil, fmt.Errorf("redisstore: dead group keys: %d results for %d fingerprints", len(rows), len(fingerprints))
	}
	for i, r := range rows {
		v, _ := r.([]any)
		var pairs [][2]string
		for j := 0; j+1 < len(v); j += 2 {
			q, h, ok := strings.Cut(str(v[j]), "\n")
			if ok {
				pairs = append(pairs, [2]string{q, h})
			}
		}
		if len(pairs) == 0 {
			continue
		}
		slices.SortFunc(pairs, func(a, b [2]string) int {
			if c := strings.Compare(a[0], b[0]); c != 0 {
				return c
			}
			return strings.Compare(a[1], b[1])
		})
		out[fingerprints[i]] = pairs
	}
	return out, nil
}
