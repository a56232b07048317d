package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// runLive checks store.LiveTasks: listing every live state against a
// brute-force scan with every filter and keyset paging, lookup by
// idempotency key, retry now and cancel with their per-item errors, audit
// entries and effect on the dead-letter queue.
func runLive(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"ListTasks", testListTasks},
		{"TaskByKey", testTaskByKey},
		{"RetryNow", testRetryNow},
		{"Cancel", testCancel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t, h))
		})
	}
	if h.Capabilities.Admin {
		t.Run("KeyAfterDeadRetention", func(t *testing.T) {
			t.Parallel()
			testKeyAfterDeadRetention(t, newEnv(t, h))
		})
	}
}

func (e *env) live() store.LiveTasks {
	e.t.Helper()
	l, ok := store.LiveTasksOf(e.s)
	if !ok {
		e.t.Fatalf("store %T does not implement store.LiveTasks", e.s)
	}
	return l
}

// liveSet builds tasks in every status, several queues, handlers and
// failures, with ties in due and finish times, and returns every task as
// the store reports it.
func liveSet(t *testing.T, e *env) []*rdq.Task {
	t.Helper()
	var ids []rdq.ID
	queues := []string{"orders", "emails"}
	handlers := []string{"charge", "send", "refund"}
	failures := []rdq.Failure{mkFailure("http_5xx", "Upstream said 503"), mkFailure("timeout", "deadline exceeded after 30s")}
	// Retrying: claimed and failed, with retries due later (tied in pairs).
	for i := range 6 {
		nt := task(queues[i%2])
		nt.Handler = handlers[i%3]
		e.enqueue(nt)
		ids = append(ids, nt.ID)
		e.claimIDs(nt.Queue, time.Minute, "w", nt.ID)
		e.mustFinish(retry(e.load(nt.ID), time.Duration(1+i/2)*time.Hour, failures[i%2], "w", time.Millisecond))
	}
	// Succeeded, with ties in finish time; one after a failure.
	ids = append(ids, e.makeSucceeded(tasks("orders", 3)...)...)
	e.advance(time.Second)
	ids = append(ids, e.makeSucceeded(tasks("emails", 2)...)...)
	healed := task("emails")
	e.enqueue(healed)
	ids = append(ids, healed.ID)
	e.claimIDs("emails", time.Minute, "w", healed.ID)
	e.mustFinish(retry(e.load(healed.ID), 0, failures[1], "w", time.Millisecond))
	e.claimIDs("emails", time.Minute, "w", healed.ID)
	e.mustFinish(succeed(e.load(healed.ID), "w", time.Millisecond))
	// Dead: never listed.
	ids = append(ids, e.makeDead(func(int) rdq.Failure { return failures[0] }, tasks("orders", 2)...)...)
	// In flight: claimed, with lease expiries tied in pairs.
	for i := range 4 {
		nt := task(queues[i%2])
		nt.Handler = handlers[i%3]
		e.enqueue(nt)
		ids = append(ids, nt.ID)
		e.claimIDs(nt.Queue, time.Duration(1+i/2)*time.Minute, "w", nt.ID)
	}
	// Pending, never tried: due now or later, with ties.
	for i := range 12 {
		nt := task(queues[i%2])
		nt.Handler = handlers[i%3]
		nt.Delay = time.Duration(i%4) * time.Minute
		e.enqueue(nt)
		ids = append(ids, nt.ID)
	}
	all := make([]*rdq.Task, len(ids))
	for i, id := range ids {
		all[i] = e.load(id)
	}
	return all
}

// inState reports whether tk belongs in a listing of state matching f.
func inState(tk *rdq.Task, state store.TaskState, f store.TaskFilter) bool {
	switch state {
	case store.StatePending:
		if tk.Status != rdq.StatusPending || tk.Attempts != 0 {
			return false
		}
	case store.StateRetrying:
		if tk.Status != rdq.StatusPending || tk.Attempts == 0 {
			return false
		}
	case store.StateInFlight:
		if tk.Status != rdq.StatusInFlight {
			return false
		}
	case store.StateSucceeded:
		if tk.Status != rdq.StatusSucceeded {
			return false
		}
	}
	switch {
	case len(f.IDs) > 0 && !slices.Contains(f.IDs, tk.ID):
		return false
	case f.Queue != "" && tk.Queue != f.Queue:
		return false
	case f.Handler != "" && tk.Handler != f.Handler:
		return false
	case f.ErrorType != "" && tk.LastError.Type != f.ErrorType:
		return false
	case f.Fingerprint != "" && tk.LastError.Fingerprint != f.Fingerprint:
		return false
	case f.MessageContains != "" && !containsFold(tk.LastError.Message, f.MessageContains):
		return false
	}
	return true
}

// liveOrder orders tasks as ListTasks must for state.
func liveOrder(state store.TaskState) func(a, b *rdq.Task) int {
	return func(a, b *rdq.Task) int {
		ca, cb := store.TaskCursorOf(state, a), store.TaskCursorOf(state, b)
		c := ca.At.Compare(cb.At)
		if c == 0 {
			c = compareIDs(a.ID, b.ID)
		}
		if state == store.StateSucceeded {
			return -c
		}
		return c
	}
}

func listLive(t *testing.T, e *env, state store.TaskState, f store.TaskFilter, pageSize int) []*rdq.Task {
	t.Helper()
	var out []*rdq.Task
	var after *store.TaskCursor
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("ListTasks(%s, %+v) did not end after 100 pages", state, f)
		}
		got, err := e.live().ListTasks(e.ctx, store.ListTasksParams{State: state, Filter: f, After: after, Limit: pageSize})
		if err != nil {
			t.Fatalf("ListTasks(%s, %+v): %v", state, f, err)
		}
		if len(got) > pageSize {
			t.Fatalf("ListTasks with limit %d returned %d tasks", pageSize, len(got))
		}
		out = append(out, got...)
		if len(got) < pageSize {
			return out
		}
		c := store.TaskCursorOf(state, got[len(got)-1])
		after = &c
	}
}

func testListTasks(t *testing.T, e *env) {
	all := liveSet(t, e)
	retrying := slices.IndexFunc(all, func(tk *rdq.Task) bool { return tk.Status == rdq.StatusPending && tk.Attempts > 0 })
	if retrying < 0 {
		t.Fatal("the population has no retrying task")
	}
	ex := all[retrying]
	filters := map[string]store.TaskFilter{
		"none":        {},
		"queue":       {Queue: "orders"},
		"handler":     {Handler: "send"},
		"error type":  {ErrorType: "timeout"},
		"fingerprint": {Fingerprint: ex.LastError.Fingerprint},
		"message":     {MessageContains: "UPSTREAM"},
		"ids":         {IDs: []rdq.ID{all[0].ID, all[1].ID, ex.ID, all[len(all)-1].ID}},
		"combined":    {Queue: "emails", Handler: "send"},
		"no match":    {Queue: "nowhere"},
	}
	for _, state := range []store.TaskState{store.StatePending, store.StateRetrying, store.StateInFlight, store.StateSucceeded} {
		nonEmpty := 0
		for name, f := range filters {
			var want []*rdq.Task
			for _, tk := range all {
				if inState(tk, state, f) {
					want = append(want, tk)
				}
			}
			slices.SortFunc(want, liveOrder(state))
			if len(want) > 0 {
				nonEmpty++
			}
			for _, size := range []int{1, 2, 1000} {
				got := listLive(t, e, state, f, size)
				if !slices.Equal(taskIDs(got), taskIDs(want)) {
					t.Errorf("ListTasks(%s, filter %s, pages of %d) = %v, want %v", state, name, size, taskIDs(got), taskIDs(want))
				}
				for _, tk := range got {
					if !inState(tk, state, store.TaskFilter{}) {
						t.Errorf("ListTasks(%s) returned %s", state, tk)
					}
				}
			}
		}
		if nonEmpty < 2 {
			t.Errorf("state %s: only %d filters select anything; the population is too thin to test", state, nonEmpty)
		}
	}
	for _, p := range []store.ListTasksParams{{State: "dead", Limit: 1}, {State: "", Limit: 1}, {State: store.StatePending, Limit: 0}} {
		if _, err := e.live().ListTasks(e.ctx, p); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("ListTasks(%+v) error = %v, want rdq.ErrInvalid", p, err)
		}
	}
}

func testTaskByKey(t *testing.T, e *env) {
	a, b := task("q"), task("other")
	a.IdempotencyKey, b.IdempotencyKey = "order-7", "order-7"
	e.enqueue(a, b, task("q"))
	got, err := e.live().TaskByKey(e.ctx, "q", "order-7")
	if err != nil || got.ID != a.ID {
		t.Fatalf("TaskByKey(q, order-7) = %v, %v; want %s", got, err, a.ID)
	}
	if got, err := e.live().TaskByKey(e.ctx, "other", "order-7"); err != nil || got.ID != b.ID {
		t.Fatalf("TaskByKey(other, order-7) = %v, %v; want %s", got, err, b.ID)
	}
	for _, k := range [][2]string{{"q", "order-8"}, {"nowhere", "order-7"}, {"q", ""}} {
		if _, err := e.live().TaskByKey(e.ctx, k[0], k[1]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("TaskByKey(%q, %q) error = %v, want store.ErrNotFound", k[0], k[1], err)
		}
	}
	// A task keeps its key through every state, into the DLQ.
	e.claimIDs("q", time.Minute, "w", a.ID)
	tk := e.load(a.ID)
	e.mustFinish(kill(tk, mkFailure("E", "x"), "w", time.Millisecond))
	if got, err := e.live().TaskByKey(e.ctx, "q", "order-7"); err != nil || got.ID != a.ID || got.Status != rdq.StatusDead {
		t.Fatalf("TaskByKey of a dead task = %v, %v; want %s, DEAD", got, err, a.ID)
	}
}

// auditOf returns the newest audit entry of action, when the store has
// Admin; ok is false otherwise.
func (e *env) auditOf(t *testing.T, action string) (en store.AuditEntry, ok bool) {
	t.Helper()
	if _, isAdmin := store.AdminOf(e.s); !isAdmin {
		return store.AuditEntry{}, false
	}
	got := auditEntries(t, e, store.ListAuditParams{Action: action})
	if len(got) == 0 {
		t.Fatalf("no %q audit entry", action)
	}
	return got[0], true
}

func testRetryNow(t *testing.T, e *env) {
	later, soon, running := task("q"), task("q"), task("q")
	later.Delay, soon.Delay = time.Hour, 0
	e.enqueue(running)
	run := e.claimOne("q", time.Minute, "w")
	e.enqueue(later, soon)
	// soon becomes a retry due in an hour.
	tk := e.claimOne("q", time.Minute, "w")
	e.mustFinish(retry(tk, time.Hour, mkFailure("E", "boom"), "w", time.Millisecond))
	dead := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "x") }, task("q"))[0]
	if got := e.claim([]string{"q"}, 10, time.Minute, "w"); len(got) != 0 {
		t.Fatalf("Claim before retry now returned %v", taskIDs(got))
	}

	e.advance(time.Second)
	missing := rdq.NewID()
	errs, err := e.live().RetryNow(e.ctx, store.RetryNowParams{
		IDs: []rdq.ID{later.ID, soon.ID, later.ID, run.ID, dead, missing}, Actor: "ops", Reason: "fixed upstream", Now: e.at(),
	})
	if err != nil {
		t.Fatalf("RetryNow: %v", err)
	}
	wantErrs(t, "RetryNow", errs, nil, nil, nil, store.ErrNotPending, store.ErrNotPending, store.ErrNotFound)
	for _, id := range []rdq.ID{later.ID, soon.ID} {
		got := e.load(id)
		eq(t, "status after retry now", got.Status, rdq.StatusPending)
		eqTime(t, "due time after retry now", got.NextAttemptAt, e.now)
	}
	eq(t, "attempts of the retried task", e.load(soon.ID).Attempts, 1)
	claimed := e.claim([]string{"q"}, 10, time.Minute, "w")
	if !sameIDSet(taskIDs(claimed), []rdq.ID{later.ID, soon.ID}) {
		t.Fatalf("Claim after retry now returned %v, want %s and %s", taskIDs(claimed), later.ID, soon.ID)
	}
	if en, ok := e.auditOf(t, "retry_now"); ok {
		eq(t, "audit actor", en.Actor, "ops")
		eq(t, "audit reason", en.Reason, "fixed upstream")
		eq(t, "audit count", en.Count, int64(2))
		if !sameIDSet(en.IDs, []rdq.ID{later.ID, soon.ID}) {
			t.Errorf("audit IDs = %v, want %s and %s", en.IDs, later.ID, soon.ID)
		}
		eqTime(t, "audit time", en.At, e.now)
	}
	// Nothing eligible: no entry, no error.
	errs, err = e.live().RetryNow(e.ctx, store.RetryNowParams{IDs: []rdq.ID{missing}, Actor: "nobody", Now: e.at()})
	if err != nil {
		t.Fatalf("RetryNow of a missing task: %v", err)
	}
	wantErrs(t, "RetryNow of a missing task", errs, store.ErrNotFound)
	if _, ok := store.AdminOf(e.s); ok {
		if got := auditEntries(t, e, store.ListAuditParams{Actor: "nobody"}); len(got) != 0 {
			t.Errorf("a retry now that changed nothing was audited: %+v", got)
		}
	}
}

func testCancel(t *testing.T, e *env) {
	waiting, failing, running := task("q"), task("q"), task("q")
	waiting.Delay = time.Hour
	waiting.IdempotencyKey = "cancel-me"
	e.enqueue(running)
	run := e.claimOne("q", time.Minute, "w")
	e.enqueue(failing)
	tk := e.claimOne("q", time.Minute, "w")
	e.mustFinish(retry(tk, time.Hour, mkFailure("http_5xx", "503"), "w", 3*time.Millisecond))
	e.enqueue(waiting)
	succeeded := e.makeSucceeded(task("q"))[0]
	_, before := e.get(failing.ID)

	e.advance(time.Second)
	missing := rdq.NewID()
	reason := "customer withdrew order 42"
	errs, err := e.live().Cancel(e.ctx, store.CancelParams{
		IDs:   []rdq.ID{waiting.ID, failing.ID, failing.ID, run.ID, succeeded, missing},
		Actor: "alice", Reason: reason, Now: e.at(),
	})
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	wantErrs(t, "Cancel", errs, nil, nil, nil, store.ErrNotPending, store.ErrNotPending, store.ErrNotFound)
	cf := rdq.CancelledFailure(reason)
	for _, id := range []rdq.ID{waiting.ID, failing.ID} {
		got, atts := e.get(id)
		eq(t, "status after cancel", got.Status, rdq.StatusDead)
		eqTime(t, "finished at", got.FinishedAt, e.now)
		eq(t, "last error", got.LastError, summaryOf(cf))
		last := atts[len(atts)-1]
		checkAttempt(t, "cancelled attempt", last, rdq.Attempt{
			TaskID: id, Number: len(atts), Life: 0, Outcome: rdq.OutcomeCancelled, ErrorType: cf.Type,
			Message: reason, WorkerID: "alice", StartedAt: e.now, FinishedAt: e.now,
		})
		checkNumbers(t, "history after cancel", atts)
		eq(t, "attempts after cancel", got.Attempts, len(atts))
	}
	_, after := e.get(failing.ID)
	if len(after) != len(before)+1 {
		t.Fatalf("history of the cancelled retrying task has %d attempts, want %d (its failure kept, the cancel added)", len(after), len(before)+1)
	}
	checkAttempt(t, "the failure before the cancel", after[0], before[0])
	eq(t, "running task", e.load(run.ID).Status, rdq.StatusInFlight)
	eq(t, "succeeded task", e.load(succeeded).Status, rdq.StatusSucceeded)
	e.advance(2 * time.Hour)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w"); len(got) != 0 {
		t.Fatalf("Claim after their due time returned cancelled tasks %v", taskIDs(got))
	}
	// The key stays taken: the task exists, in the DLQ.
	res := e.enqueue(func() store.NewTask { nt := task("q"); nt.IdempotencyKey = "cancel-me"; return nt }())
	if !res[0].Duplicate || res[0].Task.ID != waiting.ID {
		t.Errorf("resubmitting a cancelled task's key = %+v, want a duplicate of %s", res[0], waiting.ID)
	}

	a, ok := store.AdminOf(e.s)
	if !ok {
		return
	}
	en, _ := e.auditOf(t, "cancel")
	eq(t, "audit actor", en.Actor, "alice")
	eq(t, "audit reason", en.Reason, reason)
	eq(t, "audit count", en.Count, int64(2))
	if !sameIDSet(en.IDs, []rdq.ID{waiting.ID, failing.ID}) {
		t.Errorf("audit IDs = %v, want %s and %s", en.IDs, waiting.ID, failing.ID)
	}
	// The dead-letter queue sees the cancelled tasks at once, in its
	// listings, counts and groups.
	f := store.DeadFilter{Queue: "q", ErrorType: rdq.CancelledErrorType}
	if n, err := a.CountDead(e.ctx, f); err != nil || n != 2 {
		t.Errorf("CountDead(cancelled) = %d, %v; want 2", n, err)
	}
	groups, err := a.DeadGroups(e.ctx, store.DeadFilter{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Fingerprint != cf.Fingerprint || groups[0].Count != 2 {
		t.Errorf("DeadGroups = %+v, want one group of 2 with fingerprint %s", groups, cf.Fingerprint)
	}
	dead, err := a.ListDead(e.ctx, store.ListDeadParams{Filter: f, Limit: 10})
	if err != nil || !sameIDSet(taskIDs(dead), []rdq.ID{waiting.ID, failing.ID}) {
		t.Errorf("ListDead(cancelled) = %v, %v", taskIDs(dead), err)
	}
	// Nothing disappeared: a cancelled task can be redriven.
	wantErrs(t, "redrive of a cancelled task", e.redrive(store.RedriveParams{IDs: []rdq.ID{waiting.ID}, Actor: "alice"}), nil)
	if n, err := a.CountDead(e.ctx, f); err != nil || n != 1 {
		t.Errorf("CountDead(cancelled) after a redrive = %d, %v; want 1", n, err)
	}
	if got := e.load(waiting.ID); got.Status != rdq.StatusPending || got.Life != 1 {
		t.Errorf("redriven cancelled task: %s life %d", got.Status, got.Life)
	}
}

// testKeyAfterDeadPurges: a dead task purged by retention keeps its key
// for the store's key retention, like a succeeded one; one an operator
// purges frees it at once (testPurgeDeadKeyReusable).
func testKeyAfterDeadRetention(t *testing.T, e *env) {
	nt := task("q")
	nt.IdempotencyKey = "dead-key"
	id := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "x") }, nt)[0]
	if n, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: []rdq.ID{id}}, Limit: 1, Action: "retention", Actor: "janitor"}); err != nil || n != 1 {
		t.Fatalf("PurgeDead(retention) = %d, %v", n, err)
	}
	again := task("q")
	again.IdempotencyKey = "dead-key"
	res := e.enqueue(again)
	if !res[0].Duplicate || !res[0].Purged || res[0].Task.ID != id {
		t.Fatalf("key of a dead task purged by retention: Duplicate=%v Purged=%v ID=%s, want a purged duplicate of %s", res[0].Duplicate, res[0].Purged, res[0].Task.ID, id)
	}
	e.wantNotFound(again.ID)
}

// testRepeatedIDWithNewKey: a task repeating an existing ID is a duplicate
// of that task whatever key it carries, and does not take the key: a later
// task with that key is new.
func testRepeatedIDWithNewKey(t *testing.T, e *env) {
	first := task("q")
	e.enqueue(first)
	again := task("q")
	again.ID, again.IdempotencyKey = first.ID, "fresh-key"
	if res := e.enqueue(again); !res[0].Duplicate || res[0].Task.ID != first.ID {
		t.Fatalf("repeated ID with a new key: Duplicate=%v ID=%s, want a duplicate of %s", res[0].Duplicate, res[0].Task.ID, first.ID)
	}
	other := task("q")
	other.IdempotencyKey = "fresh-key"
	if res := e.enqueue(other); res[0].Duplicate || res[0].Purged || res[0].Task.ID != other.ID {
		t.Fatalf("the key a repeated ID carried: Duplicate=%v Purged=%v ID=%s, want a new task", res[0].Duplicate, res[0].Purged, res[0].Task.ID)
	}
}
