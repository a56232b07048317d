package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Pausing a queue stops claims of its tasks for every worker until it is
// resumed; both changes are audited and repeats change nothing.
func TestQueuePauseResume(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "orders", Handler: "charge"}}}); err != nil {
		t.Fatal(err)
	}
	claim := func() int {
		t.Helper()
		got, err := h.s.Claim(ctx, store.ClaimParams{Queues: []string{"orders"}, Limit: 10, Lease: time.Minute, WorkerID: "w"})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}

	if out := h.ok("queue", "ls"); out != "no queue is paused\n" {
		t.Fatalf("queue ls before pausing: %q", out)
	}
	if out := h.ok("queue", "pause", "orders", "--reason", "INC-9"); out != "queue orders paused\n" {
		t.Fatalf("queue pause: %q", out)
	}
	h.ok("queue", "pause", "orders", "--reason", "again")
	if out := h.ok("queue", "ls"); out != "PAUSED QUEUE\norders\n" {
		t.Fatalf("queue ls while paused: %q", out)
	}
	if n := claim(); n != 0 {
		t.Fatalf("claimed %d tasks of a paused queue", n)
	}
	h.ok("queue", "resume", "orders", "--reason", "fixed", "--actor", "ops")
	var ls struct{ Paused []string }
	mustJSON(t, h.ok("--json", "queue", "ls"), &ls)
	if len(ls.Paused) != 0 {
		t.Fatalf("paused after resume: %v", ls.Paused)
	}
	if n := claim(); n != 1 {
		t.Fatalf("claimed %d tasks after resuming, want 1", n)
	}

	var got []string
	for _, e := range h.audit() {
		if e.Action == "pause" || e.Action == "resume" {
			got = append(got, e.Action+" "+e.Actor+" "+e.Reason)
		}
	}
	if want := []string{"resume ops fixed", "pause tester INC-9"}; !slices.Equal(got, want) {
		t.Errorf("audit = %q, want %q", got, want)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "pause", "--reason", "x"}, "takes one queue name"},
		{[]string{"queue", "pause", "orders"}, "pass --reason"},
		{[]string{"queue", "pause", "bad name", "--reason", "x"}, "queue name"},
		{[]string{"queue", "stop", "orders"}, "unknown queue command"},
	} {
		r := h.run("", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rdq %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(c.args, " "), r.code, r.stderr, exitUsage, c.want)
		}
	}
}
