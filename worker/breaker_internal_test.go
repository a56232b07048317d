package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/srjn45/rdq"
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
		if _, ok := b.observe(now.Add(time.Duration(i)*time.Millisecond), "h", poison, true, "fp"); ok {
			t.Fatalf("a single task failing %d times tripped the breaker", i+1)
		}
	}

	// Four distinct tasks are not enough; the fifth trips it.
	b = newBreakerState(p)
	for i := range 4 {
		if _, ok := b.observe(now, "h", rdq.NewID(), true, "fp"); ok {
			t.Fatalf("%d distinct failed tasks tripped the breaker, want 5", i+1)
		}
	}
	tr, ok := b.observe(now, "h", rdq.NewID(), true, "fp")
	if !ok || tr.fingerprint != "fp" || tr.tasks != 5 || tr.ratio != 1 {
		t.Fatalf("fifth distinct failure: trip %+v, %v; want a trip on fp, 5 tasks, ratio 1", tr, ok)
	}
	// While the trip is being written, no second trip.
	if _, ok := b.observe(now, "h", rdq.NewID(), true, "fp"); ok {
		t.Fatal("a second trip while the first is in progress")
	}

	// Many causes, none shared by five tasks: no trip.
	b = newBreakerState(p)
	for i := range 20 {
		if _, ok := b.observe(now, "h", rdq.NewID(), true, fmt.Sprint("fp", i%5)); ok {
			t.Fatalf("failure %d tripped with at most 4 tasks per cause", i+1)
		}
	}

	// Below the failure ratio: no trip.
	b = newBreakerState(p)
	for range 20 {
		b.observe(now, "h", rdq.NewID(), false, "")
	}
	for i := range 10 {
		if _, ok := b.observe(now, "h", rdq.NewID(), true, "fp"); ok {
			t.Fatalf("tripped at %d failures of %d attempts, under the 0.5 ratio", i+1, 21+i)
		}
	}

	// Failures older than the window are forgotten.
	b = newBreakerState(p)
	for range 4 {
		b.observe(now, "h", rdq.NewID(), true, "fp")
	}
	if _, ok := b.observe(now.Add(2*time.Minute), "h", rdq.NewID(), true, "fp"); ok {
		t.Fatal("failures outside the window counted")
	}

	// The window holds at most maxWindowEvents attempts, and forgets the
	// failures it evicts: after a poison task's 5,000 failures and 5,000
	// successes, ten distinct failures are a small share of the window.
	b = newBreakerState(p)
	for range 5000 {
		b.observe(now, "h", poison, true, "fp")
	}
	for range 5000 {
		b.observe(now, "h", rdq.NewID(), false, "")
	}
	for i := range 10 {
		if _, ok := b.observe(now, "h", rdq.NewID(), true, "fp"); ok {
			t.Fatalf("tripped at the %d-th distinct failure among %d successes", i+1, maxWindowEvents-10)
		}
	}
	if n := len(b.windows["h"].events); n != maxWindowEvents {
		t.Fatalf("window holds %d attempts, want %d", n, maxWindowEvents)
	}

	// Handlers are judged apart.
	b = newBreakerState(p)
	for i := range 8 {
		if _, ok := b.observe(now, fmt.Sprint("h", i%2), rdq.NewID(), true, "fp"); ok {
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
	b.observe(now, "h", rdq.NewID(), true, "fp")
	if _, ok := b.observe(now, "h", rdq.NewID(), true, "fp"); !ok {
		t.Fatal("two distinct failures did not trip the breaker")
	}
	run, held := b.holdBack(claimed)
	if len(run) != 1 || run[0] != claimed[1] || len(held) != 2 || held[0] != claimed[0] || held[1] != claimed[2] {
		t.Fatalf("while tripping: run %v, held %v; want the other handler's task run and h's two held", run, held)
	}
	b.tripped("h")
	if run, held := b.holdBack(claimed); len(run) != 3 || len(held) != 0 {
		t.Fatalf("after the trip: run %d, held %d; want every task run", len(run), len(held))
	}
}
