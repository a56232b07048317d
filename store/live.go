package store

import (
	"context"
	"errors"
	"time"

	"github.com/srjn45/rdq"
)

// ErrNotPending: a live-task operation (retry now, cancel) named a task that
// is not PENDING: it is running, finished or dead. Nothing was changed.
var ErrNotPending = errors.New("rdq/store: task is not pending (it is in flight, succeeded or dead)")

// LiveTasks is implemented by stores that let operators see and act on tasks
// that are not dead: list them by state, find one by idempotency key, make a
// waiting task due at once, and cancel one into the dead-letter queue. It is
// optional: callers find it with LiveTasksOf,
//
//	lt, ok := store.LiveTasksOf(st)
//
// and report the capability as unsupported when it is missing. Package tasks
// builds the operator-facing API on it.
//
// Every mutation writes its audit entry in the same transaction as the
// change. Cancel never deletes anything: a cancelled task is DEAD, with a
// CANCELLED attempt naming who cancelled it and why, and can be redriven
// like any dead task.
type LiveTasks interface {
	// ListTasks returns up to p.Limit tasks in p.State matching p.Filter,
	// in the state's order (see TaskState), strictly after p.After when
	// set. Paging with the last task's cursor (TaskCursorOf) neither skips
	// nor repeats a task that stays in the state with the same position.
	ListTasks(ctx context.Context, p ListTasksParams) ([]*rdq.Task, error)

	// TaskByKey returns the task holding idempotency key key in queue, or
	// ErrNotFound if no task holds it.
	TaskByKey(ctx context.Context, queue, key string) (*rdq.Task, error)

	// RetryNow makes the PENDING tasks p.IDs due now (by the store's
	// clock), keeping their attempts and history, and notifies their
	// queues. errs[i] is nil, ErrNotFound or ErrNotPending for p.IDs[i];
	// an ID listed twice is acted on once. When any task changed, one
	// "retry_now" audit entry is written in the same transaction.
	RetryNow(ctx context.Context, p RetryNowParams) (errs []error, err error)

	// Cancel moves the PENDING tasks p.IDs to DEAD (finished now), each
	// with a CANCELLED attempt (rdq.CancelledFailure of p.Reason, worker
	// p.Actor), numbered one past the task's highest attempt number and
	// counted, which becomes the task's last error. errs[i] is nil,
	// ErrNotFound or ErrNotPending for p.IDs[i]; an ID listed twice is
	// cancelled once. When any task changed, one "cancel" audit entry is
	// written in the same transaction. The dead-task counts the Admin
	// interface reports include cancelled tasks at once.
	Cancel(ctx context.Context, p CancelParams) (errs []error, err error)
}

// TaskState selects the tasks ListTasks returns and their order.
type TaskState string

// The listable task states.
const (
	// StatePending: PENDING tasks not yet tried in their current life
	// (no attempt recorded since submission or redrive), soonest due
	// first (NextAttemptAt, then ID).
	StatePending TaskState = "pending"
	// StateRetrying: PENDING tasks with at least one failed attempt in
	// their current life, waiting for their next try, soonest due first
	// (NextAttemptAt, then ID).
	StateRetrying TaskState = "retrying"
	// StateInFlight: IN_FLIGHT tasks, the lease expiring soonest first
	// (LeaseExpiresAt, then ID).
	StateInFlight TaskState = "in_flight"
	// StateSucceeded: SUCCEEDED tasks still retained, most recently
	// finished first (FinishedAt, then ID, descending).
	StateSucceeded TaskState = "succeeded"
)

// Valid reports whether s is one of the defined states.
func (s TaskState) Valid() bool {
	switch s {
	case StatePending, StateRetrying, StateInFlight, StateSucceeded:
		return true
	}
	return false
}

// TaskFilter selects live tasks. Zero fields match everything; set fields
// combine with AND. The fields mean what they mean in DeadFilter.
type TaskFilter struct {
	// IDs, if not empty, limits the selection to these tasks.
	IDs []rdq.ID
	// Queue, Handler, ErrorType and Fingerprint match exactly against the
	// task and its last error (a task that never failed has empty
	// ErrorType and Fingerprint).
	Queue       string
	Handler     string
	ErrorType   string
	Fingerprint string
	// MessageContains matches a case-insensitive substring of the last
	// error message.
	MessageContains string
}

// TaskCursor is a position in a listing of one state: the task's time in
// the state's order (see TaskCursorOf) and its ID.
type TaskCursor struct {
	At time.Time
	ID rdq.ID
}

// TaskCursorOf returns the cursor just past t in a listing of state:
// NextAttemptAt for pending and retrying, LeaseExpiresAt for in flight,
// FinishedAt for succeeded.
func TaskCursorOf(state TaskState, t *rdq.Task) TaskCursor {
	switch state {
	case StateInFlight:
		return TaskCursor{At: t.LeaseExpiresAt, ID: t.ID}
	case StateSucceeded:
		return TaskCursor{At: t.FinishedAt, ID: t.ID}
	default:
		return TaskCursor{At: t.NextAttemptAt, ID: t.ID}
	}
}

// ListTasksParams is the input of LiveTasks.ListTasks.
type ListTasksParams struct {
	// State is required.
	State  TaskState
	Filter TaskFilter
	// After, if set, continues a listing after this position.
	After *TaskCursor
	// Limit is the page size; at least one.
	Limit int
}

// RetryNowParams is the input of LiveTasks.RetryNow.
type RetryNowParams struct {
	// IDs are the PENDING tasks to make due now.
	IDs []rdq.ID
	// Actor and Reason are written to the audit log.
	Actor  string
	Reason string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// CancelParams is the input of LiveTasks.Cancel.
type CancelParams struct {
	// IDs are the PENDING tasks to cancel.
	IDs []rdq.ID
	// Actor names who cancelled (the CANCELLED attempt's worker ID and the
	// audit entry's actor). Reason is the attempt's message and the audit
	// entry's reason.
	Actor  string
	Reason string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}
