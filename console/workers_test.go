package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// The Workers page lists every registered worker, stale ones marked; the
// overview says which queue has waiting tasks and no live worker, and which
// handler's tasks no live worker can run; each person sees only the queues
// they may read, and names from workers and tasks are escaped.
func TestWorkersPageAndUnservedTasks(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	now := time.Now()
	old := now.Add(-4 * time.Minute)
	for _, w := range []struct {
		info store.WorkerInfo
		at   time.Time
	}{
		{store.WorkerInfo{ID: "w-live", Host: "<b>host</b>", PID: 11, Version: "v1.4.0", Queues: []string{"emails"}, Handlers: []string{"send"}, Slots: 8, InFlight: 2}, now},
		{store.WorkerInfo{ID: "w-stale", Host: "h2", PID: 12, Version: "v1.3.0", Queues: []string{"billing", "other"}, Handlers: []string{"charge"}, Slots: 4}, old},
	} {
		if err := e.s.RegisterWorker(ctx, store.RegisterWorkerParams{Worker: w.info, StaleAfter: 30 * time.Second, ExpireAfter: time.Hour, Now: &w.at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.s.Enqueue(ctx, store.EnqueueParams{Now: &old, Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "emails", Handler: "send"},
		{ID: rdq.NewID(), Queue: "emails", Handler: "send-v2"},
		{ID: rdq.NewID(), Queue: "emails", Handler: "send-v2"},
		{ID: rdq.NewID(), Queue: "billing", Handler: "charge"},
	}}); err != nil {
		t.Fatal(err)
	}

	r := e.get(userAdmin, "/workers")
	if r.status != 200 {
		t.Fatalf("workers: %d %s", r.status, r.body)
	}
	mustContain(t, r.body, `aria-current="page">Workers</a>`, "1 live, 1 stale", "w-live", "w-stale",
		`<tr class="stale">`, `<span class="badge paused">stale</span>`, "&lt;b&gt;host&lt;/b&gt;", "v1.4.0",
		"2 tasks of handler <code>send-v2</code> in queue <code>emails</code>, oldest 4m ago, no worker has registered it",
		"1 task of handler <code>charge</code> in queue <code>billing</code>")
	mustNotContain(t, r.body, "<b>host</b>", "handler <code>send</code> in")
	if strings.Index(r.body, "w-live") > strings.Index(r.body, "w-stale") {
		t.Error("workers are not ordered by ID")
	}

	r = e.get(userAdmin, "/")
	mustContain(t, r.body, "Tasks no running worker can execute", "2 tasks of handler <code>send-v2</code> in queue <code>emails</code>")
	// billing waits with only a stale worker; emails has a live one.
	billing := rowOf(t, r.body, "billing")
	emails := rowOf(t, r.body, "emails")
	if !strings.Contains(billing, "no live worker") || strings.Contains(emails, "no live worker") {
		t.Errorf("overview rows:\nbilling: %s\nemails: %s", billing, emails)
	}

	// The operator of "other" sees the stale worker with only that queue,
	// and no other queue's tasks; a queue they may not read is refused.
	r = e.get(userOther, "/workers")
	if r.status != 200 {
		t.Fatalf("workers as other: %d %s", r.status, r.body)
	}
	mustContain(t, r.body, "w-stale", `href="/workers?queue=other"`)
	mustNotContain(t, r.body, "w-live", "billing", "send-v2")
	if r := e.get(userOther, "/workers?queue=emails"); r.status != 403 {
		t.Errorf("workers?queue=emails as other: %d", r.status)
	}
	if r := e.get("", "/workers"); r.status != 403 {
		t.Errorf("workers signed out: %d", r.status)
	}
	if r := e.get(userAdmin, "/workers?queue=bad%20name"); r.status != 400 {
		t.Errorf("workers?queue=bad name: %d", r.status)
	}
	r = e.get(userAdmin, "/workers?queue=emails")
	mustContain(t, r.body, "w-live", "send-v2")
	mustNotContain(t, r.body, "w-stale", "charge</code> in")
}

// rowOf returns the overview table row of queue.
func rowOf(t *testing.T, body, queue string) string {
	t.Helper()
	i := strings.Index(body, `<th scope="row">`+queue+`</th>`)
	if i < 0 {
		t.Fatalf("no row for %s", queue)
	}
	j := strings.Index(body[i:], "</tr>")
	return body[i : i+j]
}

// A worker's in-flight count is over all its queues: a person who may not
// read every one of them does not see it.
func TestWorkersInFlightScoped(t *testing.T) {
	e := newEnv(t, "")
	now := time.Now()
	info := store.WorkerInfo{ID: "w-both", Host: "h", PID: 3, Version: "v1", Queues: []string{"emails", "other"}, Handlers: []string{"send"}, Slots: 9, InFlight: 7}
	if err := e.s.RegisterWorker(context.Background(), store.RegisterWorkerParams{Worker: info, StaleAfter: time.Minute, ExpireAfter: time.Hour, Now: &now}); err != nil {
		t.Fatal(err)
	}
	cell := `<td class="n">7</td>`
	mustContain(t, e.get(userAdmin, "/workers").body, "w-both", cell)
	r := e.get(userOperator, "/workers")
	mustContain(t, r.body, "w-both", `href="/workers?queue=emails"`, "it counts queues you may not read")
	mustNotContain(t, r.body, cell, "queue=other")
}
