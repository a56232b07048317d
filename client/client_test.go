package client_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/leakcheck"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

func newClient(t *testing.T) (*client.Client, store.Store) {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c, st
}

// TestDependencies checks that a producer importing client pulls in
// nothing of the worker, Prometheus, OpenTelemetry's SDK or a SQL driver.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/srjn45/rdq/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps returned only %d packages:\n%s", len(deps), out)
	}
	forbidden := []string{
		"github.com/srjn45/rdq/worker",
		"github.com/prometheus/",
		"go.opentelemetry.io/otel/sdk",
		"github.com/jackc/pgx",
		"modernc.org/sqlite",
	}
	found := map[string]bool{}
	for _, d := range deps {
		found[d] = true
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("client depends on %s (forbidden: %s)", d, f)
			}
		}
	}
	for _, want := range []string{"github.com/srjn45/rdq/store", "go.opentelemetry.io/otel/propagation"} {
		if !found[want] {
			t.Errorf("client does not depend on %s; is go list reading the right module?", want)
		}
	}
}

func TestNewRequiresStore(t *testing.T) {
	_, err := client.New(client.Config{})
	if !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("New without store: got %v, want ErrInvalid", err)
	}
}

func TestSubmitAndGet(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	res, err := c.Submit(ctx, client.Task{
		Queue:       "emails",
		Handler:     "send-welcome",
		Payload:     []byte(`{"user":42}`),
		ContentType: "application/json",
		Headers:     map[string]string{"tenant": "acme"},
	})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if res.Duplicate {
		t.Fatal("first submit reported as duplicate")
	}
	got, attempts, err := c.Get(ctx, res.Task.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Queue != "emails" || got.Handler != "send-welcome" || string(got.Payload) != `{"user":42}` ||
		got.ContentType != "application/json" || got.Headers["tenant"] != "acme" {
		t.Errorf("stored task differs from the submitted one: %+v", got)
	}
	if got.Status != rdq.StatusPending || got.Attempts != 0 || got.Life != 0 {
		t.Errorf("new task: status %s attempts %d life %d, want PENDING 0 0", got.Status, got.Attempts, got.Life)
	}
	if len(attempts) != 0 {
		t.Errorf("new task has %d attempts, want 0", len(attempts))
	}
	if _, _, err := c.Get(ctx, rdq.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of an unknown id: got %v, want ErrNotFound", err)
	}
}

func TestIdempotencyKey(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	task := client.Task{Queue: "payments", Handler: "capture", IdempotencyKey: "order-1", Payload: []byte("a")}
	first, err := c.Submit(ctx, task)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	task.Payload = []byte("b")
	second, err := c.Submit(ctx, task)
	if err != nil {
		t.Fatalf("resubmit: %v", err)
	}
	if !second.Duplicate || second.Task.ID != first.Task.ID {
		t.Fatalf("resubmit: duplicate=%v id=%s, want duplicate of %s", second.Duplicate, second.Task.ID, first.Task.ID)
	}
	if string(second.Task.Payload) != "a" {
		t.Errorf("duplicate returned payload %q, want the existing task's %q", second.Task.Payload, "a")
	}
	// The key is scoped to the queue.
	task.Queue = "refunds"
	other, err := c.Submit(ctx, task)
	if err != nil {
		t.Fatalf("submit to another queue: %v", err)
	}
	if other.Duplicate || other.Task.ID == first.Task.ID {
		t.Errorf("same key in another queue was treated as a duplicate")
	}
}

func TestSubmitManyOneBatch(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	counting := &countingStore{Store: st}
	c, err := client.New(client.Config{Store: counting})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	existing, err := c.Submit(ctx, client.Task{Queue: "q", Handler: "h", IdempotencyKey: "k0"})
	if err != nil {
		t.Fatal(err)
	}
	counting.enqueues = 0

	res, err := c.SubmitMany(ctx, []client.Task{
		{Queue: "q", Handler: "h", Payload: []byte("0")},
		{Queue: "q", Handler: "h", Payload: []byte("1"), IdempotencyKey: "k1"},
		{Queue: "q", Handler: "h", Payload: []byte("2"), IdempotencyKey: "k1"}, // repeat within the batch
		{Queue: "q", Handler: "h", Payload: []byte("3"), IdempotencyKey: "k0"}, // exists already
		{Queue: "q2", Handler: "h", Payload: []byte("4"), IdempotencyKey: "k1"},
	})
	if err != nil {
		t.Fatalf("SubmitMany: %v", err)
	}
	if counting.enqueues != 1 {
		t.Errorf("SubmitMany made %d Enqueue calls, want 1", counting.enqueues)
	}
	if len(res) != 5 {
		t.Fatalf("got %d results, want 5", len(res))
	}
	wantDup := []bool{false, false, true, true, false}
	for i, r := range res {
		if r.Duplicate != wantDup[i] {
			t.Errorf("result %d: duplicate=%v, want %v", i, r.Duplicate, wantDup[i])
		}
	}
	if string(res[0].Task.Payload) != "0" || string(res[1].Task.Payload) != "1" || string(res[4].Task.Payload) != "4" {
		t.Errorf("results are not in input order")
	}
	if res[2].Task.ID != res[1].Task.ID {
		t.Errorf("repeat within the batch: id %s, want %s", res[2].Task.ID, res[1].Task.ID)
	}
	if res[3].Task.ID != existing.Task.ID {
		t.Errorf("existing key: id %s, want %s", res[3].Task.ID, existing.Task.ID)
	}
	if res[4].Task.ID == res[1].Task.ID {
		t.Errorf("same key in another queue got the same task")
	}
	if empty, err := c.SubmitMany(ctx, nil); err != nil || empty != nil {
		t.Errorf("empty batch: %v, %v; want nil, nil", empty, err)
	}
}

func TestDelay(t *testing.T) {
	c, st := newClient(t)
	ctx := context.Background()
	delayed, err := c.Submit(ctx, client.Task{Queue: "later", Handler: "h", Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if until := time.Until(delayed.Task.NextAttemptAt); until < 55*time.Minute || until > 65*time.Minute {
		t.Errorf("delayed task is due in %s, want about 1h", until)
	}
	claim := func(now *time.Time) []*rdq.Task {
		t.Helper()
		tasks, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"later"}, Limit: 10, Lease: time.Minute, WorkerID: "test", Now: now})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		return tasks
	}
	if got := claim(nil); len(got) != 0 {
		t.Fatalf("delayed task was claimable at once")
	}
	later := time.Now().Add(2 * time.Hour)
	got := claim(&later)
	if len(got) != 1 || got[0].ID != delayed.Task.ID {
		t.Fatalf("delayed task not claimable after its delay: %v", got)
	}

	if _, err := c.Submit(ctx, client.Task{Queue: "later", Handler: "h", Delay: -time.Second}); !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative delay: got %v, want ErrInvalid saying negative", err)
	}
}

type sendError struct{}

func (e *sendError) Error() string     { return "smtp: mailbox unavailable" }
func (e *sendError) ErrorType() string { return "smtp" }

func TestFirstFailure(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	res, err := c.Submit(ctx, client.Task{Queue: "emails", Handler: "send", FirstFailure: &sendError{}})
	if err != nil {
		t.Fatal(err)
	}
	task, attempts, err := c.Get(ctx, res.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Attempts != 1 || task.Status != rdq.StatusPending {
		t.Errorf("task: attempts %d status %s, want 1 PENDING", task.Attempts, task.Status)
	}
	want := rdq.Describe(&sendError{})
	if task.LastError.Type != "smtp" || task.LastError.Message != want.Message || task.LastError.Fingerprint != want.Fingerprint {
		t.Errorf("last error %+v, want type smtp, message %q, fingerprint %s", task.LastError, want.Message, want.Fingerprint)
	}
	if len(attempts) != 1 {
		t.Fatalf("got %d attempts, want 1", len(attempts))
	}
	a := attempts[0]
	if a.Number != 1 || a.Life != 0 || a.Outcome != rdq.OutcomeRetryableFailure || a.ErrorType != "smtp" ||
		a.Message != "smtp: mailbox unavailable" || a.WorkerID != client.DefaultID || a.LeaseToken != 0 {
		t.Errorf("first failure recorded as %+v", a)
	}
	if a.StartedAt.IsZero() || a.FinishedAt.Before(a.StartedAt) {
		t.Errorf("attempt times: started %v finished %v", a.StartedAt, a.FinishedAt)
	}

	// A custom submitter ID is recorded instead.
	st, _ := pgtest.NewStore(t)
	c2, err := client.New(client.Config{Store: st, ID: "checkout-service"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = c2.Submit(ctx, client.Task{Queue: "emails", Handler: "send", FirstFailure: errors.New("boom")})
	if err != nil {
		t.Fatal(err)
	}
	_, attempts, err = c2.Get(ctx, res.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 || attempts[0].WorkerID != "checkout-service" {
		t.Errorf("attempts %+v, want one by checkout-service", attempts)
	}
}

// narrowStore exposes only what the client needs of a store.
type narrowStore struct{ s store.Store }

func (n narrowStore) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	return n.s.Enqueue(ctx, p)
}

func (n narrowStore) Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	return n.s.Get(ctx, id)
}

// Config.Store accepts anything with Enqueue and Get, not only a whole
// store.Store.
func TestNarrowStore(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: narrowStore{st}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(context.Background(), client.Task{Queue: "q", Handler: "h", Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := c.Get(context.Background(), res.Task.ID)
	if err != nil || string(got.Payload) != "p" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

// A queue's policy in Config.Policies fingerprints its first failures, so
// they group with the worker's failures of the same cause; other queues
// keep the default.
func TestFirstFailureUsesQueuePolicy(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	policy := rdq.Policy{Fingerprint: func(errorType, message string) string { return "one group" }}
	c, err := client.New(client.Config{Store: st, Policies: map[string]rdq.Policy{"emails": policy}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	custom, err := c.Submit(ctx, client.Task{Queue: "emails", Handler: "send", FirstFailure: &sendError{}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Submit(ctx, client.Task{Queue: "sms", Handler: "send", FirstFailure: &sendError{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := custom.Task.LastError.Fingerprint, policy.Describe(errors.New("anything")).Fingerprint; got != want {
		t.Errorf("emails first failure fingerprint %s, want the policy's %s", got, want)
	}
	if got, want := other.Task.LastError.Fingerprint, rdq.Describe(&sendError{}).Fingerprint; got != want {
		t.Errorf("sms first failure fingerprint %s, want the default %s", got, want)
	}
}

// A first failure marked permanent puts the task straight into the
// dead-letter queue with that failure as its history.
func TestPermanentFirstFailure(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	res, err := c.Submit(ctx, client.Task{Queue: "emails", Handler: "send", FirstFailure: rdq.Permanent(&sendError{})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Task.Status != rdq.StatusDead {
		t.Errorf("submitted task status %s, want DEAD", res.Task.Status)
	}
	task, attempts, err := c.Get(ctx, res.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != rdq.StatusDead || task.FinishedAt.IsZero() || task.LastError.Type != "smtp" {
		t.Errorf("stored task: status %s, finished %v, last error %+v; want DEAD, finished, type smtp", task.Status, task.FinishedAt, task.LastError)
	}
	if len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomePermanentFailure {
		t.Errorf("history %+v, want one PERMANENT_FAILURE attempt", attempts)
	}
}

func TestValidation(t *testing.T) {
	c, st := newClient(t)
	ctx := context.Background()
	tooManyHeaders := map[string]string{}
	for i := 0; i <= rdq.MaxHeaders; i++ {
		tooManyHeaders["h"+strings.Repeat("x", i)] = "v"
	}
	cases := []struct {
		name string
		task client.Task
		want string
	}{
		{"no queue", client.Task{Handler: "h"}, "queue name is empty"},
		{"bad queue", client.Task{Queue: "bad queue", Handler: "h"}, `queue name "bad queue" contains ' '`},
		{"no handler", client.Task{Queue: "q"}, "handler name is empty"},
		{"payload", client.Task{Queue: "q", Handler: "h", Payload: make([]byte, rdq.MaxPayloadBytes+1)}, "payload is"},
		{"headers", client.Task{Queue: "q", Handler: "h", Headers: tooManyHeaders}, "headers; the limit is"},
		{"key", client.Task{Queue: "q", Handler: "h", IdempotencyKey: strings.Repeat("k", rdq.MaxIdempotencyKeyLength+1)}, "idempotency key is"},
		{"content type", client.Task{Queue: "q", Handler: "h", ContentType: strings.Repeat("c", rdq.MaxContentTypeLength+1)}, "content type is"},
		{"delay", client.Task{Queue: "q", Handler: "h", Delay: -1}, "delay -1ns is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Submit(ctx, tc.task)
			if !errors.Is(err, rdq.ErrInvalid) {
				t.Fatalf("got %v, want an error wrapping rdq.ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}

	// In a batch the error names the index, and nothing is stored.
	_, err := c.SubmitMany(ctx, []client.Task{
		{Queue: "q", Handler: "h"},
		{Queue: "q", Handler: "h"},
		{Queue: "q", Handler: "no spaces"},
	})
	if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "task 2:") || !strings.Contains(err.Error(), `handler name "no spaces"`) {
		t.Fatalf("batch validation: got %v, want ErrInvalid naming task 2 and the handler", err)
	}
	tasks, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 10, Lease: time.Minute, WorkerID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 0 {
		t.Errorf("an invalid batch stored %d tasks", len(tasks))
	}
}

func TestTraceContextInjected(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	headers := map[string]string{"tenant": "acme"}
	res, err := c.Submit(ctx, client.Task{Queue: "q", Handler: "h", Headers: headers})
	if err != nil {
		t.Fatal(err)
	}
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if got := res.Task.Headers["traceparent"]; got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	if res.Task.Headers["tenant"] != "acme" {
		t.Errorf("caller header lost: %v", res.Task.Headers)
	}
	if len(headers) != 1 {
		t.Errorf("the caller's header map was modified: %v", headers)
	}

	// A traceparent the caller sets explicitly is kept.
	explicit := "00-11111111111111111111111111111111-2222222222222222-01"
	res, err = c.Submit(ctx, client.Task{Queue: "q", Handler: "h", Headers: map[string]string{"traceparent": explicit}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Task.Headers["traceparent"]; got != explicit {
		t.Errorf("explicit traceparent replaced: %q", got)
	}

	// Without a span in the context nothing is added.
	res, err = c.Submit(context.Background(), client.Task{Queue: "q", Handler: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Task.Headers) != 0 {
		t.Errorf("headers without a trace: %v", res.Task.Headers)
	}
}

// countingStore counts Enqueue calls.
type countingStore struct {
	store.Store
	enqueues int
}

func (s *countingStore) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	s.enqueues++
	return s.Store.Enqueue(ctx, p)
}

func TestRunAt(t *testing.T) {
	c, st := newClient(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	res, err := c.Submit(ctx, client.Task{Queue: "later", Handler: "h", RunAt: at})
	if err != nil {
		t.Fatal(err)
	}
	// Translated on this process's clock; the test database runs on the
	// same host, so the due time is RunAt up to the submit's duration.
	if off := res.Task.NextAttemptAt.Sub(at); off < -5*time.Second || off > 5*time.Second {
		t.Errorf("task is due at %s, %s away from RunAt %s", res.Task.NextAttemptAt, off, at)
	}
	before, after := at.Add(-time.Minute), at.Add(time.Minute)
	for _, c := range []struct {
		now  *time.Time
		want int
	}{{&before, 0}, {&after, 1}} {
		got, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"later"}, Limit: 10, Lease: time.Minute, WorkerID: "test", Now: c.now})
		if err != nil || len(got) != c.want {
			t.Fatalf("Claim at %s = %d tasks, %v; want %d", c.now, len(got), err, c.want)
		}
	}

	past, err := c.Submit(ctx, client.Task{Queue: "past", Handler: "h", RunAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !past.Task.NextAttemptAt.Equal(past.Task.CreatedAt) {
		t.Errorf("a RunAt in the past: due %s, created %s; want due at once", past.Task.NextAttemptAt, past.Task.CreatedAt)
	}
	_, err = c.Submit(ctx, client.Task{Queue: "later", Handler: "h", RunAt: at, Delay: time.Minute})
	if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "both Delay") {
		t.Errorf("Delay and RunAt together: got %v, want ErrInvalid saying both are set", err)
	}
}

func TestCallerChosenID(t *testing.T) {
	c, st := newClient(t)
	ctx := context.Background()
	id := rdq.NewID()
	task := client.Task{ID: id, Queue: "q", Handler: "h", Payload: []byte(`{"n":1}`)}
	first, err := c.Submit(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || first.Task.ID != id {
		t.Fatalf("first submit: %+v, want a new task with ID %s", first, id)
	}
	// Retrying after an ambiguous error: the same ID is a duplicate, even
	// with another payload or queue, and nothing is inserted.
	task.Payload = []byte(`{"n":2}`)
	task.Queue = "other"
	again, err := c.Submit(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Task.ID != id || string(again.Task.Payload) != `{"n":1}` {
		t.Fatalf("resubmit with the same ID: %+v, want a duplicate of the first", again)
	}
	many, err := c.SubmitMany(ctx, []client.Task{{ID: id, Queue: "q", Handler: "h"}, {Queue: "q", Handler: "h"}})
	if err != nil || !many[0].Duplicate || many[1].Duplicate {
		t.Fatalf("SubmitMany with a known ID: %+v, %v", many, err)
	}
	got, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"q", "other"}, Limit: 10, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(got) != 2 {
		t.Fatalf("Claim = %d tasks, %v; want the 2 distinct ones", len(got), err)
	}

	bad := map[string]rdq.ID{
		"nil variant": rdq.MustParseID("01890a5d-ac96-7000-0000-000000000000"),
		"version 0":   rdq.MustParseID("01890a5d-ac96-0000-8000-000000000000"),
		"version 15":  rdq.MustParseID("01890a5d-ac96-f000-8000-000000000000"),
		"max UUID":    rdq.MustParseID("ffffffff-ffff-ffff-ffff-ffffffffffff"),
	}
	for name, id := range bad {
		if _, err := c.Submit(ctx, client.Task{ID: id, Queue: "q", Handler: "h"}); !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), id.String()) {
			t.Errorf("%s: got %v, want ErrInvalid naming the ID", name, err)
		}
	}
	v4 := rdq.MustParseID("9b2c6f0e-3a4d-4e5f-8a6b-7c8d9e0f1a2b")
	if res, err := c.Submit(ctx, client.Task{ID: v4, Queue: "q", Handler: "h"}); err != nil || res.Task.ID != v4 {
		t.Errorf("a version 4 UUID: %+v, %v", res, err)
	}
}

// A task's own MaxAttempts and Timeout are stored with it within the
// queue's bounds; outside them Submit says what the limit is and stores
// nothing.
func TestTaskBudgetWithinQueueLimits(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	c, err := client.New(client.Config{Store: st, Policies: map[string]rdq.Policy{
		"tight": {TaskMaxAttempts: 5, TaskMaxTimeout: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Submit(ctx, client.Task{Queue: "tight", Handler: "h", MaxAttempts: 5, Timeout: 90 * time.Second / 2})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := c.Get(ctx, res.Task.ID)
	if err != nil || got.MaxAttempts != 5 || got.Timeout != 45*time.Second {
		t.Fatalf("stored task %+v, %v; want MaxAttempts 5, Timeout 45s", got, err)
	}
	for _, tc := range []struct {
		task client.Task
		want string
	}{
		{client.Task{Queue: "tight", Handler: "h", MaxAttempts: 6}, "task MaxAttempts 6 is over the queue's limit of 5 (Policy.TaskMaxAttempts)"},
		{client.Task{Queue: "tight", Handler: "h", MaxAttempts: rdq.Unlimited}, "the queue allows a task at most 5 attempts"},
		{client.Task{Queue: "tight", Handler: "h", MaxAttempts: -2}, "task MaxAttempts -2: use 1 to 5"},
		{client.Task{Queue: "tight", Handler: "h", Timeout: 2 * time.Minute}, "task Timeout 2m0s is over the queue's limit of 1m0s (Policy.TaskMaxTimeout)"},
		{client.Task{Queue: "tight", Handler: "h", Timeout: -time.Second}, "task Timeout -1s is negative"},
		{client.Task{Queue: "other", Handler: "h", MaxAttempts: rdq.DefaultTaskMaxAttempts + 1}, "over the queue's limit of 100"},
		{client.Task{Queue: "other", Handler: "h", Timeout: rdq.DefaultTaskMaxTimeout + time.Second}, "over the queue's limit of 1h0m0s"},
	} {
		_, err := c.Submit(ctx, tc.task)
		if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Submit(%+v) = %v; want an error wrapping rdq.ErrInvalid saying %q", tc.task, err, tc.want)
		}
	}
}
