package store

import (
	"context"
	"fmt"
	"time"

	"github.com/srjn45/rdq"
)

// WorkerRegistry is implemented by stores that keep a registry of running
// workers, so operators see who consumes each queue and which waiting tasks
// no running worker can execute. It is optional: find it with RegistryOf.
//
// A worker registers when it starts, registers again (a refresh) on an
// interval, and deregisters when it stops gracefully. Liveness is judged by
// the store's clock: an entry not refreshed for its StaleAfter is stale (a
// worker that crashed, hung or lost the store), and one not refreshed for
// its ExpireAfter is removed. Only live (not stale) workers serve tasks in
// UnservedHandlers and DeadLetterUnserved.
//
// Workers that do not register (builds without this capability, or other
// SDKs) are invisible here: the tasks they execute are reported as unserved.
type WorkerRegistry interface {
	// RegisterWorker inserts or refreshes p.Worker's entry (keyed by its
	// ID): every field is replaced and LastSeen set to now; StartedAt is
	// set to now on insert and kept on refresh. It also removes expired
	// entries. One statement, whatever the number of workers.
	RegisterWorker(ctx context.Context, p RegisterWorkerParams) error
	// DeregisterWorker removes the entry of worker id; removing an entry
	// that does not exist is not an error.
	DeregisterWorker(ctx context.Context, id string) error
	// Workers returns the entries not yet expired, live and stale alike
	// (Stale says which), of workers serving p.Queue (every worker when
	// empty), ordered by ID.
	Workers(ctx context.Context, p WorkersParams) ([]WorkerInfo, error)
	// UnservedHandlers returns, for each (queue, handler) with PENDING
	// tasks that no live worker serves (none lists both the queue and the
	// handler), how many tasks wait and since when, ordered by queue then
	// handler. p.Queues limits it to those queues (every queue when empty).
	// With p.DueOnly it counts only the due tasks of p.Queues that are not
	// held by a paused handler: a range of the claim index, small while
	// workers keep up, which is what a worker looks at on its schedule.
	UnservedHandlers(ctx context.Context, p UnservedParams) ([]UnservedHandler, error)
	// DeadLetterUnserved moves to DEAD up to p.Limit PENDING tasks of
	// (p.Queue, p.Handler) that have been due for at least p.Grace while no
	// live worker serves that pair, judged in the same statement, each with
	// a PERMANENT_FAILURE attempt (p.Failure, worker p.Actor) numbered one
	// past the task's highest, counted in the dead-letter statistics. Tasks
	// of a paused handler (store.HandlerPauser) are left alone. When any
	// task moved, one "dead_letter_unserved" audit entry is written in the
	// same transaction. It returns how many tasks moved.
	DeadLetterUnserved(ctx context.Context, p DeadLetterUnservedParams) (int64, error)
}

// WorkerInfo describes one registered worker.
type WorkerInfo struct {
	// ID is the worker's ID, as in leases and attempt history.
	ID string
	// Host and PID locate the worker's process; Version is the rdq
	// version it runs.
	Host    string
	PID     int
	Version string
	// Queues and Handlers are the queues the worker runs and the handlers
	// it registered (every handler serves every queue of the worker),
	// sorted.
	Queues   []string
	Handlers []string
	// Slots is how many executions the worker runs at once over all its
	// queues; InFlight is how many ran at its last refresh.
	Slots    int
	InFlight int
	// StartedAt and LastSeen are on the store's clock: the first
	// registration and the latest refresh. Ignored by RegisterWorker.
	StartedAt time.Time
	LastSeen  time.Time
	// Stale reports that the worker has not refreshed its entry for its
	// StaleAfter. Ignored by RegisterWorker.
	Stale bool
}

// Serves reports whether the worker lists both queue and handler.
func (w WorkerInfo) Serves(queue, handler string) bool {
	return contains(w.Queues, queue) && contains(w.Handlers, handler)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// RegisterWorkerParams is the input of WorkerRegistry.RegisterWorker.
type RegisterWorkerParams struct {
	Worker WorkerInfo
	// StaleAfter is how long without a refresh marks the entry stale, and
	// ExpireAfter how long removes it; 0 < StaleAfter <= ExpireAfter.
	StaleAfter  time.Duration
	ExpireAfter time.Duration
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// WorkersParams is the input of WorkerRegistry.Workers.
type WorkersParams struct {
	// Queue, if set, lists only the workers serving it.
	Queue string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// UnservedParams is the input of WorkerRegistry.UnservedHandlers.
type UnservedParams struct {
	// Queues, if not empty, limits the result to these queues; DueOnly
	// needs at least one.
	Queues []string
	// DueOnly counts only due tasks that are not held.
	DueOnly bool
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// UnservedHandler describes the waiting tasks of one (queue, handler) that
// no live worker serves.
type UnservedHandler struct {
	Queue   string
	Handler string
	// Tasks counts the PENDING tasks, due or not.
	Tasks int64
	// OldestDue is the earliest due time among them, and Waiting how long
	// ago that was by the store's clock (zero when none is due yet).
	OldestDue time.Time
	Waiting   time.Duration
}

// DeadLetterUnservedParams is the input of WorkerRegistry.DeadLetterUnserved.
type DeadLetterUnservedParams struct {
	Queue   string
	Handler string
	// Grace is how long a task must have been due; at least zero.
	Grace time.Duration
	// Limit bounds one call; at least one.
	Limit int
	// Failure is recorded as each task's attempt and last error.
	Failure rdq.Failure
	// Actor names the caller in the attempts and the audit entry.
	Actor string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// ValidateRegistration checks p for RegisterWorker; the error wraps
// rdq.ErrInvalid and says what to change.
func ValidateRegistration(p RegisterWorkerParams) error {
	switch {
	case p.Worker.ID == "":
		return fmt.Errorf("%w: worker registration without an ID", rdq.ErrInvalid)
	case p.StaleAfter <= 0:
		return fmt.Errorf("%w: worker %s: StaleAfter %s must be positive", rdq.ErrInvalid, p.Worker.ID, p.StaleAfter)
	case p.ExpireAfter < p.StaleAfter:
		return fmt.Errorf("%w: worker %s: ExpireAfter %s must be at least StaleAfter %s", rdq.ErrInvalid, p.Worker.ID, p.ExpireAfter, p.StaleAfter)
	}
	return nil
}

// ValidateDeadLetterUnserved checks p for DeadLetterUnserved; the error
// wraps rdq.ErrInvalid and says what to change.
func ValidateDeadLetterUnserved(p DeadLetterUnservedParams) error {
	if err := rdq.ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if err := rdq.ValidateName("handler", p.Handler); err != nil {
		return err
	}
	switch {
	case p.Grace < 0:
		return fmt.Errorf("%w: dead-letter unserved: Grace %s is negative", rdq.ErrInvalid, p.Grace)
	case p.Limit < 1:
		return fmt.Errorf("%w: dead-letter unserved: Limit %d must be at least 1", rdq.ErrInvalid, p.Limit)
	case p.Failure.Type == "":
		return fmt.Errorf("%w: dead-letter unserved: Failure has no Type", rdq.ErrInvalid)
	}
	return nil
}
