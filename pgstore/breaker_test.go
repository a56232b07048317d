package pgstore_test

import (
	"fmt"
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
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+sql, args...)
	if err != nil {
		t.Fatalf("EXPLAIN ANALYZE: %v\n%s", err, sql)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
