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

	if out := h.ok("queue", "ls"); out != "no queue is paused in "+h.desc()+"\n" {
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

// Forcing a handler's breaker open stops claims of that handler's tasks
// (not of the queue's others) until it is forced closed; the state is
// listed, both changes are audited, and repeats change nothing.
func TestQueueBreakerOpenClose(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "orders", Handler: "charge"},
		{ID: rdq.NewID(), Queue: "orders", Handler: "email"},
	}}); err != nil {
		t.Fatal(err)
	}
	claim := func() []string {
		t.Helper()
		got, err := h.s.Claim(ctx, store.ClaimParams{Queues: []string{"orders"}, Limit: 10, Lease: time.Minute, WorkerID: "w"})
		if err != nil {
			t.Fatal(err)
		}
		var handlers []string
		for _, tk := range got {
			handlers = append(handlers, tk.Handler)
		}
		return handlers
	}

	if out := h.ok("queue", "breakers"); out != "no handler is paused in "+h.desc()+": every breaker is closed\n" {
		t.Fatalf("queue breakers before opening: %q", out)
	}
	if out := h.ok("queue", "open", "orders", "charge", "--reason", "INC-12"); out != "breaker of orders/charge forced open\n" {
		t.Fatalf("queue open: %q", out)
	}
	if out := h.ok("queue", "open", "orders", "charge", "--reason", "again"); out != "breaker of orders/charge was already open\n" {
		t.Fatalf("queue open again: %q", out)
	}
	out := h.ok("queue", "breakers", "orders")
	if !strings.Contains(out, "QUEUE") || !strings.Contains(out, "charge") || !strings.Contains(out, "open") || !strings.Contains(out, "until closed") || !strings.Contains(out, "INC-12") {
		t.Fatalf("queue breakers while open:\n%s", out)
	}
	var ls struct {
		PausedHandlers []struct {
			Queue, Handler, State, Actor, Reason string
			Trips                                int
		} `json:"paused_handlers"`
	}
	mustJSON(t, h.ok("--json", "queue", "breakers"), &ls)
	if len(ls.PausedHandlers) != 1 || ls.PausedHandlers[0].State != "open" || ls.PausedHandlers[0].Handler != "charge" || ls.PausedHandlers[0].Trips != 1 {
		t.Fatalf("queue breakers --json: %+v", ls)
	}
	if got := claim(); !slices.Equal(got, []string{"email"}) {
		t.Fatalf("claimed %v with charge open, want only email", got)
	}
	if out := h.ok("queue", "close", "orders", "charge", "--reason", "fixed", "--actor", "ops"); out != "breaker of orders/charge forced closed\n" {
		t.Fatalf("queue close: %q", out)
	}
	if got := claim(); !slices.Equal(got, []string{"charge"}) {
		t.Fatalf("claimed %v after closing, want charge", got)
	}
	var got []string
	for _, e := range h.audit() {
		if e.Action == "pause_handler" || e.Action == "resume_handler" {
			got = append(got, e.Action+" "+e.Actor+" "+e.Reason)
		}
	}
	if want := []string{"resume_handler ops fixed", "pause_handler tester INC-12"}; !slices.Equal(got, want) {
		t.Errorf("audit = %q, want %q", got, want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "open", "orders", "--reason", "x"}, "takes a queue and a handler"},
		{[]string{"queue", "open", "orders", "charge"}, "pass --reason"},
		{[]string{"queue", "open", "orders", "bad name", "--reason", "x"}, "handler name"},
		{[]string{"queue", "open", "orders", "charge", "--reason", "x", "--cool-off", "-1s"}, "negative"},
		{[]string{"queue", "close", "orders", "charge", "extra", "--reason", "x"}, "takes a queue and a handler"},
	} {
		r := h.run("", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rdq %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(c.args, " "), r.code, r.stderr, exitUsage, c.want)
		}
	}
}
