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

// rdq tasks: list by state with filters and pages, show by id and by key,
// retry now and cancel with their audit entries and per-task errors.
func TestTasksCommands(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var waiting []rdq.ID
	for i := range 5 {
		nt := store.NewTask{ID: rdq.NewID(), Queue: "shipping", Handler: "ship", Payload: []byte(`{"n":1}`), Delay: time.Hour}
		if i == 0 {
			nt.IdempotencyKey = "order-77"
		}
		if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{nt}}); err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, nt.ID)
	}

	var page struct {
		State         string
		Tasks         []struct{ ID string }
		NextPageToken string `json:"next_page_token"`
	}
	var seen []string
	token := ""
	for range 5 {
		args := []string{"--json", "tasks", "ls", "--queue", "shipping", "--limit", "2"}
		if token != "" {
			args = append(args, "--page", token)
		}
		mustJSON(t, h.ok(args...), &page)
		for _, tk := range page.Tasks {
			seen = append(seen, tk.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if len(seen) != len(waiting) {
		t.Fatalf("tasks ls over pages saw %d tasks, want %d", len(seen), len(waiting))
	}
	for _, id := range waiting {
		if !slices.Contains(seen, id.String()) {
			t.Errorf("tasks ls never listed %s", id)
		}
	}
	// An empty listing names the states where the tasks might be instead.
	if out, want := h.ok("tasks", "ls", "--state", "in-flight"), "no in-flight tasks in "+h.desc()+"; other states: --state pending, --state retrying, --state succeeded\n"; out != want {
		t.Errorf("tasks ls --state in-flight: %q, want %q", out, want)
	}
	if out, want := h.ok("tasks", "ls", "--state", "in_flight"), "no in_flight tasks in "+h.desc()+"; other states: --state pending, --state retrying, --state succeeded\n"; out != want {
		t.Errorf("tasks ls --state in_flight: %q, want %q", out, want)
	}
	if out := h.ok("tasks", "key", "shipping", "order-77"); !strings.Contains(out, waiting[0].String()) {
		t.Errorf("tasks key did not show %s:\n%s", waiting[0], out)
	}
	if out := h.ok("tasks", "show", waiting[1].String()); !strings.Contains(out, "PENDING") {
		t.Errorf("tasks show:\n%s", out)
	}

	if out := h.ok("tasks", "retry", waiting[1].String(), "--reason", "carrier back"); out != "1 of 1 task made due now\n" {
		t.Errorf("tasks retry: %q", out)
	}
	if got, _, err := h.s.Get(ctx, waiting[1]); err != nil || got.NextAttemptAt.After(time.Now()) {
		t.Errorf("after tasks retry the task is due at %v (%v)", got.NextAttemptAt, err)
	}
	r := h.run("", "tasks", "cancel", waiting[0].String(), waiting[2].String(), rdq.NewID().String(), "--reason", "order refunded", "--actor", "alice")
	if r.code != exitNotFound || !strings.Contains(r.stdout, "2 of 3 tasks cancelled") {
		t.Errorf("tasks cancel with an unknown id: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, id := range waiting[:3:3] {
		if id == waiting[1] {
			continue
		}
		got, atts, err := h.s.Get(ctx, id)
		if err != nil || got.Status != rdq.StatusDead || atts[len(atts)-1].Outcome != rdq.OutcomeCancelled || atts[len(atts)-1].WorkerID != "alice" {
			t.Errorf("cancelled task %s: %v %+v %v", id, got, atts, err)
		}
	}
	// The history names who cancelled, not a worker that ran something.
	if out := h.ok("dlq", "show", waiting[0].String()); !strings.Contains(out, "CANCELLED  by alice  ") || strings.Contains(out, "worker alice") {
		t.Errorf("dlq show of a cancelled task:\n%s", out)
	}
	r = h.run("", "tasks", "cancel", waiting[0].String(), "--reason", "again")
	if r.code != exitConflict || !strings.Contains(r.stderr, "not pending") {
		t.Errorf("cancelling a dead task: exit %d, stderr %q", r.code, r.stderr)
	}
	var got []string
	for _, e := range h.audit() {
		if e.Action == "cancel" || e.Action == "retry_now" {
			got = append(got, e.Action+" "+e.Actor+" "+e.Reason)
		}
	}
	if want := []string{"cancel alice order refunded", "retry_now tester carrier back"}; !slices.Equal(got, want) {
		t.Errorf("audit = %q, want %q", got, want)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "ls", "--state", "dead"}, "--state"},
		{[]string{"tasks", "cancel", waiting[3].String()}, "pass --reason"},
		{[]string{"tasks", "cancel", "--reason", "x"}, "one or more task ids"},
		{[]string{"tasks", "key", "shipping"}, "a queue and a key"},
		{[]string{"tasks", "stop"}, "unknown tasks command"},
	} {
		r := h.run("", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rdq %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(c.args, " "), r.code, r.stderr, exitUsage, c.want)
		}
	}
}
