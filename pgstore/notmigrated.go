package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/srjn45/rdq/store"
)

// mapped is the db every query of the Store goes through: the pool, or the
// caller's transaction in a WithTx view. It adds one thing: an error saying
// that rdq's schema or tables do not exist also wraps store.ErrNotMigrated,
// so that callers learn the database needs Migrate (or the schema is
// misconfigured) instead of reading a raw SQL error.
type mapped struct {
	conn db
}

// notMigrated wraps err with store.ErrNotMigrated when PostgreSQL reports
// rdq's schema or one of its tables missing: 3F000 invalid_schema_name or
// 42P01 undefined_table.
func notMigrated(err error) error {
	if err != nil && (isCode(err, "42P01") || isCode(err, "3F000")) {
		return fmt.Errorf("%w: %w", store.ErrNotMigrated, err)
	}
	return err
}

func (d mapped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.conn.Query(ctx, sql, args...)
	return rows, notMigrated(err)
}

func (d mapped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return row{d.conn.QueryRow(ctx, sql, args...)}
}

func (d mapped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.conn.Exec(ctx, sql, args...)
	return tag, notMigrated(err)
}

func (d mapped) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return batchResults{d.conn.SendBatch(ctx, b)}
}

type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error { return notMigrated(r.Row.Scan(dest...)) }

type batchResults struct{ pgx.BatchResults }

func (b batchResults) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, notMigrated(err)
}

func (b batchResults) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	return rows, notMigrated(err)
}

func (b batchResults) QueryRow() pgx.Row { return row{b.BatchResults.QueryRow()} }

// Begin starts a transaction whose queries map errors as db's do.
func (d mapped) Begin(ctx context.Context) (pgx.Tx, error) {
	t, err := d.conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx{t}, nil
}

type tx struct{ pgx.Tx }

func (t tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.Tx.Query(ctx, sql, args...)
	return rows, notMigrated(err)
}

func (t tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return row{t.Tx.QueryRow(ctx, sql, args...)}
}

func (t tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, notMigrated(err)
}

func (t tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return batchResults{t.Tx.SendBatch(ctx, b)}
}
