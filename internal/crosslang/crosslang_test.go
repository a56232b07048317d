package crosslang

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/execlog"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// waitFor polls cond every 50ms until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getTask(t *testing.T, st *pgstore.Store, id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	t.Helper()
	tk, atts, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return tk, atts
}

func statusIs(t *testing.T, st *pgstore.Store, id rdq.ID, want rdq.Status) func() bool {
	return func() bool {
		tk, _ := getTask(t, st, id)
		return tk.Status == want
	}
}

// record is what the Java "record" handler saw.
type record struct {
	ID             string            `json:"id"`
	Queue          string            `json:"queue"`
	Payload        string            `json:"payload"`
	ContentType    string            `json:"content_type"`
	Headers        map[string]string `json:"headers"`
	IdempotencyKey string            `json:"idempotency_key"`
	Attempt        int               `json:"attempt"`
	Attempts       int               `json:"attempts"`
	Life           int               `json:"life"`
	Token          int64             `json:"token"`
	Worker         string            `json:"worker"`
}

func readRecords(t *testing.T, path string) map[string]record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string]record{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, dup := out[r.ID]; dup {
			t.Errorf("task %s recorded twice", r.ID)
		}
		out[r.ID] = r
	}
	return out
}

func outcomes(atts []rdq.Attempt) string {
	var s []string
	for _, a := range atts {
		s = append(s, fmt.Sprintf("%d:%s/life%d/%s/token%d", a.Number, a.Outcome, a.Life, a.WorkerID, a.LeaseToken))
	}
	return strings.Join(s, " ")
}

// TestGoSubmitsJavaExecutes: tasks submitted by the Go client (payload bytes,
// content type, headers, idempotency key, a first failure) are executed by
// a Java worker, which records success, retries with its own error type and
// fingerprint, and dead-letters a permanent failure into the summary the Go
// DLQ reads.
func TestGoSubmitsJavaExecutes(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st, ID: "go-client"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	payload := []byte{0, 1, 0xfe, 0xff, 'r', 'd', 'q'}
	a, err := c.Submit(ctx, client.Task{Queue: "xq", Handler: "record", Payload: payload, ContentType: "application/octet-stream",
		Headers: map[string]string{"tenant": "acme", "x-note": "<café>"}, IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := c.Submit(ctx, client.Task{Queue: "xq", Handler: "record", IdempotencyKey: "k1"})
	if err != nil || !dup.Duplicate || dup.Task.ID != a.Task.ID {
		t.Fatalf("duplicate submit: %+v, %v", dup, err)
	}
	ff, err := c.Submit(ctx, client.Task{Queue: "xq", Handler: "record", FirstFailure: errors.New("upstream 503")})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := c.Submit(ctx, client.Task{Queue: "xq", Handler: "typed-fail"})
	if err != nil {
		t.Fatal(err)
	}
	perm, err := c.Submit(ctx, client.Task{Queue: "xq", Handler: "permanent"})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	logPath := filepath.Join(dir, "exec.log")
	p := startJava(t, "WorkerMain", dir, "java-w1", javaWorkerEnv(schema, "java-w1", "xq", logPath))
	t.Cleanup(p.kill)
	p.waitReady(t)
	for _, id := range []rdq.ID{a.Task.ID, ff.Task.ID, typed.Task.ID} {
		waitFor(t, time.Minute, "SUCCEEDED", statusIs(t, st, id, rdq.StatusSucceeded))
	}
	waitFor(t, time.Minute, "DEAD", statusIs(t, st, perm.Task.ID, rdq.StatusDead))
	p.stop(t)

	recs := readRecords(t, logPath)
	r, ok := recs[a.Task.ID.String()]
	if !ok {
		t.Fatalf("the Java handler did not record task %s: %v", a.Task.ID, recs)
	}
	got, _ := base64.StdEncoding.DecodeString(r.Payload)
	if !bytes.Equal(got, payload) || r.ContentType != "application/octet-stream" || r.Headers["tenant"] != "acme" ||
		r.Headers["x-note"] != "<café>" || r.IdempotencyKey != "k1" || r.Attempt != 1 || r.Token != 1 || r.Worker != "java-w1" {
		t.Errorf("Java saw %+v (payload %v)", r, got)
	}
	if r := recs[ff.Task.ID.String()]; r.Attempt != 2 || r.Attempts != 1 {
		t.Errorf("after a first failure Java ran attempt %d (attempts before: %d), want 2 (1)", r.Attempt, r.Attempts)
	}
	_, atts := getTask(t, st, ff.Task.ID)
	if len(atts) != 2 || atts[0].Outcome != rdq.OutcomeRetryableFailure || atts[0].WorkerID != "go-client" ||
		atts[1].Number != 2 || atts[1].Outcome != rdq.OutcomeSuccess || atts[1].WorkerID != "java-w1" {
		t.Errorf("first failure then Java success: %s", outcomes(atts))
	}
	_, atts = getTask(t, st, typed.Task.ID)
	if len(atts) != 2 || atts[0].ErrorType != "java_typed" || atts[1].Outcome != rdq.OutcomeSuccess {
		t.Fatalf("typed failure then success: %s", outcomes(atts))
	}
	tk, _ := getTask(t, st, typed.Task.ID)
	if want := rdq.Fingerprint("java_typed", "quota exceeded for tenant 7"); tk.LastError.Fingerprint != want {
		t.Errorf("Java fingerprint %s, Go computes %s for the same failure", tk.LastError.Fingerprint, want)
	}
	d, err := dlq.New(st, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := d.Groups(ctx, dlq.Filter{Queue: "xq"})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Count != 1 || groups[0].ErrorType != "java.lang.IllegalArgumentException" {
		t.Errorf("Go's DLQ groups after a Java dead-letter: %+v", groups)
	}
}

// TestJavaSubmitsGoExecutes: tasks submitted by the Java client, inside a
// JDBC transaction, are executed by a Go worker with every field intact; a
// Java first failure is attempt 1, and a permanent one is dead at once and
// counted where the Go DLQ reads it.
func TestJavaSubmitsGoExecutes(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	payload := []byte{0, 1, 0xfe, 0xff, '{', '}'}
	b64 := base64.StdEncoding.EncodeToString(payload)
	input := strings.Join([]string{
		`{"queue":"jq","handler":"record","payload":"` + b64 + `","content_type":"application/x-test","headers":{"tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"idempotency_key":"order-1"}`,
		`{"queue":"jq","handler":"record","idempotency_key":"order-1"}`,
		`{"queue":"jq","handler":"record","delay_ms":400}`,
		`{"queue":"jq","handler":"record","first_failure":{"message":"connect 10.0.0.7:5432 refused"}}`,
		`{"queue":"jq","handler":"record","first_failure":{"message":"invalid order 42","permanent":true}}`,
	}, "\n")
	out := runJava(t, "SubmitMain", t.TempDir(), []string{"RDQ_DATABASE_URL=" + pgtest.URL(), "RDQ_SCHEMA=" + schema, "RDQ_TX=1"}, input)
	var res []struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			ID        string `json:"id"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("SubmitMain output %q: %v", line, err)
		}
		res = append(res, r)
	}
	if len(res) != 5 || res[0].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID {
		t.Fatalf("Java submit results: %+v", res)
	}
	ids := make([]rdq.ID, len(res))
	for i, r := range res {
		ids[i] = rdq.MustParseID(r.ID)
	}
	dead, atts := getTask(t, st, ids[4])
	if dead.Status != rdq.StatusDead || len(atts) != 1 || atts[0].Outcome != rdq.OutcomePermanentFailure ||
		atts[0].WorkerID != "java-client" || dead.LastError.Type != "java.lang.IllegalStateException" ||
		dead.LastError.Fingerprint != rdq.Fingerprint("java.lang.IllegalStateException", "invalid order 42") {
		t.Fatalf("permanent first failure from Java: %+v %s", dead, outcomes(atts))
	}
	d, err := dlq.New(st, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.Count(t.Context(), dlq.Filter{Queue: "jq"}); err != nil || n != 1 {
		t.Fatalf("Go DLQ counts %d dead in jq (%v), want 1", n, err)
	}
	delayed, _ := getTask(t, st, ids[2])
	if gap := delayed.NextAttemptAt.Sub(delayed.CreatedAt); gap != 400*time.Millisecond {
		t.Errorf("delay_ms 400 made the task due %s after creation", gap)
	}

	var mu sync.Mutex
	seen := map[rdq.ID]rdq.Task{}
	w, err := worker.New(worker.Config{Store: st, ID: "go-w1", Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]worker.QueueConfig{"jq": {}}, PollInterval: 50 * time.Millisecond,
		ReclaimInterval: worker.Disabled, PurgeInterval: worker.Disabled})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("record", func(ctx context.Context, tk *rdq.Task) error {
		mu.Lock()
		defer mu.Unlock()
		seen[tk.ID] = *tk
		return nil
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []rdq.ID{ids[0], ids[2], ids[3]} {
		waitFor(t, time.Minute, "SUCCEEDED", statusIs(t, st, id, rdq.StatusSucceeded))
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	first := seen[ids[0]]
	if !bytes.Equal(first.Payload, payload) || first.ContentType != "application/x-test" || first.Headers["tenant"] != "acme" ||
		first.Headers["traceparent"] == "" || first.IdempotencyKey != "order-1" {
		t.Errorf("Go saw %+v", first)
	}
	if tk := seen[ids[3]]; tk.Attempts != 1 {
		t.Errorf("Go ran the task with a Java first failure after %d attempts, want 1", tk.Attempts)
	}
	_, atts = getTask(t, st, ids[3])
	if len(atts) != 2 || atts[0].WorkerID != "java-client" || atts[0].ErrorType != "java.lang.IllegalStateException" ||
		atts[1].Number != 2 || atts[1].WorkerID != "go-w1" || atts[1].Outcome != rdq.OutcomeSuccess {
		t.Errorf("history: %s", outcomes(atts))
	}
}

// TestJavaDeadRedrivenByGoSucceedsOnJava: a task dead-lettered by a Java
// worker is grouped and redriven with the Go dlq package, and succeeds on a
// Java worker in its new life, its attempts numbered on across lives.
func TestJavaDeadRedrivenByGoSucceedsOnJava(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(t.Context(), client.Task{Queue: "rq", Handler: "always-fail"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	dir := t.TempDir()
	broken := startJava(t, "WorkerMain", dir, "java-broken", javaWorkerEnv(schema, "java-broken", "rq", filepath.Join(dir, "1.log"), "RDQ_MAX_ATTEMPTS=2"))
	t.Cleanup(broken.kill)
	broken.waitReady(t)
	waitFor(t, time.Minute, "DEAD", statusIs(t, st, id, rdq.StatusDead))
	broken.stop(t)

	d, err := dlq.New(st, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	msg := "order " + id.String() + " cannot be processed"
	groups, err := d.Groups(t.Context(), dlq.Filter{Queue: "rq"})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Fingerprint != rdq.Fingerprint("java.lang.IllegalStateException", msg) {
		t.Fatalf("groups of the Java dead task: %+v", groups)
	}
	rr, err := d.Redrive(t.Context(), dlq.Filter{Fingerprint: groups[0].Fingerprint}, dlq.RedriveOptions{Actor: "crosslang-test", Reason: "handler fixed"})
	if err != nil || rr.Redriven != 1 {
		t.Fatalf("redrive: %+v, %v", rr, err)
	}
	fixed := startJava(t, "WorkerMain", dir, "java-fixed", javaWorkerEnv(schema, "java-fixed", "rq", filepath.Join(dir, "2.log"), "RDQ_MAX_ATTEMPTS=2", "RDQ_FIXED=1"))
	t.Cleanup(fixed.kill)
	fixed.waitReady(t)
	waitFor(t, time.Minute, "SUCCEEDED after redrive", statusIs(t, st, id, rdq.StatusSucceeded))
	fixed.stop(t)
	tk, atts := getTask(t, st, id)
	if tk.Life != 1 || len(atts) != 3 || atts[2].Number != 3 || atts[2].Life != 1 || atts[2].Outcome != rdq.OutcomeSuccess ||
		atts[2].WorkerID != "java-fixed" || atts[1].Life != 0 || atts[1].Outcome != rdq.OutcomeRetryableFailure {
		t.Fatalf("history across the redrive: life %d, %s", tk.Life, outcomes(atts))
	}
}

// TestJavaWorkerKilledMidTaskIsReclaimed: a Java worker process SIGKILLed
// while executing two tasks, one of them redriven from the DLQ (attempts
// reset to 0 in its new life), is reclaimed by another Java worker: each lost
// execution becomes a LEASE_EXPIRED attempt numbered one past the highest
// stored attempt (never colliding with an earlier life's numbers), naming the
// killed worker and its token, and the task then succeeds.
func TestJavaWorkerKilledMidTaskIsReclaimed(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	fresh, err := c.Submit(ctx, client.Task{Queue: "kq", Handler: "sleep", Payload: []byte(`{"sleep_ms":60000}`)})
	if err != nil {
		t.Fatal(err)
	}
	redriven, err := c.Submit(ctx, client.Task{Queue: "kq", Handler: "sleep", Payload: []byte(`{"sleep_ms":60000}`),
		FirstFailure: rdq.Permanent(errors.New("rejected at the edge"))})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dlq.New(st, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if rr, err := d.RedriveTasks(ctx, []rdq.ID{redriven.Task.ID}, dlq.RedriveOptions{Actor: "crosslang-test", Reason: "edge check fixed"}); err != nil || rr.Redriven != 1 {
		t.Fatalf("redrive: %+v, %v", rr, err)
	}
	dir := t.TempDir()
	victimLog := filepath.Join(dir, "victim.log")
	victim := startJava(t, "WorkerMain", dir, "java-victim", javaWorkerEnv(schema, "java-victim", "kq", victimLog,
		"RDQ_LEASE_MS=1500", "RDQ_RECLAIM_MS=600000"))
	t.Cleanup(victim.kill)
	victim.waitReady(t)
	victimTail := execlog.NewTail(victimLog)
	waitFor(t, time.Minute, "both executions started", func() bool {
		evs, err := victimTail.Events()
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) == 2
	})
	victim.kill()

	rescuer := startJava(t, "WorkerMain", dir, "java-rescuer", javaWorkerEnv(schema, "java-rescuer", "kq", filepath.Join(dir, "rescuer.log"),
		"RDQ_LEASE_MS=1500", "RDQ_RECLAIM_MS=200"))
	t.Cleanup(rescuer.kill)
	rescuer.waitReady(t)
	for _, id := range []rdq.ID{fresh.Task.ID, redriven.Task.ID} {
		waitFor(t, time.Minute, "SUCCEEDED after reclaim", statusIs(t, st, id, rdq.StatusSucceeded))
	}
	rescuer.stop(t)

	_, atts := getTask(t, st, fresh.Task.ID)
	if len(atts) != 2 || atts[0].Number != 1 || atts[0].Outcome != rdq.OutcomeLeaseExpired || atts[0].WorkerID != "java-victim" ||
		atts[0].LeaseToken != 1 || atts[1].Number != 2 || atts[1].Outcome != rdq.OutcomeSuccess || atts[1].WorkerID != "java-rescuer" {
		t.Errorf("fresh task: %s", outcomes(atts))
	}
	_, atts = getTask(t, st, redriven.Task.ID)
	want := []struct {
		n       int
		life    int
		outcome rdq.Outcome
		worker  string
	}{{1, 0, rdq.OutcomePermanentFailure, "client"}, {2, 1, rdq.OutcomeLeaseExpired, "java-victim"}, {3, 1, rdq.OutcomeSuccess, "java-rescuer"}}
	if len(atts) != len(want) {
		t.Fatalf("redriven task: %s", outcomes(atts))
	}
	for i, w := range want {
		a := atts[i]
		if a.Number != w.n || a.Life != w.life || a.Outcome != w.outcome || a.WorkerID != w.worker {
			t.Errorf("redriven task attempt %d: %s, want %d/%s/life %d/%s", i, outcomes(atts), w.n, w.outcome, w.life, w.worker)
		}
	}
	if atts[1].LeaseToken != 1 || atts[2].LeaseToken <= atts[1].LeaseToken {
		t.Errorf("redriven task tokens: %s", outcomes(atts))
	}
	if slices.ContainsFunc(atts, func(a rdq.Attempt) bool {
		return a.ErrorType == "lease_expired" && a.Message != rdq.LeaseExpiredFailure().Message
	}) {
		t.Errorf("lease-expired text differs from Go's: %s", outcomes(atts))
	}
}

// TestJavaWorkerHonoursAGoQueuePause: a queue paused with the Go store is
// not claimed by a Java worker (a task of another queue it runs goes
// through meanwhile), and its task runs once the queue is resumed.
func TestJavaWorkerHonoursAGoQueuePause(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	if err := st.PauseQueue(ctx, store.PauseParams{Queue: "paused", Actor: "crosslang-test", Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.Submit(ctx, client.Task{Queue: "paused", Handler: "record"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := startJava(t, "WorkerMain", dir, "java-pause", javaWorkerEnv(schema, "java-pause", "paused,open", filepath.Join(dir, "exec.log")))
	t.Cleanup(p.kill)
	p.waitReady(t)
	// The worker claims from each queue at start and then every 50 ms: by the
	// time a task of the open queue, submitted after the worker was ready,
	// has been claimed, run and finished, the paused queue has been asked
	// for its task at least once, had the pause been ignored.
	control, err := c.Submit(ctx, client.Task{Queue: "open", Handler: "record"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the open queue's task", statusIs(t, st, control.Task.ID, rdq.StatusSucceeded))
	if tk, _ := getTask(t, st, held.Task.ID); tk.Status != rdq.StatusPending || tk.LeaseToken != 0 {
		t.Fatalf("a task of a paused queue was claimed by Java: %+v", tk)
	}
	if err := st.ResumeQueue(ctx, store.PauseParams{Queue: "paused", Actor: "crosslang-test", Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the resumed queue's task", statusIs(t, st, held.Task.ID, rdq.StatusSucceeded))
	p.stop(t)
}

// TestJavaQueuePauseIsGos: a queue paused and resumed by the Java SDK's
// RdqAdmin writes the audit entries Go's pgstore writes for the same
// operations, and Java's stats read the counts Go's read.
func TestJavaQueuePauseIsGos(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	p := store.PauseParams{Queue: "emails", Actor: "alice", Reason: "INC-42 relay down"}
	if err := st.PauseQueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := st.ResumeQueue(ctx, store.PauseParams{Queue: "emails", Actor: "alice", Reason: "INC-42 fixed"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"RDQ_DATABASE_URL=" + pgtest.URL(), "RDQ_SCHEMA=" + schema}
	if out := runJava(t, "AdminMain", dir, env, "", "pause", "emails", "alice", "INC-42 relay down"); strings.TrimSpace(out) != "true" {
		t.Fatalf("Java pause: %q, want true", out)
	}
	paused, err := st.PausedQueues(ctx)
	if err != nil || !slices.Equal(paused, []string{"emails"}) {
		t.Fatalf("after Java's pause, Go sees paused queues %v (%v)", paused, err)
	}
	if out := runJava(t, "AdminMain", dir, env, "", "pause", "emails", "bob", "again"); strings.TrimSpace(out) != "false" {
		t.Fatalf("Java pause of a paused queue: %q, want false", out)
	}
	if out := runJava(t, "AdminMain", dir, env, "", "resume", "emails", "alice", "INC-42 fixed"); strings.TrimSpace(out) != "true" {
		t.Fatalf("Java resume: %q, want true", out)
	}
	entries, err := st.ListAudit(ctx, store.ListAuditParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Fatalf("%d audit entries, want 4 (Go's pause and resume, Java's): %+v", len(entries), entries)
	}
	// Newest first: Java's resume, Java's pause, Go's resume, Go's pause.
	for i, pair := range [][2]store.AuditEntry{{entries[1], entries[3]}, {entries[0], entries[2]}} {
		java, goes := pair[0], pair[1]
		java.ID, java.At, goes.ID, goes.At = 0, time.Time{}, 0, time.Time{}
		if !reflect.DeepEqual(java, goes) {
			t.Errorf("entry %d: Java wrote %+v, Go %+v", i, java, goes)
		}
	}

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"emails", "emails", "orders"} {
		if _, err := c.Submit(ctx, client.Task{Queue: q, Handler: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := st.Stats(ctx, store.StatsParams{})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, s := range stats {
		fmt.Fprintf(&want, "%s %d %d %d %d\n", s.Queue, s.Pending, s.InFlight, s.Dead, s.Succeeded)
	}
	if got := runJava(t, "AdminMain", dir, env, "", "stats"); got != want.String() {
		t.Fatalf("Java stats:\n%s\nGo stats:\n%s", got, want.String())
	}
}
