// Package pgtest gives tests a real PostgreSQL to run against: a small pool
// on the test database and fresh, migrated pgstore schemas that are dropped
// when the test ends.
//
// The database is RDQ_TEST_DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test
// when that is not set. Every store lives in its own randomly named schema,
// so tests and packages can run in parallel against one database.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq/pgstore"
)

// EnvURL is the environment variable that overrides the test database URL.
const EnvURL = "RDQ_TEST_DATABASE_URL"

// DefaultURL is the test database used when EnvURL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test"

// MaxConns is the size of the pools this package opens: small, because
// many tests run in parallel on few cores.
const MaxConns = 6

// URL returns the test database URL: RDQ_TEST_DATABASE_URL if set, else
// DefaultURL.
func URL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

// NewPool opens a pool of at most MaxConns connections on URL() and checks
// that the database answers. The caller closes it.
func NewPool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		return nil, fmt.Errorf("pgtest: parsing %s: %w", EnvURL, err)
	}
	cfg.MaxConns = MaxConns
	cfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgtest: opening a pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgtest: the test database does not answer (set %s to point at one): %w", EnvURL, err)
	}
	return pool, nil
}

// Pool returns a pool on the test database, closed when the test ends. It
// fails the test if the database cannot be reached.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := NewPool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// SchemaName returns a fresh random schema name for one test store.
func SchemaName() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("pgtest: reading random bytes: %v", err))
	}
	return "rdqtest_" + hex.EncodeToString(b[:])
}

// NewStore returns a pgstore.Store on a fresh, migrated schema with a random
// name, and that name (which Open accepts). The schema is dropped, with
// everything in it, and the store's pool closed when the test ends.
func NewStore(t testing.TB) (*pgstore.Store, string) {
	t.Helper()
	pool := Pool(t)
	schema := SchemaName()
	s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	// Registered after Pool's cleanup, so it runs first, while the pool is open.
	t.Cleanup(func() {
		if err := DropSchema(pool, schema); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s, schema
}

// Open returns a store on an existing schema (one NewStore created, say
// from another process) with its own small pool, and a function that closes
// that pool. It does not migrate.
func Open(ctx context.Context, schema string) (*pgstore.Store, func() error, error) {
	pool, err := NewPool(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, func() error { pool.Close(); return nil }, nil
}

// DropSchema drops schema and everything in it, if it exists.
func DropSchema(pool *pgxpool.Pool, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("pgtest: dropping schema %s: %w", schema, err)
	}
	return nil
}
