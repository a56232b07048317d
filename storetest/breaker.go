package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// testHandlerPause checks store.HandlerPauser: a paused handler's tasks
// wait (claims return only the queue's other handlers, and no attempt is
// counted for a task that did not run) while claimed executions finish;
// after the cool-off exactly one probe is leased among concurrent callers,
// the waiting task with the fewest attempts; a failed probe reopens with
// one more trip, a successful one resumes, a stale probe changes nothing; a
// probe whose lease expired lets a new one through; an operator's pause
// never probes; the state is persisted; changes are audited.
func testHandlerPause(t *testing.T, h Harness) {
	e := newEnv(t, h)
	hp, ok := store.HandlerPauserOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.HandlerPauser", e.s)
	}
	const q = "storm"
	mk := func(handler string) store.NewTask {
		nt := task(q)
		nt.Handler = handler
		return nt
	}
	paused := func() []store.HandlerPause {
		t.Helper()
		got, err := hp.PausedHandlers(e.ctx, "")
		if err != nil {
			t.Fatalf("PausedHandlers: %v", err)
		}
		return got
	}
	if got := paused(); len(got) != 0 {
		t.Fatalf("PausedHandlers of a new store = %+v, want none", got)
	}
	probe := func(worker string) []store.Probe {
		t.Helper()
		got, err := hp.ClaimProbe(e.ctx, store.ProbeParams{Queues: []string{q, "other"}, Lease: time.Minute, WorkerID: worker, Now: e.at()})
		if err != nil {
			t.Fatalf("ClaimProbe: %v", err)
		}
		return got
	}

	// Invalid names are refused with rdq.ErrInvalid.
	if _, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: q, Handler: "bad name!"}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("PauseHandler with an invalid handler name: err = %v, want rdq.ErrInvalid", err)
	}
	if _, err := hp.ResumeHandler(e.ctx, store.ResumeHandlerParams{Queue: "", Handler: "down"}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("ResumeHandler with an empty queue: err = %v, want rdq.ErrInvalid", err)
	}

	// Five tasks of the failing handler "down", two of "up"; one of
	// "down" runs when the breaker trips.
	down := []store.NewTask{mk("down"), mk("down"), mk("down"), mk("down"), mk("down")}
	e.enqueue(down[:2]...)
	running := e.claimIDs(q, time.Minute, "w1", down[0].ID, down[1].ID)
	inflight, released := running[down[0].ID], running[down[1].ID]
	e.enqueue(down[2:]...)
	e.enqueue(mk("up"), mk("up"))
	e.advance(time.Second)

	pause := store.PauseHandlerParams{Queue: q, Handler: "down", CoolOff: time.Minute, Actor: "breaker",
		Reason: "failure ratio over threshold", Fingerprint: "fp-down", Ratio: 0.95, Now: e.at()}
	changed, err := hp.PauseHandler(e.ctx, pause)
	if err != nil || !changed {
		t.Fatalf("PauseHandler = %v, %v; want true, nil", changed, err)
	}
	again := pause
	again.Reason = "again"
	if changed, err := hp.PauseHandler(e.ctx, again); err != nil || changed {
		t.Fatalf("PauseHandler of a paused handler = %v, %v; want false, nil", changed, err)
	}
	ps := paused()
	if len(ps) != 1 {
		t.Fatalf("PausedHandlers = %+v, want one", ps)
	}
	eq(t, "pause queue", ps[0].Queue, q)
	eq(t, "pause handler", ps[0].Handler, "down")
	eq(t, "pause state", ps[0].State, store.HandlerOpen)
	eq(t, "pause trips", ps[0].Trips, 1)
	eq(t, "pause actor", ps[0].Actor, "breaker")
	eq(t, "pause fingerprint", ps[0].Fingerprint, "fp-down")
	eq(t, "pause ratio", ps[0].Ratio, 0.95)
	eqTime(t, "pause since", ps[0].Since, e.now)
	eqTime(t, "pause probe time", ps[0].ProbeAt, e.now.Add(time.Minute))

	// Claims skip the paused handler, including tasks that become
	// pending while it is paused (a retry, a release, a new task).
	e.mustFinish(retry(inflight, 0, failure("connection refused"), "w1", time.Millisecond))
	wantErrs(t, "Release of a paused handler's task", e.release(lease(released)), nil)
	late := mk("down")
	e.enqueue(late)
	got := e.claim([]string{q}, 10, time.Minute, "w2")
	if len(got) != 2 || got[0].Handler != "up" || got[1].Handler != "up" {
		t.Fatalf("Claim with handler down paused returned %v, want only the two tasks of up", taskIDs(got))
	}
	// Waiting tasks keep their budgets: nothing is recorded for them.
	for _, nt := range append(down[2:], late) {
		tk, atts := e.get(nt.ID)
		eq(t, "status of a waiting task", tk.Status, rdq.StatusPending)
		eq(t, "attempts of a waiting task", tk.Attempts, 0)
		eq(t, "history of a waiting task", len(atts), 0)
	}

	// The waiting tasks stay visible to operators as pending, whether the
	// listing is by queue or not.
	if lt, ok := store.LiveTasksOf(e.s); ok {
		for _, f := range []store.TaskFilter{{Queue: q}, {Handler: "down"}} {
			listed, err := lt.ListTasks(e.ctx, store.ListTasksParams{State: store.StatePending, Filter: f, Limit: 100})
			if err != nil {
				t.Fatalf("ListTasks(pending, %+v): %v", f, err)
			}
			seen := map[rdq.ID]bool{}
			for _, tk := range listed {
				seen[tk.ID] = true
			}
			for _, nt := range append(down[2:], late) {
				if !seen[nt.ID] {
					t.Errorf("ListTasks(pending, %+v) lacks waiting task %s of the paused handler", f, nt.ID)
				}
			}
		}
	}

	// Before the cool-off, no probe.
	if got := probe("w1"); len(got) != 0 {
		t.Fatalf("ClaimProbe before the cool-off returned %d probes", len(got))
	}
	e.advance(time.Minute)
	// A claimant that does not run the paused handler leases no probe of
	// it (a worker of an older version, in a rolling deploy).
	if got, err := hp.ClaimProbe(e.ctx, store.ProbeParams{Queues: []string{q}, Handlers: []string{"up"}, Lease: time.Minute, WorkerID: "w-old", Now: e.at()}); err != nil || len(got) != 0 {
		t.Fatalf("ClaimProbe by a claimant of handler \"up\" only = %d probes, %v; want none of the paused \"down\"", len(got), err)
	}
	// Concurrent callers that run it: exactly one probe.
	var mu sync.Mutex
	var probes []store.Probe
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := hp.ClaimProbe(e.ctx, store.ProbeParams{Queues: []string{q}, Handlers: []string{"up", "down"}, Lease: time.Minute, WorkerID: "racer", Now: e.at()})
			if err != nil {
				t.Errorf("concurrent ClaimProbe: %v", err)
				return
			}
			mu.Lock()
			probes = append(probes, got...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(probes) != 1 {
		t.Fatalf("8 concurrent ClaimProbe calls leased %d probes, want exactly 1", len(probes))
	}
	p1 := probes[0]
	eq(t, "probe handler", p1.Task.Handler, "down")
	eq(t, "probe status", p1.Task.Status, rdq.StatusInFlight)
	// The fewest attempts first: not the task that already failed once.
	eq(t, "probe attempts", p1.Task.Attempts, 0)
	if p1.Task.ID == down[0].ID {
		t.Errorf("the probe is the task that already failed, want one with its budget intact")
	}
	eq(t, "probe pause state", p1.Pause.State, store.HandlerHalfOpen)
	eq(t, "probe lease in the pause", p1.Pause.Probe, lease(p1.Task))
	// The worker judges the probe by the cause that tripped the breaker.
	eq(t, "probe pause fingerprint", p1.Pause.Fingerprint, "fp-down")
	eq(t, "probe pause reason", p1.Pause.Reason, "failure ratio over threshold")
	if got := probe("w2"); len(got) != 0 {
		t.Fatalf("ClaimProbe while a probe runs returned %d probes", len(got))
	}
	if got := e.claim([]string{q}, 10, time.Minute, "w2"); len(got) != 0 {
		t.Fatalf("Claim while half-open returned %v, want none", taskIDs(got))
	}
	if ps := paused(); len(ps) != 1 || ps[0].State != store.HandlerHalfOpen || ps[0].Probe != lease(p1.Task) {
		t.Fatalf("PausedHandlers while probing = %+v, want half-open with the probe", ps)
	}

	// The probe fails: open again, one more trip, a longer cool-off.
	e.mustFinish(retry(p1.Task, 0, failure("connection refused"), "racer", time.Millisecond))
	reopen := store.PauseHandlerParams{Queue: q, Handler: "down", CoolOff: 2 * time.Minute, Probe: ptr(lease(p1.Task)),
		Actor: "breaker", Reason: "probe failed", Fingerprint: "fp-down", Ratio: 1, Now: e.at()}
	if changed, err := hp.PauseHandler(e.ctx, reopen); err != nil || !changed {
		t.Fatalf("PauseHandler after a failed probe = %v, %v; want true, nil", changed, err)
	}
	if changed, err := hp.PauseHandler(e.ctx, reopen); err != nil || changed {
		t.Fatalf("PauseHandler with the same probe again = %v, %v; want false, nil", changed, err)
	}
	ps = paused()
	if len(ps) != 1 {
		t.Fatalf("PausedHandlers = %+v, want one", ps)
	}
	eq(t, "reopened state", ps[0].State, store.HandlerOpen)
	eq(t, "reopened trips", ps[0].Trips, 2)
	eqTime(t, "reopened probe time", ps[0].ProbeAt, e.now.Add(2*time.Minute))
	e.advance(time.Minute)
	if got := probe("w1"); len(got) != 0 {
		t.Fatalf("ClaimProbe within the longer cool-off returned %d probes", len(got))
	}
	e.advance(time.Minute)
	p2s := probe("w1")
	if len(p2s) != 1 {
		t.Fatalf("ClaimProbe after the second cool-off returned %d probes, want 1", len(p2s))
	}
	p2 := p2s[0]
	eq(t, "second probe attempts", p2.Task.Attempts, 0)
	// A stale probe neither resumes nor reopens.
	if changed, err := hp.ResumeHandler(e.ctx, store.ResumeHandlerParams{Queue: q, Handler: "down", Probe: ptr(lease(p1.Task)), Actor: "breaker", Now: e.at()}); err != nil || changed {
		t.Fatalf("ResumeHandler with a stale probe = %v, %v; want false, nil", changed, err)
	}
	// The probe succeeds: the handler resumes and every waiting task is
	// claimable again.
	e.mustFinish(succeed(p2.Task, "w1", time.Millisecond))
	if changed, err := hp.ResumeHandler(e.ctx, store.ResumeHandlerParams{Queue: q, Handler: "down", Probe: ptr(lease(p2.Task)), Actor: "breaker", Reason: "probe succeeded", Now: e.at()}); err != nil || !changed {
		t.Fatalf("ResumeHandler with the probe = %v, %v; want true, nil", changed, err)
	}
	if ps := paused(); len(ps) != 0 {
		t.Fatalf("PausedHandlers after resuming = %+v, want none", ps)
	}
	waiting := map[rdq.ID]bool{}
	for _, nt := range append(down, late) {
		if nt.ID != p2.Task.ID {
			waiting[nt.ID] = true
		}
	}
	got = e.claim([]string{q}, 20, time.Minute, "w2")
	if len(got) != len(waiting) {
		t.Fatalf("Claim after resuming returned %d tasks, want the %d that waited", len(got), len(waiting))
	}
	for _, tk := range got {
		if !waiting[tk.ID] {
			t.Errorf("Claim after resuming returned %s, which did not wait", tk.ID)
		}
	}

	// A probe whose worker died: once its lease expired, another probe.
	for _, tk := range got {
		e.mustFinish(retry(tk, 0, failure("connection refused"), "w2", time.Millisecond))
	}
	if changed, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: q, Handler: "down", CoolOff: time.Second, Actor: "breaker", Now: e.at()}); err != nil || !changed {
		t.Fatalf("PauseHandler of a new series = %v, %v; want true, nil", changed, err)
	}
	if ps := paused(); len(ps) != 1 || ps[0].Trips != 1 {
		t.Fatalf("PausedHandlers of a new series = %+v, want one with 1 trip", ps)
	}
	e.advance(time.Second)
	lost := probe("w1")
	if len(lost) != 1 {
		t.Fatalf("ClaimProbe = %d probes, want 1", len(lost))
	}
	e.advance(30 * time.Second)
	if got := probe("w2"); len(got) != 0 {
		t.Fatalf("ClaimProbe while the probe's lease is live returned %d probes", len(got))
	}
	e.advance(31 * time.Second)
	next := probe("w2")
	if len(next) != 1 || next[0].Task.ID == lost[0].Task.ID {
		t.Fatalf("ClaimProbe after the probe's lease expired = %+v, want a new probe", next)
	}
	if changed, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: q, Handler: "down", CoolOff: time.Second, Probe: ptr(lease(lost[0].Task)), Actor: "breaker", Now: e.at()}); err != nil || changed {
		t.Fatalf("PauseHandler with the lost probe = %v, %v; want false, nil", changed, err)
	}

	// An operator's pause (no cool-off) never probes, and an operator's
	// resume needs no probe.
	if changed, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: q, Handler: "up", Actor: "ops", Reason: "hold", Now: e.at()}); err != nil || !changed {
		t.Fatalf("PauseHandler without a cool-off = %v, %v; want true, nil", changed, err)
	}
	e.enqueue(mk("up"))
	e.advance(1000 * time.Hour)
	for _, p := range probe("w1") {
		if p.Task.Handler == "up" {
			t.Fatalf("ClaimProbe probed a handler paused until resumed")
		}
	}
	ps = paused()
	if len(ps) != 2 || ps[1].Handler != "up" || !ps[1].ProbeAt.IsZero() {
		t.Fatalf("PausedHandlers = %+v, want down and up, up without a probe time", ps)
	}

	// The state lives in the store, not in the handle.
	other, closeOther, err := h.Open(e.ctx, e.locator)
	if err != nil {
		t.Fatalf("Harness.Open(%q): %v", e.locator, err)
	}
	ohp, ok := store.HandlerPauserOf(other)
	if !ok {
		t.Fatalf("the store Open returns (%T) does not implement store.HandlerPauser", other)
	}
	seen, err := ohp.PausedHandlers(e.ctx, q)
	if cerr := closeOther(); cerr != nil {
		t.Errorf("closing the second handle: %v", cerr)
	}
	if err != nil || len(seen) != 2 {
		t.Fatalf("PausedHandlers through a second handle = %+v, %v; want two", seen, err)
	}
	for _, h := range []string{"up", "down"} {
		if changed, err := hp.ResumeHandler(e.ctx, store.ResumeHandlerParams{Queue: q, Handler: h, Actor: "ops", Reason: "forced", Now: e.at()}); err != nil || !changed {
			t.Fatalf("ResumeHandler(%s) by an operator = %v, %v; want true, nil", h, changed, err)
		}
	}
	if changed, err := hp.ResumeHandler(e.ctx, store.ResumeHandlerParams{Queue: q, Handler: "never", Actor: "ops", Now: e.at()}); err != nil || changed {
		t.Fatalf("ResumeHandler of a running handler = %v, %v; want false, nil", changed, err)
	}

	a, ok := store.AdminOf(e.s)
	if !ok {
		return
	}
	entries, err := a.ListAudit(e.ctx, store.ListAuditParams{Limit: 100})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	var actions [][2]string
	for _, en := range entries {
		actions = append(actions, [2]string{en.Action, en.Actor})
	}
	slices.Reverse(actions)
	want := [][2]string{
		{"pause_handler", "breaker"},  // trip
		{"pause_handler", "breaker"},  // failed probe
		{"resume_handler", "breaker"}, // successful probe
		{"pause_handler", "breaker"},  // new series
		{"pause_handler", "ops"},
		{"resume_handler", "ops"},
		{"resume_handler", "ops"},
	}
	if !slices.Equal(actions, want) {
		t.Fatalf("audit (oldest first) = %v, want %v", actions, want)
	}
	first := entries[len(entries)-1]
	eq(t, "trip audit reason", first.Reason, "failure ratio over threshold")
	eq(t, "trip audit fingerprint", first.Details["fingerprint"], "fp-down")
	eq(t, "trip audit ratio", first.Details["ratio"], "0.950")
	eq(t, "trip audit handler", first.Details["handler"], "down")
	eq(t, "reopen audit trips", entries[len(entries)-2].Details["trips"], "2")
	if !containsFold(first.Filter, `"handler":"down"`) || !containsFold(first.Filter, `"queue":"storm"`) {
		t.Errorf("trip audit filter = %s, want the queue and handler", first.Filter)
	}
	testProbeChoice(t, h)
}

// testProbeChoice checks which task becomes the probe and how many: of a
// paused handler's waiting tasks the one with the fewest attempts, even
// when one that spent an attempt is due earlier; and exactly one per
// handler however many callers race, over many paused handlers at once.
func testProbeChoice(t *testing.T, h Harness) {
	e := newEnv(t, h)
	hp, _ := store.HandlerPauserOf(e.s)
	// A race shows only when the callers overlap: several rounds, each in
	// a queue of its own.
	const rounds, handlers, perHandler, callers = 5, 16, 3, 8
	for r := range rounds {
		q := fmt.Sprintf("q%d", r)
		// Each handler's oldest task has failed once and is due at once;
		// the others, enqueued later, have their budgets intact.
		var spent []rdq.ID
		for i := range handlers {
			first := task(q)
			first.Handler = fmt.Sprintf("h%d", i)
			e.enqueue(first)
			spent = append(spent, first.ID)
		}
		claimed := e.claimIDs(q, time.Minute, "w", spent...)
		for _, id := range spent {
			e.mustFinish(retry(claimed[id], 0, failure("down"), "w", time.Millisecond))
		}
		e.advance(time.Second)
		for i := range handlers {
			handler := fmt.Sprintf("h%d", i)
			for range perHandler - 1 {
				nt := task(q)
				nt.Handler = handler
				e.enqueue(nt)
			}
			if _, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: q, Handler: handler, CoolOff: time.Minute,
				Actor: "breaker", Reason: "r", Fingerprint: "fp", Ratio: 1, Now: e.at()}); err != nil {
				t.Fatalf("PauseHandler(%s, %s): %v", q, handler, err)
			}
		}
		e.advance(2 * time.Minute)

		var (
			mu     sync.Mutex
			probes []store.Probe
			wg     sync.WaitGroup
		)
		start := make(chan struct{})
		for c := range callers {
			wg.Go(func() {
				<-start
				got, err := hp.ClaimProbe(e.ctx, store.ProbeParams{Queues: []string{q}, Lease: time.Minute, WorkerID: fmt.Sprintf("racer-%d", c), Now: e.at()})
				if err != nil {
					t.Errorf("concurrent ClaimProbe: %v", err)
					return
				}
				mu.Lock()
				probes = append(probes, got...)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		per := map[string]int{}
		for _, p := range probes {
			per[p.Task.Handler]++
			if slices.Contains(spent, p.Task.ID) || p.Task.Attempts != 0 {
				t.Errorf("probe of %s in %s is task %s with %d attempts; want one of the tasks with the fewest attempts (0), not the one due earliest",
					p.Task.Handler, q, p.Task.ID, p.Task.Attempts)
			}
		}
		for i := range handlers {
			if n := per[fmt.Sprintf("h%d", i)]; n != 1 {
				t.Errorf("%d concurrent ClaimProbe calls leased %d probes of handler h%d in %s, want exactly 1", callers, n, i, q)
			}
		}
		if t.Failed() {
			return
		}
	}
}

func ptr[T any](v T) *T { return &v }

// testProbeInPausedQueue checks that a paused queue runs nothing, not even
// the probe of a tripped handler whose cool-off has passed, and that the
// probe comes once the queue is resumed.
func testProbeInPausedQueue(t *testing.T, h Harness) {
	e := newEnv(t, h)
	hp, ok := store.HandlerPauserOf(e.s)
	if !ok {
		t.Fatalf("%T declares PauseHandlers and Pause but is no store.HandlerPauser", e.s)
	}
	pq, ok := store.PauserOf(e.s)
	if !ok {
		t.Fatalf("%T declares PauseHandlers and Pause but is no store.Pauser", e.s)
	}
	const q = "stopped"
	nt := task(q)
	nt.Handler = "down"
	e.enqueue(nt)
	if changed, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: q, Handler: "down", CoolOff: time.Second, Actor: "breaker", Now: e.at()}); err != nil || !changed {
		t.Fatalf("PauseHandler = %v, %v; want true, nil", changed, err)
	}
	if err := pq.PauseQueue(e.ctx, store.PauseParams{Queue: q, Actor: "ops", Reason: "incident"}); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	e.advance(time.Minute)
	probe := func() []store.Probe {
		t.Helper()
		got, err := hp.ClaimProbe(e.ctx, store.ProbeParams{Queues: []string{q}, Lease: time.Minute, WorkerID: "w", Now: e.at()})
		if err != nil {
			t.Fatalf("ClaimProbe: %v", err)
		}
		return got
	}
	if got := probe(); len(got) != 0 {
		t.Fatalf("ClaimProbe in a paused queue leased %d probes, want none", len(got))
	}
	if err := pq.ResumeQueue(e.ctx, store.PauseParams{Queue: q, Actor: "ops", Reason: "over"}); err != nil {
		t.Fatalf("ResumeQueue: %v", err)
	}
	if got := probe(); len(got) != 1 || got[0].Task.ID != nt.ID {
		t.Fatalf("ClaimProbe after the queue resumed leased %d probes, want the waiting task", len(got))
	}
}
