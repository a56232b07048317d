package sqlitestore

import (
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// LivePlanCases lists the live-task statements with the index sql.go says
// serves them.
func LivePlanCases() []PlanCase {
	id := rdq.NewID()
	after := &store.TaskCursor{At: time.Now(), ID: id}
	cases := []PlanCase{
		{"task by key", sqlTaskByKey, []any{"q", "k"}, "rdq_tasks_idempotency", true},
		{"purged key", sqlKeyFind, []any{"q", "k", 0}, "sqlite_autoindex_rdq_idempotency_keys_1", true},
		{"prune keys", sqlKeyPrune, []any{0, 100}, "rdq_idempotency_keys_purged", true},
	}
	for _, c := range []struct {
		state store.TaskState
		f     store.TaskFilter
		index string
	}{
		{store.StatePending, store.TaskFilter{}, "rdq_tasks_pending"},
		{store.StatePending, store.TaskFilter{Queue: "q"}, "rdq_tasks_claim"},
		{store.StatePending, store.TaskFilter{Handler: "h", MessageContains: "x"}, "rdq_tasks_pending"},
		{store.StateRetrying, store.TaskFilter{}, "rdq_tasks_pending"},
		{store.StateRetrying, store.TaskFilter{Queue: "q"}, "rdq_tasks_claim"},
		{store.StateInFlight, store.TaskFilter{}, "rdq_tasks_expiry"},
		{store.StateInFlight, store.TaskFilter{Queue: "q"}, "rdq_tasks_expiry"},
		{store.StateSucceeded, store.TaskFilter{}, "rdq_tasks_succeeded"},
		{store.StateSucceeded, store.TaskFilter{Queue: "q", ErrorType: "e"}, "rdq_tasks_succeeded"},
	} {
		for _, a := range []*store.TaskCursor{nil, after} {
			q, args, err := listLiveQuery(store.ListTasksParams{State: c.state, Filter: c.f, After: a, Limit: 50})
			if err != nil {
				panic(err)
			}
			name := "live " + string(c.state)
			if c.f.Queue != "" {
				name += " by queue"
			}
			if a != nil {
				name += ", next page"
			}
			// A queue's waiting tasks are merged from two indexes, each read
			// in order up to the page size; the merge sorts at most two pages,
			// and the held index (a paused handler's backlog) is sorted.
			merged := c.f.Queue != "" && (c.state == store.StatePending || c.state == store.StateRetrying)
			cases = append(cases, PlanCase{name, q, args, c.index, !merged})
		}
	}
	return cases
}
