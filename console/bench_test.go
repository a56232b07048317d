package console_test

// Server render time of every console page over a large dead-letter queue
// on PostgreSQL. The tasks are seeded straight into pgstore's tables by one
// INSERT … SELECT, then counted into the dead-task summary.
//
//	RDQ_BENCH_DEAD=1000000 go test -run '^$' -bench . -benchtime 50x ./console/
//
// RDQ_BENCH_DEAD defaults to 20,000 so the benchmarks stay quick. The data:
// 10 queues, 20 handlers, 8 error types, 200 fingerprints, dead times
// spread evenly over the 30 days before the console's clock, a unique
// message per task; plus 10,000 pending tasks (half not due yet) and 5,000
// audit entries. Every dead task also has an attempt finished within the 24
// hours before the database's clock (which the activity series reads),
// evenly spread: about 700 a minute at a million tasks.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// benchNow is the console's clock: the newest dead time of the data.
var benchNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var benchTypes = []string{"timeout", "*net.OpError", "panic", "validation", "*url.Error", "http_503", "*json.SyntaxError", "lease_expired"}

// benchSeedDead inserts $1 dead tasks dead between $2 - 30 days and $2,
// with the error types $3.
const benchSeedDead = `
INSERT INTO %[1]s.tasks (id, queue, handler, payload, content_type, status, attempts, life,
    last_attempt_number, next_attempt_at, created_at, updated_at, finished_at,
    last_error_type, last_error_message, last_error_fingerprint)
SELECT (lpad(to_hex((extract(epoch FROM g.at) * 1000)::bigint), 12, '0') || '7' || substr(md5('dead' || g.i), 1, 3)
        || '8' || substr(md5('dead' || g.i), 4, 15))::uuid, 'queue-' || (g.i %% 10), 'handler-' || (g.i %% 20),
    convert_to('{"order":' || g.i || ',"items":[1,2,3]}', 'UTF8'), 'application/json', 'DEAD', 3, 0, 3,
    g.at, g.at - interval '1 hour', g.at, g.at,
    ($3::text[])[(g.i %% 8) + 1],
    ($3::text[])[(g.i %% 8) + 1] || ': variant ' || ((g.i / 8) %% 25) || ' failed for order ' || g.i,
    substr(md5(($3::text[])[(g.i %% 8) + 1] || '/' || ((g.i / 8) %% 25)), 1, 16)
FROM (SELECT i, $2::timestamptz - (i::bigint * 2592000000000 / $1::bigint) * interval '1 microsecond' AS at
      FROM generate_series(1, $1::bigint) AS i) g`

// benchSeedAttempts gives every dead task an attempt (its number 3, the
// one that killed it) finished in the 24 hours before the database's now.
const benchSeedAttempts = `
INSERT INTO %[1]s.attempts (task_id, number, life, outcome, error_type, message, worker_id, started_at, finished_at)
SELECT t.id, 3, 0, 'PERMANENT_FAILURE', t.last_error_type, t.last_error_message, 'w', f.at, f.at
FROM (SELECT t.*, row_number() OVER () AS i, count(*) OVER () AS n FROM %[1]s.tasks AS t WHERE t.status = 'DEAD') AS t
CROSS JOIN LATERAL (SELECT now() - (t.i::float8 / t.n) * interval '24 hours' AS at) AS f`

// benchSeedPending inserts 10,000 pending tasks, half of them not due.
const benchSeedPending = `
INSERT INTO %[1]s.tasks (id, queue, handler, payload, content_type, status, next_attempt_at, created_at, updated_at)
SELECT md5('pending' || i)::uuid, 'queue-' || (i %% 10), 'handler-' || (i %% 20), '\x7b7d'::bytea, 'application/json', 'PENDING',
    now() + CASE WHEN i %% 2 = 0 THEN interval '1 hour' ELSE -interval '1 minute' END, now(), now()
FROM generate_series(1, 10000) AS i`

// benchSeedAudit inserts 5,000 audit entries in the minutes before $1.
const benchSeedAudit = `
INSERT INTO %[1]s.audit (at, actor, action, filter, count, reason)
SELECT $1::timestamptz - i * interval '1 minute', 'user-' || (i %% 7), 'redrive', '{"queue":"queue-' || (i %% 10) || '"}', 100, 'bench'
FROM generate_series(1, 5000) AS i`

var consoleBench struct {
	once sync.Once
	c    *console.Console
	s    *pgstore.Store
	err  error
}

func benchDead() int {
	if n, err := strconv.Atoi(os.Getenv("RDQ_BENCH_DEAD")); err == nil && n > 0 {
		return n
	}
	return 20000
}

// benchConsole seeds the bench store on first use. The schema is dropped
// and the console closed when the benchmark ends.
func benchConsole(b *testing.B) *console.Console {
	b.Helper()
	consoleBench.once.Do(func() {
		ctx := context.Background()
		pool, err := pgtest.NewPool(ctx)
		if err != nil {
			consoleBench.err = err
			return
		}
		schema := pgtest.SchemaName()
		s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
		if err == nil {
			err = s.Migrate(ctx)
		}
		if err != nil {
			pool.Close()
			consoleBench.err = err
			return
		}
		start := time.Now()
		n := benchDead()
		table := pgx.Identifier{schema}.Sanitize()
		for _, seed := range []struct {
			sql  string
			args []any
		}{
			{benchSeedDead, []any{n, benchNow, benchTypes}},
			{benchSeedAttempts, nil},
			{benchSeedPending, nil},
			{benchSeedAudit, []any{benchNow}},
		} {
			if _, err := pool.Exec(ctx, fmt.Sprintf(seed.sql, table), seed.args...); err != nil {
				consoleBench.err = fmt.Errorf("seeding: %w", err)
				return
			}
		}
		if err := s.RecountDead(ctx); err != nil {
			consoleBench.err = err
			return
		}
		for _, t := range []string{"tasks", "attempts", "dead_counts", "audit"} {
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{schema, t}.Sanitize()); err != nil {
				consoleBench.err = err
				return
			}
		}
		fmt.Fprintf(os.Stderr, "console bench: seeded %d dead tasks in %s\n", n, time.Since(start).Round(time.Millisecond))
		c, err := console.New(console.Config{
			Store: s, Authorize: func(*http.Request, console.Action, string) error { return nil },
			Actor: func(*http.Request) string { return "bench" }, Now: func() time.Time { return benchNow },
		})
		if err != nil {
			consoleBench.err = err
			return
		}
		consoleBench.c, consoleBench.s = c, s
		addBenchCleanup(func() {
			if err := c.Close(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			if err := pgtest.DropSchema(pool, schema); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			pool.Close()
		})
	})
	if consoleBench.err != nil {
		b.Fatal(consoleBench.err)
	}
	return consoleBench.c
}

func BenchmarkPages(b *testing.B) {
	c := benchConsole(b)
	fetch := func(b *testing.B, method, path string, form url.Values) string {
		var body *strings.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		} else {
			body = strings.NewReader("")
		}
		req := httptest.NewRequest(method, path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	// A task id and a second-page link, taken from the pages themselves.
	first := fetch(b, "GET", "/dead?queue=queue-3", nil)
	task := regexp.MustCompile(`href="(/tasks/[0-9a-f-]{36})"`).FindStringSubmatch(first)
	next := regexp.MustCompile(`href="(/dead\?[^"]+)" rel="next"`).FindStringSubmatch(first)
	if task == nil || next == nil {
		b.Fatal("the dead-task page has no task or next page")
	}
	// The seed wrote a day of attempt history that no read has rolled
	// up, as after an upgrade; each read rolls up a few minutes of it
	// (BenchmarkSeries in pgstore times that). The views timed here are
	// the ones after the catch-up.
	settleBenchSeries(b)
	fetch(b, "GET", "/", nil)
	fp := regexp.MustCompile(`fingerprint=([0-9a-f]{16})`).FindStringSubmatch(fetch(b, "GET", "/groups", nil))
	if fp == nil {
		b.Fatal("the groups page has no fingerprint")
	}
	pages := []struct {
		name, method, path string
		form               url.Values
	}{
		{"overview", "GET", "/", nil},
		{"dead", "GET", "/dead", nil},
		{"dead-queue", "GET", "/dead?queue=queue-3", nil},
		{"dead-queue-page2", "GET", strings.ReplaceAll(next[1], "&amp;", "&"), nil},
		{"dead-fingerprint", "GET", "/dead?fingerprint=" + fp[1], nil},
		{"dead-message", "GET", "/dead?queue=queue-3&message=variant+7", nil},
		{"dead-last-day", "GET", "/dead?dead_after=" + url.QueryEscape(benchNow.Add(-24*time.Hour).Format(time.RFC3339)), nil},
		{"groups", "GET", "/groups", nil},
		{"groups-queue", "GET", "/groups?queue=queue-3", nil},
		{"task", "GET", task[1], nil},
		{"audit", "GET", "/audit", nil},
		{"audit-queue", "GET", "/audit?queue=queue-3", nil},
		{"live-pending", "GET", "/live?state=pending", nil},
		{"live-retrying-queue", "GET", "/live?state=retrying&queue=queue-3", nil},
		{"bulk-form", "GET", "/bulk?op=redrive&fingerprint=" + fp[1], nil},
		{"activity", "GET", "/activity", nil},
		{"activity-queue", "GET", "/activity?queue=queue-3", nil},
		{"activity-queue-handler", "GET", "/activity?queue=queue-3&handler=handler-3", nil},
		{"bulk-dry-run", "POST", "/bulk/dry-run", url.Values{"op": {"redrive"}, "fingerprint": {fp[1]}}},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				fetch(b, p.method, p.path, p.form)
			}
		})
	}
}

// settleBenchSeries reads the activity series until the store has rolled
// up the seeded history.
func settleBenchSeries(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	for _, p := range []store.SeriesParams{{Width: time.Minute, Buckets: 60}, {Width: time.Hour, Buckets: 24}} {
		for reads := 0; ; reads++ {
			s, err := consoleBench.s.Series(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			if s.PartialUntil.IsZero() {
				break
			}
			if reads == 10000 {
				b.Fatalf("the series of %s is still partial after %d reads", p.Width, reads)
			}
		}
	}
}

// BenchmarkQueries times the store reads behind the overview and groups
// pages one by one, to show where a page's time goes.
func BenchmarkQueries(b *testing.B) {
	benchConsole(b)
	settleBenchSeries(b)
	s := consoleBench.s
	ctx := context.Background()
	since := benchNow.Truncate(time.Hour).Add(-23 * time.Hour)
	groups, err := s.DeadGroups(ctx, store.DeadFilter{})
	if err != nil || len(groups) < 25 {
		b.Fatal(err, len(groups))
	}
	fps := make([]string, 25)
	for i := range fps {
		fps[i] = groups[i].Fingerprint
	}
	// The groups of one page of the groups page.
	pageFps := make([]string, min(len(groups), 100))
	for i := range pageFps {
		pageFps[i] = groups[i].Fingerprint
	}
	for _, q := range []struct {
		name string
		fn   func() error
	}{
		{"stats", func() error { _, err := s.Stats(ctx, store.StatsParams{SucceededWindow: time.Hour}); return err }},
		{"not-due", func() error { _, err := s.NotDueCounts(ctx, nil); return err }},
		{"waiting", func() error { _, err := s.WaitingCounts(ctx, nil); return err }},
		{"group-origins-100", func() error { _, err := s.GroupOrigins(ctx, pageFps); return err }},
		{"histogram", func() error { _, err := s.DeadHistogram(ctx, since, time.Hour, 24, nil); return err }},
		{"histogram-25-groups", func() error { _, err := s.DeadHistogram(ctx, since, time.Hour, 24, fps); return err }},
		{"group-keys", func() error { _, err := s.DeadGroupKeys(ctx, fps); return err }},
		{"groups", func() error { _, err := s.DeadGroups(ctx, store.DeadFilter{}); return err }},
		{"audit", func() error { _, err := s.ListAudit(ctx, store.ListAuditParams{Limit: 8}); return err }},
		{"series-minutes-60", func() error {
			_, err := s.Series(ctx, store.SeriesParams{Width: time.Minute, Buckets: 60})
			return err
		}},
		{"series-hours-24", func() error {
			_, err := s.Series(ctx, store.SeriesParams{Width: time.Hour, Buckets: 24})
			return err
		}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				if err := q.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var (
	benchCleanupMu sync.Mutex
	benchCleanups  []func()
)

func addBenchCleanup(f func()) {
	benchCleanupMu.Lock()
	benchCleanups = append(benchCleanups, f)
	benchCleanupMu.Unlock()
}

// runBenchCleanups drops what the benchmarks seeded; TestMain calls it.
func runBenchCleanups() {
	benchCleanupMu.Lock()
	defer benchCleanupMu.Unlock()
	for _, f := range benchCleanups {
		f()
	}
	benchCleanups = nil
}
