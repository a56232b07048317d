package pgstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// TestSeriesQueriesUseIndexes checks with EXPLAIN ANALYZE that the
// statements of a Series call, planned for their arguments as Series runs
// them, read the history through attempts_finished_idx, never the
// attempts whole, and are not compiled by JIT, with nothing rolled up yet
// (the most they do).
func TestSeriesQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	now := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	// 20 dead tasks a minute over the last day, one attempt each.
	for _, q := range []string{`
INSERT INTO %[1]s.tasks (id, queue, handler, payload, status, attempts, last_attempt_number,
                         next_attempt_at, created_at, updated_at, finished_at)
SELECT md5('explain' || i)::uuid, 'q' || (i %% 10), 'h' || (i %% 4), '{}'::bytea, 'DEAD', 1, 1, g.at, g.at, g.at, g.at
FROM generate_series(0, 28799) AS i
CROSS JOIN LATERAL (SELECT $1::timestamptz - i * interval '3 seconds' AS at) AS g`, `
INSERT INTO %[1]s.attempts (task_id, number, life, outcome, error_type, message, worker_id, started_at, finished_at)
SELECT t.id, 1, 0, 'PERMANENT_FAILURE', 'e', 'failed', 'w', t.finished_at, t.finished_at FROM %[1]s.tasks AS t`,
		`ANALYZE %[1]s.tasks, %[1]s.attempts`} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{now}
		}
		if _, err := pool.Exec(ctx, fmt.Sprintf(q, schema), args...); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, p := range []store.SeriesParams{{Width: time.Minute, Buckets: 60}, {Width: time.Hour, Buckets: 24}} {
		for _, st := range pgstore.SeriesStatements(s, p, now) {
			plan := explainAnalyze(t, conn.Conn(), st.SQL, st.Args)
			what := fmt.Sprintf("%s of %d × %s", st.Name, p.Buckets, p.Width)
			// The tasks of the attempts read may be hashed whole at
			// this size; at a million they are looked up by key.
			if strings.Contains(plan, "Seq Scan on attempts") {
				t.Errorf("%s reads the attempts whole:\n%s", what, plan)
			}
			if (st.Name == "read" || st.Name == "rollup") && !strings.Contains(plan, "attempts_finished_idx") {
				t.Errorf("%s does not read the history through attempts_finished_idx:\n%s", what, plan)
			}
			if strings.Contains(plan, "JIT:") {
				t.Errorf("%s is compiled by JIT:\n%s", what, plan)
			}
		}
	}
}
