package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	args := []any{string(p.State), p.Limit, cat, cid, f.Queue, f.Handler, f.ErrorType, f.Fingerprint, asciiLower(f.MessageContains), len(f.IDs)}
	for _, id := range f.IDs {
		args = append(args, id.String())
	}
	res, err := s.run(ctx, scriptListTasks, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list tasks: %w", err)
	}
	return decodeTasks(res)
}

// TaskByKey implements store.LiveTasks.
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
	t, _, err := s.Get(ctx, id)
	return t, err
}

// RetryNow implements store.LiveTasks.
func (s *Store) RetryNow(ctx context.Context, p store.RetryNowParams) ([]error, error) {
	if len(p.IDs) == 0 {
		return nil, nil
	}
	args := []any{nowArg(p.Now), p.Actor, p.Reason, len(p.IDs)}
	for _, id := range p.IDs {
		args = append(args, id.String())
	}
	res, err := s.run(ctx, scriptRetryNow, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: retry now: %w", err)
	}
	return liveErrs("retry now", p.IDs, res)
}

// Cancel implements store.LiveTasks.
func (s *Store) Cancel(ctx context.Context, p store.CancelParams) ([]error, error) {
	if len(p.IDs) == 0 {
		return nil, nil
	}
	cf := rdq.CancelledFailure(p.Reason)
	args := []any{nowArg(p.Now), p.Actor, p.Reason, cf.Type, cf.Message, cf.Fingerprint, len(p.IDs)}
	for _, id := range p.IDs {
		args = append(args, id.String())
	}
	res, err := s.run(ctx, scriptCancel, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: cancel: %w", err)
	}
	return liveErrs("cancel", p.IDs, res)
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
