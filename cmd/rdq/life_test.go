package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// The life flags select redrive loops: a task redriven once that died
// again is found by --life-min 1 and left out by --life-below 1.
func TestLifeFilterFlags(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.ok("dlq", "redrive", fid(1), "--reason", "relay fixed", "--actor", "alice")
	claimed, err := h.s.Claim(ctx, store.ClaimParams{Queues: []string{"emails"}, Limit: 10, Lease: time.Minute, WorkerID: "worker-b"})
	if err != nil || len(claimed) != 1 || claimed[0].ID.String() != fid(1) {
		t.Fatalf("claim of the redriven task: %v %v", claimed, err)
	}
	again := failure("*net.OpError", "dial tcp 10.0.0.7:25: connect: connection refused", "")
	errs, err := h.s.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: claimed[0].ID, Token: claimed[0].LeaseToken}, Status: rdq.StatusDead,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: again, WorkerID: "worker-b", Duration: time.Second},
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}

	var ls struct {
		Tasks []struct {
			ID   string `json:"id"`
			Life int    `json:"life"`
		} `json:"tasks"`
	}
	mustJSON(t, h.ok("dlq", "ls", "--life-min", "1", "--json"), &ls)
	if len(ls.Tasks) != 1 || ls.Tasks[0].ID != fid(1) || ls.Tasks[0].Life != 1 {
		t.Fatalf("ls --life-min 1: %+v, want only %s in life 1", ls.Tasks, fid(1))
	}
	if out := h.ok("dlq", "ls", "--life-below", "1"); strings.Contains(out, fid(1)) || !strings.Contains(out, fid(2)) {
		t.Fatalf("ls --life-below 1 lists the redriven task or misses the others:\n%s", out)
	}
	if got := strings.TrimSpace(h.ok("dlq", "count", "--life-below", "1")); got != "4" {
		t.Fatalf("count --life-below 1 = %q, want 4", got)
	}
	if got := strings.TrimSpace(h.ok("dlq", "count", "--queue", "emails", "--life-min", "1", "--life-below", "2")); got != "1" {
		t.Fatalf("count of life exactly 1 = %q, want 1", got)
	}
	if out := h.ok("dlq", "redrive", "--life-min", "1", "--dry-run", "--reason", "r"); !strings.Contains(out, "would redrive 1") {
		t.Fatalf("redrive --life-min 1 --dry-run:\n%s", out)
	}
	if out := h.ok("dlq", "groups", "--life-min", "1"); !strings.Contains(out, again.Fingerprint) || strings.Contains(out, "validation") {
		t.Fatalf("groups --life-min 1:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "ls", "--life-min", "3", "--life-below", "2"}, "empty range"},
		{[]string{"dlq", "ls", "--life-min", "-1"}, "outside 0"},
		{[]string{"dlq", "count", "--life-below", "two"}, "life-below"},
	} {
		r := h.run("", c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rdq %s: exit %d, stderr %q; want a failure mentioning %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	if h.deadCount() != 5 {
		t.Fatalf("dead count %d after read-only commands, want 5", h.deadCount())
	}
}
