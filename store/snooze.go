package store

import (
	"context"
	"time"
)

// Snoozer is implemented by stores that can put a leased task back to wait
// without counting an attempt (rdq.Snooze). It is optional: find it with
// SnoozerOf; a worker on a store without it records a snooze as a failed
// attempt.
type Snoozer interface {
	// Snooze returns each current lease of p.Snoozes to PENDING, due
	// after its Delay, without recording or counting an attempt, and adds
	// one to the task's Snoozes (which Redrive sets back to zero). The
	// first occurrence of a lease in the batch counts. errs[i] is nil or
	// ErrLeaseLost for p.Snoozes[i]; err is set only if the call failed
	// as a whole. A snoozed task of a paused handler is held like any
	// other pending task.
	Snooze(ctx context.Context, p SnoozeParams) (errs []error, err error)
}

// SnoozeItem is one snooze: the execution's lease and how long the task
// waits.
type SnoozeItem struct {
	Lease
	// Delay is how long from now the task becomes due; negative is zero.
	Delay time.Duration
}

// SnoozeParams is the input of Snoozer.Snooze.
type SnoozeParams struct {
	Snoozes []SnoozeItem
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}
