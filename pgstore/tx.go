package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// db is what a Store's statements run on: *pgxpool.Pool, or pgx.Tx for a
// view made by WithTx. pgx.BeginFunc on a pool begins a transaction; on a
// transaction it makes a savepoint.
type db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// WithTx returns a view of s that runs every statement in tx, the caller's
// transaction, instead of on the pool: the transactional outbox. A task
// submitted through the view (for instance by a client.Client made with
// client.Config{Store: s.WithTx(tx)}) is written by tx, so it exists if
// and only if tx commits, together with the caller's own writes, and
// rolling back (or losing the connection before COMMIT) leaves no trace of
// it. Workers are woken when tx commits: PostgreSQL holds the
// notifications a transaction sends until it commits and drops them if it
// rolls back.
//
// The view is valid until tx ends and, like tx, is not safe for concurrent
// use. A statement that fails aborts tx, as any failed statement does in
// PostgreSQL; the caller then rolls back. Idempotency keys work across
// transactions: while another open transaction holds a task with the same
// key, Enqueue waits for it to end, then reports a duplicate if it
// committed. Every other method of the view also runs in tx (its effects
// are visible to tx at once and to others at commit), except
// Notifications, which listens on a connection of its own from the pool s
// was made with.
func (s *Store) WithTx(tx pgx.Tx) *Store {
	v := *s
	v.pool = mapped{tx}
	v.floors = nil
	return &v
}
