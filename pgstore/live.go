package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.LiveTasks = (*Store)(nil)

// ListTasks returns one page of the tasks in p.State matching p.Filter, in
// the state's order (see store.TaskState), in one statement served by the
// state's index (see sqlListTasks).
func (s *Store) ListTasks(ctx context.Context, p store.ListTasksParams) ([]*rdq.Task, error) {
	query, args, err := s.listTasksQuery(p)
	if err != nil {
		return nil, err
	}
	if waitingEveryQueue(p) {
		// See sqlListTasksWaiting: its estimate, a hundred rows per
		// recursive scan of queues times a page per queue, is far above
		// its cost (a page per queue found), and above the server's
		// jit_above_cost: JIT would compile it at every call, which at a
		// million tasks cost most of a second, to save microseconds.
		// The transaction (a savepoint in a caller's transaction) is
		// rolled back, which ends the setting with it.
		tasks, err := s.listJITOff(ctx, query, args)
		if err != nil {
			return nil, fmt.Errorf("pgstore: list %s tasks: %w", p.State, err)
		}
		return tasks, nil
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list %s tasks: %w", p.State, err)
	}
	tasks, err := collectTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list %s tasks: %w", p.State, err)
	}
	return tasks, nil
}

// listJITOff runs a task listing after sqlJITOff in a transaction of its
// own, which it rolls back.
func (s *Store) listJITOff(ctx context.Context, query string, args []any) (tasks []*rdq.Task, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := tx.Rollback(ctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = errors.Join(err, rerr)
		}
	}()
	if _, err := tx.Exec(ctx, sqlJITOff); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collectTasks(rows)
}

// waitingEveryQueue reports whether ListTasks runs sqlListTasksWaiting for p.
func waitingEveryQueue(p store.ListTasksParams) bool {
	return (p.State == store.StatePending || p.State == store.StateRetrying) && p.Filter.Queue == ""
}

// listTasksQuery renders the ListTasks statement for p.
func (s *Store) listTasksQuery(p store.ListTasksParams) (string, []any, error) {
	if !p.State.Valid() {
		return "", nil, errInvalid("list tasks: state %q, want pending, retrying, in_flight or succeeded", p.State)
	}
	if p.Limit < 1 {
		return "", nil, errInvalid("list tasks: limit %d, want at least 1", p.Limit)
	}
	st := newStmt()
	var state, column, order, cmp string
	switch p.State {
	case store.StatePending:
		state, column, order, cmp = "t.status = 'PENDING' AND t.attempts = 0", "next_attempt_at", "t.next_attempt_at, t.id", ">"
	case store.StateRetrying:
		state, column, order, cmp = "t.status = 'PENDING' AND t.attempts > 0", "next_attempt_at", "t.next_attempt_at, t.id", ">"
	case store.StateInFlight:
		state, column, order, cmp = "t.status = 'IN_FLIGHT'", "lease_expires_at", "t.lease_expires_at, t.id", ">"
	case store.StateSucceeded:
		state, column, order, cmp = "t.status = 'SUCCEEDED'", "finished_at", "t.finished_at DESC, t.id DESC", "<"
	}
	st.set("state", state)
	st.set("order", order)
	st.set("filter", st.deadFilter(liveFilter(p.Filter)))
	after := ""
	if p.After != nil {
		after = fmt.Sprintf("\n  AND (t.%s, t.id) %s (%s::timestamptz, %s::uuid)", column, cmp,
			st.param(p.After.At), st.param([16]byte(p.After.ID)))
	}
	st.set("after", after)
	st.set("limit", st.param(p.Limit))
	if waitingEveryQueue(p) {
		return st.render(s.q.listTasksWaiting), st.args, nil
	}
	if p.State == store.StatePending || p.State == store.StateRetrying {
		return st.render(s.q.listTasksHeld), st.args, nil
	}
	return st.render(s.q.listTasks), st.args, nil
}

// liveFilter is f as the dead-task filter whose conditions it shares.
func liveFilter(f store.TaskFilter) store.DeadFilter {
	return store.DeadFilter{
		IDs: f.IDs, Queue: f.Queue, Handler: f.Handler, ErrorType: f.ErrorType,
		Fingerprint: f.Fingerprint, MessageContains: f.MessageContains,
	}
}

// TaskByKey returns the task holding idempotency key key in queue, or an
// error wrapping store.ErrNotFound.
func (s *Store) TaskByKey(ctx context.Context, queue, key string) (*rdq.Task, error) {
	t, err := scanTask(s.pool.QueryRow(ctx, s.q.taskByKey, clean(queue), clean(key)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: task with key %q in queue %q: %w", key, queue, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: task with key %q in queue %q: %w", key, queue, err)
	}
	return t, nil
}

// RetryNow makes the PENDING tasks p.IDs due now, in one transaction that
// locks them, changes them, notifies their queues and writes one
// "retry_now" audit entry (with the IDs changed) when any changed.
func (s *Store) RetryNow(ctx context.Context, p store.RetryNowParams) ([]error, error) {
	errs, err := s.liveAction(ctx, p.IDs, "retry now", func(tx pgx.Tx, ids []rdq.ID) error {
		var moved, notified int64
		if err := tx.QueryRow(ctx, s.q.retryNow, uuids(ids), p.Now, s.channel).Scan(&moved, &notified); err != nil {
			return err
		}
		if moved != int64(len(ids)) {
			return fmt.Errorf("made %d of %d locked pending tasks due", moved, len(ids))
		}
		_, err := tx.Exec(ctx, s.q.insertAudit, p.Now, clean(p.Actor), "retry_now", "", uuids(ids), moved, clean(p.Reason), "{}")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: retry now: %w", err)
	}
	return errs, nil
}

// Cancel moves the PENDING tasks p.IDs to DEAD with a CANCELLED attempt
// each, in one transaction that locks them, changes them, keeps
// dead_counts in step and writes one "cancel" audit entry (with the IDs
// cancelled) when any changed.
func (s *Store) Cancel(ctx context.Context, p store.CancelParams) ([]error, error) {
	f := cleanFailure(rdq.CancelledFailure(p.Reason))
	actor := clean(p.Actor)
	errs, err := s.liveAction(ctx, p.IDs, "cancel", func(tx pgx.Tx, ids []rdq.ID) error {
		var moved int64
		if err := tx.QueryRow(ctx, s.q.cancel, uuids(ids), p.Now, f.Type, f.Message, f.Fingerprint, actor).Scan(&moved); err != nil {
			return err
		}
		if moved != int64(len(ids)) {
			return fmt.Errorf("cancelled %d of %d locked pending tasks", moved, len(ids))
		}
		_, err := tx.Exec(ctx, s.q.insertAudit, p.Now, actor, "cancel", "", uuids(ids), moved, clean(p.Reason), "{}")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: cancel: %w", err)
	}
	return errs, nil
}

// liveAction runs apply, in a transaction, on the PENDING tasks among ids
// (locked in ID order first), and reports store.ErrNotFound or
// store.ErrNotPending for the others. An ID listed twice is acted on once
// and reported nil both times.
func (s *Store) liveAction(ctx context.Context, ids []rdq.ID, what string, apply func(pgx.Tx, []rdq.ID) error) ([]error, error) {
	errs := make([]error, len(ids))
	if len(ids) == 0 {
		return errs, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.q.liveLock, uuids(ids))
		if err != nil {
			return err
		}
		status := map[rdq.ID]string{}
		for rows.Next() {
			var id [16]byte
			var st string
			if err := rows.Scan(&id, &st); err != nil {
				rows.Close()
				return err
			}
			status[id] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var eligible []rdq.ID
		seen := map[rdq.ID]bool{}
		for i, id := range ids {
			st, ok := status[id]
			switch {
			case !ok:
				errs[i] = fmt.Errorf("%s %s: %w", what, id, store.ErrNotFound)
			case st != string(rdq.StatusPending):
				errs[i] = fmt.Errorf("%s %s (%s): %w", what, id, st, store.ErrNotPending)
			case !seen[id]:
				seen[id] = true
				eligible = append(eligible, id)
			}
		}
		if len(eligible) == 0 {
			return nil
		}
		return apply(tx, eligible)
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}
