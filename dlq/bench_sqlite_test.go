package dlq_test

// The bulk redrive benchmark on SQLite: the path of 'rdq dlq redrive' and
// of the console on the embedded store, with the data of the PostgreSQL
// benchmarks (benchSeedSQL), seeded straight into a file in a temporary
// directory:
//
//	RDQ_BENCH_DEAD=1000000 go test -run '^$' -bench RedriveAllSQLite -benchtime 1x ./dlq/

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/sqlitestore"
)

// benchSQLiteSeedSQL inserts ?1 dead tasks shaped as benchSeedSQL's: task
// i (1-based) in queue i%10, handler i%20, error type i%8 of ?4 (a JSON
// array), message variant (i/8)%25, so 200 fingerprints; dead at ?2 -
// i×(?3 / ?1) microseconds. IDs are UUIDv7 built from the dead time, so ID
// order follows time order as in production.
const benchSQLiteSeedSQL = `
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1),
x AS (SELECT i, ?2 - i * (?3 / ?1) AS ft, ?4 ->> (i % 8) AS et, (i / 8) % 25 AS v FROM s)
INSERT INTO rdq_tasks (id, queue, handler, payload, content_type, status, attempts, life,
    next_attempt_at, created_at, updated_at, finished_at,
    last_error_type, last_error_message, last_error_fingerprint)
SELECT unhex(printf('%012x', ft / 1000) || '7' || substr(hex(randomblob(2)), 1, 3) || '8' || substr(hex(randomblob(8)), 1, 15)),
    'queue-' || (i % 10), 'handler-' || (i % 20), CAST('{}' AS BLOB), 'application/json', 'DEAD', 3, 0,
    ft, ft - 3600000000, ft, ft,
    et, et || ': failure variant ' || v || ' for order ' || i || ' at shard ' || (i % 97),
    'fp-' || (i % 8) || '-' || v
FROM x`

// benchSQLiteResetSQL makes every task dead again after a redrive.
const benchSQLiteResetSQL = `
UPDATE rdq_tasks SET status = 'DEAD', attempts = 3, life = 0, held = 0,
    finished_at = created_at + 3600000000, next_attempt_at = created_at + 3600000000,
    updated_at = created_at + 3600000000
WHERE status <> 'DEAD' OR life <> 0`

var benchLite struct {
	once sync.Once
	n    int
	s    *sqlitestore.Store
	db   *sql.DB
	err  error
}

// benchSQLiteStore returns the seeded SQLite bench store, seeding it on
// first use; the file is removed when the test binary ends.
func benchSQLiteStore(tb testing.TB) *sqlitestore.Store {
	tb.Helper()
	benchLite.once.Do(func() {
		benchLite.err = seedSQLiteBench()
	})
	if benchLite.err != nil {
		tb.Fatal(benchLite.err)
	}
	return benchLite.s
}

func seedSQLiteBench() error {
	ctx := context.Background()
	benchLite.n = benchSize()
	dir, err := os.MkdirTemp("", "rdq-dlq-bench-")
	if err != nil {
		return err
	}
	addCleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	})
	path := filepath.Join(dir, "rdq.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return err
	}
	addCleanup(func() {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	addCleanup(func() {
		if err := db.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	})
	start := time.Now()
	types := `["timeout", "*net.OpError", "panic", "validation", "*url.Error", "http_503", "*json.SyntaxError", "lease_expired"]`
	if _, err := db.ExecContext(ctx, benchSQLiteSeedSQL, benchLite.n, benchEnd.UnixMicro(), benchSpan.Microseconds(), types); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: seeded %d dead tasks into SQLite in %s\n", benchLite.n, time.Since(start).Round(time.Millisecond))
	benchLite.s, benchLite.db = s, db
	return nil
}

// BenchmarkRedriveAllSQLite redrives every seeded task by filter, as
// BenchmarkRedriveAll does on PostgreSQL: with the DLQ's defaults (the
// store's own chunk size, two chunks at a time), and in dlq's default
// chunks of 5,000 for comparison. The tasks are made dead again between
// iterations.
func BenchmarkRedriveAllSQLite(b *testing.B) {
	s := benchSQLiteStore(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cfg  dlq.Config
	}{
		{"chunk=store/parallel=2", dlq.Config{}},
		{fmt.Sprintf("chunk=%d/parallel=2", dlq.DefaultChunkSize), dlq.Config{ChunkSize: dlq.DefaultChunkSize}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q, err := dlq.New(s, c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			benchRedriveAll(b, q, benchLite.n, func() {
				if _, err := benchLite.db.ExecContext(ctx, benchSQLiteResetSQL); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
