package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// base is the seeded clock: whole seconds, so output is deterministic.
var base = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// fixture is one dead task with a known id and history.
type fixture struct {
	id             string
	queue, handler string
	payload        string
	// fails are the failed attempts, the last one fatal.
	fails []rdq.Failure
	// start is when the task was submitted; attempts follow two minutes
	// apart, each finishing 1.5s after it started.
	start time.Time
}

func failure(typ, msg, stack string) rdq.Failure {
	return rdq.Failure{Type: typ, Message: msg, Stack: stack, Fingerprint: rdq.Fingerprint(typ, msg)}
}

const panicStack = "goroutine 42 [running]:\nmain.(*Biller).Charge(0x0)\n\t/src/billing/charge.go:87 +0x1d\nmain.handler()\n\t/src/billing/handler.go:31 +0x4a"

var fixtures = []fixture{
	{id: "01954a1e-c000-7000-8000-000000000001", queue: "emails", handler: "send_welcome", payload: `{"user":1}`,
		fails: []rdq.Failure{failure("*net.OpError", "dial tcp 10.0.0.7:25: connect: connection refused", "")}, start: base},
	{id: "01954a1e-c000-7000-8000-000000000002", queue: "emails", handler: "send_welcome", payload: `{"user":2}`,
		fails: []rdq.Failure{failure("*net.OpError", "dial tcp 10.0.0.9:25: connect: connection refused", "")}, start: base.Add(time.Minute)},
	{id: "01954a1e-c000-7000-8000-000000000003", queue: "emails", handler: "send_receipt", payload: `{"order":77}`,
		fails: []rdq.Failure{
			failure("timeout", "handler timed out after 30s", ""),
			failure("timeout", "handler timed out after 30s", ""),
		}, start: base.Add(2 * time.Minute)},
	{id: "01954a1e-c000-7000-8000-000000000004", queue: "billing", handler: "charge", payload: `{"invoice":"inv_1"}`,
		fails: []rdq.Failure{
			failure("*url.Error", "Post \"https://psp.example/charge\": EOF", ""),
			failure("panic", "panic: runtime error: invalid memory address or nil pointer dereference", panicStack),
		}, start: base.Add(2 * time.Minute)},
	{id: "01954a1e-c000-7000-8000-000000000005", queue: "billing", handler: "charge", payload: `{"invoice":"inv_2"}`,
		fails: []rdq.Failure{failure("validation", "amount -5 is negative", "")}, start: base.Add(10 * time.Minute)},
}

// seedFixtures creates the fixtures as DEAD tasks through the store SPI,
// the way a worker would, on the store's clock set to seeded times.
func seedFixtures(t testing.TB, s store.Store, fs []fixture) {
	t.Helper()
	ctx := context.Background()
	for _, f := range fs {
		at := f.start
		if _, err := s.Enqueue(ctx, store.EnqueueParams{Now: &at, Tasks: []store.NewTask{{
			ID: rdq.MustParseID(f.id), Queue: f.queue, Handler: f.handler, Payload: []byte(f.payload),
			ContentType: "application/json", Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		}}}); err != nil {
			t.Fatal(err)
		}
		for k, fl := range f.fails {
			claimAt := f.start.Add(time.Duration(2*k) * time.Minute)
			claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{f.queue}, Limit: 1, Lease: time.Minute, WorkerID: "worker-a", Now: &claimAt})
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim %s: %v %v", f.id, claimed, err)
			}
			status, outcome := rdq.StatusPending, rdq.OutcomeRetryableFailure
			if k == len(f.fails)-1 {
				status, outcome = rdq.StatusDead, rdq.OutcomePermanentFailure
			}
			doneAt := claimAt.Add(1500 * time.Millisecond)
			errs, err := s.Finish(ctx, store.FinishParams{Now: &doneAt, Completions: []store.Completion{{
				Lease: store.Lease{ID: claimed[0].ID, Token: claimed[0].LeaseToken}, Status: status,
				Attempt: &store.AttemptRecord{Outcome: outcome, Failure: fl, WorkerID: "worker-a", Duration: 1500 * time.Millisecond},
			}}})
			if err != nil || errs[0] != nil {
				t.Fatalf("finish %s: %v %v", f.id, errs, err)
			}
		}
	}
}

// harness runs the command in-process against one fresh schema.
type harness struct {
	t      *testing.T
	s      *pgstore.Store
	schema string
	env    map[string]string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	s, schema := pgtest.NewStore(t)
	seedFixtures(t, s, fixtures)
	return &harness{t: t, s: s, schema: schema, env: map[string]string{
		"RDQ_DATABASE_URL": pgtest.URL(), "RDQ_SCHEMA": schema, "USER": "tester",
	}}
}

type result struct {
	code           int
	stdout, stderr string
}

func (h *harness) run(stdin string, args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, args, strings.NewReader(stdin), &out, &errb, func(k string) string { return h.env[k] })
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs a command that must succeed and returns its stdout.
func (h *harness) ok(args ...string) string {
	h.t.Helper()
	r := h.run("", args...)
	if r.code != 0 {
		h.t.Fatalf("rdq %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// timestampRE matches the table time format, for normalizing times set by
// the real clock.
var timestampRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z`)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (run go test -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func (h *harness) task(id string) *rdq.Task {
	h.t.Helper()
	task, _, err := h.s.Get(context.Background(), rdq.MustParseID(id))
	if err != nil {
		h.t.Fatal(err)
	}
	return task
}

func (h *harness) audit() []store.AuditEntry {
	h.t.Helper()
	entries, err := h.s.ListAudit(context.Background(), store.ListAuditParams{Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	return entries
}

func (h *harness) deadCount() int64 {
	h.t.Helper()
	n, err := h.s.CountDead(context.Background(), store.DeadFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// desc is how the command names the harness's database in messages.
func (h *harness) desc() string {
	h.t.Helper()
	e := &env{}
	e.g.databaseURL, e.g.schema = h.env["RDQ_DATABASE_URL"], h.env["RDQ_SCHEMA"]
	u, err := e.databaseURL()
	if err != nil {
		h.t.Fatal(err)
	}
	return storeurl.Describe(u)
}

func fid(i int) string { return fixtures[i-1].id }
