package pgstore_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// deadKey is one row of the dead-task summary: a failure kind.
type deadKey struct{ queue, handler, errorType, fingerprint string }

// summaryCounts reads dead_counts summed over shards, leaving out keys
// whose sum is zero; a negative sum fails the test.
func summaryCounts(t *testing.T, ctx context.Context, pool *pgxpool.Pool, schema string) map[deadKey]int64 {
	t.Helper()
	return readCounts(t, ctx, pool, fmt.Sprintf(`
SELECT queue, handler, error_type, fingerprint, sum(n)::bigint
FROM %s.dead_counts
GROUP BY queue, handler, error_type, fingerprint
HAVING sum(n) <> 0`, pgx.Identifier{schema}.Sanitize()))
}

// bruteCounts counts the DEAD tasks per failure kind from the tasks table.
func bruteCounts(t *testing.T, ctx context.Context, pool *pgxpool.Pool, schema string) map[deadKey]int64 {
	t.Helper()
	return readCounts(t, ctx, pool, fmt.Sprintf(`
SELECT queue, handler, last_error_type, last_error_fingerprint, count(*)
FROM %s.tasks
WHERE status = 'DEAD'
GROUP BY queue, handler, last_error_type, last_error_fingerprint`, pgx.Identifier{schema}.Sanitize()))
}

func readCounts(t *testing.T, ctx context.Context, pool *pgxpool.Pool, sql string) map[deadKey]int64 {
	t.Helper()
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[deadKey]int64{}
	for rows.Next() {
		var k deadKey
		var n int64
		if err := rows.Scan(&k.queue, &k.handler, &k.errorType, &k.fingerprint, &n); err != nil {
			t.Fatal(err)
		}
		if n < 0 {
			t.Fatalf("dead_counts sums to %d for %+v", n, k)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSummary fails the test unless dead_counts agrees with a brute-force
// count of the dead tasks, and CountDead, DeadGroups and Stats, which read
// the summary, agree with it too. It returns how many tasks are dead.
func checkSummary(t *testing.T, ctx context.Context, s *pgstore.Store, pool *pgxpool.Pool, schema, step string) int64 {
	t.Helper()
	got, want := summaryCounts(t, ctx, pool, schema), bruteCounts(t, ctx, pool, schema)
	if fmt.Sprint(sortedCounts(got)) != fmt.Sprint(sortedCounts(want)) {
		t.Fatalf("after %s: dead_counts\n  %v\nwant (GROUP BY over tasks)\n  %v", step, sortedCounts(got), sortedCounts(want))
	}
	var total int64
	perQueue := map[string]int64{}
	perFingerprint := map[string]int64{}
	for k, n := range want {
		total += n
		perQueue[k.queue] += n
		perFingerprint[k.fingerprint] += n
	}
	if n, err := s.CountDead(ctx, store.DeadFilter{}); err != nil || n != total {
		t.Fatalf("after %s: CountDead() = %d, %v; want %d", step, n, err, total)
	}
	for k, n := range want {
		f := store.DeadFilter{Queue: k.queue, Handler: k.handler, ErrorType: k.errorType, Fingerprint: k.fingerprint}
		if got, err := s.CountDead(ctx, f); err != nil || got != n {
			t.Fatalf("after %s: CountDead(%+v) = %d, %v; want %d", step, f, got, err, n)
		}
	}
	for q, n := range perQueue {
		if got, err := s.CountDead(ctx, store.DeadFilter{Queue: q}); err != nil || got != n {
			t.Fatalf("after %s: CountDead(queue %s) = %d, %v; want %d", step, q, got, err, n)
		}
	}
	groups, err := s.DeadGroups(ctx, store.DeadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != len(perFingerprint) {
		t.Fatalf("after %s: %d groups, want %d", step, len(groups), len(perFingerprint))
	}
	for _, g := range groups {
		if g.Count != perFingerprint[g.Fingerprint] {
			t.Fatalf("after %s: group %s counts %d, want %d", step, g.Fingerprint, g.Count, perFingerprint[g.Fingerprint])
		}
	}
	stats, err := s.Stats(ctx, store.StatsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, qs := range stats {
		if qs.Dead != perQueue[qs.Queue] {
			t.Fatalf("after %s: Stats says queue %s has %d dead, want %d", step, qs.Queue, qs.Dead, perQueue[qs.Queue])
		}
		delete(perQueue, qs.Queue)
	}
	if len(perQueue) > 0 {
		t.Fatalf("after %s: Stats misses the queues of dead tasks %v", step, perQueue)
	}
	return total
}

func sortedCounts(m map[deadKey]int64) []string {
	out := make([]string, 0, len(m))
	for k, n := range m {
		out = append(out, fmt.Sprintf("%s/%s/%s/%s=%d", k.queue, k.handler, k.errorType, k.fingerprint, n))
	}
	sort.Strings(out)
	return out
}

// killTasks enqueues n tasks per (queue, handler), claims them and
// finishes them DEAD in one Finish batch per queue, cycling through
// failure messages of different fingerprints, dead at now.
func killTasks(t *testing.T, s *pgstore.Store, now time.Time, queues, handlers []string, n int, msgs ...string) []rdq.ID {
	t.Helper()
	var dead []rdq.ID
	for _, q := range queues {
		var tasks []store.NewTask
		for _, h := range handlers {
			for range n {
				nt := newTask(q)
				nt.Handler = h
				tasks = append(tasks, nt)
			}
		}
		enqueue(t, s, at(now), tasks...)
		claimed := claim(t, s, at(now), q, len(tasks))
		if len(claimed) != len(tasks) {
			t.Fatalf("claimed %d of %d", len(claimed), len(tasks))
		}
		cs := make([]store.Completion, len(claimed))
		for i, c := range claimed {
			cs[i] = store.Completion{Lease: lease(c), Status: rdq.StatusDead,
				Attempt: attempt(rdq.OutcomePermanentFailure, msgs[i%len(msgs)])}
			dead = append(dead, c.ID)
		}
		for i, err := range finish(t, s, at(now), cs...) {
			if err != nil {
				t.Fatalf("completion %d: %v", i, err)
			}
		}
	}
	return dead
}

// TestDeadCountsFollowEveryTransition drives tasks into and out of DEAD by
// every path the store has and checks after each step that the dead_counts
// summary equals a GROUP BY over the dead tasks.
func TestDeadCountsFollowEveryTransition(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	check := func(step string) int64 { return checkSummary(t, ctx, s, pool, schema, step) }

	if n := check("migration"); n != 0 {
		t.Fatalf("%d dead tasks in a new schema", n)
	}

	// Finish with DEAD, in batches that mix DEAD with retries and
	// successes, and several batches over the same keys.
	queues, handlers := []string{"q1", "q2"}, []string{"ha", "hb"}
	killTasks(t, s, base, queues, handlers, 3, "Order 1 not found", "connection refused to 10.0.0.1", "Order 2 not found")
	check("finish dead")
	killTasks(t, s, base.Add(time.Minute), queues, handlers[:1], 2, "disk full")
	check("finish dead, same keys again")
	mixed := []store.NewTask{newTask("q1"), newTask("q1"), newTask("q1")}
	enqueue(t, s, at(base.Add(2*time.Minute)), mixed...)
	c := claim(t, s, at(base.Add(2*time.Minute)), "q1", 3)
	if len(c) != 3 {
		t.Fatalf("claimed %d", len(c))
	}
	errs := finish(t, s, at(base.Add(2*time.Minute)),
		store.Completion{Lease: lease(c[0]), Status: rdq.StatusSucceeded, Attempt: attempt(rdq.OutcomeSuccess, "")},
		store.Completion{Lease: lease(c[1]), Status: rdq.StatusPending, RetryIn: time.Hour, Attempt: attempt(rdq.OutcomeRetryableFailure, "Order 1 not found")},
		store.Completion{Lease: lease(c[2]), Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, "Order 1 not found")},
		// A stale repeat of a lease changes nothing, the summary included.
		store.Completion{Lease: lease(c[2]), Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, "Order 1 not found")})
	for i, err := range errs[:3] {
		if err != nil {
			t.Fatalf("completion %d: %v", i, err)
		}
	}
	check("finish mixed batch")

	// A permanent first failure enqueues a task straight into DEAD, beside
	// a pending one in the same batch.
	born := newTask("q2")
	born.FirstFailure = attempt(rdq.OutcomePermanentFailure, "payload is not valid JSON")
	enqueue(t, s, at(base.Add(2*time.Minute)), born, newTask("q2"))
	check("enqueue with a permanent first failure")

	// A lease expires; the reclaimer finishes the task DEAD without an
	// attempt, under the lease-expired failure.
	nt := newTask("q2")
	enqueue(t, s, at(base.Add(3*time.Minute)), nt)
	if got := claim(t, s, at(base.Add(3*time.Minute)), "q2", 1); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	reclaimed, err := s.ReclaimExpired(ctx, store.ReclaimParams{Limit: 10, Lease: time.Minute, WorkerID: "w2", Now: at(base.Add(5 * time.Minute))})
	if err != nil || len(reclaimed) != 1 {
		t.Fatalf("reclaimed %d, %v", len(reclaimed), err)
	}
	if errs := finish(t, s, at(base.Add(5*time.Minute)), store.Completion{Lease: lease(reclaimed[0]), Status: rdq.StatusDead}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	check("reclaim then dead")

	// Redrive by IDs: a plain redrive of several, a payload edit, and IDs
	// that are not dead (which change nothing).
	dead := listAll(t, s, store.DeadFilter{Queue: "q1", Handler: "ha"}, 100)
	byIDs := []rdq.ID{dead[0].ID, dead[1].ID, dead[2].ID, mixed[0].ID, mixed[1].ID}
	if _, err := s.Redrive(ctx, store.RedriveParams{IDs: byIDs, Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	check("redrive by ids")
	if _, err := s.Redrive(ctx, store.RedriveParams{IDs: []rdq.ID{dead[3].ID}, Payload: []byte(`{"n":2}`), Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	check("redrive with a payload edit")

	// The redriven tasks die again in their second life, under another
	// failure.
	for _, q := range queues {
		again := claim(t, s, at(time.Now().Add(time.Hour)), q, 10)
		cs := make([]store.Completion, len(again))
		for i, a := range again {
			cs[i] = store.Completion{Lease: lease(a), Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, "second life failure")}
		}
		if len(cs) > 0 {
			finish(t, s, nil, cs...)
		}
	}
	check("dead again after redrive")

	// Redrive by filter, a chunk at a time, with and without a life limit.
	for i := 0; ; i++ {
		res, err := s.RedriveDead(ctx, store.RedriveDeadParams{Filter: store.DeadFilter{Queue: "q1", Handler: "ha"}, Limit: 2, MaxLife: 1, Actor: "t"})
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("redrive by filter, chunk %d", i))
		if res.Redriven == 0 {
			if res.AtLimit == 0 {
				t.Fatal("no task of q1/ha was kept dead by the life limit")
			}
			break
		}
	}
	if _, err := s.RedriveDead(ctx, store.RedriveDeadParams{Filter: store.DeadFilter{ErrorType: failure("disk full").Type}, Limit: 100, Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	check("redrive by error type")

	// Purge by filter, a chunk at a time.
	fp := failure("Order 1 not found").Fingerprint
	for i := 0; ; i++ {
		n, err := s.PurgeDead(ctx, store.PurgeDeadParams{Filter: store.DeadFilter{Fingerprint: fp}, Limit: 2, Actor: "t"})
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("purge by fingerprint, chunk %d", i))
		if n == 0 {
			break
		}
	}

	// Retention: the tasks dead before base+4m go, the later ones stay.
	if _, err := s.PurgeDead(ctx, store.PurgeDeadParams{Filter: store.DeadFilter{DeadBefore: base.Add(4 * time.Minute)},
		Limit: 1000, Action: pgstore.ActionRetention, Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	if n := check("retention"); n == 0 {
		t.Fatal("retention removed every dead task; the test wants some left")
	}

	// A dead task written behind the store's back is missing from the
	// summary until RecountDead.
	hand := newTask("q3")
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
INSERT INTO %s.tasks (id, queue, handler, payload, status, next_attempt_at, created_at, updated_at,
                      finished_at, last_error_type, last_error_message, last_error_fingerprint)
VALUES ($1, 'q3', 'h', '\x00', 'DEAD', now(), now(), now(), now(), 'manual', 'by hand', 'fp-hand')`,
		pgx.Identifier{schema}.Sanitize()), [16]byte(hand.ID)); err != nil {
		t.Fatal(err)
	}
	if got, want := summaryCounts(t, ctx, pool, schema), bruteCounts(t, ctx, pool, schema); len(got) == len(want) {
		t.Fatalf("the summary already counts a task inserted by hand: %v", sortedCounts(got))
	}
	if err := s.RecountDead(ctx); err != nil {
		t.Fatal(err)
	}
	check("recount")

	// Purging everything leaves nothing counted.
	if _, err := s.PurgeDead(ctx, store.PurgeDeadParams{Limit: 1000, Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	if n := check("purge all"); n != 0 {
		t.Fatalf("%d dead after purging all", n)
	}
	if groups, err := s.DeadGroups(ctx, store.DeadFilter{Queue: "q1"}); err != nil || len(groups) != 0 {
		t.Fatalf("DeadGroups after purging all: %v, %v", groups, err)
	}
}

// TestDeadCountsUnderConcurrentTransitions finishes batches of tasks DEAD
// from several goroutines at once, over the same failure kinds, while
// others redrive and purge, and checks that no statement fails (no
// deadlock on the summary rows) and the summary ends exact.
func TestDeadCountsUnderConcurrentTransitions(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	const (
		killers = 3
		rounds  = 4
		batch   = 12
	)
	queues := []string{"c1", "c2"}
	var wg sync.WaitGroup
	errc := make(chan error, killers+2)
	for w := range killers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := queues[w%len(queues)]
			for r := range rounds {
				tasks := make([]store.NewTask, batch)
				for i := range tasks {
					tasks[i] = newTask(q)
					tasks[i].Handler = fmt.Sprintf("h%d", i%3)
				}
				if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: tasks}); err != nil {
					errc <- err
					return
				}
				claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{q}, Limit: batch, Lease: time.Minute, WorkerID: fmt.Sprintf("w%d", w)})
				if err != nil {
					errc <- err
					return
				}
				cs := make([]store.Completion, len(claimed))
				for i, c := range claimed {
					// Keys in a different order in each batch.
					msg := fmt.Sprintf("failure %d", (i+r+w)%4)
					cs[i] = store.Completion{Lease: lease(c), Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, msg)}
				}
				if _, err := s.Finish(ctx, store.FinishParams{Completions: cs}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range rounds * 2 {
			if _, err := s.RedriveDead(ctx, store.RedriveDeadParams{Filter: store.DeadFilter{Queue: "c1"}, Limit: 5, Delay: time.Hour}); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range rounds * 2 {
			if _, err := s.PurgeDead(ctx, store.PurgeDeadParams{Filter: store.DeadFilter{Queue: "c2"}, Limit: 5}); err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if n := checkSummary(t, ctx, s, pool, schema, "concurrent transitions"); n == 0 {
		t.Fatal("no task left dead; the test wants some")
	}
	var shards int
	if err := pool.QueryRow(ctx, fmt.Sprintf("SELECT count(DISTINCT shard) FROM %s.dead_counts", pgx.Identifier{schema}.Sanitize())).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	if shards < 2 {
		t.Errorf("every statement counted into one shard (%d distinct)", shards)
	}
}
