package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// testRegistry checks store.WorkerRegistry: registration and refresh (the
// start kept, the rest replaced), listing by queue, staleness and removal by
// the store's clock, deregistration, the waiting tasks no live worker
// serves, and dead-lettering them after a grace period through an attempt,
// the dead-letter counts and the audit log.
func testRegistry(t *testing.T, h Harness) {
	e := newEnv(t, h)
	reg, ok := store.RegistryOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.WorkerRegistry", e.s)
	}
	workers := func(queue string) []store.WorkerInfo {
		t.Helper()
		ws, err := reg.Workers(e.ctx, store.WorkersParams{Queue: queue, Now: e.at()})
		if err != nil {
			t.Fatalf("Workers(%q): %v", queue, err)
		}
		return ws
	}
	ids := func(ws []store.WorkerInfo) []string {
		out := []string{}
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	register := func(w store.WorkerInfo, stale, expire time.Duration) {
		t.Helper()
		if err := reg.RegisterWorker(e.ctx, store.RegisterWorkerParams{Worker: w, StaleAfter: stale, ExpireAfter: expire, Now: e.at()}); err != nil {
			t.Fatalf("RegisterWorker(%s): %v", w.ID, err)
		}
	}
	unserved := func(queues ...string) []store.UnservedHandler {
		t.Helper()
		us, err := reg.UnservedHandlers(e.ctx, store.UnservedParams{Queues: queues, Now: e.at()})
		if err != nil {
			t.Fatalf("UnservedHandlers(%v): %v", queues, err)
		}
		return us
	}
	type pair struct {
		queue, handler string
		tasks          int64
	}
	pairs := func(us []store.UnservedHandler) []pair {
		out := []pair{}
		for _, u := range us {
			out = append(out, pair{u.Queue, u.Handler, u.Tasks})
		}
		return out
	}

	if ws := workers(""); len(ws) != 0 {
		t.Fatalf("Workers of an empty registry = %v, want none", ids(ws))
	}
	for _, bad := range []store.RegisterWorkerParams{
		{Worker: store.WorkerInfo{Queues: []string{"a"}}, StaleAfter: time.Second, ExpireAfter: time.Minute},
		{Worker: store.WorkerInfo{ID: "w"}, StaleAfter: 0, ExpireAfter: time.Minute},
		{Worker: store.WorkerInfo{ID: "w"}, StaleAfter: time.Minute, ExpireAfter: time.Second},
	} {
		if err := reg.RegisterWorker(e.ctx, bad); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("RegisterWorker(%+v) = %v, want an error wrapping rdq.ErrInvalid", bad, err)
		}
	}

	w1 := store.WorkerInfo{ID: "w1", Host: "host-1", PID: 41, Version: "v1.2.3",
		Queues: []string{"b", "a"}, Handlers: []string{"h2", "h1"}, Slots: 20, InFlight: 0}
	start := e.now
	register(w1, 30*time.Second, 10*time.Minute)
	e.advance(10 * time.Second)
	w1.InFlight = 3
	register(w1, 30*time.Second, 10*time.Minute)
	got := workers("")
	if len(got) != 1 {
		t.Fatalf("Workers after registering w1 = %v, want [w1]", ids(got))
	}
	g := got[0]
	eq(t, "ID", g.ID, "w1")
	eq(t, "Host", g.Host, "host-1")
	eq(t, "PID", g.PID, 41)
	eq(t, "Version", g.Version, "v1.2.3")
	eq(t, "Slots", g.Slots, 20)
	eq(t, "InFlight after a refresh", g.InFlight, 3)
	eq(t, "Stale", g.Stale, false)
	if !slices.Equal(g.Queues, []string{"a", "b"}) || !slices.Equal(g.Handlers, []string{"h1", "h2"}) {
		t.Errorf("Queues, Handlers = %v, %v; want [a b], [h1 h2] (sorted)", g.Queues, g.Handlers)
	}
	eqTime(t, "StartedAt (kept by a refresh)", g.StartedAt, start)
	eqTime(t, "LastSeen (the refresh)", g.LastSeen, e.now)
	if !g.Serves("a", "h2") || g.Serves("c", "h1") || g.Serves("a", "h3") {
		t.Errorf("Serves is wrong for %+v", g)
	}
	if got := ids(workers("b")); !slices.Equal(got, []string{"w1"}) {
		t.Errorf("Workers(b) = %v, want [w1]", got)
	}
	if got := ids(workers("c")); len(got) != 0 {
		t.Errorf("Workers(c) = %v, want none", got)
	}

	// Waiting tasks no live worker serves, counted per (queue, handler).
	served := task("a")
	served.Handler = "h1"
	lost1, lost2 := task("a"), task("a")
	lost1.Handler, lost2.Handler = "h3", "h3"
	lost2.Delay = time.Hour
	otherQueue := task("c")
	otherQueue.Handler = "h1"
	enqueued := e.now
	e.enqueue(served, lost1, lost2, otherQueue)
	e.advance(4 * time.Second)
	us := unserved()
	if want := []pair{{"a", "h3", 2}, {"c", "h1", 1}}; !slices.Equal(pairs(us), want) {
		t.Fatalf("UnservedHandlers = %v, want %v", pairs(us), want)
	}
	eqTime(t, "OldestDue", us[0].OldestDue, enqueued)
	eq(t, "Waiting", us[0].Waiting, 4*time.Second)
	if want := []pair{{"a", "h3", 2}}; !slices.Equal(pairs(unserved("a", "z")), want) {
		t.Errorf("UnservedHandlers(a, z) = %v, want %v", pairs(unserved("a", "z")), want)
	}

	// DueOnly counts only the due tasks of the queues it names.
	due, err := reg.UnservedHandlers(e.ctx, store.UnservedParams{Queues: []string{"a", "c"}, DueOnly: true, Now: e.at()})
	if err != nil {
		t.Fatalf("UnservedHandlers(DueOnly): %v", err)
	}
	if want := []pair{{"a", "h3", 1}, {"c", "h1", 1}}; !slices.Equal(pairs(due), want) {
		t.Errorf("UnservedHandlers(a, c, DueOnly) = %v, want %v (the task due in an hour left out)", pairs(due), want)
	}
	if _, err := reg.UnservedHandlers(e.ctx, store.UnservedParams{DueOnly: true, Now: e.at()}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("UnservedHandlers(DueOnly, no queue) = %v, want an error wrapping rdq.ErrInvalid", err)
	}

	// Only due tasks count towards the waiting time.
	notYet := task("d")
	notYet.Delay = time.Hour
	e.enqueue(notYet)
	for _, u := range unserved("d") {
		eq(t, "Waiting of a task due in an hour", u.Waiting, time.Duration(0))
	}

	// The entry lives in the store, not the handle.
	other, closeOther, err := h.Open(e.ctx, e.locator)
	if err != nil {
		t.Fatalf("Harness.Open(%q): %v", e.locator, err)
	}
	oreg, ok := store.RegistryOf(other)
	if !ok {
		t.Fatalf("the store Open returns (%T) does not implement store.WorkerRegistry", other)
	}
	seen, err := oreg.Workers(e.ctx, store.WorkersParams{Now: e.at()})
	if cerr := closeOther(); cerr != nil {
		t.Errorf("closing the second handle: %v", cerr)
	}
	if err != nil || len(seen) != 1 || seen[0].ID != "w1" {
		t.Fatalf("Workers on another handle = %v, %v; want [w1]", ids(seen), err)
	}

	// Without a refresh for StaleAfter, the entry is stale and serves
	// nothing.
	e.advance(30 * time.Second)
	if got := workers(""); len(got) != 1 || !got[0].Stale {
		t.Fatalf("Workers 30s after the last refresh (StaleAfter 30s) = %+v, want w1 stale", got)
	}
	if want := []pair{{"a", "h1", 1}, {"a", "h3", 2}}; !slices.Equal(pairs(unserved("a")), want) {
		t.Errorf("UnservedHandlers(a) with w1 stale = %v, want %v", pairs(unserved("a")), want)
	}
	// A refresh makes it live again.
	register(w1, 30*time.Second, 10*time.Minute)
	if got := workers(""); len(got) != 1 || got[0].Stale {
		t.Fatalf("Workers after a refresh of a stale entry = %+v, want w1 live", got)
	}

	// Past ExpireAfter, the entry is gone from listings, and removed by the
	// next registration of any worker.
	e.advance(10 * time.Minute)
	if got := ids(workers("")); len(got) != 0 {
		t.Fatalf("Workers 10m after the last refresh (ExpireAfter 10m) = %v, want none", got)
	}
	w2 := store.WorkerInfo{ID: "w2", Queues: []string{"a"}, Handlers: []string{"h1"}, Slots: 1}
	register(w2, time.Minute, time.Hour)
	e.advance(-11 * time.Minute) // w1 would be live again at this time, had it not been removed
	if got := ids(workers("")); !slices.Equal(got, []string{"w2"}) {
		t.Fatalf("Workers after w2's registration removed the expired w1 = %v, want [w2]", got)
	}
	e.advance(11 * time.Minute)

	// Dead-lettering after a grace period, only while nobody serves the pair.
	for _, bad := range []store.DeadLetterUnservedParams{
		{Queue: "a", Handler: "h3", Grace: -time.Second, Limit: 1, Failure: rdq.UnservedHandlerFailure("a", "h3", 0)},
		{Queue: "a", Handler: "h3", Limit: 0, Failure: rdq.UnservedHandlerFailure("a", "h3", 0)},
		{Queue: "", Handler: "h3", Limit: 1, Failure: rdq.UnservedHandlerFailure("a", "h3", 0)},
		{Queue: "a", Handler: "h3", Limit: 1},
	} {
		if _, err := reg.DeadLetterUnserved(e.ctx, bad); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("DeadLetterUnserved(%+v) = %v, want an error wrapping rdq.ErrInvalid", bad, err)
		}
	}
	deadLetter := func(queue, handler string, grace time.Duration) int64 {
		t.Helper()
		n, err := reg.DeadLetterUnserved(e.ctx, store.DeadLetterUnservedParams{
			Queue: queue, Handler: handler, Grace: grace, Limit: 10,
			Failure: rdq.UnservedHandlerFailure(queue, handler, grace), Actor: "w2", Now: e.at(),
		})
		if err != nil {
			t.Fatalf("DeadLetterUnserved(%s, %s, %s): %v", queue, handler, grace, err)
		}
		return n
	}
	waited := e.now.Sub(enqueued)
	if n := deadLetter("a", "h3", waited+time.Second); n != 0 {
		t.Fatalf("DeadLetterUnserved with a grace longer than the wait moved %d tasks, want 0", n)
	}
	if n := deadLetter("a", "h1", 0); n != 0 {
		t.Fatalf("DeadLetterUnserved of a pair a live worker serves moved %d tasks, want 0", n)
	}
	if n := deadLetter("a", "h3", waited); n != 1 {
		t.Fatalf("DeadLetterUnserved(a, h3) moved %d tasks, want 1 (the other is not due)", n)
	}
	eq(t, "status of the due unserved task", e.status(lost1.ID), rdq.StatusDead)
	eq(t, "status of the unserved task not yet due", e.status(lost2.ID), rdq.StatusPending)
	eq(t, "status of the served task", e.status(served.ID), rdq.StatusPending)
	dead, atts := e.get(lost1.ID)
	want := rdq.UnservedHandlerFailure("a", "h3", waited)
	eq(t, "last error type", dead.LastError.Type, rdq.UnservedHandlerErrorType)
	eq(t, "last error message", dead.LastError.Message, want.Message)
	eq(t, "attempts counted", dead.Attempts, 1)
	if len(atts) != 1 {
		t.Fatalf("history of the dead-lettered task has %d attempts, want 1", len(atts))
	}
	eq(t, "attempt outcome", atts[0].Outcome, rdq.OutcomePermanentFailure)
	eq(t, "attempt worker", atts[0].WorkerID, "w2")
	eq(t, "attempt error type", atts[0].ErrorType, rdq.UnservedHandlerErrorType)
	if h.Capabilities.Admin {
		entries := auditEntries(t, e, store.ListAuditParams{Action: "dead_letter_unserved"})
		if len(entries) != 1 || entries[0].Count != 1 || !slices.Equal(entries[0].IDs, []rdq.ID{lost1.ID}) || entries[0].Actor != "w2" {
			t.Fatalf("dead_letter_unserved audit entries = %+v, want one naming %s, by w2", entries, lost1.ID)
		}
		stats, err := e.admin().Stats(e.ctx, store.StatsParams{Now: e.at()})
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		for _, s := range stats {
			if s.Queue == "a" {
				eq(t, "dead tasks of queue a in Stats", s.Dead, int64(1))
			}
		}
	}

	// Deregistration removes the entry; removing a missing one is no error.
	if err := reg.DeregisterWorker(e.ctx, "w2"); err != nil {
		t.Fatalf("DeregisterWorker(w2): %v", err)
	}
	if err := reg.DeregisterWorker(e.ctx, "never-registered"); err != nil {
		t.Fatalf("DeregisterWorker of a worker never registered: %v", err)
	}
	if got := ids(workers("")); len(got) != 0 {
		t.Fatalf("Workers after deregistering w2 = %v, want none", got)
	}
}
