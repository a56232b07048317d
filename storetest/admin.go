package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func runAdmin(t *testing.T, h Harness) {
	tests := []contractTest{
		{"ListDead/FiltersMatchBruteForce", testListDeadFilters},
		{"ListDead/KeysetPaging", testListDeadPaging},
		{"DeadGroups", testDeadGroups},
		{"RedriveDead/ChunksAndAtLimit", testRedriveDead},
		{"PurgeDead", testPurgeDead},
		{"PurgeDead/IdempotencyKeyReusable", testPurgeDeadKeyReusable},
		{"Audit/EveryMutation", testAuditEveryMutation},
		{"Audit/QueuesTouched", testAuditQueues},
		{"Audit/FailureChangesNothing", testAuditFailure},
		{"ListAudit/Filters", testListAudit},
		{"Stats", testStats},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t, h))
		})
	}
}

func mkFailure(typ, msg string) rdq.Failure {
	return rdq.Failure{Type: typ, Message: msg, Fingerprint: rdq.Fingerprint(typ, msg)}
}

// deadSet builds a varied population of dead tasks (several queues,
// handlers, error types and fingerprints, with ties in FinishedAt), plus
// tasks in every other status, and returns every task as the store reports
// it.
func deadSet(t *testing.T, e *env) []*rdq.Task {
	t.Helper()
	queues := []string{"orders", "emails", "billing"}
	handlers := []string{"charge", "refund", "send"}
	failures := []func(i int) rdq.Failure{
		func(i int) rdq.Failure {
			return mkFailure("http_5xx", fmt.Sprintf("card 4242 declined for order %d", 1000+i))
		},
		func(i int) rdq.Failure {
			return mkFailure("timeout", fmt.Sprintf("Timeout after %ds talking to 10.0.0.%d", 30, i%7))
		},
		func(int) rdq.Failure { return mkFailure("quota", "100% of quota used") },
		func(int) rdq.Failure { return mkFailure("validation", "field user_id missing") },
		func(int) rdq.Failure { return mkFailure("io", `path C:\tmp\x not found`) },
		func(i int) rdq.Failure { return mkFailure("http_5xx", fmt.Sprintf("UPSTREAM Declined request %d", i)) },
	}
	var ids []rdq.ID
	const n = 48
	for batch := range n / 4 {
		var ts []store.NewTask
		for j := range 4 {
			i := batch*4 + j
			nt := task(queues[i%len(queues)])
			nt.Handler = handlers[(i/2)%len(handlers)]
			ts = append(ts, nt)
		}
		// Four tasks go dead at the same instant: ties in FinishedAt.
		ids = append(ids, e.makeDead(func(j int) rdq.Failure {
			i := batch*4 + j
			return failures[(i*7)%len(failures)](i)
		}, ts...)...)
		e.advance(time.Duration(batch%3+1) * time.Second)
	}
	// Redrive loops: a third of the tasks die again after a redrive (life
	// 1), and a third of those after a second one (life 2).
	for round := 1; round <= 2; round++ {
		var again []rdq.ID
		for i := 2; i < n; i += 3 * round {
			again = append(again, ids[i])
		}
		wantErrs(t, "Redrive", e.redrive(store.RedriveParams{IDs: again}), make([]error, len(again))...)
		e.advance(time.Second)
		e.killAgain(func(i int) rdq.Failure { return failures[(i+round)%len(failures)](i) }, again...)
		e.advance(time.Second)
	}
	// One dead task redriven (now pending): not dead any more.
	wantErrs(t, "Redrive", e.redrive(store.RedriveParams{IDs: ids[:1]}), nil)
	// Tasks in every other status, in the same queues.
	ids = append(ids, e.makeSucceeded(task("orders"), task("emails"))...)
	pend := task("orders")
	pend.Delay = time.Hour
	inflight := task("billing")
	e.enqueue(pend, inflight)
	e.claimIDs("billing", time.Hour, "w", inflight.ID)
	ids = append(ids, pend.ID, inflight.ID)

	all := make([]*rdq.Task, len(ids))
	for i, id := range ids {
		all[i], _ = e.get(id)
	}
	return all
}

// matches is the brute-force reading of a DeadFilter.
func matches(tk *rdq.Task, f store.DeadFilter) bool {
	switch {
	case tk.Status != rdq.StatusDead:
		return false
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
	case !f.DeadAfter.IsZero() && tk.FinishedAt.Before(f.DeadAfter):
		return false
	case !f.DeadBefore.IsZero() && !tk.FinishedAt.Before(f.DeadBefore):
		return false
	case f.MessageContains != "" && !containsFold(tk.LastError.Message, f.MessageContains):
		return false
	case f.LifeMin > 0 && tk.Life < f.LifeMin:
		return false
	case f.LifeBelow > 0 && tk.Life >= f.LifeBelow:
		return false
	}
	return true
}

// newestFirst orders dead tasks as ListDead must: FinishedAt, then ID,
// descending.
func newestFirst(a, b *rdq.Task) int {
	if c := b.FinishedAt.Compare(a.FinishedAt); c != 0 {
		return c
	}
	return compareIDs(b.ID, a.ID)
}

func bruteForce(all []*rdq.Task, f store.DeadFilter) []*rdq.Task {
	var out []*rdq.Task
	for _, tk := range all {
		if matches(tk, f) {
			out = append(out, tk)
		}
	}
	slices.SortFunc(out, newestFirst)
	return out
}

// filtersFor returns filters exercising every DeadFilter field alone and in
// combination, with values taken from the data.
func filtersFor(all []*rdq.Task) map[string]store.DeadFilter {
	var dead []*rdq.Task
	for _, tk := range all {
		if tk.Status == rdq.StatusDead {
			dead = append(dead, tk)
		}
	}
	slices.SortFunc(dead, newestFirst)
	mid := dead[len(dead)/2].FinishedAt
	quarter := dead[len(dead)/4].FinishedAt
	var someIDs []rdq.ID
	for i, tk := range all {
		if i%5 == 0 {
			someIDs = append(someIDs, tk.ID)
		}
	}
	fp := dead[3].LastError.Fingerprint
	return map[string]store.DeadFilter{
		"none":                          {},
		"queue":                         {Queue: "orders"},
		"unknown queue":                 {Queue: "nope"},
		"handler":                       {Handler: "refund"},
		"error type":                    {ErrorType: "timeout"},
		"fingerprint":                   {Fingerprint: fp},
		"dead after (inclusive)":        {DeadAfter: mid},
		"dead before (exclusive)":       {DeadBefore: mid},
		"dead between":                  {DeadAfter: mid, DeadBefore: quarter},
		"message, case-insensitive":     {MessageContains: "DECLINED"},
		"message with %":                {MessageContains: "0%"},
		"message % is literal":          {MessageContains: "%"},
		"message _ is literal":          {MessageContains: "o_d"},
		"message with _":                {MessageContains: "user_id"},
		"message with backslash":        {MessageContains: `C:\tmp`},
		"ids":                           {IDs: someIDs},
		"queue+handler+type":            {Queue: "emails", Handler: "charge", ErrorType: "http_5xx"},
		"queue+message+time":            {Queue: "orders", MessageContains: "e", DeadAfter: mid},
		"ids+queue":                     {IDs: someIDs, Queue: "billing"},
		"fingerprint+handler":           {Fingerprint: fp, Handler: dead[3].Handler},
		"life at least 1":               {LifeMin: 1},
		"life at least 2":               {LifeMin: 2},
		"life at least 3 (none)":        {LifeMin: 3},
		"life below 1 (never redriven)": {LifeBelow: 1},
		"life exactly 1":                {LifeMin: 1, LifeBelow: 2},
		"queue+life":                    {Queue: "emails", LifeMin: 1},
		"fingerprint+life":              {Fingerprint: fp, LifeBelow: 2},
		"life+message+time":             {LifeMin: 1, MessageContains: "e", DeadAfter: mid},
	}
}

func listAll(t *testing.T, e *env, f store.DeadFilter, pageSize int) []*rdq.Task {
	t.Helper()
	var out []*rdq.Task
	var after *store.Cursor
	for range 1000 {
		page, err := e.admin().ListDead(e.ctx, store.ListDeadParams{Filter: f, After: after, Limit: pageSize})
		if err != nil {
			t.Fatalf("ListDead: %v", err)
		}
		if len(page) > pageSize {
			t.Fatalf("ListDead with Limit %d returned %d tasks", pageSize, len(page))
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		c := store.CursorOf(page[len(page)-1])
		after = &c
	}
	t.Fatalf("ListDead paging did not end after 1000 pages")
	return nil
}

func sameOrder(t *testing.T, what string, got, want []*rdq.Task) {
	t.Helper()
	g, w := taskIDs(got), taskIDs(want)
	if !slices.Equal(g, w) {
		t.Errorf("%s: got %d tasks %v,\nwant %d (newest dead first) %v", what, len(g), g, len(w), w)
	}
}

func testListDeadFilters(t *testing.T, e *env) {
	all := deadSet(t, e)
	for name, f := range filtersFor(all) {
		want := bruteForce(all, f)
		got, err := e.admin().ListDead(e.ctx, store.ListDeadParams{Filter: f, Limit: 1000})
		if err != nil {
			t.Fatalf("ListDead(%s): %v", name, err)
		}
		sameOrder(t, "ListDead("+name+")", got, want)
		for _, tk := range got {
			eq(t, "ListDead("+name+") Status", tk.Status, rdq.StatusDead)
		}
		n, err := e.admin().CountDead(e.ctx, f)
		if err != nil {
			t.Fatalf("CountDead(%s): %v", name, err)
		}
		eq(t, "CountDead("+name+")", n, int64(len(want)))
	}
	// Listed tasks carry the fields the DLQ shows.
	got, err := e.admin().ListDead(e.ctx, store.ListDeadParams{Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListDead(limit 1) = %d tasks, %v", len(got), err)
	}
	full, _ := e.get(got[0].ID)
	eq(t, "listed Queue", got[0].Queue, full.Queue)
	eq(t, "listed Handler", got[0].Handler, full.Handler)
	eq(t, "listed LastError", got[0].LastError, full.LastError)
	eq(t, "listed Attempts", got[0].Attempts, full.Attempts)
	eq(t, "listed Life", got[0].Life, full.Life)
	eqTime(t, "listed FinishedAt", got[0].FinishedAt, full.FinishedAt)
}

// Keyset paging neither skips nor repeats, even across ties in FinishedAt
// and with tasks going dead while paging.
func testListDeadPaging(t *testing.T, e *env) {
	all := deadSet(t, e)
	for _, name := range []string{"none", "queue", "dead after (inclusive)", "message, case-insensitive"} {
		f := filtersFor(all)[name]
		want := bruteForce(all, f)
		for _, size := range []int{1, 3, 4, 7, 100} {
			sameOrder(t, fmt.Sprintf("pages of %d (%s)", size, name), listAll(t, e, f, size), want)
		}
	}
	// Paging goes on correctly when new tasks die mid-listing: they are
	// newer than the cursor, so they do not appear in later pages.
	page, err := e.admin().ListDead(e.ctx, store.ListDeadParams{Limit: 5})
	if err != nil {
		t.Fatalf("ListDead: %v", err)
	}
	e.advance(time.Minute)
	e.makeDead(func(int) rdq.Failure { return mkFailure("late", "late") }, task("orders"))
	c := store.CursorOf(page[len(page)-1])
	rest, err := e.admin().ListDead(e.ctx, store.ListDeadParams{After: &c, Limit: 1000})
	if err != nil {
		t.Fatalf("ListDead: %v", err)
	}
	sameOrder(t, "first page + rest", append(page, rest...), bruteForce(all, store.DeadFilter{}))
}

func testDeadGroups(t *testing.T, e *env) {
	all := deadSet(t, e)
	for name, f := range filtersFor(all) {
		want := map[string][]*rdq.Task{}
		for _, tk := range bruteForce(all, f) {
			want[tk.LastError.Fingerprint] = append(want[tk.LastError.Fingerprint], tk)
		}
		got, err := e.admin().DeadGroups(e.ctx, f)
		if err != nil {
			t.Fatalf("DeadGroups(%s): %v", name, err)
		}
		if len(got) != len(want) {
			t.Errorf("DeadGroups(%s) returned %d groups, want %d", name, len(got), len(want))
		}
		byID := map[rdq.ID]*rdq.Task{}
		for _, tk := range all {
			byID[tk.ID] = tk
		}
		for i, g := range got {
			what := fmt.Sprintf("DeadGroups(%s) group %s", name, g.Fingerprint)
			if i > 0 && g.Count > got[i-1].Count {
				t.Errorf("DeadGroups(%s) not largest first: count %d after %d", name, g.Count, got[i-1].Count)
			}
			members := want[g.Fingerprint]
			if members == nil {
				t.Errorf("%s: no matching dead task has this fingerprint", what)
				continue
			}
			eq(t, what+" Count", g.Count, int64(len(members)))
			eq(t, what+" ErrorType", g.ErrorType, members[0].LastError.Type)
			// members is newest first.
			eqTime(t, what+" LastSeen", g.LastSeen, members[0].FinishedAt)
			eqTime(t, what+" FirstSeen", g.FirstSeen, members[len(members)-1].FinishedAt)
			ex := byID[g.ExampleID]
			if ex == nil || !slices.Contains(members, ex) || !ex.FinishedAt.Equal(members[0].FinishedAt) {
				t.Errorf("%s ExampleID %s is not one of its most recently dead tasks", what, g.ExampleID)
			} else {
				eq(t, what+" Message (of ExampleID)", g.Message, ex.LastError.Message)
			}
		}
	}
}

func auditEntries(t *testing.T, e *env, p store.ListAuditParams) []store.AuditEntry {
	t.Helper()
	if p.Limit == 0 {
		p.Limit = 1000
	}
	got, err := e.admin().ListAudit(e.ctx, p)
	if err != nil {
		t.Fatalf("ListAudit(%+v): %v", p, err)
	}
	return got
}

// nonEmpty drops entries of bulk operations that changed nothing: the
// contract neither requires nor forbids them.
func nonEmpty(es []store.AuditEntry) []store.AuditEntry {
	var out []store.AuditEntry
	for _, en := range es {
		if en.Count > 0 {
			out = append(out, en)
		}
	}
	return out
}

func checkFilterJSON(t *testing.T, what string, en store.AuditEntry) {
	t.Helper()
	if en.Filter == "" || !json.Valid([]byte(en.Filter)) {
		t.Errorf("%s: audit Filter %q is not the selection as JSON", what, en.Filter)
	}
}

func testRedriveDead(t *testing.T, e *env) {
	orders := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "boom") }, tasks("orders", 20)...)
	emails := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "boom") }, tasks("emails", 5)...)
	// Four orders tasks are in their second life already.
	atLimit := orders[:4]
	wantErrs(t, "Redrive", e.redrive(store.RedriveParams{IDs: atLimit}), nil, nil, nil, nil)
	for _, tk := range e.claimIDs("orders", time.Minute, "w", atLimit...) {
		e.mustFinish(kill(tk, mkFailure("E", "boom"), "w", 0))
	}
	e.advance(time.Minute)

	f := store.DeadFilter{Queue: "orders"}
	var total int64
	calls := 0
	for {
		res, err := e.admin().RedriveDead(e.ctx, store.RedriveDeadParams{
			Filter: f, Limit: 5, Delay: 10 * time.Second, Spread: 20 * time.Second, MaxLife: 1,
			Actor: "bob", Reason: "bug 123 fixed", Now: e.at(),
		})
		if err != nil {
			t.Fatalf("RedriveDead: %v", err)
		}
		if res.Redriven > 5 || res.Redriven < 0 {
			t.Fatalf("RedriveDead with Limit 5 redrove %d", res.Redriven)
		}
		eq(t, fmt.Sprintf("RedriveDead call %d AtLimit", calls+1), res.AtLimit, int64(len(atLimit)))
		if res.Redriven == 0 {
			break
		}
		total += res.Redriven
		calls++
		if calls > 10 {
			t.Fatalf("RedriveDead keeps redriving: %d so far", total)
		}
	}
	eq(t, "tasks redriven", total, int64(16))
	for _, id := range orders[4:] {
		got, _ := e.get(id)
		eq(t, "redriven Status", got.Status, rdq.StatusPending)
		eq(t, "redriven Life", got.Life, 1)
		eq(t, "redriven Attempts", got.Attempts, 0)
		zeroTime(t, "redriven FinishedAt", got.FinishedAt)
		if d := got.NextAttemptAt.Sub(e.now); d < 10*time.Second || d > 30*time.Second {
			t.Errorf("redriven NextAttemptAt = now+%s, want in [now+10s, now+30s)", d)
		}
	}
	for _, id := range atLimit {
		got, _ := e.get(id)
		eq(t, "at-limit Status", got.Status, rdq.StatusDead)
		eq(t, "at-limit Life", got.Life, 1)
	}
	for _, id := range emails {
		eq(t, "other queue Status", e.status(id), rdq.StatusDead)
	}
	entries := nonEmpty(auditEntries(t, e, store.ListAuditParams{Action: "redrive", Actor: "bob"}))
	eq(t, "audit entries of the bulk redrive", len(entries), calls)
	var sum int64
	for _, en := range entries {
		sum += en.Count
		eq(t, "audit Reason", en.Reason, "bug 123 fixed")
		eqHeaders(t, "audit Details", en.Details, map[string]string{"delay": "10s", "spread": "20s", "max_life": "1"})
		checkFilterJSON(t, "bulk redrive", en)
	}
	eq(t, "audit counts summed", sum, total)

	// Without a limit the rest go too.
	res, err := e.admin().RedriveDead(e.ctx, store.RedriveDeadParams{Filter: f, Limit: 100, Actor: "bob", Now: e.at()})
	if err != nil {
		t.Fatalf("RedriveDead: %v", err)
	}
	eq(t, "RedriveDead without MaxLife", res, store.RedriveDeadResult{Redriven: 4})
	eq(t, "life 1 task redriven to life", e.load(atLimit[0]).Life, 2)
}

func testPurgeDead(t *testing.T, e *env) {
	orders := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "boom") }, tasks("orders", 6)...)
	emails := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "boom") }, tasks("emails", 3)...)
	pend := task("orders")
	e.enqueue(pend)

	var counts []int64
	for range 3 {
		n, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{Queue: "orders"}, Limit: 4, Action: "purge", Actor: "carol", Reason: "obsolete"})
		if err != nil {
			t.Fatalf("PurgeDead: %v", err)
		}
		counts = append(counts, n)
	}
	if !slices.Equal(counts, []int64{4, 2, 0}) {
		t.Fatalf("PurgeDead counts with Limit 4 = %v, want [4 2 0]", counts)
	}
	for _, id := range orders {
		e.wantNotFound(id)
	}
	eq(t, "pending task in the purged queue", e.status(pend.ID), rdq.StatusPending)
	for _, id := range emails {
		eq(t, "dead task of another queue", e.status(id), rdq.StatusDead)
	}
	entries := nonEmpty(auditEntries(t, e, store.ListAuditParams{Action: "purge"}))
	var got []int64
	for _, en := range entries {
		got = append(got, en.Count)
		eq(t, "purge audit Actor", en.Actor, "carol")
		eq(t, "purge audit Reason", en.Reason, "obsolete")
		checkFilterJSON(t, "purge", en)
	}
	if !slices.Equal(got, []int64{2, 4}) {
		t.Errorf("purge audit counts (newest first) = %v, want [2 4]", got)
	}

	n, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: emails[:2]}, Limit: 10, Action: "retention", Actor: "janitor"})
	if err != nil || n != 2 {
		t.Fatalf("PurgeDead by IDs = %d, %v; want 2", n, err)
	}
	e.wantNotFound(emails[0])
	e.wantNotFound(emails[1])
	eq(t, "remaining dead task", e.status(emails[2]), rdq.StatusDead)
	ret := nonEmpty(auditEntries(t, e, store.ListAuditParams{Action: "retention"}))
	if len(ret) != 1 || ret[0].Count != 2 || ret[0].Actor != "janitor" {
		t.Errorf("retention audit entries = %+v, want one by janitor with count 2", ret)
	}
}

func testPurgeDeadKeyReusable(t *testing.T, e *env) {
	nt := task("q")
	nt.IdempotencyKey = "k"
	id := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "x") }, nt)[0]
	dup := task("q")
	dup.IdempotencyKey = "k"
	if res := e.enqueue(dup); !res[0].Duplicate {
		t.Fatalf("key of a dead task: not a duplicate")
	}
	if n, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: []rdq.ID{id}}, Limit: 1, Action: "purge", Actor: "a"}); err != nil || n != 1 {
		t.Fatalf("PurgeDead = %d, %v", n, err)
	}
	again := task("q")
	again.IdempotencyKey = "k"
	if res := e.enqueue(again); res[0].Duplicate || res[0].Task.ID != again.ID {
		t.Fatalf("key of a purged dead task: Duplicate=%v ID=%s, want a new task", res[0].Duplicate, res[0].Task.ID)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Every mutation writes one audit entry, in order, with its facts.
func testAuditEveryMutation(t *testing.T, e *env) {
	ids := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "x") }, tasks("q", 5)...)
	before, _ := e.get(ids[0])

	// Nothing redriven: no entry.
	pending := task("q")
	e.enqueue(pending)
	e.redrive(store.RedriveParams{IDs: []rdq.ID{pending.ID, rdq.NewID()}, Actor: "nobody"})
	if got := auditEntries(t, e, store.ListAuditParams{}); len(got) != 0 {
		t.Fatalf("audit entries after a redrive that changed nothing: %+v", got)
	}

	newPayload := []byte(`{"fixed":1}`)
	wantErrs(t, "edit", e.redrive(store.RedriveParams{IDs: ids[:1], Payload: newPayload, Actor: "alice", Reason: "fix payload"}), nil)
	wantErrs(t, "redrive", e.redrive(store.RedriveParams{IDs: []rdq.ID{ids[1], ids[2], pending.ID}, Actor: "alice", Reason: "retry"}), nil, nil, store.ErrNotDead)
	if _, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: ids[3:4]}, Limit: 10, Action: "purge", Actor: "bob", Reason: "junk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin().RedriveDead(e.ctx, store.RedriveDeadParams{Filter: store.DeadFilter{Queue: "q"}, Limit: 10, Actor: "carol", Reason: "bulk", Now: e.at()}); err != nil {
		t.Fatal(err)
	}
	e.makeSucceeded(task("q2"))
	e.advance(2 * time.Hour)
	if _, err := e.s.PurgeSucceeded(e.ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 10, Actor: "janitor", Now: e.at()}); err != nil {
		t.Fatal(err)
	}

	got := nonEmpty(auditEntries(t, e, store.ListAuditParams{}))
	type want struct {
		action, actor, reason string
		count                 int64
		ids                   []rdq.ID
		byFilter              bool
	}
	wants := []want{ // newest first
		{action: "retention", actor: "janitor", count: 1},
		{action: "redrive", actor: "carol", reason: "bulk", count: 1, byFilter: true},
		{action: "purge", actor: "bob", reason: "junk", count: 1, byFilter: true},
		{action: "redrive", actor: "alice", reason: "retry", count: 2, ids: ids[1:3]},
		{action: "edit_payload", actor: "alice", reason: "fix payload", count: 1, ids: ids[:1]},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d audit entries, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		en := got[i]
		what := fmt.Sprintf("audit entry %d (%s)", i, w.action)
		eq(t, what+" Action", en.Action, w.action)
		eq(t, what+" Actor", en.Actor, w.actor)
		eq(t, what+" Reason", en.Reason, w.reason)
		eq(t, what+" Count", en.Count, w.count)
		if en.At.IsZero() {
			t.Errorf("%s At is zero", what)
		}
		if i > 0 && en.ID >= got[i-1].ID {
			t.Errorf("%s ID %d not below the newer entry's %d", what, en.ID, got[i-1].ID)
		}
		if w.ids != nil && !sameIDSet(en.IDs, w.ids) {
			t.Errorf("%s IDs = %v, want %v", what, en.IDs, w.ids)
		}
		if w.byFilter {
			checkFilterJSON(t, what, en)
		}
	}
	edit := got[len(got)-1]
	eq(t, "edit_payload old_sha256", edit.Details["old_sha256"], sha(before.Payload))
	eq(t, "edit_payload new_sha256", edit.Details["new_sha256"], sha(newPayload))
}

// testAuditQueues checks that every audit entry of a mutation of dead
// tasks names the queues it touched, whatever selected the tasks: IDs, a
// group (a fingerprint) or a queue filter.
func testAuditQueues(t *testing.T, e *env) {
	boom := func(int) rdq.Failure { return mkFailure("E", "boom") }
	a := e.makeDead(boom, tasks("qa", 3)...)
	b := e.makeDead(boom, tasks("qb", 3)...)
	c := e.makeDead(boom, tasks("qc", 3)...)
	other := e.makeDead(func(int) rdq.Failure { return mkFailure("F", "other") }, tasks("qd", 2)...)

	wantErrs(t, "redrive by IDs", e.redrive(store.RedriveParams{IDs: []rdq.ID{b[0], a[0], b[1]}, Actor: "alice"}), nil, nil, nil)
	wantErrs(t, "edit", e.redrive(store.RedriveParams{IDs: other[:1], Payload: []byte(`{"v":2}`), Actor: "alice"}), nil)
	if _, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: []rdq.ID{c[0], b[2]}}, Limit: 10, Action: "purge", Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	// The group of fingerprint boom: a[1:], c[1:] are left.
	if _, err := e.admin().RedriveDead(e.ctx, store.RedriveDeadParams{Filter: store.DeadFilter{Fingerprint: rdq.Fingerprint("E", "boom")}, Limit: 10, Actor: "carol", Now: e.at()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{Queue: "qd"}, Limit: 10, Action: "purge", Actor: "dave"}); err != nil {
		t.Fatal(err)
	}
	e.makeSucceeded(task("qs"))
	e.advance(2 * time.Hour)
	if _, err := e.s.PurgeSucceeded(e.ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 10, Actor: "janitor", Now: e.at()}); err != nil {
		t.Fatal(err)
	}

	got := nonEmpty(auditEntries(t, e, store.ListAuditParams{}))
	wants := []struct {
		action string
		queues []string
	}{ // newest first
		{"retention", []string{"qs"}},
		{"purge", []string{"qd"}},
		{"redrive", []string{"qa", "qc"}},
		{"purge", []string{"qb", "qc"}},
		{"edit_payload", []string{"qd"}},
		{"redrive", []string{"qa", "qb"}},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d audit entries, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		en := got[i]
		what := fmt.Sprintf("audit entry %d (%s by %s)", i, en.Action, en.Actor)
		eq(t, what+" Action", en.Action, w.action)
		if !slices.Equal(en.Queues, w.queues) {
			t.Errorf("%s Queues = %q, want %q (sorted, each once)", what, en.Queues, w.queues)
		}
		for _, q := range []string{"qa", "qb", "qc", "qd", "qs"} {
			if en.TouchesQueue(q) != slices.Contains(w.queues, q) {
				t.Errorf("%s TouchesQueue(%q) = %v, want %v", what, q, en.TouchesQueue(q), !en.TouchesQueue(q))
			}
		}
	}
}

func testListAudit(t *testing.T, e *env) {
	// Mutations on the store's own clock, so At grows with ID.
	ids := e.makeDead(func(int) rdq.Failure { return mkFailure("E", "x") }, tasks("q", 12)...)
	steps := []struct {
		actor string
		purge bool
	}{{"alice", false}, {"bob", true}, {"alice", true}, {"carol", false}, {"bob", false}, {"alice", false}, {"carol", true}, {"bob", true}}
	for i, s := range steps {
		id := ids[i]
		if s.purge {
			if _, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: []rdq.ID{id}}, Limit: 1, Action: "purge", Actor: s.actor}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		errs, err := e.admin().Redrive(e.ctx, store.RedriveParams{IDs: []rdq.ID{id}, Actor: s.actor})
		if err != nil || errs[0] != nil {
			t.Fatalf("Redrive: %v %v", err, errs)
		}
	}
	all := auditEntries(t, e, store.ListAuditParams{})
	if len(all) != len(steps) {
		t.Fatalf("%d audit entries, want %d", len(all), len(steps))
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID || all[i].At.After(all[i-1].At) {
			t.Fatalf("ListAudit not newest first: entry %d (id %d at %s) after (id %d at %s)", i, all[i].ID, fmtTime(all[i].At), all[i-1].ID, fmtTime(all[i-1].At))
		}
	}
	brute := func(p store.ListAuditParams) []int64 {
		var out []int64
		for _, en := range all {
			if (p.Actor == "" || en.Actor == p.Actor) && (p.Action == "" || en.Action == p.Action) &&
				(p.Since.IsZero() || !en.At.Before(p.Since)) && (p.Until.IsZero() || en.At.Before(p.Until)) &&
				(p.BeforeID == 0 || en.ID < p.BeforeID) {
				out = append(out, en.ID)
			}
		}
		return out
	}
	entryIDs := func(es []store.AuditEntry) []int64 {
		out := make([]int64, len(es))
		for i, en := range es {
			out[i] = en.ID
		}
		return out
	}
	params := map[string]store.ListAuditParams{
		"actor":          {Actor: "alice"},
		"action":         {Action: "purge"},
		"actor+action":   {Actor: "bob", Action: "redrive"},
		"since":          {Since: all[4].At},
		"until":          {Until: all[2].At},
		"since+until":    {Since: all[5].At, Until: all[1].At},
		"before id":      {BeforeID: all[3].ID},
		"before id+user": {BeforeID: all[1].ID, Actor: "carol"},
		"unknown actor":  {Actor: "mallory"},
	}
	for name, p := range params {
		if got, want := entryIDs(auditEntries(t, e, p)), brute(p); !slices.Equal(got, want) {
			t.Errorf("ListAudit(%s) = %v, want %v", name, got, want)
		}
	}
	// Paging by BeforeID with a small Limit neither skips nor repeats.
	var paged []int64
	p := store.ListAuditParams{Limit: 3}
	for range 10 {
		page := auditEntries(t, e, p)
		if len(page) == 0 {
			break
		}
		paged = append(paged, entryIDs(page)...)
		p.BeforeID = page[len(page)-1].ID
	}
	if want := entryIDs(all); !slices.Equal(paged, want) {
		t.Errorf("ListAudit paged by 3 = %v, want %v", paged, want)
	}
}

func testStats(t *testing.T, e *env) {
	t0 := e.now
	e.makeDead(func(int) rdq.Failure { return mkFailure("E", "x") }, task("alpha"), task("alpha"))
	e.makeDead(func(int) rdq.Failure { return mkFailure("E", "x") }, task("beta"))
	e.makeSucceeded(task("alpha"))
	e.now = t0.Add(50 * time.Second)
	e.makeSucceeded(task("alpha"))
	e.now = t0
	f := task("alpha")
	e.enqueue(f)
	e.claimOne("alpha", time.Hour, "w")

	p1, p2, p3 := task("alpha"), task("alpha"), task("alpha")
	p2.Delay, p3.Delay = 30*time.Second, time.Hour
	g := task("gamma")
	g.Delay = time.Hour
	e.enqueue(p1, p2, p3, g)

	stats := func(at time.Time, window time.Duration) []store.QueueStats {
		t.Helper()
		got, err := e.admin().Stats(e.ctx, store.StatsParams{SucceededWindow: window, Now: &at})
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		return got
	}
	check := func(what string, got, want []store.QueueStats) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	check("Stats at t0+60s, window 30s", stats(t0.Add(60*time.Second), 30*time.Second), []store.QueueStats{
		{Queue: "alpha", Pending: 3, InFlight: 1, Dead: 2, Succeeded: 1, OldestDueAge: 60 * time.Second},
		{Queue: "beta", Dead: 1},
		{Queue: "gamma", Pending: 1},
	})
	check("Stats at t0+2m, window 1h", stats(t0.Add(2*time.Minute), time.Hour), []store.QueueStats{
		{Queue: "alpha", Pending: 3, InFlight: 1, Dead: 2, Succeeded: 2, OldestDueAge: 2 * time.Minute},
		{Queue: "beta", Dead: 1},
		{Queue: "gamma", Pending: 1},
	})
	// Only p1 is due yet 10s in: its age counts from its due time.
	got := stats(t0.Add(10*time.Second), time.Hour)
	if len(got) == 0 || got[0].Queue != "alpha" || got[0].OldestDueAge != 10*time.Second {
		t.Errorf("Stats at t0+10s = %+v, want alpha's OldestDueAge 10s", got)
	}
}
