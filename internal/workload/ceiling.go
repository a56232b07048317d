package workload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The raw-SQL ceiling of a PostgreSQL task queue: what the database alone
// does when no application code runs. Each transaction inserts 500 tasks,
// claims 500 due tasks with FOR UPDATE SKIP LOCKED and deletes the 500 it
// claimed, from two connections at once, in a scratch schema dropped
// afterwards. rdq bench --ceiling runs it.
const (
	ceilingBatch   = 500
	ceilingClients = 2
)

const (
	sqlCeilingTable = `CREATE TABLE %[1]s.q (id bigserial PRIMARY KEY, queue text NOT NULL, payload bytea,
    due timestamptz NOT NULL DEFAULT now(), status text NOT NULL DEFAULT 'PENDING')`
	sqlCeilingIndex  = `CREATE INDEX q_due ON %[1]s.q (queue, due) WHERE status = 'PENDING'`
	sqlCeilingInsert = `INSERT INTO %[1]s.q (queue, payload) SELECT 'bench', '\x7b226e223a317d'::bytea FROM generate_series(1, 500)`
	sqlCeilingClaim  = `WITH c AS (SELECT id FROM %[1]s.q WHERE status = 'PENDING' AND queue = 'bench' AND due <= now()
    ORDER BY due LIMIT 500 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s.q SET status = 'RUNNING' FROM c WHERE q.id = c.id`
	sqlCeilingDelete = `DELETE FROM %[1]s.q WHERE status = 'RUNNING' AND id IN (SELECT id FROM %[1]s.q WHERE status = 'RUNNING' LIMIT 500)`
)

// Ceiling measures the raw-SQL ceiling for d on the PostgreSQL database
// connString names, in tasks per second. It needs the CREATE privilege on
// the database (for its scratch schema).
func Ceiling(ctx context.Context, connString string, d time.Duration) (perSecond float64, err error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return 0, fmt.Errorf("workload: ceiling: %w", err)
	}
	cfg.MaxConns = ceilingClients
	// Plain statements, as pgbench sends them.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("workload: ceiling: %w", err)
	}
	defer pool.Close()
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return 0, fmt.Errorf("workload: ceiling: %w", err)
	}
	schema := pgx.Identifier{"rdq_ceiling_" + hex.EncodeToString(suffix[:])}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return 0, fmt.Errorf("workload: ceiling: creating a scratch schema: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, derr := pool.Exec(dctx, "DROP SCHEMA "+schema+" CASCADE"); derr != nil {
			err = errors.Join(err, fmt.Errorf("workload: ceiling: dropping its scratch schema %s: %w", schema, derr))
		}
	}()
	for _, q := range []string{sqlCeilingTable, sqlCeilingIndex} {
		if _, err := pool.Exec(ctx, fmt.Sprintf(q, schema)); err != nil {
			return 0, fmt.Errorf("workload: ceiling: %w", err)
		}
	}
	stmts := []string{fmt.Sprintf(sqlCeilingInsert, schema), fmt.Sprintf(sqlCeilingClaim, schema), fmt.Sprintf(sqlCeilingDelete, schema)}
	var txns atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, ceilingClients)
	start := time.Now()
	deadline := start.Add(d)
	for i := range ceilingClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					for _, s := range stmts {
						if _, err := tx.Exec(ctx, s); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs[i] = err
					return
				}
				txns.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("workload: ceiling: %w", err)
	}
	return float64(txns.Load()*ceilingBatch) / elapsed.Seconds(), nil
}

// Analyze refreshes the planner's statistics of rdq's tables in schema, on
// the PostgreSQL database connString names, as autovacuum does within a
// minute or so on a table in use. PostgreSQL plans a prepared statement once
// for all its later runs (its generic plan), so statements first run on a
// table created moments before keep plans made for a near-empty table until
// the next ANALYZE; a benchmark on a fresh schema would measure those. The
// ANALYZE invalidates them: the next run of each statement is planned anew.
func Analyze(ctx context.Context, connString, schema string) (err error) {
	// Parsed as a pool's settings, which a store URL may carry
	// (pool_max_conns and the like): a single connection's parser would
	// send them to the server as run-time parameters, which it refuses.
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return fmt.Errorf("workload: analyze: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("workload: analyze: %w", err)
	}
	defer func() {
		if cerr := conn.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = fmt.Errorf("workload: analyze: %w", cerr)
		}
	}()
	for _, table := range []string{"tasks", "attempts"} {
		if _, err := conn.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, table}.Sanitize()); err != nil {
			return fmt.Errorf("workload: analyze %s.%s: %w", schema, table, err)
		}
	}
	return nil
}
