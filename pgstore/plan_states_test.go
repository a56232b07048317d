package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
)

// planState is a state of the tasks table and of its statistics that users
// meet: the statements of the hot path must be planned the same way in
// each.
type planState struct {
	name string
	// before is written, then the tables are analyzed if analyze is set,
	// then after is written: statistics describe the table as it was.
	before, after string
	analyze       bool
}

// planStates are the statistics states users meet, each with a drain
// under way (tasks pending and in flight) when the plans are made:
//   - fresh: never analyzed;
//   - quiet: analyzed with nothing pending or in flight (autovacuum at a
//     quiet moment, rdq bench's and the peer bench's -warm);
//   - busy: analyzed with thousands pending and in flight (-warm-busy);
//   - preloaded: analyzed with many succeeded and dead tasks (-preload).
var planStates = []planState{
	{"fresh", "", drain, false},
	{"small", "", smallDrain, false},
	{"small, analyzed", "", smallDrain, true},
	{"quiet", seedRows("SUCCEEDED", 5000), drain, true},
	{"busy", seedRows("SUCCEEDED", 10000) + seedRows("PENDING", 8000) + seedRows("IN_FLIGHT", 2000), drain, true},
	{"preloaded", seedRows("SUCCEEDED", 40000) + seedRows("DEAD", 40000), drain, true},
}

// drain is a drain under way: tasks waiting and in flight. With fewer
// than about 30,000 tasks, a custom plan of a 200-lease batch may read the
// table whole, which the estimates rightly say is cheaper there; the
// generic plan PostgreSQL caches after five runs probes in every state.
var drain = seedRows("PENDING", 40000) + seedRows("IN_FLIGHT", 2000)

// smallDrain is a drain on a table of a few hundred pages, where reading
// the table whole costs less, by the planner's estimates, than a probe per
// task of a batch: a statement that joins a batch to the tasks on their
// ctids then hashes the whole table.
var smallDrain = seedRows("PENDING", 20000) + seedRows("IN_FLIGHT", 400)

// seedRows inserts n tasks of status into queue q1 (handler h1), as the
// store would have written them.
func seedRows(status string, n int) string {
	return fmt.Sprintf(`
INSERT INTO {schema}.tasks (id, queue, handler, payload, status, attempts, last_attempt_number,
                            lease_token, next_attempt_at, created_at, updated_at, finished_at,
                            lease_expires_at, lease_owner, claimed_at)
SELECT gen_random_uuid(), 'q1', 'h1', '\x00'::bytea, '%[1]s', 1, 1, 1,
       now() - i * interval '1 millisecond', now(), now(),
       CASE WHEN '%[1]s' IN ('SUCCEEDED', 'DEAD') THEN now() END,
       CASE WHEN '%[1]s' = 'IN_FLIGHT' THEN now() + interval '1 minute' END,
       'w', now()
FROM generate_series(1, %[2]d) AS i;`, status, n)
}

// planShape is a plan's nodes without their estimates and conditions: what
// must not change between statistics states.
func planShape(plan string) string {
	var b strings.Builder
	for i, line := range strings.Split(plan, "\n") {
		if i == 0 || strings.Contains(line, "->") || strings.HasPrefix(strings.TrimSpace(line), "CTE ") ||
			strings.HasPrefix(strings.TrimSpace(line), "SubPlan") || strings.HasPrefix(strings.TrimSpace(line), "InitPlan") {
			line = planEstimates.ReplaceAllString(line, "")
			b.WriteString(planParams.ReplaceAllString(line, "$$n") + "\n")
		}
	}
	return b.String()
}

var (
	planEstimates = regexp.MustCompile(`\s*\(cost=[^)]*\)`)
	// planParams are the numbers of a plan's internal parameters
	// ("InitPlan 2 (returns $3)"), which may differ with no difference
	// in the plan.
	planParams = regexp.MustCompile(`\$\d+`)
)

// TestHotPlansHoldInEveryStatisticsState plans every statement of the hot
// path, custom and generic, in each statistics state: each must have one
// plan shape in every state and mode, read no table whole, and look tasks
// up by id only through tasks_pkey.
func TestHotPlansHoldInEveryStatisticsState(t *testing.T) {
	t.Parallel()
	// Seeding four states takes longer than ctxT allows on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	type hot struct {
		name string
		plan func(s *pgstore.Store) (string, []any)
		// avoid are plan fragments that must not appear; require, those
		// that must.
		avoid, require []string
	}
	// A batch of leases is found through tasks_pkey alone, one probe per
	// lease (no partial index, no bitmap over the whole batch), and the
	// rows are updated through their ctids: a TID scan, never a hash of
	// the table.
	byID := []string{"tasks_lease_expiry_idx", "tasks_claim_idx", "tasks_held_idx", "tasks_succeeded_idx", "Bitmap"}
	byTID := []string{"Tid Scan on tasks t"}
	hots := []hot{
		{"enqueue", func(s *pgstore.Store) (string, []any) { return pgstore.EnqueueQuery(s, "q1", 500) }, nil, nil},
		{"claim", func(s *pgstore.Store) (string, []any) { return pgstore.ClaimQuery(s, []string{"q1"}, 500) }, []string{"Bitmap", "Sort"}, byTID},
		{"claim of two queues", func(s *pgstore.Store) (string, []any) { return pgstore.ClaimQuery(s, []string{"q1", "q2"}, 500) }, []string{"Bitmap"}, byTID},
		{"claim of a worker's handlers", func(s *pgstore.Store) (string, []any) {
			return pgstore.ClaimHandlersQuery(s, []string{"q1"}, []string{"h1", "h2"}, 500)
		}, []string{"Bitmap"}, byTID},
		{"claim from a floor", func(s *pgstore.Store) (string, []any) {
			return pgstore.ClaimFromQuery(s, "q1", nil, 500, time.Now().Add(-time.Hour))
		}, []string{"Bitmap", "Sort"}, byTID},
		{"claim of a worker's handlers from a floor", func(s *pgstore.Store) (string, []any) {
			return pgstore.ClaimFromQuery(s, "q1", []string{"h1", "h2"}, 500, time.Now().Add(-time.Hour))
		}, []string{"Bitmap"}, byTID},
		{"claim of two queues and a worker's handlers", func(s *pgstore.Store) (string, []any) {
			return pgstore.ClaimHandlersQuery(s, []string{"q1", "q2"}, []string{"h1", "h2"}, 500)
		}, []string{"Bitmap"}, byTID},
		{"finish", func(s *pgstore.Store) (string, []any) { return pgstore.FinishQuery(s, 200) }, byID, byTID},
		{"retry in place", func(s *pgstore.Store) (string, []any) { return pgstore.RetryInPlaceQuery(s, 200) }, byID, byTID},
		{"heartbeat", func(s *pgstore.Store) (string, []any) { return pgstore.HeartbeatQuery(s, 200) }, byID, byTID},
		{"release", func(s *pgstore.Store) (string, []any) { return pgstore.ReleaseQuery(s, 200) }, byID, byTID},
		{"claim probe", func(s *pgstore.Store) (string, []any) { return pgstore.ClaimProbeQuery(s, []string{"q1"}) }, nil, nil},
	}
	// The reclaim reads tasks_lease_expiry_idx's expired range, ordered
	// or as a bitmap and a sort, as the estimates say: either reads the
	// expired leases only, which are bounded by the tasks in flight.
	// TestQueriesUseIndexes checks its index.
	shapes := map[string]string{} // hot name and mode -> first shape seen
	firstIn := map[string]string{}
	for _, st := range planStates {
		s, schema := pgtest.NewStore(t)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Release) // before the pool's Close, which waits for it
		seedPlanState(t, ctx, conn.Conn(), schema, st)
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			for _, h := range hots {
				sql, args := h.plan(s)
				plan := explain(t, ctx, conn.Conn(), mode, sql, args)
				where := st.name + ", " + mode
				for _, table := range []string{"tasks", "attempts", "dead_counts"} {
					if strings.Contains(plan, "Seq Scan on "+table) {
						t.Errorf("%s (%s): plan scans the whole %s table:\n%s", h.name, where, table, plan)
					}
				}
				for _, bad := range h.avoid {
					if strings.Contains(plan, bad) {
						t.Errorf("%s (%s): plan has %q:\n%s", h.name, where, bad, plan)
					}
				}
				for _, want := range h.require {
					if !strings.Contains(plan, want) {
						t.Errorf("%s (%s): plan lacks %q:\n%s", h.name, where, want, plan)
					}
				}
				// A generic plan names parameters where a custom plan
				// has values: shapes are compared within a mode.
				key, shape := h.name+" "+mode, planShape(plan)
				if first, ok := shapes[key]; !ok {
					shapes[key], firstIn[key] = shape, where
				} else if shape != first {
					t.Errorf("%s: the plan in %s differs from the plan in %s:\n%s\nvs\n%s", h.name, where, firstIn[key], shape, first)
				}
			}
		}
	}
}

// seedPlanState writes st into schema with autovacuum off on the tables,
// so that the statistics stay what st says while the test runs.
func seedPlanState(t *testing.T, ctx context.Context, conn *pgx.Conn, schema string, st planState) {
	t.Helper()
	for _, table := range []string{"tasks", "attempts", "dead_counts", "paused_handlers", "paused_queues"} {
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.%s SET (autovacuum_enabled = false)", schema, table)); err != nil {
			t.Fatal(err)
		}
	}
	seed := func(sql string) {
		if sql == "" {
			return
		}
		if _, err := conn.Exec(ctx, strings.ReplaceAll(sql, "{schema}", schema)); err != nil {
			t.Fatalf("seeding %s: %v", st.name, err)
		}
	}
	seed(st.before)
	if st.analyze {
		if _, err := conn.Exec(ctx, fmt.Sprintf("ANALYZE %[1]s.tasks, %[1]s.attempts, %[1]s.dead_counts", schema)); err != nil {
			t.Fatal(err)
		}
	}
	seed(st.after)
}
