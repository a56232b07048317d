package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.LiveTasks = (*Store)(nil)

// ListTasks implements store.LiveTasks: one page of one state, read from
// the state's index in order (see sqlListLive).
func (s *Store) ListTasks(ctx context.Context, p store.ListTasksParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("sqlitestore: list tasks: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	query, args, err := listLiveQuery(p)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list tasks: %w", err)
	}
	var tasks []*rdq.Task
	err = s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		tasks, err = scanTasks(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list %s tasks: %w", p.State, err)
	}
	if tasks == nil {
		tasks = []*rdq.Task{}
	}
	return tasks, nil
}

// listLiveQuery is the statement and parameters of one ListTasks page.
func listLiveQuery(p store.ListTasksParams) (string, []any, error) {
	sel := &selection{}
	var cursor, order string
	switch p.State {
	case store.StatePending:
		sel.add(liveWherePending)
		cursor, order = liveCursorDue, liveOrderDue
	case store.StateRetrying:
		sel.add(liveWhereRetrying)
		cursor, order = liveCursorDue, liveOrderDue
	case store.StateInFlight:
		sel.add(liveWhereInFlight)
		cursor, order = liveCursorExpiry, liveOrderExpiry
	case store.StateSucceeded:
		sel.add(liveWhereSucceeded)
		cursor, order = liveCursorFinished, liveOrderNewestDone
	default:
		return "", nil, fmt.Errorf("%w: state %q, want pending, retrying, in_flight or succeeded", rdq.ErrInvalid, p.State)
	}
	f := p.Filter
	if err := sel.filter(store.DeadFilter{IDs: f.IDs, Queue: f.Queue, Handler: f.Handler, ErrorType: f.ErrorType,
		Fingerprint: f.Fingerprint, MessageContains: f.MessageContains}); err != nil {
		return "", nil, err
	}
	if p.After != nil {
		sel.add(cursor, p.After.At.UnixMicro(), idArg(p.After.ID))
	}
	if f.Queue != "" && (p.State == store.StatePending || p.State == store.StateRetrying) {
		// A queue's waiting tasks live in two indexes (see listLiveMerged).
		where := sel.where.String()
		args := slices.Concat(sel.args, []any{p.Limit}, sel.args, []any{p.Limit, p.Limit})
		return listLiveMerged(where, order), args, nil
	}
	sel.add(order)
	sel.add(sqlLimit, p.Limit)
	return sqlListLive + sel.where.String(), sel.args, nil
}

// TaskByKey implements store.LiveTasks.
func (s *Store) TaskByKey(ctx context.Context, queue, key string) (*rdq.Task, error) {
	var tasks []*rdq.Task
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlTaskByKey, queue, key)
		if err != nil {
			return err
		}
		tasks, err = scanTasks(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: task with key %q in queue %q: %w", key, queue, err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("sqlitestore: task with key %q in queue %q: %w", key, queue, store.ErrNotFound)
	}
	return tasks[0], nil
}

// RetryNow implements store.LiveTasks, in one write transaction with its
// audit entry.
func (s *Store) RetryNow(ctx context.Context, p store.RetryNowParams) ([]error, error) {
	errs, err := s.liveAction(ctx, p.Now, p.IDs, "retry_now", p.Actor, p.Reason, func(tx *sql.Tx, id rdq.ID, now int64) error {
		return s.applyOne(ctx, tx, sqlRetryNow, now, idArg(id))
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: retry now: %w", err)
	}
	return errs, nil
}

// Cancel implements store.LiveTasks, in one write transaction with its
// audit entry.
func (s *Store) Cancel(ctx context.Context, p store.CancelParams) ([]error, error) {
	f := rdq.CancelledFailure(p.Reason)
	rec := &store.AttemptRecord{Outcome: rdq.OutcomeCancelled, Failure: f, WorkerID: p.Actor}
	errs, err := s.liveAction(ctx, p.Now, p.IDs, "cancel", p.Actor, p.Reason, func(tx *sql.Tx, id rdq.ID, now int64) error {
		if err := s.applyOne(ctx, tx, sqlCancel, now, f.Type, f.Message, f.Fingerprint, idArg(id)); err != nil {
			return err
		}
		return s.insertAttempt(ctx, tx, id, rec, 0, now)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: cancel: %w", err)
	}
	return errs, nil
}

// applyOne runs an update that must change exactly one row.
func (s *Store) applyOne(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	res, err := s.exec(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("reading rows affected: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("changed %d rows of a pending task, want 1", n)
	}
	return nil
}

// liveAction applies fn, in one write transaction, to each PENDING task
// among ids (once per ID), reports store.ErrNotFound or
// store.ErrNotPending for the others, and writes one audit entry of action
// when any task changed.
func (s *Store) liveAction(ctx context.Context, override *time.Time, ids []rdq.ID, action, actor, reason string, fn func(*sql.Tx, rdq.ID, int64) error) ([]error, error) {
	if len(ids) == 0 {
		return []error{}, nil
	}
	var errs []error
	err := s.writeAt(ctx, override, func(tx *sql.Tx, now int64) error {
		errs = make([]error, len(ids))
		done := map[rdq.ID]bool{}
		var (
			changed []rdq.ID
			queues  []string
		)
		for i, id := range ids {
			if done[id] {
				continue
			}
			var status, queue string
			err := tx.QueryRowContext(ctx, sqlLiveStatus, idArg(id)).Scan(&status, &queue)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				errs[i] = fmt.Errorf("task %s: %w", id, store.ErrNotFound)
				continue
			case err != nil:
				return fmt.Errorf("looking up task %s: %w", id, err)
			case rdq.Status(status) != rdq.StatusPending:
				errs[i] = fmt.Errorf("task %s (%s): %w", id, status, store.ErrNotPending)
				continue
			}
			if err := fn(tx, id, now); err != nil {
				return fmt.Errorf("task %s: %w", id, err)
			}
			done[id] = true
			changed = append(changed, id)
			queues = append(queues, queue)
		}
		if len(changed) == 0 {
			return nil
		}
		return s.audit(ctx, tx, now, auditRecord{actor: actor, action: action, ids: changed, count: int64(len(changed)), reason: reason, queues: queues})
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}
