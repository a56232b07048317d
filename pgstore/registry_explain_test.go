package pgstore_test

import (
	"strings"
	"testing"

	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
)

// TestRegistryQueriesUseTheClaimIndex checks with EXPLAIN that a worker's
// look for unserved tasks and the dead-lettering of them read the range of
// due tasks of their queues in tasks_claim_idx, with custom and generic
// plans: never every pending task.
func TestRegistryQueriesUseTheClaimIndex(t *testing.T) {
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
	for _, q := range []struct {
		name string
		sql  string
		args []any
	}{
		{"unserved due", pgstore.UnservedDueQuery(s), []any{[]string{"q3", "q4"}, nil}},
		{"dead-letter unserved", pgstore.DeadLetterUnservedQuery(s), []any{"q3", "h3", nil, int64(60_000_000), 100,
			"unserved_handler", "m", "f", "w", `{"queue":"q3","handler":"h3"}`}},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan := explain(t, ctx, conn.Conn(), mode, q.sql, q.args)
			if !strings.Contains(plan, "tasks_claim_idx") || strings.Contains(plan, "Seq Scan on tasks") {
				t.Errorf("%s (%s) is not served by tasks_claim_idx:\n%s", q.name, mode, plan)
			}
		}
	}
}
