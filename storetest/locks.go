package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// lockWait bounds how long a claim or reclaim may take while another
// transaction holds a row lock: a store that waits behind the lock instead
// of passing over it blocks until the lock is released, which the test only
// does afterwards, so it fails when this runs out.
const lockWait = 20 * time.Second

// A claim passes over a task another transaction holds locked and takes the
// next due one at once; once the lock is released, the locked task is
// claimable.
func testClaimSkipsLocked(t *testing.T, e *env) {
	if e.h.LockTask == nil {
		t.Skip("Harness.LockTask is nil: the store has no row locks (Claim/ConcurrentNeverEmpty covers it)")
	}
	first, second := task("q"), task("q")
	e.enqueue(first)
	e.advance(time.Millisecond)
	e.enqueue(second)
	e.advance(time.Second)
	unlock := e.h.LockTask(t, e.locator, first.ID)
	ctx, cancel := context.WithTimeout(e.ctx, lockWait)
	got, err := e.s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, WorkerID: "w", Now: e.at()})
	cancel()
	unlock()
	if err != nil {
		t.Fatalf("Claim while the oldest due task is locked by another transaction: %v (a claim must pass over locked tasks, not wait behind them)", err)
	}
	if len(got) != 1 || got[0].ID != second.ID {
		t.Fatalf("Claim while the oldest due task is locked by another transaction returned %v, want the next due task %s", taskIDs(got), second.ID)
	}
	again := e.claim([]string{"q"}, 10, time.Minute, "w")
	if len(again) != 1 || again[0].ID != first.ID {
		t.Fatalf("Claim after the lock was released returned %v, want the formerly locked task %s", taskIDs(again), first.ID)
	}
}

// ReclaimExpired passes over an expired task another transaction holds
// locked and takes the next expired one at once.
func testReclaimSkipsLocked(t *testing.T, e *env) {
	if e.h.LockTask == nil {
		t.Skip("Harness.LockTask is nil: the store has no row locks (Reclaim/Concurrent covers it)")
	}
	first, second := task("q"), task("q")
	e.enqueue(first, second)
	e.claimIDs("q", time.Second, "w1", first.ID, second.ID)
	e.advance(time.Second)
	unlock := e.h.LockTask(t, e.locator, first.ID)
	ctx, cancel := context.WithTimeout(e.ctx, lockWait)
	got, err := e.s.ReclaimExpired(ctx, store.ReclaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, WorkerID: "r", Now: e.at()})
	cancel()
	unlock()
	if err != nil {
		t.Fatalf("ReclaimExpired while one expired task is locked by another transaction: %v (a reclaim must pass over locked tasks, not wait behind them)", err)
	}
	if len(got) != 1 || got[0].ID == first.ID {
		t.Fatalf("ReclaimExpired while task %s is locked by another transaction returned %v, want the other expired task", first.ID, taskIDs(got))
	}
	again := e.reclaim([]string{"q"}, 10, time.Minute, "r")
	if len(again) != 1 || again[0].ID != first.ID {
		t.Fatalf("ReclaimExpired after the lock was released returned %v, want the formerly locked task %s", taskIDs(again), first.ID)
	}
}

// Concurrent claims of one task each, never more claims than due tasks:
// every claim returns a task. A claim that waits behind a row another claim
// holds, and then finds it taken, comes back empty while tasks are due.
func testClaimConcurrentNeverEmpty(t *testing.T, e *env) {
	const claimers, rounds = 8, 25
	e.enqueue(tasks("q", claimers*rounds)...)
	e.advance(time.Second)
	var (
		mu    sync.Mutex
		seen  = map[rdq.ID]bool{}
		empty int
		wg    sync.WaitGroup
	)
	errs := make(chan error, claimers)
	start := make(chan struct{})
	for w := range claimers {
		wg.Go(func() {
			<-start
			for range rounds {
				got, err := e.s.Claim(e.ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Hour, WorkerID: fmt.Sprintf("w%d", w), Now: e.at()})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if len(got) == 0 {
					empty++
				}
				for _, tk := range got {
					if seen[tk.ID] {
						errs <- fmt.Errorf("task %s claimed twice", tk.ID)
					}
					seen[tk.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Claim: %v", err)
	}
	if empty > 0 {
		t.Fatalf("%d of %d concurrent claims of one task came back empty while at least as many tasks as claims were due: a claim must pass over the tasks other claims hold", empty, claimers*rounds)
	}
	eq(t, "distinct tasks claimed", len(seen), claimers*rounds)
}

// Of two completions of one lease in a batch, the first is applied and the
// second is stale; the same for Release. Two heartbeats of one lease both
// extend it.
func testFinishSameLeaseTwice(t *testing.T, e *env) {
	a, b, c := task("q"), task("q"), task("q")
	e.enqueue(a, b, c)
	claimed := e.claimIDs("q", time.Minute, "w", a.ID, b.ID, c.ID)
	ta, tb, tc := claimed[a.ID], claimed[b.ID], claimed[c.ID]
	f := failure("second completion")
	errs := e.finish(
		retry(ta, time.Hour, failure("first completion"), "w", time.Millisecond),
		succeed(tb, "w", time.Millisecond),
		kill(ta, f, "w", time.Millisecond),
		retry(tb, 0, f, "w", time.Millisecond),
	)
	wantErrs(t, "Finish with two completions of each lease", errs, nil, nil, store.ErrLeaseLost, store.ErrLeaseLost)
	ga, atts := e.get(a.ID)
	eq(t, "Status after a retry then a kill of one lease", ga.Status, rdq.StatusPending)
	eq(t, "Attempts after two completions of one lease", ga.Attempts, 1)
	eq(t, "attempt rows after two completions of one lease", len(atts), 1)
	eq(t, "LastError.Message", ga.LastError.Message, "first completion")
	eqTime(t, "NextAttemptAt", ga.NextAttemptAt, e.now.Add(time.Hour))
	gb, atts := e.get(b.ID)
	eq(t, "Status after a success then a retry of one lease", gb.Status, rdq.StatusSucceeded)
	eq(t, "attempt rows after a success then a retry", len(atts), 1)

	wantErrs(t, "Heartbeat of one lease twice", e.heartbeat(time.Hour, lease(tc), lease(tc)), nil, nil)
	wantErrs(t, "Release of one lease twice", e.release(lease(tc), lease(tc)), nil, store.ErrLeaseLost)
	gc, atts := e.get(c.ID)
	eq(t, "Status after a release", gc.Status, rdq.StatusPending)
	eq(t, "Attempts after a release twice", gc.Attempts, 0)
	eq(t, "attempt rows after a release twice", len(atts), 0)
}

// snapshot is every task of ids with its history, as Get returns them.
type snapshot map[rdq.ID]struct {
	task *rdq.Task
	atts []rdq.Attempt
}

func (e *env) snapshot(ids []rdq.ID) snapshot {
	e.t.Helper()
	out := snapshot{}
	for _, id := range ids {
		tk, atts := e.get(id)
		out[id] = struct {
			task *rdq.Task
			atts []rdq.Attempt
		}{tk, atts}
	}
	return out
}

// A mutation whose audit entry cannot be written fails and changes
// nothing: the audit entry is written in the mutation's own transaction.
func testAuditFailure(t *testing.T, e *env) {
	if e.h.FailAudit == nil {
		t.Fatal("Harness.FailAudit is nil: a store with Admin must let the kit make its audit writes fail")
	}
	dead := e.makeDead(func(int) rdq.Failure { return failure("boom") }, tasks("q", 4)...)
	succeeded := e.makeSucceeded(tasks("q", 2)...)
	var pending []rdq.ID
	for _, r := range e.enqueue(task("q"), task("q")) {
		pending = append(pending, r.Task.ID)
	}
	e.advance(48 * time.Hour)
	all := slices.Concat(dead, succeeded, pending)
	before := e.snapshot(all)
	audit := auditEntries(t, e, store.ListAuditParams{Limit: 1000})

	e.h.FailAudit(t, e.locator)
	mutations := []struct {
		what string
		do   func() error
	}{
		{"Redrive", func() error {
			_, err := e.admin().Redrive(e.ctx, store.RedriveParams{IDs: dead, Actor: "op", Now: e.at()})
			return err
		}},
		{"Redrive with a payload edit", func() error {
			_, err := e.admin().Redrive(e.ctx, store.RedriveParams{IDs: dead[:1], Payload: []byte(`{"fixed":true}`), Actor: "op", Now: e.at()})
			return err
		}},
		{"RedriveDead", func() error {
			_, err := e.admin().RedriveDead(e.ctx, store.RedriveDeadParams{Filter: store.DeadFilter{Queue: "q"}, Limit: 100, Actor: "op", Now: e.at()})
			return err
		}},
		{"PurgeDead", func() error {
			_, err := e.admin().PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{Queue: "q"}, Limit: 100, Action: "purge", Actor: "op"})
			return err
		}},
		{"PurgeSucceeded", func() error {
			_, err := e.s.PurgeSucceeded(e.ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 100, Actor: "op", Now: e.at()})
			return err
		}},
	}
	if lt, ok := store.LiveTasksOf(e.s); ok {
		mutations = append(mutations,
			struct {
				what string
				do   func() error
			}{"RetryNow", func() error {
				_, err := lt.RetryNow(e.ctx, store.RetryNowParams{IDs: pending, Actor: "op", Now: e.at()})
				return err
			}},
			struct {
				what string
				do   func() error
			}{"Cancel", func() error {
				_, err := lt.Cancel(e.ctx, store.CancelParams{IDs: pending, Actor: "op", Reason: "r", Now: e.at()})
				return err
			}})
	}
	for _, m := range mutations {
		if err := m.do(); err == nil {
			t.Errorf("%s succeeded although its audit entry could not be written", m.what)
		}
	}
	if p, ok := store.PauserOf(e.s); ok {
		if err := p.PauseQueue(e.ctx, store.PauseParams{Queue: "q", Actor: "op"}); err == nil {
			t.Errorf("PauseQueue succeeded although its audit entry could not be written")
		}
		if got, err := p.PausedQueues(e.ctx); err != nil || len(got) != 0 {
			t.Errorf("PausedQueues after a pause whose audit failed = %v, %v; want none", got, err)
		}
	}
	if hp, ok := store.HandlerPauserOf(e.s); ok {
		if _, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: "q", Handler: "handler-q", Actor: "op", Now: e.at()}); err == nil {
			t.Errorf("PauseHandler succeeded although its audit entry could not be written")
		}
		if got, err := hp.PausedHandlers(e.ctx, ""); err != nil || len(got) != 0 {
			t.Errorf("PausedHandlers after a pause whose audit failed = %v, %v; want none", got, err)
		}
	}
	after := e.snapshot(all)
	for _, id := range all {
		b, a := before[id], after[id]
		if !reflect.DeepEqual(b.task, a.task) {
			t.Errorf("task %s changed by mutations whose audit entries could not be written:\nbefore %+v\nafter  %+v", id, *b.task, *a.task)
		}
		if !reflect.DeepEqual(b.atts, a.atts) {
			t.Errorf("history of task %s changed by mutations whose audit entries could not be written:\nbefore %+v\nafter  %+v", id, b.atts, a.atts)
		}
	}
	eq(t, "audit entries after failed mutations", len(auditEntries(t, e, store.ListAuditParams{Limit: 1000})), len(audit))
}
