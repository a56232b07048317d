package rdq

import (
	"fmt"
	"time"
)

// Status is where a task is in its life cycle.
//
//	PENDING ──claim──► IN_FLIGHT ──success──► SUCCEEDED
//	   ▲                   │
//	   └──retry, expiry────┤
//	   │                   └──permanent failure, attempts exhausted──► DEAD
//	   └────────────────────────────── redrive (life+1) ◄──────────────┘
type Status string

// The task statuses.
const (
	// StatusPending: waiting until its next attempt time, then claimable.
	StatusPending Status = "PENDING"
	// StatusInFlight: claimed by a worker under a live or expired lease.
	StatusInFlight Status = "IN_FLIGHT"
	// StatusSucceeded: a handler returned nil. Kept for the store's TTL.
	StatusSucceeded Status = "SUCCEEDED"
	// StatusDead: in the dead-letter queue, with its full history, until
	// it is redriven or purged.
	StatusDead Status = "DEAD"
)

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusInFlight, StatusSucceeded, StatusDead:
		return true
	}
	return false
}

// Outcome is the result of one attempt.
type Outcome string

// The attempt outcomes.
const (
	// OutcomeSuccess: the handler returned nil.
	OutcomeSuccess Outcome = "SUCCESS"
	// OutcomeRetryableFailure: the handler failed (error, panic or
	// timeout) and the policy allowed a retry, or would have if attempts
	// were not exhausted.
	OutcomeRetryableFailure Outcome = "RETRYABLE_FAILURE"
	// OutcomePermanentFailure: the handler failed in a way that retrying
	// cannot fix (Permanent, or the policy's classifier said so).
	OutcomePermanentFailure Outcome = "PERMANENT_FAILURE"
	// OutcomeLeaseExpired: the executing worker lost its lease (it
	// crashed, hung or was partitioned) and the store reclaimed the task.
	OutcomeLeaseExpired Outcome = "LEASE_EXPIRED"
	// OutcomeCancelled: an operator cancelled the waiting task, which went
	// to the dead-letter queue without running again. The attempt's
	// WorkerID names the operator and its Message the reason.
	OutcomeCancelled Outcome = "CANCELLED"
)

// Valid reports whether o is one of the defined outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeSuccess, OutcomeRetryableFailure, OutcomePermanentFailure, OutcomeLeaseExpired, OutcomeCancelled:
		return true
	}
	return false
}

// Task is one unit of work: a call of a named handler with a payload.
//
// Tasks returned by a store are snapshots; changing one changes nothing
// stored.
type Task struct {
	// ID is the task's UUIDv7, assigned at submission.
	ID ID
	// Queue groups tasks that share workers and a retry policy.
	Queue string
	// Handler is the stable name the task is executed by.
	Handler string
	// Payload is opaque to rdq. It is never logged.
	Payload []byte
	// ContentType describes Payload, e.g. "application/json".
	ContentType string
	// Headers carry metadata such as W3C trace context (traceparent).
	Headers map[string]string
	// IdempotencyKey, when set, is unique per queue while the task exists.
	IdempotencyKey string

	// Status is where the task is in its life cycle.
	Status Status
	// Attempts is the number of attempts made in the current life,
	// including a first failure recorded at submission and executions
	// lost to an expired lease. Redrive resets it to zero.
	Attempts int
	// Life starts at 0 and grows by one with every redrive.
	Life int
	// NextAttemptAt is when a pending task becomes due.
	NextAttemptAt time.Time
	// LeaseToken is the fencing token of the latest claim: strictly
	// greater for every claim of this task. Zero if never claimed.
	LeaseToken int64
	// LeaseExpiresAt is when the current lease lapses; zero unless the
	// task is in flight.
	LeaseExpiresAt time.Time
	// LeaseOwner is the worker ID holding (or last holding) the lease.
	LeaseOwner string

	// CreatedAt, UpdatedAt are set by the store's clock.
	CreatedAt time.Time
	UpdatedAt time.Time
	// FinishedAt is when the task succeeded or went dead; zero otherwise.
	FinishedAt time.Time

	// LastError summarizes the latest failed attempt; zero if none.
	LastError ErrorSummary

	// MaxAttempts, if not zero, is the task's own attempt budget per
	// life, set at submission (client.Task.MaxAttempts), in place of its
	// queue policy's MaxAttempts; see Policy.TaskMaxAttempts for its
	// bounds.
	MaxAttempts int
	// Timeout, if not zero, is the task's own limit on one execution, set
	// at submission (client.Task.Timeout), in place of its queue's; see
	// Policy.TaskMaxTimeout for its bounds.
	Timeout time.Duration
	// Snoozes is how many times the task snoozed in its current life
	// (see Snooze) without spending an attempt.
	Snoozes int
}

// NextAttempt is the attempt number, within the current life, that the next
// execution of t is (Attempts + 1).
func (t *Task) NextAttempt() int { return t.Attempts + 1 }

// String identifies the task in logs and errors without its payload.
func (t *Task) String() string {
	return fmt.Sprintf("task %s (queue %s, handler %s, %s)", t.ID, t.Queue, t.Handler, t.Status)
}

// ErrorSummary is the latest failure of a task, kept on the task so the DLQ
// can list and group failures without reading attempt history.
type ErrorSummary struct {
	// Type is the failure's error type (see ErrorTypeOf).
	Type string
	// Message is the capped error message.
	Message string
	// Fingerprint groups failures that share a cause (see Fingerprint).
	Fingerprint string
}

// IsZero reports whether no failure is recorded.
func (e ErrorSummary) IsZero() bool { return e == ErrorSummary{} }

// Attempt is one execution of a task, as recorded in its history.
type Attempt struct {
	// TaskID is the task this attempt belongs to.
	TaskID ID
	// Number is unique per task and monotonic across lives: a redriven
	// task continues counting where its earlier lives stopped.
	Number int
	// Life is the task's life when the attempt ran.
	Life int
	// Outcome says how the attempt ended.
	Outcome Outcome
	// ErrorType, Message and Stack describe a failure; empty on success.
	// Message and Stack are capped (see MaxMessageBytes, MaxStackBytes).
	ErrorType string
	Message   string
	Stack     string
	// WorkerID names the worker that ran it.
	WorkerID string
	// LeaseToken is the fencing token the execution held; zero for a
	// failure recorded at submission.
	LeaseToken int64
	// StartedAt and FinishedAt are on the store's clock.
	StartedAt  time.Time
	FinishedAt time.Time
}
