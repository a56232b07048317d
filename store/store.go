// Package store defines the storage interface rdq runs on, and what a backend
// must guarantee to implement it.
//
// A store is persistence plus atomicity, nothing else: every decision
// (backoff, when to dead-letter, how to classify an error) is made by rdq's
// core and handed to the store as data. The rules every implementation keeps:
//
//   - Atomic claim: Claim takes up to N due tasks in one atomic operation; no
//     two claims return the same task while its lease is live.
//   - Lease and fencing token: every claim sets a lease expiry and a new
//     token, strictly greater than any earlier token of that task.
//     Heartbeat, Finish and Release must present the token; a stale token
//     changes nothing and yields ErrLeaseLost for that item.
//   - Reclaim: ReclaimExpired takes over tasks whose lease expired, records
//     a LEASE_EXPIRED attempt for the lost execution, and leases them to the
//     caller, which then applies the policy through Finish.
//   - The store owns the clock: due and expired are decided by the store's
//     clock. The interface passes durations ("retry in 30s"), never
//     absolute times. Every method that reads the clock takes a Now field
//     that is nil in production; tests set it to travel in time.
//   - Batch-first: one call handles many items, ideally in one round trip.
//     A per-item failure (one stale token) does not fail the others: it is
//     reported at that item's index.
//   - Attempt numbers are unique per task and monotonic across lives: each
//     new attempt is numbered max(existing) + 1 from the persisted history.
//
// The compliance kit in package storetest checks every one of these rules;
// a backend is correct when it passes storetest.Run.
//
// # Stability
//
// Store never gains a method: a backend written against it keeps compiling
// and keeps working with every later rdq release. New capabilities arrive
// as separate, optional interfaces (Notifier, Admin, Pauser and those that
// follow), as database/sql's optional interfaces of database/sql/driver
// do. Each has an accessor here (AdminOf, PauserOf, one per interface),
// which looks through a store that wraps another (see Wrapper); code
// outside this package finds a capability only with its accessor, never
// by a type assertion of its own, so that every capability is declared in
// this package and in storetest.Capabilities. A feature whose interface a
// store lacks is reported as unsupported, never worked around. A
// capability's interface, once released, is extended only by a new
// interface beside it. Callers should likewise accept the smallest
// interface they use (client.Config.Store needs only Enqueue and Get).
// storetest.Capabilities declares which optional interfaces a backend
// implements, and storetest.Run checks the declaration against the store.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/srjn45/rdq"
)

// Sentinel errors. Stores return them (wrapped or as per-item results) and
// callers check them with errors.Is.
var (
	// ErrLeaseLost: the presented lease token is not the task's current
	// lease (it expired and the task was reclaimed, or the task was
	// released or finished). Nothing was changed.
	ErrLeaseLost = errors.New("rdq/store: lease lost: the task was reclaimed or finished under a newer lease")
	// ErrNotFound: no task has the given ID (it never existed or was purged).
	ErrNotFound = errors.New("rdq/store: task not found")
	// ErrNotDead: a DLQ operation (redrive) named a task that is not dead.
	ErrNotDead = errors.New("rdq/store: task is not in the dead-letter queue")
	// ErrRedriveLimit: the task has been redriven as often as allowed and
	// stays dead.
	ErrRedriveLimit = errors.New("rdq/store: task reached its redrive limit and stays dead")
	// ErrNotMigrated: the database has no rdq tables where the store looks
	// for them: the schema was never migrated, or the store was pointed at
	// the wrong schema or file. Run the store's Migrate, or fix the
	// configuration. Nothing was changed.
	ErrNotMigrated = errors.New("rdq/store: no rdq tables found: the database was not migrated (call the store's Migrate, or run 'rdq migrate'), or this is not the right schema")
)

// Store is the interface the client and the worker run on. Implementations
// must be safe for concurrent use by many goroutines and processes.
type Store interface {
	// Enqueue inserts new tasks as PENDING, due after their Delay. A task
	// whose ID already exists, or whose idempotency key already exists in
	// its queue, is not inserted: its result is the existing task with
	// Duplicate set (earlier tasks of the same batch included). The
	// results are in input order. An error fails the whole batch: nothing
	// is inserted.
	Enqueue(ctx context.Context, p EnqueueParams) ([]EnqueueResult, error)

	// Claim leases up to p.Limit due PENDING tasks of p.Queues (and of
	// p.Handlers, when given), oldest due first, setting them IN_FLIGHT
	// with a lease of p.Lease and a new fencing token. It returns the
	// claimed tasks, possibly none. A task of a handler not in p.Handlers
	// is not read, locked or changed: it stays PENDING for a claimant
	// that runs it. While at least p.Limit tasks are due, a store may
	// pass over a task that became due behind the ones its last claims
	// took, for at most a second, and never in a claim that returns
	// fewer than p.Limit tasks.
	Claim(ctx context.Context, p ClaimParams) ([]*rdq.Task, error)

	// Heartbeat extends live leases to p.Extend from now. errs[i] is nil
	// or ErrLeaseLost for p.Leases[i]; err is set only if the call failed
	// as a whole.
	Heartbeat(ctx context.Context, p HeartbeatParams) (errs []error, err error)

	// Finish ends executions: each completion, if its lease is current,
	// records its attempt (if any) and moves the task to its new status.
	// errs[i] is nil or ErrLeaseLost for p.Completions[i], or an error of
	// that completion alone (wrapping rdq.ErrInvalid for an invalid status
	// or outcome) while the others are applied: one bad completion never
	// fails the batch. Error types and fingerprints longer than
	// rdq.MaxErrorTypeLength are cut to it. err is set only if the call
	// failed as a whole.
	Finish(ctx context.Context, p FinishParams) (errs []error, err error)

	// Release returns leased tasks to PENDING, due now, without counting
	// an attempt: a worker shutting down gives back what it did not run
	// to completion. errs[i] is nil or ErrLeaseLost.
	Release(ctx context.Context, p ReleaseParams) (errs []error, err error)

	// ReclaimExpired takes over up to p.Limit IN_FLIGHT tasks of p.Queues
	// (all queues if empty) whose lease has expired: for each it records
	// a LEASE_EXPIRED attempt (rdq.LeaseExpiredFailure, the lost
	// execution's worker and token, numbered from the persisted history),
	// counts the attempt, and leases the task to p.WorkerID with a new
	// token for p.Lease. The caller then decides retry or dead and calls
	// Finish without an attempt. Safe to run from every worker at once.
	ReclaimExpired(ctx context.Context, p ReclaimParams) ([]*rdq.Task, error)

	// Get returns a task and its full attempt history across lives, in
	// attempt-number order. It returns ErrNotFound if there is no such
	// task.
	Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error)

	// PurgeSucceeded deletes up to p.Limit SUCCEEDED tasks (and their
	// attempts) that finished more than p.OlderThan ago, and returns how
	// many it deleted. When any were deleted it writes a "retention"
	// audit entry in the same transaction. Safe to run from every worker
	// at once.
	PurgeSucceeded(ctx context.Context, p PurgeSucceededParams) (int64, error)
}

// Notifier is implemented by stores that can push a hint when tasks become
// available, so workers wake without waiting for their next poll. It is
// optional: find it with NotifierOf.
type Notifier interface {
	// Notifications delivers queue names in which tasks may have become
	// due, until ctx is done, when the channel is closed. Hints may be
	// coalesced or dropped; polling stays the source of truth.
	Notifications(ctx context.Context) (<-chan string, error)
}

// Lease identifies one execution of a task: its ID and the fencing token
// its claim returned.
type Lease struct {
	ID    rdq.ID
	Token int64
}

// NewTask is a task to enqueue.
type NewTask struct {
	// ID is the task's ID: rdq.NewID, or a UUID the caller chose (see
	// client.Task.ID). An ID that exists makes the task a duplicate.
	ID      rdq.ID
	Queue   string
	Handler string
	// Payload, ContentType and Headers are stored as given.
	Payload     []byte
	ContentType string
	Headers     map[string]string
	// IdempotencyKey, if not empty, deduplicates within Queue.
	IdempotencyKey string
	// Delay postpones the first attempt; zero makes the task due now.
	Delay time.Duration
	// MaxAttempts and Timeout, if not zero, are the task's own attempt
	// budget and execution timeout (rdq.Task.MaxAttempts, Timeout),
	// checked by the client against the queue's bounds. The store keeps
	// them as given and returns them on the task; Timeout is kept to the
	// microsecond at least.
	MaxAttempts int
	Timeout     time.Duration
	// FirstFailure, if set, is recorded as attempt 1 (life 0) and counted
	// in the task's attempts: the failure that made the caller submit.
	// With Outcome PERMANENT_FAILURE the task is created DEAD (finished
	// now), straight into the dead-letter queue with that history.
	FirstFailure *AttemptRecord
}

// EnqueueParams is the input of Store.Enqueue.
type EnqueueParams struct {
	Tasks []NewTask
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// EnqueueResult is the outcome of one NewTask.
type EnqueueResult struct {
	// Task is the stored task: the new one, or the existing one when
	// Duplicate is true.
	Task *rdq.Task
	// Duplicate reports that a task with the same idempotency key already
	// existed in the queue and nothing was inserted.
	Duplicate bool
	// Purged reports a duplicate of a task that no longer exists: its
	// idempotency key is remembered after the task was purged by
	// retention (stores keep keys for a retention window of their own).
	// Task then holds only the original task's ID, Queue,
	// IdempotencyKey and CreatedAt.
	Purged bool
}

// ClaimParams is the input of Store.Claim.
type ClaimParams struct {
	// Queues to claim from; at least one.
	Queues []string
	// Handlers are the handlers the claimant runs: only their tasks are
	// claimed. Empty claims the tasks of every handler (a claimant that
	// runs whatever its queues hold); a worker names the handlers it has
	// registered, so a task whose handler it lacks waits for one that has
	// it instead of being dead-lettered.
	Handlers []string
	// Limit is the maximum number of tasks to claim; at least one.
	Limit int
	// Lease is how long the claim holds each task without a heartbeat.
	Lease time.Duration
	// WorkerID names the claimant; recorded as the lease owner.
	WorkerID string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// HeartbeatParams is the input of Store.Heartbeat.
type HeartbeatParams struct {
	Leases []Lease
	// Extend sets each lease to expire this long from now.
	Extend time.Duration
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// AttemptRecord is an attempt to record. The store numbers it, stamps it
// with the task's life and the lease token, and sets its finish time from its
// own clock and its start time Duration earlier.
type AttemptRecord struct {
	Outcome rdq.Outcome
	// Failure describes a failed attempt; zero for a success.
	Failure rdq.Failure
	// WorkerID names the worker that ran the attempt.
	WorkerID string
	// Duration is how long the execution ran, as measured by the worker.
	Duration time.Duration
}

// Completion is the end of one execution.
type Completion struct {
	Lease
	// Status is the task's new status: StatusSucceeded, StatusPending (a
	// retry, due after RetryIn) or StatusDead.
	Status rdq.Status
	// RetryIn is the delay before the next attempt, for StatusPending.
	RetryIn time.Duration
	// Attempt is recorded and counted in the task's attempts; nil records
	// nothing (the decision after a reclaim, whose attempt is recorded).
	Attempt *AttemptRecord
}

// FinishParams is the input of Store.Finish.
type FinishParams struct {
	Completions []Completion
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// ReleaseParams is the input of Store.Release.
type ReleaseParams struct {
	Leases []Lease
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// ReclaimParams is the input of Store.ReclaimExpired.
type ReclaimParams struct {
	// Queues limits the reclaim; empty means every queue.
	Queues []string
	// Limit is the maximum number of tasks to reclaim; at least one.
	Limit int
	// Lease is how long the reclaimer holds each task to decide its fate.
	Lease time.Duration
	// WorkerID names the reclaimer.
	WorkerID string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// RedriveParams is the input of Store.Redrive.
type RedriveParams struct {
	// IDs are the DEAD tasks to redrive.
	IDs []rdq.ID
	// Payload, if not nil, replaces the payload of the (single) task in
	// IDs; with more than one ID it is an error wrapping rdq.ErrInvalid.
	Payload []byte
	// Delay postpones the first attempt of the new life.
	Delay time.Duration
	// Spread, if positive, adds a uniformly random extra delay in
	// [0, Spread) to each task, so a bulk redrive is not a thundering herd.
	Spread time.Duration
	// MaxLife, if positive, refuses tasks already in life MaxLife or later
	// (redriven MaxLife times) with ErrRedriveLimit.
	MaxLife int
	// Actor and Reason are written to the audit log.
	Actor  string
	Reason string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// PurgeSucceededParams is the input of Store.PurgeSucceeded.
type PurgeSucceededParams struct {
	// OlderThan is the retention: tasks that finished longer ago go.
	OlderThan time.Duration
	// Limit bounds one call's deletions; at least one.
	Limit int
	// Actor is written to the audit log.
	Actor string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}
