package crosslang

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

// TestJavaDeadLetterOperationsAreGos: Go dead-letters two identical sets of
// tasks, one in queue "java" and one in queue "go". The Java SDK's RdqAdmin
// lists, counts, redrives (a dry run, then for real) and purges the first;
// Go's dlq package does the same to the second. The results are equal, the
// audit entries are equal but for the queue the filter names, and Go reads
// the tasks Java changed in the state its own operations left its own.
func TestJavaDeadLetterOperationsAreGos(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][]rdq.ID{}
	for _, q := range []string{"java", "go"} {
		for i := range 7 {
			msg := fmt.Sprintf("relay <down> & 503, try %d", i)
			if i == 6 {
				msg = "card declined"
			}
			r, err := c.Submit(ctx, client.Task{Queue: q, Handler: "send",
				FirstFailure: rdq.Permanent(errors.New(msg))})
			if err != nil {
				t.Fatal(err)
			}
			ids[q] = append(ids[q], r.Task.ID)
		}
	}
	d, err := dlq.New(st, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"RDQ_DATABASE_URL=" + pgtest.URL(), "RDQ_SCHEMA=" + schema}

	// Java pages through queue "java" three at a time: Go's listing, in order.
	var want []string
	for p := (dlq.Page{}); ; {
		p, err = d.List(ctx, dlq.Filter{Queue: "java"}, dlq.ListOptions{PageSize: 2, PageToken: p.NextPageToken})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range p.Tasks {
			want = append(want, task.ID.String())
		}
		if p.NextPageToken == "" {
			break
		}
	}
	if got := strings.Fields(runJava(t, "AdminMain", dir, env, "", "list", "java", "3")); !slices.Equal(got, want) {
		t.Fatalf("Java lists\n%v\nGo lists\n%v", got, want)
	}
	text := "<DOWN> & 503"
	if got := strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "count", "java", text)); got != "6" {
		t.Fatalf("Java counts %s dead tasks matching %q, want 6", got, text)
	}

	// A dry run, then a redrive of at most four with a delay and a spread.
	opts := dlq.RedriveOptions{DryRun: true, Max: 4, Delay: time.Minute, Spread: 90 * time.Second}
	goRes, err := d.Redrive(ctx, dlq.Filter{Queue: "go", MessageContains: text}, opts)
	if err != nil {
		t.Fatal(err)
	}
	line := func(r dlq.RedriveResult) string {
		return fmt.Sprintf("%t %d %d %d", r.DryRun, r.Matched, r.Redriven, r.AtLimit)
	}
	got := strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "redrive", "java", text, "dry", "-", "4", "60000", "90000"))
	if got != line(goRes) || got != "true 6 4 0" {
		t.Fatalf("Java's dry run: %q, Go's: %q, want \"true 6 4 0\"", got, line(goRes))
	}
	if entries, err := st.ListAudit(ctx, store.ListAuditParams{Limit: 10}); err != nil || len(entries) != 0 {
		t.Fatalf("after dry runs, audit %+v (%v), want none", entries, err)
	}
	opts.DryRun, opts.Actor, opts.Reason = false, "alice", "INC-42 relay fixed"
	if goRes, err = d.Redrive(ctx, dlq.Filter{Queue: "go", MessageContains: text}, opts); err != nil {
		t.Fatal(err)
	}
	got = strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "redrive", "java", text, "alice", "INC-42 relay fixed",
		"4", "60000", "90000"))
	if got != line(goRes) || got != "false 6 4 0" {
		t.Fatalf("Java's redrive: %q, Go's: %q, want \"false 6 4 0\"", got, line(goRes))
	}
	for _, q := range []string{"java", "go"} {
		var pending int
		for _, id := range ids[q] {
			task, _, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			switch task.Status {
			case rdq.StatusPending:
				pending++
				if task.Life != 1 || task.Attempts != 0 || time.Until(task.NextAttemptAt) < 50*time.Second {
					t.Errorf("queue %s: redriven task %+v, want life 1, no attempts, due after the delay", q, task)
				}
			case rdq.StatusDead:
			default:
				t.Errorf("queue %s: task %s is %s", q, id, task.Status)
			}
		}
		if pending != 4 {
			t.Errorf("queue %s: %d tasks redriven, want 4", q, pending)
		}
	}

	// Purge what is left dead of each queue: a dry run, then for real.
	goPurge, err := d.Purge(ctx, dlq.Filter{Queue: "go"}, dlq.PurgeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "purge", "java", "dry")); got != fmt.Sprintf("true %d %d", goPurge.Matched, goPurge.Purged) || got != "true 3 3" {
		t.Fatalf("Java's dry purge: %q, Go's %+v, want \"true 3 3\"", got, goPurge)
	}
	if goPurge, err = d.Purge(ctx, dlq.Filter{Queue: "go"}, dlq.PurgeOptions{Actor: "bob", Reason: "GDPR-7"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "purge", "java", "bob", "GDPR-7")); got != fmt.Sprintf("false %d %d", goPurge.Matched, goPurge.Purged) || got != "false 3 3" {
		t.Fatalf("Java's purge: %q, Go's %+v, want \"false 3 3\"", got, goPurge)
	}
	for _, q := range []string{"java", "go"} {
		if n, err := d.Count(ctx, dlq.Filter{Queue: q}); err != nil || n != 0 {
			t.Fatalf("queue %s: %d dead after the purge (%v), want 0", q, n, err)
		}
	}

	// The audit, oldest first: Go's redrive, Java's, Go's purge, Java's.
	entries, err := st.ListAudit(ctx, store.ListAuditParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Fatalf("%d audit entries, want 4: %+v", len(entries), entries)
	}
	slices.Reverse(entries)
	for i := 0; i < len(entries); i += 2 {
		goes, java := entries[i], entries[i+1]
		goes.ID, goes.At, java.ID, java.At = 0, time.Time{}, 0, time.Time{}
		goes.Filter = strings.Replace(goes.Filter, `"queue":"go"`, `"queue":"java"`, 1)
		if !slices.Equal(goes.Queues, []string{"go"}) || !slices.Equal(java.Queues, []string{"java"}) {
			t.Errorf("%s entries name queues %q (Go) and %q (Java), want [go] and [java]", java.Action, goes.Queues, java.Queues)
		}
		goes.Queues = java.Queues
		if !reflect.DeepEqual(java, goes) {
			t.Errorf("Java wrote %+v\nGo wrote   %+v", java, goes)
		}
	}
	if want := `{"queue":"java","message_contains":"\u003cDOWN\u003e \u0026 503"}`; entries[1].Filter != want {
		t.Errorf("Java's redrive filter %s, want %s", entries[1].Filter, want)
	}
	if want := map[string]string{"delay": "1m0s", "spread": "1m30s", "max_life": "0"}; !reflect.DeepEqual(entries[1].Details, want) {
		t.Errorf("Java's redrive details %v, want %v", entries[1].Details, want)
	}
	if entries[1].Count != 4 || entries[3].Count != 3 || entries[3].Action != pgstore.ActionPurge {
		t.Errorf("Java's entries %+v and %+v, want a redrive of 4 and a purge of 3", entries[1], entries[3])
	}
}

// TestJavaLiveTaskOperationsAreGos: the Java SDK's RdqAdmin finds a task
// Go submitted by its idempotency key, makes one due now and cancels
// another, writing the audit entries and the CANCELLED attempt Go's tasks
// package writes for the same operations on twin tasks.
func TestJavaLiveTaskOperationsAreGos(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(q, key string) rdq.ID {
		r, err := c.Submit(ctx, client.Task{Queue: q, Handler: "charge", IdempotencyKey: key, Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return r.Task.ID
	}
	javaLater, javaCancel := submit("java", "o-1"), submit("java", "o-2")
	goLater, goCancel := submit("go", "o-1"), submit("go", "o-2")
	tk, err := tasks.New(st, tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"RDQ_DATABASE_URL=" + pgtest.URL(), "RDQ_SCHEMA=" + schema}

	if got := strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "by-key", "java", "o-2")); got != javaCancel.String() {
		t.Fatalf("Java finds key o-2 at %s, want %s", got, javaCancel)
	}
	missing := rdq.NewID()
	if _, err := tk.RetryNow(ctx, []rdq.ID{goLater}, tasks.Change{Actor: "alice", Reason: "INC-9"}); err != nil {
		t.Fatal(err)
	}
	got := runJava(t, "AdminMain", dir, env, "", "retry-now", "alice", "INC-9", javaLater.String(), missing.String())
	if want := javaLater.String() + " CHANGED\n" + missing.String() + " NOT_FOUND\n"; got != want {
		t.Fatalf("Java's retry now:\n%s\nwant\n%s", got, want)
	}
	if _, err := tk.Cancel(ctx, []rdq.ID{goCancel}, tasks.Change{Actor: "bob", Reason: "order withdrawn"}); err != nil {
		t.Fatal(err)
	}
	got = runJava(t, "AdminMain", dir, env, "", "cancel", "bob", "order withdrawn", javaCancel.String(), javaLater.String())
	if want := javaCancel.String() + " CHANGED\n" + javaLater.String() + " CHANGED\n"; got != want {
		t.Fatalf("Java's cancel:\n%s\nwant\n%s", got, want)
	}
	if _, err := tk.Cancel(ctx, []rdq.ID{goLater}, tasks.Change{Actor: "bob", Reason: "order withdrawn"}); err != nil {
		t.Fatal(err)
	}

	entries, err := st.ListAudit(ctx, store.ListAuditParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Fatalf("%d audit entries, want 5: %+v", len(entries), entries)
	}
	slices.Reverse(entries)
	// Go's retry now, Java's; Go's cancel, Java's cancel of two; Go's second cancel.
	for _, pair := range [][2]int{{0, 1}, {2, 3}} {
		goes, java := entries[pair[0]], entries[pair[1]]
		goes.ID, goes.At, java.ID, java.At = 0, time.Time{}, 0, time.Time{}
		goes.IDs, goes.Count = nil, 0
		wantIDs := []rdq.ID{javaLater}
		if pair[0] == 2 {
			wantIDs = []rdq.ID{javaCancel, javaLater}
		}
		if !slices.Equal(java.IDs, wantIDs) || java.Count != int64(len(wantIDs)) {
			t.Errorf("Java's %s entry names %v (count %d), want %v", java.Action, java.IDs, java.Count, wantIDs)
		}
		java.IDs, java.Count = nil, 0
		if !slices.Equal(goes.Queues, []string{"go"}) || !slices.Equal(java.Queues, []string{"java"}) {
			t.Errorf("%s entries name queues %q (Go) and %q (Java), want [go] and [java]", java.Action, goes.Queues, java.Queues)
		}
		goes.Queues = java.Queues
		if !reflect.DeepEqual(java, goes) {
			t.Errorf("Java wrote %+v\nGo wrote   %+v", java, goes)
		}
	}
	for _, pair := range [][2]rdq.ID{{javaCancel, goCancel}, {javaLater, goLater}} {
		jt, ja, err := st.Get(ctx, pair[0])
		if err != nil {
			t.Fatal(err)
		}
		gt, ga, err := st.Get(ctx, pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if jt.Status != rdq.StatusDead || jt.LastError != gt.LastError || len(ja) != len(ga) {
			t.Errorf("Java's cancelled task %+v with %d attempts, Go's %+v with %d", jt, len(ja), gt, len(ga))
			continue
		}
		j, g := ja[len(ja)-1], ga[len(ga)-1]
		if j.Outcome != rdq.OutcomeCancelled || j.Outcome != g.Outcome || j.ErrorType != g.ErrorType || j.Message != g.Message || j.WorkerID != g.WorkerID {
			t.Errorf("Java's CANCELLED attempt %+v, Go's %+v", j, g)
		}
	}
}

// TestJavaEditAndRedriveIsGos: a dead task's payload replaced and redriven
// by the Java SDK is audited as Go's dlq.EditAndRedrive audits a twin task:
// the same action, actor, reason and payload hashes.
func TestJavaEditAndRedriveIsGos(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var ids []rdq.ID
	for range 2 {
		r, err := c.Submit(ctx, client.Task{Queue: "orders", Handler: "charge", Payload: []byte(`{"amount":-1}`),
			FirstFailure: rdq.Permanent(errors.New("negative amount"))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Task.ID)
	}
	d, err := dlq.New(st, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.EditAndRedrive(ctx, ids[0], []byte(`{"amount":1}`), dlq.RedriveOptions{Actor: "alice", Reason: "sign fixed"}); err != nil {
		t.Fatal(err)
	}
	env := []string{"RDQ_DATABASE_URL=" + pgtest.URL(), "RDQ_SCHEMA=" + schema}
	if got := strings.TrimSpace(runJava(t, "AdminMain", t.TempDir(), env, "", "edit", ids[1].String(), `{"amount":1}`, "alice", "sign fixed")); got != "REDRIVEN" {
		t.Fatalf("Java's edit and redrive: %q, want REDRIVEN", got)
	}
	entries, err := st.ListAudit(ctx, store.ListAuditParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("%d audit entries, want 2: %+v", len(entries), entries)
	}
	java, goes := entries[0], entries[1]
	if !slices.Equal(java.IDs, []rdq.ID{ids[1]}) || !slices.Equal(goes.IDs, []rdq.ID{ids[0]}) {
		t.Fatalf("entries name %v and %v", java.IDs, goes.IDs)
	}
	java.ID, java.At, java.IDs, goes.ID, goes.At, goes.IDs = 0, time.Time{}, nil, 0, time.Time{}, nil
	if !reflect.DeepEqual(java, goes) || java.Details["new_sha256"] == "" || java.Details["old_sha256"] == java.Details["new_sha256"] {
		t.Errorf("Java wrote %+v\nGo wrote   %+v", java, goes)
	}
	for _, id := range ids {
		task, _, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != rdq.StatusPending || task.Life != 1 || string(task.Payload) != `{"amount":1}` {
			t.Errorf("task %s after the edit: %+v", id, task)
		}
	}
}

// TestJavaHandlerPauseIsGos: a handler paused and resumed by hand with the
// Java SDK holds and releases its tasks and is audited as Go's store pauses
// and resumes a twin handler for an operator; a Go worker's claim skips the
// tasks Java held.
func TestJavaHandlerPauseIsGos(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"java", "go", "java", "go"} {
		if _, err := c.Submit(ctx, client.Task{Queue: "orders", Handler: h}); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"RDQ_DATABASE_URL=" + pgtest.URL(), "RDQ_SCHEMA=" + schema}
	dir := t.TempDir()
	if _, err := st.PauseHandler(ctx, store.PauseHandlerParams{Queue: "orders", Handler: "go", Actor: "alice", Reason: "INC-7"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "pause-handler", "orders", "java", "alice", "INC-7")); got != "true" {
		t.Fatalf("Java's pause: %q, want true", got)
	}
	claimed, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"orders"}, Limit: 10, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 0 {
		t.Fatalf("Go claimed %d tasks of paused handlers (%v), want none", len(claimed), err)
	}
	paused, err := st.PausedHandlers(ctx, "orders")
	if err != nil || len(paused) != 2 {
		t.Fatalf("paused handlers %+v (%v), want go and java", paused, err)
	}
	if _, err := st.ResumeHandler(ctx, store.ResumeHandlerParams{Queue: "orders", Handler: "go", Actor: "alice", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(runJava(t, "AdminMain", dir, env, "", "resume-handler", "orders", "java", "alice", "fixed")); got != "true" {
		t.Fatalf("Java's resume: %q, want true", got)
	}
	claimed, err = st.Claim(ctx, store.ClaimParams{Queues: []string{"orders"}, Limit: 10, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("Go claimed %d tasks after the resumes (%v), want 4", len(claimed), err)
	}
	entries, err := st.ListAudit(ctx, store.ListAuditParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Fatalf("%d audit entries, want 4: %+v", len(entries), entries)
	}
	slices.Reverse(entries)
	for i := 0; i < 4; i += 2 {
		goes, java := entries[i], entries[i+1]
		goes.ID, goes.At, java.ID, java.At = 0, time.Time{}, 0, time.Time{}
		goes.Filter = strings.Replace(goes.Filter, `"handler":"go"`, `"handler":"java"`, 1)
		goes.Details["handler"] = "java"
		if !reflect.DeepEqual(java, goes) || java.Count != 2 {
			t.Errorf("Java wrote %+v\nGo wrote   %+v", java, goes)
		}
	}
}
