package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// rdq workers lists the registry, stale entries marked; stats, tasks ls and
// workers say which waiting tasks no live worker can run; untrusted names
// are escaped.
func TestWorkersAndUnservedHandlers(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if out := h.ok("workers"); !strings.HasPrefix(out, "no worker is registered in ") {
		t.Fatalf("workers of an empty registry: %q", out)
	}
	past := time.Now().Add(-4 * time.Minute)
	for _, w := range []struct {
		info store.WorkerInfo
		at   time.Time
	}{
		{store.WorkerInfo{ID: "old-1", Host: "box\x1b[31m", PID: 7, Version: "v0.9.0", Queues: []string{"deploy"}, Handlers: []string{"a"}, Slots: 4}, time.Now()},
		{store.WorkerInfo{ID: "gone-1", Host: "box2", PID: 8, Version: "v1.0.0", Queues: []string{"deploy"}, Handlers: []string{"a", "b"}, Slots: 4}, past},
	} {
		if err := h.s.RegisterWorker(ctx, store.RegisterWorkerParams{Worker: w.info, StaleAfter: 30 * time.Second, ExpireAfter: time.Hour, Now: &w.at}); err != nil {
			t.Fatal(err)
		}
	}
	var tasks []store.NewTask
	for range 3 {
		tasks = append(tasks, store.NewTask{ID: rdq.NewID(), Queue: "deploy", Handler: "b"})
	}
	tasks = append(tasks, store.NewTask{ID: rdq.NewID(), Queue: "deploy", Handler: "a"})
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: tasks, Now: &past}); err != nil {
		t.Fatal(err)
	}

	out := h.ok("workers")
	lines := strings.Split(out, "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "LAST SEEN") {
		t.Fatalf("workers output:\n%s", out)
	}
	if !strings.HasPrefix(lines[1], "gone-1") || !strings.Contains(lines[1], "STALE") || !strings.Contains(lines[1], "a,b") {
		t.Errorf("the stale worker's line: %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "old-1") || !strings.Contains(lines[2], "live") || !strings.Contains(lines[2], `box\x1b[31m`) {
		t.Errorf("the live worker's line (host escaped): %q", lines[2])
	}
	want := "3 tasks of handler `b` in queue `deploy`, oldest 4m ago, no worker has registered it"
	for _, args := range [][]string{{"workers"}, {"stats"}, {"tasks", "ls"}, {"tasks", "ls", "--queue", "deploy", "--handler", "b"}} {
		out := h.ok(args...)
		if n := strings.Count(out, "of handler `"); n != 1 || !strings.Contains(out, want) {
			t.Errorf("rdq %s prints %d unserved lines, want exactly %q:\n%s", strings.Join(args, " "), n, want, out)
		}
	}
	if out := h.ok("tasks", "ls", "--handler", "a"); strings.Contains(out, "of handler `") {
		t.Errorf("tasks ls --handler a mentions another handler's tasks:\n%s", out)
	}
	if out := h.ok("workers", "--queue", "billing"); !strings.HasPrefix(out, "no worker serving queue billing is registered in ") {
		t.Errorf("workers --queue billing: %q", out)
	}

	if r := h.run("", "workers", "--queue", "bad name"); r.code != exitUsage || !strings.Contains(r.stderr, "queue") {
		t.Errorf("workers --queue 'bad name': exit %d, stderr %q", r.code, r.stderr)
	}

	var js struct {
		Workers []struct {
			ID       string   `json:"id"`
			Stale    bool     `json:"stale"`
			Handlers []string `json:"handlers"`
		} `json:"workers"`
		Unserved []struct {
			Queue, Handler string
			Tasks          int64
			WaitingSeconds float64 `json:"waiting_seconds"`
		} `json:"unserved"`
	}
	mustJSON(t, h.ok("--json", "workers"), &js)
	if len(js.Workers) != 2 || !js.Workers[0].Stale || js.Workers[1].Stale || len(js.Unserved) != 1 ||
		js.Unserved[0].Handler != "b" || js.Unserved[0].Tasks != 3 || js.Unserved[0].WaitingSeconds < 200 {
		t.Errorf("workers --json: %+v", js)
	}
	mustJSON(t, h.ok("--json", "stats"), &js)
	if len(js.Unserved) != 1 || js.Unserved[0].Queue != "deploy" {
		t.Errorf("stats --json unserved: %+v", js.Unserved)
	}

	// A handler whose name carries terminal escapes is printed escaped.
	evil := store.NewTask{ID: rdq.NewID(), Queue: "deploy", Handler: "b\x1b]0;pwned\x07"}
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{evil}}); err == nil {
		if out := h.ok("stats"); strings.Contains(out, "\x1b") {
			t.Errorf("stats printed a raw escape:\n%q", out)
		}
	}
}
