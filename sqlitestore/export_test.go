package sqlitestore

import (
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// PlanCase is a statement whose query plan the tests check.
type PlanCase struct {
	Name   string
	SQL    string
	Args   []any
	Index  string // the index the plan must use; "pk" for the tasks primary key, "rowid" for the row id
	NoSort bool   // the plan must not sort
}

// PlanCases lists the statements on the task path and every dead-letter
// filter, with the index sql.go says serves them.
func PlanCases() []PlanCase {
	id := rdq.NewID()
	at := time.Now()
	cases := []PlanCase{
		{"claim", sqlClaimCandidates, []any{"q", 0, 10}, "rdq_tasks_claim", true},
		{"reclaim all queues", sqlReclaimCandidates, []any{0, 0, "[]", 10}, "rdq_tasks_expiry", true},
		{"reclaim some queues", sqlReclaimCandidates, []any{0, 1, `["q"]`, 10}, "rdq_tasks_expiry", true},
		{"idempotency lookup", sqlFindByKey, []any{"q", "k"}, "rdq_tasks_idempotency", true},
		{"purge succeeded", sqlPurgeSucceeded, []any{0, 10}, "rdq_tasks_succeeded", true},
		{"attempt number", sqlInsertAttempt, []any{id[:], "SUCCESS", "", "", "", "", 0, 0, 0}, "sqlite_autoindex_rdq_attempts_1", true},
		{"history", sqlGetAttempts, []any{id[:]}, "sqlite_autoindex_rdq_attempts_1", true},
		{"retry in place", sqlRetryInPlace, []any{0, 0, "w", 0, "", "", "", id[:], 1}, "pk", true},
	}
	dead := []struct {
		name  string
		f     store.DeadFilter
		after *store.Cursor
		index string
	}{
		{"dead: no filter", store.DeadFilter{}, nil, "rdq_tasks_dead"},
		{"dead: next page", store.DeadFilter{}, &store.Cursor{FinishedAt: at, ID: id}, "rdq_tasks_dead"},
		{"dead: queue", store.DeadFilter{Queue: "q"}, nil, "rdq_tasks_dead_queue"},
		{"dead: queue, next page", store.DeadFilter{Queue: "q"}, &store.Cursor{FinishedAt: at, ID: id}, "rdq_tasks_dead_queue"},
		{"dead: handler", store.DeadFilter{Handler: "h"}, nil, "rdq_tasks_dead_handler"},
		{"dead: error type", store.DeadFilter{ErrorType: "e"}, nil, "rdq_tasks_dead_error_type"},
		{"dead: fingerprint", store.DeadFilter{Fingerprint: "f"}, nil, "rdq_tasks_dead_fingerprint"},
		{"dead: time range", store.DeadFilter{DeadAfter: at, DeadBefore: at.Add(time.Hour)}, nil, "rdq_tasks_dead"},
		{"dead: message", store.DeadFilter{MessageContains: "x"}, nil, "rdq_tasks_dead"},
		{"dead: queue and message", store.DeadFilter{Queue: "q", MessageContains: "x"}, nil, "rdq_tasks_dead_queue"},
	}
	for _, d := range dead {
		q, args, err := listDeadQuery(store.ListDeadParams{Filter: d.f, After: d.after, Limit: 50})
		if err != nil {
			panic(err)
		}
		cases = append(cases, PlanCase{d.name, q, args, d.index, true})
	}
	q, args, err := listDeadQuery(store.ListDeadParams{Filter: store.DeadFilter{IDs: []rdq.ID{id}}, Limit: 50})
	if err != nil {
		panic(err)
	}
	cases = append(cases, PlanCase{"dead: ids", q, args, "pk", false})
	sel, err := deadSelection(store.DeadFilter{})
	if err != nil {
		panic(err)
	}
	cases = append(cases, PlanCase{"dead groups", sqlDeadGroups + sel.where.String() + sqlDeadGroupsTail, sel.args, "rdq_tasks_dead_fingerprint", true})
	for _, d := range []struct {
		f     store.DeadFilter
		index string
	}{
		{store.DeadFilter{}, "rdq_tasks_dead"},
		{store.DeadFilter{Queue: "q"}, "rdq_tasks_dead_queue"},
		{store.DeadFilter{Fingerprint: "f"}, "rdq_tasks_dead_fingerprint"},
	} {
		sel, err := deadSelection(d.f)
		if err != nil {
			panic(err)
		}
		redrive := sqlRedriveDeadPickHead + sel.where.String() + deadNewestFirst + sqlLimit + sqlRedriveDeadPickTail
		args := append(append([]any(nil), sel.args...), 100)
		cases = append(cases, PlanCase{"redrive dead " + d.index, redrive, args, d.index, true})
		purge := sqlPurgeDeadHead + sel.where.String() + deadNewestFirst + sqlPurgeDeadTail
		cases = append(cases, PlanCase{"purge dead " + d.index, purge, append(append([]any(nil), sel.args...), 100), d.index, true})
	}
	cases = append(cases, PlanCase{"redrive dead rows", sqlRedriveDeadRows, []any{0, 0, "[1]", 0, 1, 0, 0.0}, "rowid", true})
	return cases
}

// MigrationCount is how many migrations are embedded.
func MigrationCount() int {
	migs, err := loadMigrations()
	if err != nil {
		panic(err)
	}
	return len(migs)
}
