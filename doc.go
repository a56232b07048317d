// Package rdq is a durable retry engine with first-class dead-letter queues.
//
// Hand rdq a failed unit of work (a handler name plus its arguments) and it
// guarantees one of exactly two outcomes: the call eventually succeeds,
// retried on the queue's backoff schedule, or the task lands in the
// dead-letter queue (DLQ) with its full failure history, where an operator can
// browse it, fix the cause and redrive it.
//
// # Delivery
//
// Delivery is at-least-once. A worker that crashes mid-task loses its lease
// and the task runs again elsewhere, so handlers must be idempotent. A
// handler receives the task's lease token (Task.LeaseToken), which is
// strictly greater for every new execution of the same task and can serve as
// an idempotency key downstream.
//
// # Packages
//
// This package holds the task model (Task, Status, Attempt), the retry
// Policy, the outcome contract (Permanent, RetryAfter, ErrorTypeOf) and the
// language-neutral wire Envelope. The other packages build on it:
//
//   - client submits tasks; a producer needs nothing else.
//   - worker claims and executes tasks with registered handlers.
//   - store defines the storage interface a backend implements.
//   - pgstore is the PostgreSQL backend.
//   - storetest is the compliance kit every backend must pass.
package rdq
