package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// testSnooze checks store.Snoozer: a snoozed task waits exactly its delay,
// keeps its attempts and history, counts the snooze, and is claimable again
// with a new token; a stale or repeated lease changes nothing; a redrive
// starts the count again.
func testSnooze(t *testing.T, h Harness) {
	e := newEnv(t, h)
	sn, ok := store.SnoozerOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.Snoozer", e.s)
	}
	snooze := func(items ...store.SnoozeItem) []error {
		t.Helper()
		errs, err := sn.Snooze(e.ctx, store.SnoozeParams{Snoozes: items, Now: e.at()})
		if err != nil {
			t.Fatalf("Snooze: %v", err)
		}
		if len(errs) != len(items) {
			t.Fatalf("Snooze of %d items returned %d errors", len(items), len(errs))
		}
		return errs
	}

	nt := task("q")
	e.enqueue(nt)
	first := e.claimOne("q", time.Minute, "w")
	e.mustFinish(retry(first, 0, failure("boom"), "w", time.Millisecond))
	tk := e.claimOne("q", time.Minute, "w")
	if tk.Attempts != 1 {
		t.Fatalf("attempts before the snooze = %d, want 1", tk.Attempts)
	}
	// The same lease twice in one batch snoozes once.
	wantErrs(t, "Snooze", snooze(
		store.SnoozeItem{Lease: lease(tk), Delay: 30 * time.Second},
		store.SnoozeItem{Lease: lease(tk), Delay: time.Hour},
	), nil, store.ErrLeaseLost)
	got, atts := e.get(tk.ID)
	eq(t, "Status after a snooze", got.Status, rdq.StatusPending)
	eq(t, "Attempts after a snooze", got.Attempts, 1)
	eq(t, "Snoozes after a snooze", got.Snoozes, 1)
	eq(t, "history length after a snooze", len(atts), 1)
	eqTime(t, "NextAttemptAt after a snooze", got.NextAttemptAt, e.now.Add(30*time.Second))
	zeroTime(t, "LeaseExpiresAt after a snooze", got.LeaseExpiresAt)

	// The old lease is gone: snoozing or finishing with it changes nothing.
	wantErrs(t, "Snooze with a stale lease", snooze(store.SnoozeItem{Lease: lease(tk), Delay: time.Second}), store.ErrLeaseLost)
	if errs := e.finish(succeed(tk, "w", time.Millisecond)); !errors.Is(errs[0], store.ErrLeaseLost) {
		t.Fatalf("Finish with the snoozed lease: %v, want ErrLeaseLost", errs[0])
	}

	// Not due before its delay, due at it, with a greater token.
	e.advance(30*time.Second - time.Millisecond)
	if c := e.claim([]string{"q"}, 10, time.Minute, "w"); len(c) != 0 {
		t.Fatalf("Claim before the snooze's delay returned %v", taskIDs(c))
	}
	e.advance(time.Millisecond)
	again := e.claimOne("q", time.Minute, "w")
	if again.ID != tk.ID || again.LeaseToken <= tk.LeaseToken || again.Attempts != 1 || again.Snoozes != 1 {
		t.Fatalf("claim after the snooze: %+v; want task %s, token > %d, 1 attempt, 1 snooze", again, tk.ID, tk.LeaseToken)
	}
	// A negative delay is zero: due at once.
	wantErrs(t, "Snooze with a negative delay", snooze(store.SnoozeItem{Lease: lease(again), Delay: -time.Minute}), nil)
	third := e.claimOne("q", time.Minute, "w")
	eq(t, "Snoozes after two snoozes", third.Snoozes, 2)

	if _, ok := store.AdminOf(e.s); !ok {
		return
	}
	e.mustFinish(kill(third, failure("fatal"), "w", time.Millisecond))
	wantErrs(t, "Redrive", e.redrive(store.RedriveParams{IDs: []rdq.ID{tk.ID}, Actor: "ops", Reason: "r"}), nil)
	redriven, _ := e.get(tk.ID)
	eq(t, "Snoozes after a redrive", redriven.Snoozes, 0)
}
