package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.LiveTasks = (*Store)(nil)

// ListTasks implements store.LiveTasks. A listing walks the state's
// sorted set of each queue (or of the filter's queue) from the cursor, so
// a filter other than the queue or IDs costs the entries it skips.
func (s *Store) ListTasks(ctx context.Context, p store.ListTasksParams) ([]*rdq.Task, error) {
	if !p.State.Valid() {
		return nil, fmt.Errorf("%w: redisstore: list tasks: state %q; want pending, retrying, in_flight or succeeded", rdq.ErrInvalid, p.State)
	}
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: list tasks needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	cat, cid := "", ""
	if p.After != nil {
		cat, cid = strconv.FormatInt(p.After.At.UnixMicro(), 10), p.After.ID.String()
	}
	f := p.Filter
	// qs are the queues the listing reads, with the IDs of each (none: all
	// of the state's tasks of the queue).
	ids := map[string][]rdq.ID{}
	var qs []string
	var err error
	switch {
	case len(f.IDs) > 0:
		found, err := s.queuesOf(ctx, f.IDs)
		if err != nil {
			return nil, fmt.Errorf("redisstore: list tasks: %w", err)
		}
		for i, q := range found {
			if q != "" && (f.Queue == "" || f.Queue == q) {
				ids[q] = append(ids[q], f.IDs[i])
			}
		}
		qs, _ = groups(found)
		qs = slices.DeleteFunc(qs, func(q string) bool { return len(ids[q]) == 0 })
	case f.Queue != "":
		qs = []string{f.Queue}
	default:
		if qs, err = s.allQueues(ctx); err != nil {
			return nil, fmt.Errorf("redisstore: list tasks: %w", err)
		}
	}
	var mu sync.Mutex
	var out []*rdq.Task
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		args := []any{string(p.State), p.Limit, cat, cid, q, f.Handler, f.ErrorType, f.Fingerprint, asciiLower(f.MessageContains), len(ids[q])}
		for _, id := range ids[q] {
			args = append(args, id.String())
		}
		res, err := s.runQ(ctx, scriptListTasks, q, args...)
		if err != nil {
			return err
		}
		ts, err := decodeTasks(res)
		mu.Lock()
		defer mu.Unlock()
		out = append(out, ts...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: list tasks: %w", err)
	}
	at := func(t *rdq.Task) time.Time {
		switch p.State {
		case store.StateInFlight:
			return t.LeaseExpiresAt
		case store.StateSucceeded:
			return t.FinishedAt
		}
		return t.NextAttemptAt
	}
	slices.SortFunc(out, func(a, b *rdq.Task) int {
		c := cmp.Or(at(a).Compare(at(b)), strings.Compare(a.ID.String(), b.ID.String()))
		if p.State == store.StateSucceeded {
			return -c
		}
		return c
	})
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

func (s *Store) TaskByKey(ctx context.Context, queue, key string) (*rdq.Task, error) {
	if err := rdq.ValidateName("queue", queue); err != nil {
		return nil, fmt.Errorf("redisstore: task by key: %w", err)
	}
	v, err := s.c.Get(ctx, s.ns+":{"+queue+"}:ik:"+key).Result()
	if errors.Is(err, redis.Nil) || strings.HasPrefix(v, "purged:") {
		return nil, fmt.Errorf("redisstore: no task holds key %q in queue %s: %w", key, queue, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: task by key: %w", err)
	}
	id, err := rdq.ParseID(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: task by key: %w", err)
	}
	t, _, err := s.getIn(ctx, queue, id)
	return t, err
}

// RetryNow implements store.LiveTasks.
func (s *Store) RetryNow(ctx context.Context, p store.RetryNowParams) ([]error, error) {
	return s.byIDs(ctx, "retry now", scriptRetryNow, p.IDs, []any{nowArg(p.Now), p.Actor, p.Reason})
}

func (s *Store) Cancel(ctx context.Context, p store.CancelParams) ([]error, error) {
	cf := rdq.CancelledFailure(p.Reason)
	return s.byIDs(ctx, "cancel", scriptCancel, p.IDs, []any{nowArg(p.Now), p.Actor, p.Reason, cf.Type, cf.Message, cf.Fingerprint})
}

// byIDs runs an audited script of live tasks by ID, one per queue of
// theirs (each writing its part of one audit entry): head are its arguments
// before the IDs' count.
func (s *Store) byIDs(ctx context.Context, what string, sc *redis.Script, ids []rdq.ID, head []any) ([]error, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	qs, err := s.queuesOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", what, err)
	}
	codes := make([]any, len(ids))
	for i, q := range qs {
		if q == "" {
			codes[i] = "notfound"
		}
	}
	order, idx := groups(qs)
	aid, err := s.reserveAudit(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", what, err)
	}
	err = parallel(ctx, order, func(ctx context.Context, q string) error {
		args := append(slices.Clone(head), len(idx[q]))
		for _, i := range idx[q] {
			args = append(args, ids[i].String())
		}
		res, err := s.runQ(ctx, sc, q, append(args, aid)...)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q, err)
		}
		got, _ := res.([]any)
		if len(got) != len(idx[q]) {
			return fmt.Errorf("queue %s: %d results for %d tasks", q, len(got), len(idx[q]))
		}
		for j, i := range idx[q] {
			codes[i] = got[j]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", what, err)
	}
	return liveErrs(what, ids, codes)
}

func liveErrs(what string, ids []rdq.ID, res any) ([]error, error) {
	codes, _ := res.([]any)
	if len(codes) != len(ids) {
		return nil, fmt.Errorf("redisstore: %s: %d results for %d tasks", what, len(codes), len(ids))
	}
	errs := make([]error, len(ids))
	for i, c := range codes {
		switch str(c) {
		case "ok":
		case "notfound":
			errs[i] = fmt.Errorf("redisstore: %s %s: %w", what, ids[i], store.ErrNotFound)
		case "notpending":
			errs[i] = fmt.Errorf("redisstore: %s %s: %w", what, ids[i], store.ErrNotPending)
		default:
			return nil, fmt.Errorf("redisstore: %s %s: unexpected result %v", what, ids[i], c)
		}
	}
	return errs, nil
}
