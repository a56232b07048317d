package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/store"
)

// testPause checks store.Pauser: a paused queue accepts tasks and lets
// claimed executions finish, but Claim returns none of its tasks until it is
// resumed; the state is persisted (another handle on the same store sees
// it); pausing and resuming are audited when the store has Admin, and
// repeating either changes nothing.
func testPause(t *testing.T, h Harness) {
	e := newEnv(t, h)
	p, ok := store.PauserOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.Pauser", e.s)
	}
	paused := func(want ...string) {
		t.Helper()
		got, err := p.PausedQueues(e.ctx)
		if err != nil {
			t.Fatalf("PausedQueues: %v", err)
		}
		if len(got) != len(want) || !slices.Equal(got, want) {
			t.Fatalf("PausedQueues = %v, want %v", got, want)
		}
	}
	paused()

	e.enqueue(task("a"), task("b"))
	inflight := e.claimOne("a", time.Minute, "w")
	for _, q := range []string{"b", "a", "empty-queue"} {
		if err := p.PauseQueue(e.ctx, store.PauseParams{Queue: q, Actor: "ops", Reason: "incident 7"}); err != nil {
			t.Fatalf("PauseQueue(%s): %v", q, err)
		}
	}
	if err := p.PauseQueue(e.ctx, store.PauseParams{Queue: "a", Actor: "ops", Reason: "again"}); err != nil {
		t.Fatalf("PauseQueue of a paused queue: %v", err)
	}
	paused("a", "b", "empty-queue")

	// A paused queue takes tasks but gives none out.
	more := task("a")
	e.enqueue(more, task("c"))
	got := e.claim([]string{"a", "b", "c"}, 10, time.Minute, "w")
	if len(got) != 1 || got[0].Queue != "c" {
		t.Fatalf("Claim over paused a, b and running c returned %v, want only c's task", taskIDs(got))
	}
	// Claimed executions run to completion.
	wantErrs(t, "Heartbeat in a paused queue", e.heartbeat(time.Minute, lease(inflight)), nil)
	e.mustFinish(succeed(inflight, "w", time.Millisecond))

	if err := p.ResumeQueue(e.ctx, store.PauseParams{Queue: "a", Actor: "ops", Reason: "fixed"}); err != nil {
		t.Fatalf("ResumeQueue: %v", err)
	}
	if err := p.ResumeQueue(e.ctx, store.PauseParams{Queue: "never-paused", Actor: "ops"}); err != nil {
		t.Fatalf("ResumeQueue of a running queue: %v", err)
	}
	paused("b", "empty-queue")
	if got := e.claim([]string{"a", "b"}, 10, time.Minute, "w"); len(got) != 1 || got[0].ID != more.ID {
		t.Fatalf("Claim after resuming a returned %v, want %s", taskIDs(got), more.ID)
	}

	// The paused state lives in the store, not in the handle.
	other, closeOther, err := h.Open(e.ctx, e.locator)
	if err != nil {
		t.Fatalf("Harness.Open(%q): %v", e.locator, err)
	}
	op, ok := store.PauserOf(other)
	if !ok {
		t.Fatalf("the store Open returns (%T) does not implement store.Pauser", other)
	}
	seen, err := op.PausedQueues(e.ctx)
	if cerr := closeOther(); cerr != nil {
		t.Errorf("closing the second handle: %v", cerr)
	}
	if err != nil || !slices.Equal(seen, []string{"b", "empty-queue"}) {
		t.Fatalf("PausedQueues through a second handle = %v, %v; want [b empty-queue]", seen, err)
	}
	if a, ok := store.AdminOf(e.s); ok {
		entries, err := a.ListAudit(e.ctx, store.ListAuditParams{Limit: 100})
		if err != nil {
			t.Fatalf("ListAudit: %v", err)
		}
		var got [][4]string
		for _, en := range entries {
			got = append(got, [4]string{en.Action, en.Actor, en.Reason, strings.Join(en.Queues, ",")})
		}
		want := [][4]string{ // newest first; repeats wrote nothing; each names its queue
			{"resume", "ops", "fixed", "a"},
			{"pause", "ops", "incident 7", "empty-queue"},
			{"pause", "ops", "incident 7", "a"},
			{"pause", "ops", "incident 7", "b"},
		}
		if !slices.Equal(got, want) {
			t.Errorf("audit entries = %v, want %v", got, want)
		}
	}
}
