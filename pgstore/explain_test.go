package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// seedPlanData fills the schema with enough tasks, spread over statuses,
// queues, handlers and errors, for the planner's choices to mean something,
// and refreshes the statistics.
func seedPlanData(t *testing.T, ctx context.Context, conn *pgx.Conn, schema string) {
	t.Helper()
	seed := fmt.Sprintf(`
INSERT INTO %[1]s.tasks (id, queue, handler, payload, status, next_attempt_at, created_at, updated_at,
                         finished_at, lease_expires_at, last_error_type, last_error_message, last_error_fingerprint)
SELECT md5(i::text)::uuid,
       'q' || (i %% 40), 'h' || (i %% 30), '\x00'::bytea,
       CASE WHEN i %% 10 < 7 THEN 'DEAD' WHEN i %% 10 < 9 THEN 'PENDING' ELSE 'SUCCEEDED' END,
       now() - (i %% 100) * interval '1 second', now(), now(),
       CASE WHEN i %% 10 < 7 OR i %% 10 = 9 THEN now() - random() * interval '30 days' END,
       NULL,
       'e' || (i %% 25), 'error number ' || i, 'f' || (i %% 100)
FROM generate_series(1, 30000) AS i`, schema)
	if _, err := conn.Exec(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ANALYZE %s.tasks", schema)); err != nil {
		t.Fatal(err)
	}
}

// TestQueriesUseIndexes checks with EXPLAIN that the hot and the browsing
// queries are served by their indexes, both with custom plans and with the
// generic plans PostgreSQL switches to for prepared statements.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	seedPlanData(t, ctx, conn.Conn(), schema)
	// The seed wrote the tasks directly: count them into dead_counts.
	if err := s.RecountDead(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ANALYZE %s.dead_counts", schema)); err != nil {
		t.Fatal(err)
	}

	cursor := &store.Cursor{FinishedAt: time.Now().Add(-time.Hour), ID: rdq.MustParseID("80000000-0000-7000-8000-000000000000")}
	claimSQL, claimArgs := pgstore.ClaimQuery(s, []string{"q3"}, 10)
	claimsSQL, claimsArgs := pgstore.ClaimQuery(s, []string{"q3", "q4"}, 10)
	reclaimSQL, reclaimArgs := pgstore.ReclaimQuery(s, 10)
	claimHandlersSQL, claimHandlersArgs := pgstore.ClaimHandlersQuery(s, []string{"q3"}, []string{"h3", "h4"}, 10)
	claimsHandlersSQL, claimsHandlersArgs := pgstore.ClaimHandlersQuery(s, []string{"q3", "q4"}, []string{"h3", "h4"}, 10)
	type query struct {
		name  string
		sql   string
		args  []any
		index string // the index the plan must use; alternatives separated by |
	}
	queries := []query{
		// An ordered index range per queue: not a bitmap scan, which
		// would read and sort every due task of the queue.
		{"claim", claimSQL, claimArgs, "Index Scan using tasks_claim_idx"},
		{"claim of two queues", claimsSQL, claimsArgs, "Index Scan using tasks_claim_idx"},
		{"reclaim", reclaimSQL, reclaimArgs, "Index Scan using tasks_lease_expiry_idx"},
		// The same ranges, the handlers a filter on their rows. A custom
		// plan that expects the filter to keep few rows (the seed spreads
		// each queue over 30 handlers) may read the range as a bitmap;
		// TestHotPlansHoldInEveryStatisticsState checks that a drain's
		// range is walked in order.
		{"claim of a worker's handlers", claimHandlersSQL, claimHandlersArgs, " tasks_claim_idx"},
		{"claim of two queues and a worker's handlers", claimsHandlersSQL, claimsHandlersArgs, " tasks_claim_idx"},
	}
	finishSQL, finishArgs := pgstore.FinishQuery(s, 200)
	heartbeatSQL, heartbeatArgs := pgstore.HeartbeatQuery(s, 200)
	releaseSQL, releaseArgs := pgstore.ReleaseQuery(s, 200)
	retrySQL, retryArgs := pgstore.RetryInPlaceQuery(s, 200)
	queries = append(queries,
		// By ID only. The seed has no task in flight when it is analyzed,
		// so a plan that may use tasks_lease_expiry_idx believes it tiny
		// and loops over it once per lease: every task in flight, read for
		// every completion.
		query{"finish", finishSQL, finishArgs, "tasks_pkey"},
		query{"heartbeat", heartbeatSQL, heartbeatArgs, "tasks_pkey"},
		query{"release", releaseSQL, releaseArgs, "tasks_pkey"},
		query{"retry in place", retrySQL, retryArgs, "tasks_pkey"})
	byID := map[string]string{"finish": "tasks_lease_expiry_idx", "heartbeat": "tasks_lease_expiry_idx",
		"release": "tasks_lease_expiry_idx", "retry in place": "tasks_lease_expiry_idx"}
	purgeSQL, purgeArgs := pgstore.PurgeSucceededQuery(s, 1000)
	queries = append(queries, query{"purge succeeded", purgeSQL, purgeArgs, "tasks_succeeded_idx"})
	for _, f := range []struct {
		name  string
		f     store.DeadFilter
		index string
	}{
		{"redrive dead by queue", store.DeadFilter{Queue: "q3"}, "tasks_dead_queue_idx"},
		{"redrive dead by fingerprint", store.DeadFilter{Fingerprint: "f7"}, "tasks_dead_fingerprint_idx"},
	} {
		sql, args := pgstore.RedriveDeadQuery(s, store.RedriveDeadParams{Filter: f.f, Limit: 1000, MaxLife: 3})
		queries = append(queries, query{f.name, sql, args, f.index})
		sql, args = pgstore.PurgeDeadQuery(s, store.PurgeDeadParams{Filter: f.f, Limit: 1000})
		queries = append(queries, query{strings.Replace(f.name, "redrive", "purge", 1), sql, args, f.index})
	}
	dead := []struct {
		name  string
		p     store.ListDeadParams
		index string
	}{
		{"list dead", store.ListDeadParams{Limit: 50}, "tasks_dead_idx"},
		{"list dead, next page", store.ListDeadParams{Limit: 50, After: cursor}, "tasks_dead_idx"},
		{"list dead by time", store.ListDeadParams{Limit: 50, Filter: store.DeadFilter{DeadBefore: time.Now().Add(-time.Hour)}}, "tasks_dead_idx"},
		{"list dead by queue", store.ListDeadParams{Limit: 50, Filter: store.DeadFilter{Queue: "q3"}}, "tasks_dead_queue_idx"},
		{"list dead by queue, next page", store.ListDeadParams{Limit: 50, After: cursor, Filter: store.DeadFilter{Queue: "q3"}}, "tasks_dead_queue_idx"},
		{"list dead by handler", store.ListDeadParams{Limit: 50, Filter: store.DeadFilter{Handler: "h2"}}, "tasks_dead_handler_idx"},
		{"list dead by error type", store.ListDeadParams{Limit: 50, Filter: store.DeadFilter{ErrorType: "e1"}}, "tasks_dead_error_type_idx"},
		{"list dead by fingerprint", store.ListDeadParams{Limit: 50, Filter: store.DeadFilter{Fingerprint: "f7"}}, "tasks_dead_fingerprint_idx"},
		{"list dead by message", store.ListDeadParams{Limit: 50, Filter: store.DeadFilter{MessageContains: "number 1"}}, "tasks_dead_idx"},
	}
	for _, d := range dead {
		sql, args := pgstore.ListDeadQuery(s, d.p)
		queries = append(queries, query{d.name, sql, args, d.index})
	}

	// Counting and grouping by queue, handler, error type and fingerprint
	// read the dead_counts summary, never the dead tasks as a whole; a
	// group's first, last and example come from LIMIT 1 probes of the
	// fingerprint index. With at most one filter field besides the
	// fingerprint the probes are ordered index scans that stop at the
	// first match, not a bitmap scan feeding a sort, which reads every
	// task of the fingerprint; with more the planner may expect so few
	// matches that it prefers the latter, still within one fingerprint.
	type summaryQuery struct {
		name  string
		sql   string
		args  []any
		probe bool // whether the plan must probe tasks_dead_fingerprint_idx
		walk  bool // whether the probes must be ordered index scans
	}
	var summary []summaryQuery
	for _, f := range []struct {
		name string
		f    store.DeadFilter
	}{
		{"all", store.DeadFilter{}},
		{"queue", store.DeadFilter{Queue: "q3"}},
		{"handler", store.DeadFilter{Handler: "h2"}},
		{"error type", store.DeadFilter{ErrorType: "e1"}},
		{"fingerprint", store.DeadFilter{Fingerprint: "f7"}},
		{"queue and fingerprint", store.DeadFilter{Queue: "q3", Fingerprint: "f3"}},
		{"queue and error type", store.DeadFilter{Queue: "q3", ErrorType: "e3"}},
	} {
		fields := 0
		for _, v := range []string{f.f.Queue, f.f.Handler, f.f.ErrorType} {
			if v != "" {
				fields++
			}
		}
		sql, args := pgstore.DeadGroupsQuery(s, f.f)
		summary = append(summary, summaryQuery{"dead groups by " + f.name, sql, args, true, fields <= 1})
		sql, args = pgstore.CountDeadQuery(s, f.f)
		summary = append(summary, summaryQuery{"count dead by " + f.name, sql, args, false, false})
	}
	// Stats sums dead_counts for its dead counts; the other statuses read
	// their own indexes.
	statsSQL, statsArgs := pgstore.StatsQuery(s)
	queries = append(queries, query{"stats", statsSQL, statsArgs, "on dead_counts"})
	// The other filters keep reading the tasks through their indexes.
	countByMessage, countByMessageArgs := pgstore.CountDeadQuery(s, store.DeadFilter{Fingerprint: "f7", MessageContains: "number 1"})
	queries = append(queries,
		query{"count dead by fingerprint and message", countByMessage, countByMessageArgs, "tasks_dead_fingerprint_idx"})

	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, q := range summary {
			plan := explain(t, ctx, conn.Conn(), mode, q.sql, q.args)
			if !strings.Contains(plan, " on dead_counts") {
				t.Errorf("%s (%s): plan does not read dead_counts:\n%s", q.name, mode, plan)
			}
			if q.probe && !strings.Contains(plan, "tasks_dead_fingerprint_idx") {
				t.Errorf("%s (%s): plan does not probe tasks_dead_fingerprint_idx:\n%s", q.name, mode, plan)
			}
			// "Index Scan" or "Index Only Scan", forward and backward.
			if q.walk && (!strings.Contains(plan, "Scan using tasks_dead_fingerprint_idx") ||
				!strings.Contains(plan, "Scan Backward using tasks_dead_fingerprint_idx") ||
				strings.Contains(plan, "Bitmap Heap Scan on tasks")) {
				t.Errorf("%s (%s): the probes are not ordered index scans from both ends:\n%s", q.name, mode, plan)
			}
			for _, bad := range []string{"Seq Scan on tasks", "tasks_dead_idx",
				"tasks_dead_queue_idx", "tasks_dead_handler_idx", "tasks_dead_error_type_idx"} {
				if strings.Contains(plan, bad) {
					t.Errorf("%s (%s): plan reads the dead tasks (%s):\n%s", q.name, mode, bad, plan)
				}
			}
			if !q.probe && strings.Contains(plan, "tasks_dead_fingerprint_idx") {
				t.Errorf("%s (%s): plan reads the dead tasks:\n%s", q.name, mode, plan)
			}
		}
		for _, q := range queries {
			plan := explain(t, ctx, conn.Conn(), mode, q.sql, q.args)
			if !containsAny(plan, strings.Split(q.index, "|")) {
				t.Errorf("%s (%s): plan does not use %s:\n%s", q.name, mode, q.index, plan)
			}
			if avoid := byID[q.name]; avoid != "" && strings.Contains(plan, avoid) {
				t.Errorf("%s (%s): plan reads %s instead of looking each task up by id:\n%s", q.name, mode, avoid, plan)
			}
			for _, table := range []string{"tasks", "attempts"} {
				if strings.Contains(plan, "Seq Scan on "+table) {
					t.Errorf("%s (%s): plan scans the whole %s table:\n%s", q.name, mode, table, plan)
				}
			}
		}
	}
}

// explain returns the plan of sql as text. With planCacheMode
// "force_generic_plan" it is the plan a prepared statement settles on
// after its first executions, which cannot depend on the parameter values.
func explain(t *testing.T, ctx context.Context, conn *pgx.Conn, planCacheMode, sql string, args []any) string {
	t.Helper()
	if _, err := conn.Exec(ctx, "SELECT set_config('plan_cache_mode', $1, false)", planCacheMode); err != nil {
		t.Fatal(err)
	}
	const name = "rdq_explain"
	if _, err := conn.Prepare(ctx, name, sql); err != nil {
		t.Fatalf("preparing: %v\n%s", err, sql)
	}
	defer func() {
		if err := conn.Deallocate(ctx, name); err != nil {
			t.Error(err)
		}
	}()
	// EXECUTE takes its arguments as SQL literals, which the simple
	// protocol renders; IDs travel in their text form.
	placeholders := make([]string, len(args))
	literalArgs := []any{pgx.QueryExecModeSimpleProtocol}
	for i, a := range args {
		placeholders[i] = fmt.Sprintf("$%d", i+1)
		switch v := a.(type) {
		case [16]byte:
			a = rdq.ID(v).String()
		case [][16]byte:
			texts := make([]string, len(v))
			for i, id := range v {
				texts[i] = rdq.ID(id).String()
			}
			a = texts
		}
		literalArgs = append(literalArgs, a)
	}
	execute := "EXPLAIN EXECUTE " + name
	if len(placeholders) > 0 {
		execute += "(" + strings.Join(placeholders, ", ") + ")"
	}
	plan, err := planText(conn.Query(ctx, execute, literalArgs...))
	if err != nil {
		t.Fatalf("EXPLAIN: %v\n%s", err, sql)
	}
	return plan
}

// planText reads the lines of an EXPLAIN's result.
func planText(rows pgx.Rows, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		b.WriteString(line + "\n")
	}
	return b.String(), rows.Err()
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestClaimKeepsOnePlan checks that PostgreSQL, left to choose (the default
// plan_cache_mode), settles on the generic plan of a worker's claim after
// its first executions instead of planning every claim afresh, whether it
// starts at the front of the queue or at a floor: the plan EXPLAIN EXECUTE
// shows then names the queue as a parameter.
func TestClaimKeepsOnePlan(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	conn, err := pgtest.Pool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	seedPlanData(t, ctx, conn.Conn(), schema)
	// The seed's q7 holds only pending tasks, due in the last 100 seconds.
	sql, floorArgs := pgstore.ClaimFromQuery(s, "q7", nil, 10, time.Now().Add(-time.Hour))
	const name = "rdq_claim"
	if _, err := conn.Conn().Prepare(ctx, name, sql); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Conn().Deallocate(ctx, name); err != nil {
			t.Error(err)
		}
	}()
	for _, from := range []any{nil, floorArgs[len(floorArgs)-1]} {
		args := append(slices.Clone(floorArgs[:len(floorArgs)-1]), from)
		plan, err := claimPlanAfterSix(ctx, conn.Conn(), name, args)
		if err != nil {
			t.Fatalf("floor %v: %v", from, err)
		}
		if !strings.Contains(plan, "(queue = $1)") {
			t.Fatalf("floor %v: after six claims the claim is still planned for its arguments:\n%s", from, plan)
		}
	}
}

// claimPlanAfterSix runs the prepared claim name six times with args in a
// transaction it rolls back, each taking 10 tasks, and returns the plan
// EXPLAIN EXECUTE shows then.
func claimPlanAfterSix(ctx context.Context, conn *pgx.Conn, name string, args []any) (plan string, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() {
		if rerr := tx.Rollback(ctx); err == nil {
			err = rerr
		}
	}()
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = auto"); err != nil {
		return "", err
	}
	for i := range 6 {
		tag, err := tx.Exec(ctx, name, args...)
		if err != nil {
			return "", err
		}
		if tag.RowsAffected() != 10 {
			return "", fmt.Errorf("claim %d took %d tasks, want 10", i+1, tag.RowsAffected())
		}
	}
	return planText(tx.Query(ctx, "EXPLAIN EXECUTE "+name+"($1, $2, $3, $4, $5, $6)",
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...))
}
