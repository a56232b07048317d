package sqlitestore_test

// Benchmarks of package dlq on SQLite: the reads of 'rdq dlq' and of the
// console (pages by every filter kind, groups, a dry-run redrive) and the
// bulk redrive, with the data of the dlq package's PostgreSQL benchmarks,
// seeded straight into a file in the benchmark's temporary directory:
//
//	RDQ_BENCH_DEAD=1000000 go test -run '^$' -bench 'DLQ' -benchtime 1x ./sqlitestore/
//	RDQ_BENCH_DEAD=1000000 go test -run '^$' -bench 'DLQ/RedriveAll' -benchtime 1x ./sqlitestore/
//
// RDQ_BENCH_DEAD defaults to 20,000 (as in the dlq package). The data: 10
// queues (queue-0 … queue-9), 20 handlers, 8 error types, 200 fingerprints,
// dead times spread evenly over the 30 days before dlqBenchEnd, a unique
// message per task.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
)

// dlqBenchEnd is the newest dead time of the bench data; the oldest is
// dlqBenchSpan earlier.
var dlqBenchEnd = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

const dlqBenchSpan = 30 * 24 * time.Hour

// dlqBenchErrorTypes are the seeded error types, task i having type i%8.
var dlqBenchErrorTypes = []string{"timeout", "*net.OpError", "panic", "validation", "*url.Error", "http_503", "*json.SyntaxError", "lease_expired"}

// dlqBenchSeedSQL inserts ?1 dead tasks: task i (1-based) in queue i%10,
// handler i%20, error type i%8 of ?4 (a JSON array), message variant
// (i/8)%25, so 200 fingerprints (dlqBenchFingerprint); dead at ?2 -
// i×(?3 / ?1) microseconds. IDs are UUIDv7 built from the dead time, so ID
// order follows time order as in production.
const dlqBenchSeedSQL = `
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1),
x AS (SELECT i, ?2 - i * (?3 / ?1) AS ft, ?4 ->> (i % 8) AS et, (i / 8) % 25 AS v FROM s)
INSERT INTO rdq_tasks (id, queue, handler, payload, content_type, status, attempts, life,
    next_attempt_at, created_at, updated_at, finished_at,
    last_error_type, last_error_message, last_error_fingerprint)
SELECT unhex(printf('%012x', ft / 1000) || '7' || substr(hex(randomblob(2)), 1, 3) || '8' || substr(hex(randomblob(8)), 1, 15)),
    'queue-' || (i % 10), 'handler-' || (i % 20), CAST('{}' AS BLOB), 'application/json', 'DEAD', 3, 0,
    ft, ft - 3600000000, ft, ft,
    et, et || ': failure variant ' || v || ' for order ' || i || ' at shard ' || (i % 97),
    printf('%016x', (i % 8) * 32 + v)
FROM x`

// dlqBenchResetSQL makes every task dead again after a redrive.
const dlqBenchResetSQL = `
UPDATE rdq_tasks SET status = 'DEAD', attempts = 3, life = 0, held = 0,
    finished_at = created_at + 3600000000, next_attempt_at = created_at + 3600000000,
    updated_at = created_at + 3600000000
WHERE status <> 'DEAD' OR life <> 0`

// dlqBenchFingerprint is the seeded fingerprint of error type number
// typeIndex (in dlqBenchErrorTypes) with message variant.
func dlqBenchFingerprint(typeIndex, variant int) string {
	return fmt.Sprintf("%016x", typeIndex*32+variant)
}

func dlqBenchSize(b *testing.B) int {
	if v := os.Getenv("RDQ_BENCH_DEAD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("RDQ_BENCH_DEAD=%q: want a positive number", v)
		}
		return n
	}
	return 20000
}

// BenchmarkDLQ measures package dlq on a seeded SQLite file: a page of 50
// (the first, and the tenth by page tokens) by every filter kind, groups,
// a dry-run redrive, and the bulk redrive of every task by filter, as the
// dlq package's BenchmarkRedriveAll does on PostgreSQL. Every redrive must
// move every seeded task.
func BenchmarkDLQ(b *testing.B) {
	n := dlqBenchSize(b)
	s, path := newStore(b)
	db := rawDB(b, path)
	ctx := context.Background()
	start := time.Now()
	types, err := json.Marshal(dlqBenchErrorTypes)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, dlqBenchSeedSQL, n, dlqBenchEnd.UnixMicro(), dlqBenchSpan.Microseconds(), string(types)); err != nil {
		b.Fatalf("seeding: %v", err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d dead tasks into SQLite in %s", n, time.Since(start).Round(time.Millisecond))

	q, err := dlq.New(s, dlq.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var ids []rdq.ID
	rows, err := db.QueryContext(ctx, `SELECT id FROM rdq_tasks WHERE status = 'DEAD' ORDER BY id LIMIT 100`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			b.Fatal(err)
		}
		var id rdq.ID
		if len(raw) != len(id) {
			b.Fatalf("a seeded id is %d bytes", len(raw))
		}
		copy(id[:], raw)
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		b.Fatal(err)
	}

	filters := []struct {
		name string
		f    dlq.Filter
	}{
		{"none", dlq.Filter{}},
		{"queue", dlq.Filter{Queue: "queue-3"}},
		{"handler", dlq.Filter{Handler: "handler-7"}},
		{"error_type", dlq.Filter{ErrorType: "panic"}},
		{"fingerprint", dlq.Filter{Fingerprint: dlqBenchFingerprint(2, 3)}},
		{"time_range", dlq.Filter{DeadAfter: dlqBenchEnd.Add(-20 * 24 * time.Hour), DeadBefore: dlqBenchEnd.Add(-10 * 24 * time.Hour)}},
		{"message_common", dlq.Filter{MessageContains: "VARIANT 7 "}},
		{"message_rare", dlq.Filter{MessageContains: fmt.Sprintf(" for order %d at ", n/2+1)}},
		{"ids", dlq.Filter{IDs: ids}},
		{"queue+error_type", dlq.Filter{Queue: "queue-3", ErrorType: "*net.OpError"}},
	}
	for _, bf := range filters {
		b.Run("ListPage/"+bf.name+"/first", func(b *testing.B) {
			var got int
			for b.Loop() {
				p, err := q.List(ctx, bf.f, dlq.ListOptions{PageSize: 50})
				if err != nil {
					b.Fatal(err)
				}
				got = len(p.Tasks)
			}
			if got == 0 {
				b.Fatalf("filter %s selected no task", bf.name)
			}
			b.ReportMetric(float64(got), "tasks/page")
		})
		// Page 10 by tokens: keyset paging reads as much at any depth.
		token := ""
		for range 9 {
			p, err := q.List(ctx, bf.f, dlq.ListOptions{PageSize: 50, PageToken: token})
			if err != nil {
				b.Fatal(err)
			}
			if token = p.NextPageToken; token == "" {
				break
			}
		}
		if token == "" {
			continue
		}
		b.Run("ListPage/"+bf.name+"/page10", func(b *testing.B) {
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
	for _, c := range []struct {
		name string
		f    dlq.Filter
	}{{"all", dlq.Filter{}}, {"queue", dlq.Filter{Queue: "queue-3"}}, {"error_type", dlq.Filter{ErrorType: "panic"}}} {
		b.Run("Groups/"+c.name, func(b *testing.B) {
			var got int
			for b.Loop() {
				g, err := q.Groups(ctx, c.f)
				if err != nil {
					b.Fatal(err)
				}
				got = len(g)
			}
			b.ReportMetric(float64(got), "groups")
		})
	}
	b.Run("RedriveDryRun/all", func(b *testing.B) {
		var got int64
		for b.Loop() {
			res, err := q.Redrive(ctx, dlq.Filter{}, dlq.RedriveOptions{DryRun: true, All: true})
			if err != nil {
				b.Fatal(err)
			}
			got = res.Redriven
		}
		if got != int64(n) {
			b.Fatalf("a dry run of all would redrive %d of %d", got, n)
		}
		b.ReportMetric(float64(got), "tasks")
	})

	// The bulk redrive, with the DLQ's defaults (the store's own chunk
	// size, two chunks at a time) and in dlq's default chunks of 5,000 for
	// comparison. The tasks are made dead again between iterations.
	for _, c := range []struct {
		name string
		cfg  dlq.Config
	}{
		{"chunk=store/parallel=2", dlq.Config{}},
		{fmt.Sprintf("chunk=%d/parallel=2", dlq.DefaultChunkSize), dlq.Config{ChunkSize: dlq.DefaultChunkSize}},
	} {
		b.Run("RedriveAll/"+c.name, func(b *testing.B) {
			q, err := dlq.New(s, c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			dlqRedriveAll(b, q, n, func() {
				if _, err := db.ExecContext(ctx, dlqBenchResetSQL); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// dlqRedriveAll redrives all n seeded tasks by filter through q, b.N
// times, calling reset (untimed) after each, and reports tasks/s and the
// mean chunk time of the first and last tenth of the chunks: do chunks get
// slower as the redrive advances?
func dlqRedriveAll(b *testing.B, q *dlq.DLQ, n int, reset func()) {
	ctx := context.Background()
	f := dlq.Filter{DeadBefore: dlqBenchEnd.Add(time.Hour)}
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
		b.ReportMetric(meanMillis(chunks[:k]), "ms/chunk-first10%")
		b.ReportMetric(meanMillis(chunks[len(chunks)-k:]), "ms/chunk-last10%")
	}
}

// meanMillis is the mean of ds in milliseconds.
func meanMillis(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / 1000 / float64(len(ds))
}
