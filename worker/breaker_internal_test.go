package worker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func TestBreakerTripsOnDistinctTasksOnly(t *testing.T) {
	p, err := Breaker{Window: time.Minute, MinFailedTasks: 5, FailureRatio: 0.5}.withDefaults("q")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)

	// One poison task failing a thousand times never trips it.
	b := newBreakerState(p)
	poison := rdq.NewID()
	for i := range 1000 {
		if _, ok := b.see(now.Add(time.Duration(i)*time.Millisecond), "h", poison, true, "fp"); ok {
			t.Fatalf("a single task failing %d times tripped the breaker", i+1)
		}
	}

	// Four distinct tasks are not enough; the fifth trips it.
	b = newBreakerState(p)
	for i := range 4 {
		if _, ok := b.see(now, "h", rdq.NewID(), true, "fp"); ok {
			t.Fatalf("%d distinct failed tasks tripped the breaker, want 5", i+1)
		}
	}
	tr, ok := b.see(now, "h", rdq.NewID(), true, "fp")
	if !ok || tr.fingerprint != "fp" || tr.tasks != 5 || tr.ratio != 1 {
		t.Fatalf("fifth distinct failure: trip %+v, %v; want a trip on fp, 5 tasks, ratio 1", tr, ok)
	}
	// While the trip is being written, no second trip.
	if _, ok := b.see(now, "h", rdq.NewID(), true, "fp"); ok {
		t.Fatal("a second trip while the first is in progress")
	}

	// Many causes, none shared by five tasks: no trip.
	b = newBreakerState(p)
	for i := range 20 {
		if _, ok := b.see(now, "h", rdq.NewID(), true, fmt.Sprint("fp", i%5)); ok {
			t.Fatalf("failure %d tripped with at most 4 tasks per cause", i+1)
		}
	}

	// Below the failure ratio: no trip.
	b = newBreakerState(p)
	for range 20 {
		b.see(now, "h", rdq.NewID(), false, "")
	}
	for i := range 10 {
		if _, ok := b.see(now, "h", rdq.NewID(), true, "fp"); ok {
			t.Fatalf("tripped at %d failures of %d attempts, under the 0.5 ratio", i+1, 21+i)
		}
	}

	// Failures older than the window are forgotten.
	b = newBreakerState(p)
	for range 4 {
		b.see(now, "h", rdq.NewID(), true, "fp")
	}
	if _, ok := b.see(now.Add(2*time.Minute), "h", rdq.NewID(), true, "fp"); ok {
		t.Fatal("failures outside the window counted")
	}

	// The window holds at most maxWindowEvents attempts, and forgets the
	// failures it evicts: after a poison task's 5,000 failures and 5,000
	// successes, ten distinct failures are a small share of the window.
	b = newBreakerState(p)
	for range 5000 {
		b.see(now, "h", poison, true, "fp")
	}
	for range 5000 {
		b.see(now, "h", rdq.NewID(), false, "")
	}
	for i := range 10 {
		if _, ok := b.see(now, "h", rdq.NewID(), true, "fp"); ok {
			t.Fatalf("tripped at the %d-th distinct failure among %d successes", i+1, maxWindowEvents-10)
		}
	}
	if n := len(b.windows["h"].events); n != maxWindowEvents {
		t.Fatalf("window holds %d attempts, want %d", n, maxWindowEvents)
	}

	// Handlers are judged apart.
	b = newBreakerState(p)
	for i := range 8 {
		if _, ok := b.see(now, fmt.Sprint("h", i%2), rdq.NewID(), true, "fp"); ok {
			t.Fatalf("tripped on %d failures split over two handlers", i+1)
		}
	}
}

func TestBreakerCoolOffBacksOffToCap(t *testing.T) {
	p, err := Breaker{CoolOff: time.Second, MaxCoolOff: 5 * time.Second}.withDefaults("q")
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := p.coolOff(i + 1); got != w {
			t.Errorf("coolOff(%d) = %s, want %s", i+1, got, w)
		}
	}
	d, err := Breaker{}.withDefaults("q")
	if err != nil || d.Window != DefaultBreakerWindow || d.MinFailedTasks != DefaultBreakerMinFailedTasks ||
		d.FailureRatio != DefaultBreakerFailureRatio || d.CoolOff != DefaultBreakerCoolOff || d.MaxCoolOff != DefaultBreakerMaxCoolOff {
		t.Errorf("Breaker{} with defaults = %+v, %v", d, err)
	}
	for _, bad := range []Breaker{{FailureRatio: 1.5}, {MinFailedTasks: -1}, {Window: -1}, {CoolOff: time.Hour, MaxCoolOff: time.Minute}} {
		if _, err := bad.withDefaults("q"); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestBreakerHoldsBackTasksWhileTripping: between the trip decision and the
// pause committing in the store, tasks of the tripping handler that a claim
// returns are held back (released unrun); other handlers' tasks run, and
// once the trip is over nothing is held back.
func TestBreakerHoldsBackTasksWhileTripping(t *testing.T) {
	p, err := Breaker{Window: time.Minute, MinFailedTasks: 2, FailureRatio: 0.5}.withDefaults("q")
	if err != nil {
		t.Fatal(err)
	}
	var none *breakerState
	claimed := []*rdq.Task{{ID: rdq.NewID(), Handler: "h"}, {ID: rdq.NewID(), Handler: "other"}, {ID: rdq.NewID(), Handler: "h"}}
	if run, held := none.holdBack(claimed); len(run) != 3 || len(held) != 0 {
		t.Fatalf("without a breaker: run %d, held %d; want every task run", len(run), len(held))
	}
	b := newBreakerState(p)
	if run, held := b.holdBack(claimed); len(run) != 3 || len(held) != 0 {
		t.Fatalf("before any trip: run %d, held %d; want every task run", len(run), len(held))
	}
	now := time.Unix(1700000000, 0)
	b.see(now, "h", rdq.NewID(), true, "fp")
	if _, ok := b.see(now, "h", rdq.NewID(), true, "fp"); !ok {
		t.Fatal("two distinct failures did not trip the breaker")
	}
	run, held := b.holdBack(claimed)
	if len(run) != 1 || run[0] != claimed[1] || len(held) != 2 || held[0] != claimed[0] || held[1] != claimed[2] {
		t.Fatalf("while tripping: run %v, held %v; want the other handler's task run and h's two held", run, held)
	}
	b.tripped("h", now)
	if run, held := b.holdBack(claimed); len(run) != 3 || len(held) != 0 {
		t.Fatalf("after the trip: run %d, held %d; want every task run", len(run), len(held))
	}
}

// see is observe of an attempt that started when it ended.
func (b *breakerState) see(now time.Time, handler string, task rdq.ID, failed bool, fingerprint string) (trip, bool) {
	return b.observe(now, now, handler, task, failed, fingerprint)
}

// TestBreakerDominantCauseOnly: when the window's ratio comes to qualify
// through failures of another cause, those failures do not trip the
// breaker; the next failure of the dominant cause does.
func TestBreakerDominantCauseOnly(t *testing.T) {
	p, err := Breaker{Window: 20 * time.Second, MinFailedTasks: 10, FailureRatio: 0.5}.withDefaults("q")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	b := newBreakerState(p)
	for range 12 {
		b.see(now, "h", rdq.NewID(), false, "")
	}
	for i := range 10 {
		if _, ok := b.see(now, "h", rdq.NewID(), true, "down"); ok {
			t.Fatalf("tripped at %d of %d attempts failed, under the ratio", i+1, 13+i)
		}
	}
	// 10 "down" tasks; failures of another cause bring the ratio to 0.5.
	for i := range 2 {
		if tr, ok := b.see(now, "h", rdq.NewID(), true, "conflict"); ok {
			t.Fatalf("failure %d of another cause tripped the breaker: %+v", i+1, tr)
		}
	}
	tr, ok := b.see(now, "h", rdq.NewID(), true, "down")
	if !ok || tr.fingerprint != "down" || tr.tasks != 11 || tr.failed != 13 || tr.total != 25 {
		t.Fatalf("a failure of the dominant cause: trip %+v, %v; want a trip on down, 11 tasks, 13 of 25 failed", tr, ok)
	}
	b.tripped("h", now)

	// The same with the ratio reached as old successes leave the window.
	b = newBreakerState(p)
	for range 20 {
		b.see(now, "h", rdq.NewID(), false, "")
	}
	later := now.Add(10 * time.Second)
	for range 10 {
		b.see(later, "h", rdq.NewID(), true, "down")
	}
	expired := now.Add(25 * time.Second)
	if tr, ok := b.see(expired, "h", rdq.NewID(), true, "conflict"); ok {
		t.Fatalf("a failure of another cause tripped the breaker once the successes expired: %+v", tr)
	}
	if tr, ok := b.see(expired, "h", rdq.NewID(), true, "down"); !ok || tr.fingerprint != "down" {
		t.Fatalf("a failure of the dominant cause: trip %+v, %v; want a trip on down", tr, ok)
	}
}

// TestBreakerMinorCauseNeverTrips: a cause with MinFailedTasks distinct
// tasks but fewer than another cause of the window does not trip the
// breaker when its failure brings the ratio to qualify; the dominant
// cause's next failure does, and names it. Two causes with as many tasks
// each are both dominant.
func TestBreakerMinorCauseNeverTrips(t *testing.T) {
	p, err := Breaker{Window: 20 * time.Second, MinFailedTasks: 3, FailureRatio: 0.5}.withDefaults("q")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	see := func(b *breakerState, n int, failed bool, fp string) {
		t.Helper()
		for range n {
			if tr, ok := b.see(now, "h", rdq.NewID(), failed, fp); ok {
				t.Fatalf("tripped while the window was being filled: %+v", tr)
			}
		}
	}

	b := newBreakerState(p)
	see(b, 10, false, "")
	see(b, 6, true, "down")
	see(b, 3, true, "conflict") // 9 of 19 failed
	// The fourth conflict task: 10 of 20 failed, 4 tasks of conflict
	// (above MinFailedTasks), but 6 of down.
	if tr, ok := b.see(now, "h", rdq.NewID(), true, "conflict"); ok {
		t.Fatalf("a failure of a cause with fewer tasks than another tripped the breaker: %+v", tr)
	}
	tr, ok := b.see(now, "h", rdq.NewID(), true, "down")
	if !ok || tr.fingerprint != "down" || tr.tasks != 7 || tr.failed != 11 || tr.total != 21 {
		t.Fatalf("a failure of the dominant cause: trip %+v, %v; want a trip on down, 7 tasks, 11 of 21 failed", tr, ok)
	}

	b = newBreakerState(p)
	see(b, 8, false, "")
	see(b, 4, true, "down")
	see(b, 3, true, "conflict") // 7 of 15 failed
	tr, ok = b.see(now, "h", rdq.NewID(), true, "conflict")
	if !ok || tr.fingerprint != "conflict" || tr.tasks != 4 {
		t.Fatalf("a failure of a cause with as many tasks as any other, at the ratio: trip %+v, %v; want a trip on conflict, 4 tasks", tr, ok)
	}
}

// TestBreakerClearsEvidenceOnPauseAndResume: a worker forgets the attempts
// it saw before a pause or resume it notices in the store, and before a
// resume or trip of its own, including attempts that started before and
// end after; attempts that start later count.
func TestBreakerClearsEvidenceOnPauseAndResume(t *testing.T) {
	p, err := Breaker{Window: 20 * time.Second, MinFailedTasks: 5, FailureRatio: 0.5}.withDefaults("q")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fill := func(b *breakerState, ms int) {
		t.Helper()
		for range 4 {
			if _, ok := b.see(at(ms), "h", rdq.NewID(), true, "down"); ok {
				t.Fatal("four distinct failures tripped a breaker of five")
			}
		}
	}
	pause := []store.HandlerPause{{Queue: "q", Handler: "h", State: store.HandlerOpen, Fingerprint: "down"}}

	for _, c := range []struct {
		name  string
		clear func(b *breakerState, ms int)
	}{
		{"pause noticed", func(b *breakerState, ms int) { b.notice(pause, at(ms)) }},
		{"resume noticed", func(b *breakerState, ms int) {
			b.notice(pause, at(ms-1))
			b.notice(nil, at(ms))
		}},
		{"resumed by its probe", func(b *breakerState, ms int) { b.resumed("h", at(ms)) }},
		{"its own trip", func(b *breakerState, ms int) { b.tripped("h", at(ms)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBreakerState(p)
			fill(b, 0)
			c.clear(b, 1000)
			// An attempt started before the clear and ending after it
			// is stale; one started after counts.
			if tr, ok := b.observe(at(1100), at(900), "h", rdq.NewID(), true, "down"); ok {
				t.Fatalf("the fifth failure tripped on evidence from before the clear: %+v", tr)
			}
			if w := b.windows["h"]; w != nil && len(w.events) != 0 {
				t.Fatalf("window after the clear holds %d attempts, want 0", len(w.events))
			}
			fill(b, 1200)
			if _, ok := b.observe(at(1300), at(1001), "h", rdq.NewID(), true, "down"); !ok {
				t.Fatal("five distinct failures after the clear did not trip")
			}
		})
	}

	// A pause already known clears nothing when seen again.
	b := newBreakerState(p)
	b.notice(pause, at(0))
	fill(b, 100)
	if added, gone := b.notice(pause, at(200)); len(added) != 0 || len(gone) != 0 {
		t.Fatalf("notice of an unchanged list: added %v, gone %v", added, gone)
	}
	if _, ok := b.see(at(300), "h", rdq.NewID(), true, "down"); !ok {
		t.Fatal("seeing a known pause again cleared the evidence")
	}
}

// TestBreakerNoRetripAfterRecovery replays the multi-worker scenario of a
// breaker that re-opened on stale failures, on a simulated clock and a
// simulated store: window 20 s, cool-off 8 s, three workers. Worker 2 ran a
// burst of successes early on; at 15 s the downstream goes down and every
// call fails with one cause; workers 0 and 1 trip the breaker while worker
// 2, its ratio diluted by the burst, is still under it. The downstream
// recovers at 20 s with 10% background failures of another cause
// (conflicts). By the time the probe runs, the burst has left worker 2's
// window, which then holds only outage failures. The probe closes the
// breaker, and it must stay closed.
func TestBreakerNoRetripAfterRecovery(t *testing.T) {
	const (
		tick     = 10 * time.Millisecond
		callTime = 100 * time.Millisecond
		poll     = time.Second
	)
	pol, err := Breaker{Window: 20 * time.Second, MinFailedTasks: 10, FailureRatio: 0.5,
		CoolOff: 8 * time.Second, MaxCoolOff: time.Minute}.withDefaults("q")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	rng := rand.New(rand.NewPCG(19, 2))
	// call is the downstream's answer at d since t0.
	call := func(d time.Duration) (failed bool, fp string) {
		switch {
		case d >= 15*time.Second && d < 20*time.Second:
			return true, "down"
		case d >= 20*time.Second && rng.IntN(10) == 0:
			return true, "conflict"
		}
		return false, ""
	}
	// period is how often worker i starts a call at d, zero for never.
	period := func(i int, d time.Duration) time.Duration {
		switch {
		case i == 2 && d < 2*time.Second:
			return 50 * time.Millisecond // the burst: 40 successes
		case i == 2 && d >= 15*time.Second:
			return 20 * time.Millisecond
		case i < 2 && d >= 15*time.Second:
			return 40 * time.Millisecond
		}
		return 0
	}

	// The store's pause of handler h.
	var (
		pause    *store.HandlerPause
		halfOpen bool
		pauses   []time.Duration // trips and re-trips, since t0
		resumes  []time.Duration
	)
	workers := []*breakerState{newBreakerState(pol), newBreakerState(pol), newBreakerState(pol)}
	type call1 struct {
		start, end time.Duration
		task       rdq.ID
		failed     bool
		fp         string
	}
	inFlight := make([][]call1, len(workers))
	for d := time.Duration(0); d <= 60*time.Second; d += tick {
		now := t0.Add(d)
		for i, b := range workers {
			// Calls that end now.
			for len(inFlight[i]) > 0 && inFlight[i][0].end <= d {
				c := inFlight[i][0]
				inFlight[i] = inFlight[i][1:]
				tr, ok := b.observe(now, t0.Add(c.start), "h", c.task, c.failed, c.fp)
				if !ok {
					continue
				}
				if pause == nil {
					pause = &store.HandlerPause{Queue: "q", Handler: "h", State: store.HandlerOpen, Trips: 1,
						ProbeAt: now.Add(pol.CoolOff), Fingerprint: tr.fingerprint}
					pauses = append(pauses, d)
				}
				b.tripped("h", now)
			}
			// The worker's poll: what the store says, then a probe.
			if (d+time.Duration(i)*333*time.Millisecond)%poll == 0 {
				var list []store.HandlerPause
				if pause != nil {
					list = []store.HandlerPause{*pause}
				}
				b.notice(list, now)
				if pause != nil && !halfOpen && !now.Before(pause.ProbeAt) {
					halfOpen = true
					failed, fp := call(d)
					if probeFailed(pause, failed, fp) {
						pause.Trips++
						pause.ProbeAt = now.Add(pol.coolOff(pause.Trips))
						pauses = append(pauses, d)
					} else {
						pause = nil
						resumes = append(resumes, d)
						b.resumed("h", now)
					}
					halfOpen = false
				}
			}
			// New calls, unless the store holds the handler's tasks.
			if p := period(i, d); p > 0 && d%p == 0 && pause == nil {
				failed, fp := call(d)
				inFlight[i] = append(inFlight[i], call1{start: d, end: d + callTime, task: rdq.NewID(), failed: failed, fp: fp})
			}
		}
	}
	if len(pauses) == 0 || pauses[0] < 15*time.Second || pauses[0] >= 20*time.Second {
		t.Fatalf("pauses at %v, resumes at %v; want the first during the outage (15 s to 20 s)", pauses, resumes)
	}
	if len(resumes) == 0 {
		t.Fatalf("pauses at %v; the breaker never closed", pauses)
	}
	for _, p := range pauses[1:] {
		t.Errorf("the breaker re-opened at %s after closing at %s (pauses %v, resumes %v)", p, resumes[0], pauses, resumes)
	}
	if len(resumes) != 1 || pause != nil {
		t.Errorf("resumes at %v, paused at the end: %v; want one resume and the handler running", resumes, pause != nil)
	}
}
