package dlq_test

// Benchmarks of the DLQ at scale. The dead-letter queue is seeded straight
// into pgstore's tables with one INSERT … SELECT over generate_series, so a
// million dead tasks take seconds, not an hour of worker round trips.
//
//	RDQ_BENCH_DEAD=1000000 go test -run '^$' -bench . -benchtime 20x ./dlq/
//	RDQ_BENCH_DEAD=1000000 RDQ_BENCH_EXPLAIN=1 go test -run TestExplainAtScale -v ./dlq/
//
// RDQ_BENCH_DEAD defaults to 20,000 so the benchmarks stay quick in CI.
// The data: 10 queues (queue-0 … queue-9), 20 handlers, 8 error types, 200
// fingerprints, dead times spread evenly over 30 days, a unique message per
// task.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// benchEnd is the newest dead time of the bench data; the oldest is 30 days
// earlier.
var benchEnd = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

const benchSpan = 30 * 24 * time.Hour

var benchErrorTypes = []string{"timeout", "*net.OpError", "panic", "validation", "*url.Error", "http_503", "*json.SyntaxError", "lease_expired"}

// benchSeedSQL inserts $1 dead tasks. Task i (1-based): queue i%10, handler
// i%20, error type i%8, message variant (i/8)%25, so 8×25 = 200
// fingerprints; dead at benchEnd - i×(30 days / $1). IDs are UUIDv7 built
// from the dead time, so ID order follows time order as in production.
const benchSeedSQL = `
INSERT INTO %[1]s.tasks (id, queue, handler, payload, content_type, status, attempts, life,
    last_attempt_number, next_attempt_at, created_at, updated_at, finished_at,
    last_error_type, last_error_message, last_error_fingerprint)
SELECT
    (lpad(to_hex((extract(epoch FROM x.ft) * 1000)::bigint), 12, '0') || '7' || substr(x.h, 1, 3)
        || '8' || substr(x.h, 4, 15))::uuid,
    'queue-' || (x.i %% 10), 'handler-' || (x.i %% 20), '\x7b7d'::bytea, 'application/json', 'DEAD',
    3, 0, 3, x.ft, x.ft - interval '1 hour', x.ft, x.ft,
    x.et,
    x.et || ': failure variant ' || x.v || ' for order ' || x.i || ' at shard ' || (x.i %% 97),
    substr(md5(x.et || '/' || x.v), 1, 16)
FROM (
    SELECT i, md5(i::text) AS h,
        $2::timestamptz - (i::bigint * $3::bigint / $1::bigint) * interval '1 microsecond' AS ft,
        ($4::text[])[(i %% 8) + 1] AS et,
        (i / 8) %% 25 AS v
    FROM generate_series(1, $1::bigint) AS i
) x`

// benchResetSQL makes every task dead again after a redrive benchmark.
const benchResetSQL = `
UPDATE %[1]s.tasks SET status = 'DEAD', attempts = 3, life = 0,
    finished_at = created_at + interval '1 hour', next_attempt_at = created_at + interval '1 hour',
    updated_at = created_at + interval '1 hour'
WHERE status <> 'DEAD' OR life <> 0`

var bench struct {
	once   sync.Once
	n      int
	schema string
	pool   *pgxpool.Pool
	s      *pgstore.Store
	err    error
}

func benchSize() int {
	if v := os.Getenv("RDQ_BENCH_DEAD"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return 20000
}

// benchStore returns the seeded bench store, seeding it on first use; the
// schema is dropped when the test binary ends.
func benchStore(tb testing.TB) *pgstore.Store {
	tb.Helper()
	bench.once.Do(func() {
		ctx := context.Background()
		bench.n = benchSize()
		pool, err := pgtest.NewPool(ctx)
		if err != nil {
			bench.err = err
			return
		}
		bench.pool = pool
		bench.schema = pgtest.SchemaName()
		addCleanup(func() {
			if err := pgtest.DropSchema(pool, bench.schema); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			pool.Close()
		})
		s, err := pgstore.New(pool, pgstore.Config{Schema: bench.schema})
		if err == nil {
			err = s.Migrate(ctx)
		}
		if err != nil {
			bench.err = err
			return
		}
		start := time.Now()
		q := fmt.Sprintf(benchSeedSQL, pgx.Identifier{bench.schema}.Sanitize())
		if _, err := pool.Exec(ctx, q, bench.n, benchEnd, benchSpan.Microseconds(), benchErrorTypes); err != nil {
			bench.err = fmt.Errorf("seeding: %w", err)
			return
		}
		// The seed bypassed the store: count the dead tasks into the
		// summary the store keeps of them.
		if err := s.RecountDead(ctx); err != nil {
			bench.err = err
			return
		}
		seeded := time.Since(start)
		if err := benchVacuum(ctx, pool); err != nil {
			bench.err = err
			return
		}
		fmt.Fprintf(os.Stderr, "bench: seeded %d dead tasks in %s (vacuum analyze %s)\n", bench.n, seeded.Round(time.Millisecond), (time.Since(start) - seeded).Round(time.Millisecond))
		bench.s = s
	})
	if bench.err != nil {
		tb.Fatal(bench.err)
	}
	return bench.s
}

func benchReset(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	if _, err := bench.pool.Exec(ctx, fmt.Sprintf(benchResetSQL, pgx.Identifier{bench.schema}.Sanitize())); err != nil {
		tb.Fatal(err)
	}
	if err := bench.s.RecountDead(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := benchVacuum(ctx, bench.pool); err != nil {
		tb.Fatal(err)
	}
}

// benchVacuum vacuums and analyzes the tables the bench data fills.
func benchVacuum(ctx context.Context, pool *pgxpool.Pool) error {
	for _, table := range []string{"tasks", "dead_counts"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{bench.schema, table}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// benchFilter is one filter kind, with its SQL condition for finding a deep
// cursor.
type benchFilter struct {
	name string
	f    dlq.Filter
	cond string
	args []any
}

func benchFilters(tb testing.TB) []benchFilter {
	tb.Helper()
	fp := benchFingerprint("panic", 3)
	// 100 IDs spread through the data.
	rows, err := bench.pool.Query(context.Background(), fmt.Sprintf(
		`SELECT id FROM %s.tasks WHERE status = 'DEAD' ORDER BY id LIMIT 100`, pgx.Identifier{bench.schema}.Sanitize()))
	if err != nil {
		tb.Fatal(err)
	}
	idList, err := pgx.CollectRows(rows, pgx.RowTo[rdq.ID])
	if err != nil {
		tb.Fatal(err)
	}
	rare := fmt.Sprintf(" for order %d at ", bench.n/2+1)
	return []benchFilter{
		{"none", dlq.Filter{}, "true", nil},
		{"queue", dlq.Filter{Queue: "queue-3"}, "queue = $1", []any{"queue-3"}},
		{"handler", dlq.Filter{Handler: "handler-7"}, "handler = $1", []any{"handler-7"}},
		{"error_type", dlq.Filter{ErrorType: "panic"}, "last_error_type = $1", []any{"panic"}},
		{"fingerprint", dlq.Filter{Fingerprint: fp}, "last_error_fingerprint = $1", []any{fp}},
		{"time_range", dlq.Filter{DeadAfter: benchEnd.Add(-20 * 24 * time.Hour), DeadBefore: benchEnd.Add(-10 * 24 * time.Hour)},
			"finished_at >= $1 AND finished_at < $2", []any{benchEnd.Add(-20 * 24 * time.Hour), benchEnd.Add(-10 * 24 * time.Hour)}},
		{"message_common", dlq.Filter{MessageContains: "VARIANT 7 "}, "last_error_message ILIKE $1", []any{"%variant 7 %"}},
		{"message_rare", dlq.Filter{MessageContains: rare}, "last_error_message ILIKE $1", []any{"%" + rare + "%"}},
		{"ids", dlq.Filter{IDs: idList}, "id = ANY($1)", []any{idList}},
		{"queue+error_type", dlq.Filter{Queue: "queue-3", ErrorType: "*net.OpError"},
			"queue = $1 AND last_error_type = $2", []any{"queue-3", "*net.OpError"}},
	}
}

func benchFingerprint(errType string, variant int) string {
	var fp string
	if err := bench.pool.QueryRow(context.Background(), `SELECT substr(md5($1 || '/' || $2), 1, 16)`, errType, strconv.Itoa(variant)).Scan(&fp); err != nil {
		panic(err)
	}
	return fp
}

// deepToken returns a page token positioned in the middle of the
// filter's selection.
func deepToken(tb testing.TB, bf benchFilter) string {
	tb.Helper()
	var n int64
	ctx := context.Background()
	table := pgx.Identifier{bench.schema, "tasks"}.Sanitize()
	if err := bench.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE status = 'DEAD' AND %s", table, bf.cond), bf.args...).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	if n < 2 {
		return ""
	}
	var c store.Cursor
	args := append(append([]any{}, bf.args...), n/2)
	q := fmt.Sprintf("SELECT finished_at, id FROM %s WHERE status = 'DEAD' AND %s ORDER BY finished_at DESC, id DESC OFFSET $%d LIMIT 1", table, bf.cond, len(bf.args)+1)
	if err := bench.pool.QueryRow(ctx, q, args...).Scan(&c.FinishedAt, &c.ID); err != nil {
		tb.Fatal(err)
	}
	return dlq.EncodeToken(c, bf.f)
}

func BenchmarkListPage(b *testing.B) {
	s := benchStore(b)
	q, err := dlq.New(s, dlq.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, bf := range benchFilters(b) {
		for _, deep := range []bool{false, true} {
			name := bf.name + "/first"
			token := ""
			if deep {
				name = bf.name + "/middle"
				if token = deepToken(b, bf); token == "" {
					continue
				}
			}
			b.Run(name, func(b *testing.B) {
				var got int
				for b.Loop() {
					p, err := q.List(ctx, bf.f, dlq.ListOptions{PageSize: 50, PageToken: token})
					if err != nil {
						b.Fatal(err)
					}
					got = len(p.Tasks)
				}
				b.ReportMetric(float64(got), "tasks/page")
			})
		}
	}
}

func BenchmarkGroups(b *testing.B) {
	s := benchStore(b)
	q, err := dlq.New(s, dlq.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		f    dlq.Filter
	}{{"all", dlq.Filter{}}, {"queue", dlq.Filter{Queue: "queue-3"}}, {"error_type", dlq.Filter{ErrorType: "panic"}}} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				g, err := q.Groups(ctx, c.f)
				if err != nil {
					b.Fatal(err)
				}
				n = len(g)
			}
			b.ReportMetric(float64(n), "groups")
		})
	}
}

func BenchmarkRedriveDryRun(b *testing.B) {
	s := benchStore(b)
	q, err := dlq.New(s, dlq.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		f    dlq.Filter
	}{{"all", dlq.Filter{}}, {"queue", dlq.Filter{Queue: "queue-3"}}, {"fingerprint", dlq.Filter{Fingerprint: benchFingerprint("panic", 3)}},
		{"message", dlq.Filter{MessageContains: "variant 7 "}}} {
		b.Run(c.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				res, err := q.Redrive(ctx, c.f, dlq.RedriveOptions{DryRun: true, All: true})
				if err != nil {
					b.Fatal(err)
				}
				n = res.Redriven
			}
			b.ReportMetric(float64(n), "tasks")
		})
	}
}

// BenchmarkRedriveAll redrives every seeded task by filter, in chunks, one
// or two at once, and makes them dead again between iterations.
func BenchmarkRedriveAll(b *testing.B) {
	s := benchStore(b)
	for _, c := range []struct{ chunk, parallel int }{{dlq.DefaultChunkSize, 1}, {dlq.DefaultChunkSize, 2}, {20000, 1}, {20000, 2}} {
		b.Run(fmt.Sprintf("chunk=%d/parallel=%d", c.chunk, c.parallel), func(b *testing.B) {
			q, err := dlq.New(s, dlq.Config{ChunkSize: c.chunk, Parallelism: c.parallel})
			if err != nil {
				b.Fatal(err)
			}
			benchRedriveAll(b, q, bench.n, func() { benchReset(b) })
		})
	}
}

// benchRedriveAll redrives all n seeded tasks by filter through q, b.N
// times, calling reset (untimed) after each, and reports tasks/s and the
// mean chunk time of the first and last tenth of the chunks: do chunks get
// slower as the redrive advances?
func benchRedriveAll(b *testing.B, q *dlq.DLQ, n int, reset func()) {
	ctx := context.Background()
	f := dlq.Filter{DeadBefore: benchEnd.Add(time.Hour)}
	var chunks []time.Duration
	last := time.Now()
	progress := func(done, total int64) {
		now := time.Now()
		if done > 0 {
			chunks = append(chunks, now.Sub(last))
		}
		last = now
	}
	for i := 0; i < b.N; i++ {
		chunks, last = chunks[:0], time.Now()
		res, err := q.Redrive(ctx, f, dlq.RedriveOptions{Actor: "bench", Reason: "benchmark", Spread: time.Hour, Progress: progress})
		if err != nil {
			b.Fatal(err)
		}
		if res.Redriven != int64(n) {
			b.Fatalf("redrove %d of %d", res.Redriven, n)
		}
		b.StopTimer()
		reset()
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	if k := len(chunks) / 10; k > 0 {
		b.ReportMetric(meanMS(chunks[:k]), "ms/chunk-first10%")
		b.ReportMetric(meanMS(chunks[len(chunks)-k:]), "ms/chunk-last10%")
	}
}

// seqScanAllowed returns why the DLQ read name may read the tasks table
// without an index, or "" when it may not: no index of pgstore's serves a
// substring search of messages (see the README), and a redrive chunk whose
// filter selects every dead task reads them all whatever the plan.
func seqScanAllowed(name string) string {
	switch {
	case strings.Contains(name, "message_"):
		return "no index serves a message substring search"
	case strings.HasPrefix(name, "RedriveDead"):
		return "the filter selects every dead task"
	}
	return ""
}

// TestExplainAtScale logs the plan PostgreSQL ran, with EXPLAIN ANALYZE
// timings (through auto_explain), for every DLQ read at the bench scale,
// and fails for each one that reads the tasks table without an index.
func TestExplainAtScale(t *testing.T) {
	if os.Getenv("RDQ_BENCH_EXPLAIN") == "" {
		t.Skip("set RDQ_BENCH_EXPLAIN=1 (and RDQ_BENCH_DEAD for the scale) to capture query plans")
	}
	benchStore(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var plans []string
	cfg.MaxConns = 1
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		plans = append(plans, n.Message)
		mu.Unlock()
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, set := range []string{
			"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
			"SET auto_explain.log_buffers = on", "SET auto_explain.log_level = notice",
		} {
			if _, err := c.Exec(ctx, set); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{Schema: bench.schema})
	if err != nil {
		t.Fatal(err)
	}
	q, err := dlq.New(s, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	capture := func(name string, fn func() error) {
		// Run twice: the second execution shows the plan a warm, cached
		// statement gets.
		for i := 0; i < 2; i++ {
			mu.Lock()
			plans = nil
			mu.Unlock()
			start := time.Now()
			if err := fn(); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if i == 0 {
				continue
			}
			mu.Lock()
			all := strings.Join(plans, "\n")
			mu.Unlock()
			if all == "" {
				t.Errorf("%s: auto_explain logged no plan", name)
			}
			if reason := seqScanAllowed(name); reason != "" && strings.Contains(all, "Seq Scan on tasks") {
				t.Logf("=== %s: sequential scan (%s), %s round trip\n%s", name, reason, took.Round(10*time.Microsecond), all)
				continue
			}
			if strings.Contains(all, "Seq Scan on tasks") {
				t.Errorf("=== %s reads the tasks table without an index, %s round trip\n%s", name, took.Round(10*time.Microsecond), all)
				continue
			}
			t.Logf("=== %s: index, %s round trip\n%s", name, took.Round(10*time.Microsecond), all)
		}
	}
	for _, bf := range benchFilters(t) {
		for _, deep := range []bool{false, true} {
			name, token := "ListDead "+bf.name+" first page", ""
			if deep {
				name = "ListDead " + bf.name + " middle page"
				if token = deepToken(t, bf); token == "" {
					continue
				}
			}
			capture(name, func() error {
				_, err := q.List(ctx, bf.f, dlq.ListOptions{PageSize: 50, PageToken: token})
				return err
			})
		}
		capture("CountDead "+bf.name, func() error { _, err := q.Count(ctx, bf.f); return err })
		capture("DeadGroups "+bf.name, func() error { _, err := q.Groups(ctx, bf.f); return err })
	}

	// One chunk of a bulk redrive by filter, at the start and half way.
	f := dlq.Filter{DeadBefore: benchEnd.Add(time.Hour)}
	chunk := func() error {
		_, err := q.Redrive(ctx, f, dlq.RedriveOptions{Actor: "bench", Reason: "explain", Max: dlq.DefaultChunkSize, Spread: time.Hour})
		return err
	}
	capture("RedriveDead first chunks", chunk)
	half, err := dlq.New(bench.s, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := half.Redrive(ctx, f, dlq.RedriveOptions{Actor: "bench", Reason: "explain", Max: int64(bench.n / 2)}); err != nil {
		t.Fatal(err)
	}
	capture("RedriveDead chunks half way", chunk)
	benchReset(t)
}

func meanMS(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / 1000 / float64(len(ds))
}

var cleanups struct {
	sync.Mutex
	fns []func()
}

func addCleanup(fn func()) {
	cleanups.Lock()
	cleanups.fns = append(cleanups.fns, fn)
	cleanups.Unlock()
}

func runCleanups() {
	cleanups.Lock()
	defer cleanups.Unlock()
	for _, fn := range cleanups.fns {
		fn()
	}
	cleanups.fns = nil
}
