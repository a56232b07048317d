package store

import (
	"context"
	"time"

	"github.com/srjn45/rdq"
)

// InPlaceRetrier is implemented by stores that can record a failed attempt
// and lease its task again to the same worker in one step, so that a retry
// due before the worker's next claim runs without going back through the
// queue. It is optional: find it with InPlaceRetrierOf; a worker on a store
// without it finishes the attempt with Finish and claims the retry later.
type InPlaceRetrier interface {
	// RetryInPlace ends executions whose attempt failed and which are to
	// run again. For each item whose lease is current it records and
	// counts the attempt exactly as Finish records a completion with
	// StatusPending and the item's RetryIn, then, unless the task's queue
	// or handler is paused, keeps the task IN_FLIGHT under a new lease: a
	// new fencing token (strictly greater, as a claim's), expiring
	// p.Lease from now, owned by the attempt's WorkerID. results[i].Task
	// is then the task as a claim returns it; the caller runs it again.
	// A task of a paused queue or handler is left PENDING, due after
	// RetryIn (held, for a paused handler), as Finish leaves it, and
	// results[i].Task is nil.
	//
	// The first occurrence of a lease in the batch counts. results[i].Err
	// is nil, ErrLeaseLost (nothing changed), or an error of that item
	// alone (wrapping rdq.ErrInvalid for an item that is not a retry: a
	// status other than StatusPending, no attempt with outcome
	// RETRYABLE_FAILURE, or a negative RetryIn); one bad item never fails
	// the batch. err is set only if the call failed as a whole, or
	// p.Lease is not positive (wrapping rdq.ErrInvalid).
	RetryInPlace(ctx context.Context, p RetryInPlaceParams) (results []RetryInPlaceResult, err error)
}

// RetryInPlaceParams is the input of InPlaceRetrier.RetryInPlace.
type RetryInPlaceParams struct {
	// Retries are the failed executions: each a Completion with
	// StatusPending, its RetryIn (zero or more), and an Attempt with
	// outcome RETRYABLE_FAILURE.
	Retries []Completion
	// Lease is how long each kept task is held without a heartbeat.
	Lease time.Duration
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// RetryInPlaceResult is the outcome of one item of RetryInPlace.
type RetryInPlaceResult struct {
	// Task is the task leased again to run its next attempt, or nil when
	// the attempt was recorded and the task left waiting (a paused queue
	// or handler), or when Err is set.
	Task *rdq.Task
	// Err is nil, ErrLeaseLost, or an error of this item alone.
	Err error
}
