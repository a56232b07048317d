package pgstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// TestLiveQueriesUseIndexes checks with EXPLAIN that every live-task
// listing, first page and next, reads the index sql.go names for it in
// order (no whole-table scan, no sort of the state's tasks), with custom
// and generic plans.
func TestLiveQueriesUseIndexes(t *testing.T) {
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
	// Some retrying and in-flight tasks among the pending ones, and keys.
	for _, q := range []string{
		`UPDATE %[1]s.tasks SET attempts = 1 WHERE status = 'PENDING' AND get_byte(uuid_send(id), 0) < 64`,
		`UPDATE %[1]s.tasks SET status = 'IN_FLIGHT', lease_expires_at = now() + (get_byte(uuid_send(id), 1) * interval '1 second')
		 WHERE status = 'PENDING' AND get_byte(uuid_send(id), 0) > 200`,
		`UPDATE %[1]s.tasks SET idempotency_key = 'k' || get_byte(uuid_send(id), 2) || '-' || id WHERE get_byte(uuid_send(id), 3) < 128`,
		`INSERT INTO %[1]s.idempotency_keys (queue, key, task_id, created_at, purged_at)
		 SELECT t.queue, t.idempotency_key, t.id, t.created_at, CASE WHEN get_byte(uuid_send(t.id), 4) < 8 THEN now() END
		 FROM %[1]s.tasks t WHERE t.idempotency_key IS NOT NULL`,
		`ANALYZE %[1]s.tasks`,
		`ANALYZE %[1]s.idempotency_keys`,
	} {
		if _, err := conn.Exec(ctx, fmt.Sprintf(q, schema)); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now()
	id := rdq.MustParseID("80000000-0000-7000-8000-000000000000")
	type query struct {
		name  string
		sql   string
		args  []any
		index string // the index the plan must read
		// ordered: the plan must walk the index in order and stop at
		// the page size. With a selective filter the planner may rather
		// collect the state's matching rows from the same index and
		// sort them, which is its call to make.
		ordered bool
		// perQueue: the plan must find the queues by skipping through
		// the index and read a bounded range of each queue.
		perQueue bool
	}
	var queries []query
	for _, c := range []struct {
		state store.TaskState
		f     store.TaskFilter
		index string
	}{
		{store.StatePending, store.TaskFilter{}, "tasks_claim_idx"},
		{store.StatePending, store.TaskFilter{Queue: "q3"}, "tasks_claim_idx"},
		{store.StatePending, store.TaskFilter{Handler: "h2"}, "tasks_claim_idx"},
		{store.StateRetrying, store.TaskFilter{}, "tasks_claim_idx"},
		{store.StateRetrying, store.TaskFilter{Queue: "q3"}, "tasks_claim_idx"},
		{store.StateInFlight, store.TaskFilter{}, "tasks_lease_expiry_idx"},
		{store.StateInFlight, store.TaskFilter{Queue: "q3"}, "tasks_lease_expiry_idx"},
		{store.StateSucceeded, store.TaskFilter{}, "tasks_succeeded_idx"},
		{store.StateSucceeded, store.TaskFilter{Queue: "q3", MessageContains: "number"}, "tasks_succeeded_idx"},
	} {
		for _, after := range []*store.TaskCursor{nil, {At: at, ID: id}} {
			name := fmt.Sprintf("list %s %+v", c.state, c.f)
			if after != nil {
				name += ", next page"
			}
			sql, args := pgstore.ListTasksQuery(s, store.ListTasksParams{State: c.state, Filter: c.f, After: after, Limit: 50})
			// The waiting states of every queue merge one ordered
			// range per queue (sqlListTasksWaiting): a sort of at most
			// limit rows per queue.
			perQueue := (c.state == store.StatePending || c.state == store.StateRetrying) && c.f.Queue == ""
			ordered := after == nil && c.f.Handler == "" && c.f.Queue == "" && c.f.MessageContains == "" && !perQueue
			queries = append(queries, query{name, sql, args, c.index, ordered, perQueue})
		}
	}
	sql, args := pgstore.TaskByKeyQuery(s)
	queries = append(queries, query{"task by key", sql, args, "tasks_idempotency_key_idx", false, false})
	lookup, lookupArgs, prune, pruneArgs := pgstore.KeyQueries(s)
	queries = append(queries,
		query{"purged key lookup", lookup, lookupArgs, "idempotency_keys_pkey", false, false},
		query{"prune keys", prune, pruneArgs, "idempotency_keys_purged_idx", false, false})
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, q := range queries {
			plan := explain(t, ctx, conn.Conn(), mode, q.sql, q.args)
			if !strings.Contains(plan, " "+q.index) {
				t.Errorf("%s (%s): plan does not read %s:\n%s", q.name, mode, q.index, plan)
			}
			if strings.Contains(plan, "Seq Scan on tasks") {
				t.Errorf("%s (%s): plan scans the whole table:\n%s", q.name, mode, plan)
			}
			walks := strings.Contains(plan, "Scan using "+q.index) || strings.Contains(plan, "Scan Backward using "+q.index)
			if q.ordered && (!walks || strings.Contains(plan, "Sort")) {
				t.Errorf("%s (%s): plan does not walk %s in order:\n%s", q.name, mode, q.index, plan)
			}
			if q.perQueue && (!strings.Contains(plan, "Recursive Union") || !strings.Contains(plan, "Index Cond: ((queue = ")) {
				t.Errorf("%s (%s): plan does not read %s one queue at a time:\n%s", q.name, mode, q.index, plan)
			}
		}
	}
}
