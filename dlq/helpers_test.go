package dlq_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/leakcheck"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	runCleanups()
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines left running: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// base is the start of seeded time: whole seconds, so times survive any
// store's precision unchanged.
var base = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// seed describes one dead task to create through the store SPI.
type seed struct {
	queue, handler string
	errType, msg   string
	stack          string
	deadAt         time.Time
	payload        []byte
}

func (s seed) failure() rdq.Failure {
	return rdq.Failure{Type: s.errType, Message: s.msg, Stack: s.stack, Fingerprint: rdq.Fingerprint(s.errType, s.msg)}
}

// seedDead creates the seeds as DEAD tasks the way a worker would: enqueue,
// claim, finish with a failed attempt, on the store's clock set to each
// seed's dead time. Seeds sharing a dead time share it exactly. It returns
// the tasks as stored, in seed order.
func seedDead(t testing.TB, s store.Store, seeds []seed) []*rdq.Task {
	t.Helper()
	if len(seeds) == 0 {
		return nil
	}
	ctx := ctxT(t)
	start := seeds[0].deadAt
	queues := map[string]bool{}
	for _, sd := range seeds {
		start = minTime(start, sd.deadAt)
		queues[sd.queue] = true
	}
	start = start.Add(-time.Minute)
	newTasks := make([]store.NewTask, len(seeds))
	for i, sd := range seeds {
		payload := sd.payload
		if payload == nil {
			payload = fmt.Appendf(nil, `{"n":%d}`, i)
		}
		newTasks[i] = store.NewTask{ID: rdq.NewID(), Queue: sd.queue, Handler: sd.handler, Payload: payload, ContentType: "application/json"}
	}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: newTasks, Now: &start}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{
		Queues: keys(queues), Limit: len(seeds), Lease: time.Hour, WorkerID: "seed-worker", Now: &start,
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[rdq.ID]int64{}
	for _, c := range claimed {
		tokens[c.ID] = c.LeaseToken
	}
	byTime := map[time.Time][]store.Completion{}
	var times []time.Time
	for i, sd := range seeds {
		id := newTasks[i].ID
		tok, ok := tokens[id]
		if !ok {
			t.Fatalf("seed: task %d was not claimed (other pending tasks in its queue?)", i)
		}
		if _, ok := byTime[sd.deadAt]; !ok {
			times = append(times, sd.deadAt)
		}
		byTime[sd.deadAt] = append(byTime[sd.deadAt], store.Completion{
			Lease: store.Lease{ID: id, Token: tok}, Status: rdq.StatusDead,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: sd.failure(), WorkerID: "seed-worker", Duration: 1500 * time.Millisecond},
		})
	}
	for _, at := range times {
		at := at
		errs, err := s.Finish(ctx, store.FinishParams{Completions: byTime[at], Now: &at})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
	}
	out := make([]*rdq.Task, len(seeds))
	for i := range seeds {
		out[i] = get(t, s, newTasks[i].ID)
	}
	return out
}

func get(t testing.TB, s store.Store, id rdq.ID) *rdq.Task {
	t.Helper()
	task, _, err := s.Get(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// failAgain claims redriven tasks and kills them again at deadAt, so they
// are DEAD in a later life.
func failAgain(t testing.TB, s store.Store, ids []rdq.ID, queue string, at time.Time) {
	t.Helper()
	ctx := ctxT(t)
	// Claim far enough in the future that any redrive delay has passed.
	claimAt := at.Add(-time.Second)
	claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{queue}, Limit: len(ids) + 10, Lease: time.Hour, WorkerID: "seed-worker", Now: &claimAt})
	if err != nil {
		t.Fatal(err)
	}
	want := map[rdq.ID]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var comps []store.Completion
	for _, c := range claimed {
		if !want[c.ID] {
			t.Fatalf("failAgain claimed unexpected task %s", c.ID)
		}
		f := rdq.Failure{Type: "again", Message: "failed again", Fingerprint: rdq.Fingerprint("again", "failed again")}
		comps = append(comps, store.Completion{Lease: store.Lease{ID: c.ID, Token: c.LeaseToken}, Status: rdq.StatusDead,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: "seed-worker", Duration: time.Second}})
	}
	if len(comps) != len(ids) {
		t.Fatalf("failAgain claimed %d tasks, want %d", len(comps), len(ids))
	}
	if _, err := s.Finish(ctx, store.FinishParams{Completions: comps, Now: &at}); err != nil {
		t.Fatal(err)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// corpus is a varied DLQ: three queues, two handlers, four error types
// with messages that differ in ids and numbers (so fingerprints group), dead
// times spread over hours with ties, and message text with LIKE
// metacharacters.
func corpus(n int) []seed {
	queues := []string{"emails", "billing", "search.index"}
	handlers := []string{"send", "sync:v2"}
	templates := []struct{ typ, msg string }{
		{"*net.OpError", "dial tcp 10.0.%d.7:5432: connect: connection refused"},
		{"timeout", "handler timed out after %ds"},
		{"panic", "panic: assignment to entry in nil map (user %d)"},
		{"validation", "field amount: 100%% or more_than %d is not allowed"},
	}
	seeds := make([]seed, n)
	for i := range seeds {
		tpl := templates[(i*7+i/5)%len(templates)]
		seeds[i] = seed{
			queue:   queues[i%len(queues)],
			handler: handlers[(i/3)%len(handlers)],
			errType: tpl.typ,
			msg:     fmt.Sprintf(tpl.msg, i%50),
			// Every third task shares its dead time with the previous one.
			deadAt: base.Add(time.Duration(i-i/3) * 97 * time.Second),
		}
		if tpl.typ == "panic" {
			seeds[i].stack = fmt.Sprintf("goroutine %d [running]:\nmain.handler()\n\t/src/app/handler.go:42 +0x1d", i)
		}
	}
	return seeds
}

// newDLQ returns a fresh migrated store with the corpus seeded, a DLQ on
// it, and the seeded tasks.
func newDLQ(t testing.TB, n int, cfg dlq.Config) (*pgstore.Store, *dlq.DLQ, []*rdq.Task) {
	t.Helper()
	s, _ := pgtest.NewStore(t)
	tasks := seedDead(t, s, corpus(n))
	q, err := dlq.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, q, tasks
}

// expect returns the tasks f selects, newest dead first: the brute-force
// reference every store query is checked against.
func expect(tasks []*rdq.Task, f dlq.Filter) []*rdq.Task {
	var out []*rdq.Task
	for _, t := range tasks {
		if f.Matches(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *rdq.Task) int {
		if c := b.FinishedAt.Compare(a.FinishedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID.String(), a.ID.String())
	})
	return out
}

// listAll follows page tokens to the end.
func listAll(t testing.TB, q *dlq.DLQ, f dlq.Filter, pageSize int) []*rdq.Task {
	t.Helper()
	var all []*rdq.Task
	token := ""
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("listing does not end")
		}
		p, err := q.List(ctxT(t), f, dlq.ListOptions{PageSize: pageSize, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Tasks) > pageSize {
			t.Fatalf("page of %d tasks, page size %d", len(p.Tasks), pageSize)
		}
		if p.NextPageToken != "" && len(p.Tasks) != pageSize {
			t.Fatalf("short page of %d (size %d) with a next token", len(p.Tasks), pageSize)
		}
		all = append(all, p.Tasks...)
		if p.NextPageToken == "" {
			return all
		}
		token = p.NextPageToken
	}
}

func ids(tasks []*rdq.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID.String()
	}
	return out
}

func audit(t testing.TB, q *dlq.DLQ, action string) []store.AuditEntry {
	t.Helper()
	entries, err := q.Audit(ctxT(t), dlq.AuditQuery{Action: action, Limit: dlq.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// Examples share one store, created on first use and dropped when the
// tests end.
var example struct {
	once sync.Once
	s    *pgstore.Store
	err  error
}

// exampleStore returns the examples' store with a few dead tasks seeded.
func exampleStore() *pgstore.Store {
	example.once.Do(func() {
		ctx := context.Background()
		pool, err := pgtest.NewPool(ctx)
		if err != nil {
			example.err = err
			return
		}
		schema := pgtest.SchemaName()
		addCleanup(func() {
			if err := pgtest.DropSchema(pool, schema); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			pool.Close()
		})
		s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
		if err == nil {
			err = s.Migrate(ctx)
		}
		if err != nil {
			example.err = err
			return
		}
		tb := &exampleTB{}
		seedDead(tb, s, []seed{
			{queue: "emails", handler: "send_welcome", errType: "*net.OpError", msg: "dial tcp 10.0.0.7:25: connection refused", deadAt: base},
			{queue: "emails", handler: "send_welcome", errType: "*net.OpError", msg: "dial tcp 10.0.0.9:25: connection refused", deadAt: base.Add(time.Minute)},
			{queue: "emails", handler: "send_receipt", errType: "timeout", msg: "handler timed out after 30s", deadAt: base.Add(2 * time.Minute)},
		})
		for _, f := range tb.cleanups {
			f()
		}
		if tb.failed != "" {
			example.err = fmt.Errorf("seeding examples: %s", tb.failed)
			return
		}
		example.s = s
	})
	if example.err != nil {
		panic(example.err)
	}
	return example.s
}

// exampleTB lets seedDead run outside a test.
type exampleTB struct {
	testing.TB
	failed   string
	cleanups []func()
}

func (e *exampleTB) Helper()                   {}
func (e *exampleTB) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) Fatal(args ...any)         { e.failed = fmt.Sprint(args...); panic(e.failed) }
func (e *exampleTB) Fatalf(f string, a ...any) { e.Fatal(fmt.Sprintf(f, a...)) }
