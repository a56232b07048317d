package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// A task redriven out of the DLQ that then succeeds: the succeeded listing
// shows no error for it (its only failures were in the life before), its
// detail says which life the last error is from, and an attempt shorter
// than a millisecond shows its duration in microseconds. Redriving it
// again, now that it is not dead, is refused in one line.
func TestSucceededAfterRedrive(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.ok("dlq", "redrive", fid(1), "--reason", "relay fixed", "--actor", "alice")
	claimed, err := h.s.Claim(ctx, store.ClaimParams{Queues: []string{"emails"}, Limit: 10, Lease: time.Minute, WorkerID: "worker-b"})
	if err != nil || len(claimed) != 1 || claimed[0].ID.String() != fid(1) {
		t.Fatalf("claim of the redriven task: %v %v", claimed, err)
	}
	errs, err := h.s.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: claimed[0].ID, Token: claimed[0].LeaseToken}, Status: rdq.StatusSucceeded,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "worker-b", Duration: 250 * time.Microsecond},
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}

	ls := h.ok("tasks", "ls", "--state", "succeeded")
	line := ""
	for _, l := range strings.Split(ls, "\n") {
		if strings.HasPrefix(l, fid(1)) {
			line = l
		}
	}
	if line == "" || strings.Contains(line, "connection refused") || !strings.HasSuffix(strings.TrimSpace(line), "-") {
		t.Fatalf("tasks ls --state succeeded shows the earlier life's error as the task's last error:\n%s", ls)
	}

	show := h.ok("tasks", "show", fid(1))
	if !strings.Contains(show, "connection refused (in life 0, before the task was redriven)") {
		t.Errorf("tasks show does not say the last error is from life 0:\n%s", show)
	}
	if !strings.Contains(show, "took 250µs") {
		t.Errorf("tasks show does not show the 250µs attempt in microseconds:\n%s", show)
	}

	r := h.run("", "dlq", "redrive", fid(1), "--reason", "again", "--actor", "alice")
	want := "rdq: task " + fid(1) + " in " + h.desc() + " is SUCCEEDED, not dead: only a dead task can be redriven\n"
	if r.code != exitConflict || r.stdout != "" || r.stderr != want {
		t.Fatalf("redrive of a succeeded task: exit %d, stdout %q, stderr %q; want exit %d and only %q", r.code, r.stdout, r.stderr, exitConflict, want)
	}
}

// A task's own budget and timeout, and its snoozes, show in its detail.
func TestShowTaskBudget(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	id := rdq.NewID()
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{
		ID: id, Queue: "reports", Handler: "build", MaxAttempts: 4, Timeout: 1500 * time.Millisecond,
	}}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := h.s.Claim(ctx, store.ClaimParams{Queues: []string{"reports"}, Limit: 1, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if errs, err := h.s.Snooze(ctx, store.SnoozeParams{Snoozes: []store.SnoozeItem{{Lease: store.Lease{ID: id, Token: claimed[0].LeaseToken}, Delay: time.Hour}}}); err != nil || errs[0] != nil {
		t.Fatalf("snooze: %v %v", errs, err)
	}
	show := h.ok("tasks", "show", id.String())
	for _, want := range []string{
		"max attempts:  4 (the task's own, within the queue's limit)",
		"timeout:       1.5s (the task's own, within the queue's limit)",
		"snoozes:       1 in this life (no attempt spent)",
	} {
		if !strings.Contains(show, want) {
			t.Errorf("tasks show lacks %q:\n%s", want, show)
		}
	}
	var js struct {
		Task struct {
			MaxAttempts int   `json:"max_attempts"`
			TimeoutMS   int64 `json:"timeout_ms"`
			Snoozes     int   `json:"snoozes"`
		} `json:"task"`
	}
	mustJSON(t, h.ok("--json", "tasks", "show", id.String()), &js)
	if js.Task.MaxAttempts != 4 || js.Task.TimeoutMS != 1500 || js.Task.Snoozes != 1 {
		t.Errorf("tasks show --json: %+v", js.Task)
	}
}
