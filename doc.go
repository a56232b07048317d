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
// Policy and the outcome contract (Permanent, RetryAfter, Snooze,
// ErrorTypeOf). The packages a program imports,
// all under github.com/srjn45/rdq/:
//
//   - client: submit tasks; a producer needs nothing else.
//   - worker: claim and execute tasks with registered handlers.
//   - store: the storage interface a backend implements, and its optional
//     capabilities.
//   - pgstore: the PostgreSQL store.
//   - envelope: the language-neutral JSON document of a task and its
//     history, which the server and every SDK read and write.
//   - sqlitestore: the embedded store on a SQLite file.
//   - redisstore: the store on a Redis server.
//   - storeurl: open any of the stores from a database URL
//     (RDQ_DATABASE_URL).
//   - storetest: the compliance kit every store must pass.
//   - rdqtest: helpers for testing handlers and producers.
//   - dlq: the dead-letter queue: browse, group, redrive, purge, audit.
//   - tasks: live tasks: list, find, retry now, cancel.
//   - callback: handlers as signed HTTP callbacks, their verification, and
//     receivers.
//   - callback/grpccall: handlers as gRPC HandlerService endpoints, with
//     the HTTP callbacks' allowlist, retries and dead-letter path.
//   - server: the REST and gRPC API as an http.Handler and a gRPC service.
//   - server/serverconfig: a server's configuration file: load, validate,
//     and build the server's parts from it.
//   - proto/rdqv1: the API's generated protobuf and gRPC types.
//   - proto/rdqv1/rdqv1connect: the API's generated Connect handlers and
//     clients (connect-go).
//   - console: the operator's web console as an http.Handler.
//
// The rdq command (cmd/rdq) inspects and operates a store from a terminal.
package rdq
