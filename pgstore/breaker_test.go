package pgstore_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// TestClaimSkipsPausedHandlerThroughIndex checks that a paused handler's
// waiting tasks cost a claim nothing: with 5,000 of them due before the
// queue's other tasks, the claim reads tasks_claim_idx and no row of the
// paused handler (EXPLAIN ANALYZE shows no row removed by a filter), and
// the probe reads tasks_held_idx.
func TestClaimSkipsPausedHandlerThroughIndex(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	past := time.Now().Add(-time.Hour)
	var down []store.NewTask
	for range 5000 {
		down = append(down, store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "down", Payload: []byte("{}")})
	}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: down, Now: &past}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PauseHandler(ctx, store.PauseHandlerParams{Queue: "q", Handler: "down", CoolOff: time.Minute, Actor: "breaker"}); err != nil {
		t.Fatal(err)
	}
	var up []store.NewTask
	for range 20 {
		up = append(up, store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "up", Payload: []byte("{}")})
	}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: up}); err != nil {
		t.Fatal(err)
	}
	pool := pgtest.Pool(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, "tasks"}.Sanitize()); err != nil {
		t.Fatal(err)
	}

	claimSQL, claimArgs := pgstore.ClaimQuery(s, []string{"q"}, 10)
	plan := explainAnalyze(t, conn.Conn(), claimSQL, claimArgs)
	if !strings.Contains(plan, "Index Scan using tasks_claim_idx") {
		t.Errorf("claim does not read tasks_claim_idx:\n%s", plan)
	}
	removed := regexp.MustCompile(`Rows Removed by Filter: (\d+)`)
	for _, m := range removed.FindAllStringSubmatch(plan, -1) {
		if n, _ := strconv.Atoi(m[1]); n > 0 {
			t.Errorf("claim read and dropped %d rows (of the paused handler):\n%s", n, plan)
		}
	}
	// The claim index yields the running handler's ten tasks and nothing
	// else: the paused handler's 5,000 are not in it.
	read := regexp.MustCompile(`Index Scan using tasks_claim_idx on tasks \S+ \(actual [^)]*rows=(\d+) loops=1\)`).FindStringSubmatch(plan)
	if read == nil {
		t.Errorf("no row count for tasks_claim_idx in the plan:\n%s", plan)
	} else if n, _ := strconv.Atoi(read[1]); n != 10 {
		t.Errorf("claim read %d rows from tasks_claim_idx for 10 tasks:\n%s", n, plan)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		probeSQL, probeArgs := pgstore.ClaimProbeQuery(s, []string{"q"})
		plan := explain(t, ctx, conn.Conn(), mode, probeSQL, probeArgs)
		if !strings.Contains(plan, "tasks_held_idx") || !strings.Contains(plan, "paused_handlers_pkey") && !strings.Contains(plan, "on paused_handlers") {
			t.Errorf("claim probe (%s) does not read tasks_held_idx and paused_handlers:\n%s", mode, plan)
		}
		if strings.Contains(plan, "Seq Scan on tasks") {
			t.Errorf("claim probe (%s) scans the tasks table:\n%s", mode, plan)
		}
		plan = explain(t, ctx, conn.Conn(), mode, claimSQL, claimArgs)
		if !strings.Contains(plan, "tasks_claim_idx") || strings.Contains(plan, "Seq Scan on tasks") {
			t.Errorf("claim (%s) does not read tasks_claim_idx alone:\n%s", mode, plan)
		}
	}
}

// explainAnalyze runs sql under EXPLAIN ANALYZE in a transaction it rolls
// back, and returns the plan with actual row counts.
func explainAnalyze(t *testing.T, conn *pgx.Conn, sql string, args []any) string {
	t.Helper()
	ctx := ctxT(t)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Error(err)
		}
	}()
	plan, err := planText(tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+sql, args...))
	if err != nil {
		t.Fatalf("EXPLAIN ANALYZE: %v\n%s", err, sql)
	}
	return plan
}

// TestClaimProbeWithWritersOfThePausedHandler checks two interleavings of
// a probe with transactions that write tasks of the paused handler under
// READ COMMITTED:
//   - a task enqueued by a transaction that began before the pause and
//     committed after it is not held (neither statement saw the other's
//     row); claims skip it, and it must still be a probe candidate, or a
//     handler whose only waiting task it is would stay paused for good;
//   - an open transaction enqueueing a task of the paused handler holds
//     the pause row FOR KEY SHARE; it must not keep the probe out, or a
//     steady stream of enqueues would starve the probe.
func TestClaimProbeWithWritersOfThePausedHandler(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, _ := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	mk := func() store.NewTask {
		return store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "down", Payload: []byte("{}")}
	}
	pauseAt := time.Now().Add(-time.Hour)
	probeAt := time.Now().Add(time.Hour)

	// The only waiting task is written concurrently with the pause.
	stray := mk()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := s.WithTx(tx).Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{stray}}); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.PauseHandler(ctx, store.PauseHandlerParams{Queue: "q", Handler: "down", CoolOff: time.Minute, Actor: "breaker", Now: &pauseAt}); err != nil || !changed {
		t.Fatalf("PauseHandler = %v, %v; want true, nil", changed, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 10, Lease: time.Minute, WorkerID: "w", Now: &probeAt}); err != nil || len(got) != 0 {
		t.Fatalf("Claim with the handler paused = %d tasks, %v; want none", len(got), err)
	}
	probes, err := s.ClaimProbe(ctx, store.ProbeParams{Queues: []string{"q"}, Lease: time.Minute, WorkerID: "w", Now: &probeAt})
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 1 || probes[0].Task.ID != stray.ID {
		t.Fatalf("ClaimProbe with the only waiting task written during the pause = %d probes, want that task", len(probes))
	}
	if _, err := s.PauseHandler(ctx, store.PauseHandlerParams{Queue: "q", Handler: "down", CoolOff: time.Minute, Probe: ptr(probes[0].Pause.Probe), Actor: "breaker", Now: &probeAt}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, store.ReleaseParams{Leases: []store.Lease{probes[0].Pause.Probe}, Now: &probeAt}); err != nil {
		t.Fatal(err)
	}

	// An enqueue of the paused handler is open while the probe is due.
	later := probeAt.Add(time.Hour)
	writer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Rollback(ctx) }()
	if _, err := s.WithTx(writer).Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{mk()}}); err != nil {
		t.Fatal(err)
	}
	probes, err = s.ClaimProbe(ctx, store.ProbeParams{Queues: []string{"q"}, Lease: time.Minute, WorkerID: "w", Now: &later})
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 1 || probes[0].Task.ID != stray.ID {
		t.Fatalf("ClaimProbe while an enqueue of the paused handler is open = %d probes, want the waiting task", len(probes))
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
