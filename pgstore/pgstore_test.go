package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// --- test setup ---------------------------------------------------------------

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newTask(queue string) store.NewTask {
	return store.NewTask{ID: rdq.NewID(), Queue: queue, Handler: "h", Payload: []byte(`{"n":1}`), ContentType: "application/json"}
}

func enqueue(t *testing.T, s *pgstore.Store, now *time.Time, tasks ...store.NewTask) []store.EnqueueResult {
	t.Helper()
	res, err := s.Enqueue(ctxT(t), store.EnqueueParams{Tasks: tasks, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(tasks) {
		t.Fatalf("enqueue returned %d results for %d tasks", len(res), len(tasks))
	}
	return res
}

func claim(t *testing.T, s *pgstore.Store, now *time.Time, queue string, limit int) []*rdq.Task {
	t.Helper()
	got, err := s.Claim(ctxT(t), store.ClaimParams{Queues: []string{queue}, Limit: limit, Lease: time.Minute, WorkerID: "w1", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func get(t *testing.T, s *pgstore.Store, id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	t.Helper()
	task, history, err := s.Get(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return task, history
}

func failure(msg string) rdq.Failure {
	return rdq.Describe(errors.New(msg))
}

func attempt(outcome rdq.Outcome, msg string) *store.AttemptRecord {
	a := &store.AttemptRecord{Outcome: outcome, WorkerID: "w1", Duration: 10 * time.Millisecond}
	if outcome != rdq.OutcomeSuccess {
		a.Failure = failure(msg)
	}
	return a
}

func finish(t *testing.T, s *pgstore.Store, now *time.Time, cs ...store.Completion) []error {
	t.Helper()
	errs, err := s.Finish(ctxT(t), store.FinishParams{Completions: cs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

func at(t time.Time) *time.Time { return &t }

func lease(task *rdq.Task) store.Lease { return store.Lease{ID: task.ID, Token: task.LeaseToken} }

// --- migrations and configuration ---------------------------------------------

func TestMigrateConcurrentlyAndIdempotently(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool := pgtest.Pool(t)
	schema := pgtest.SchemaName()
	t.Cleanup(func() {
		if err := pgtest.DropSchema(pool, schema); err != nil {
			t.Error(err)
		}
	})

	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = s.Migrate(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrator %d: %v", i, err)
		}
	}

	s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // again: a no-op
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("migrating again: %v", err)
		}
	}
	v, err := s.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != pgstore.LatestVersion() || v < 1 {
		t.Fatalf("version %d, want %d", v, pgstore.LatestVersion())
	}
	var rows int
	if err := pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.schema_migrations", schema)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != pgstore.MigrationCount() {
		t.Fatalf("%d schema_migrations rows after concurrent and repeated migrations, want %d", rows, pgstore.MigrationCount())
	}
	// The migrated schema works.
	res := enqueue(t, s, nil, newTask("q"))
	if res[0].Duplicate || res[0].Task.Status != rdq.StatusPending {
		t.Fatalf("enqueue after migrate: %+v", res[0])
	}
}

func TestVersionOfUnmigratedSchemaIsZero(t *testing.T) {
	t.Parallel()
	s, err := pgstore.New(pgtest.Pool(t), pgstore.Config{Schema: pgtest.SchemaName()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Version(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if v != 0 {
		t.Fatalf("version of a schema that does not exist: %d", v)
	}
}

func TestInvalidSchemaNamesAreRejected(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	bad := []string{
		"Rdq", "1abc", "a-b", "a b", "a.b", `x"; DROP TABLE y; --`, "rdq\x00", "ünï",
		strings.Repeat("a", 64), "pg_catalog", "pg_rdq",
	}
	for _, name := range bad {
		_, err := pgstore.New(pool, pgstore.Config{Schema: name})
		if err == nil {
			t.Errorf("New accepted schema %q", name)
			continue
		}
		if !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("schema %q: error %v does not wrap rdq.ErrInvalid", name, err)
		}
		if !strings.Contains(err.Error(), "schema") {
			t.Errorf("schema %q: error %q does not say what was wrong", name, err)
		}
	}
	good := []string{"rdq", "_x", "rdq_2", strings.Repeat("a", 63)}
	for _, name := range good {
		s, err := pgstore.New(pool, pgstore.Config{Schema: name})
		if err != nil {
			t.Errorf("New rejected schema %q: %v", name, err)
			continue
		}
		if s.Schema() != name || len(s.Channel()) > 63 {
			t.Errorf("schema %q: Schema() %q, Channel() %q", name, s.Schema(), s.Channel())
		}
	}
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Schema() != pgstore.DefaultSchema {
		t.Fatalf("default schema %q", s.Schema())
	}
	if _, err := pgstore.New(nil, pgstore.Config{}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("New(nil pool): %v", err)
	}
}

// --- notifications ------------------------------------------------------------

func TestNotificationsArriveAfterEnqueue(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := s.Notifications(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}

	// A delayed task sends nothing; a due one names its queue.
	later := newTask("later")
	later.Delay = time.Hour
	enqueue(t, s, nil, later)
	enqueue(t, s, nil, newTask("now"))
	select {
	case q := <-ch:
		if q != "now" {
			t.Fatalf("first notification for %q, want %q", q, "now")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s of an enqueue")
	}

	// A release notifies too.
	enqueue(t, s, nil, newTask("rel"))
	waitFor(t, ch, "rel")
	got := claim(t, s, nil, "rel", 1)
	if _, err := s.Release(ctxT(t), store.ReleaseParams{Leases: []store.Lease{lease(got[0])}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "rel")

	cancel()
	for range ch { // drains, then ends: the channel is closed when ctx is done
	}
}

func waitFor(t *testing.T, ch <-chan string, queue string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case q, ok := <-ch:
			if !ok {
				t.Fatal("notification channel closed")
			}
			if q == queue {
				return
			}
		case <-deadline:
			t.Fatalf("no notification for %q within 10s", queue)
		}
	}
}

func TestNotificationsWithDoneContextFail(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	s, err := pgstore.New(pool, pgstore.Config{Schema: pgtest.SchemaName()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Notifications(ctx); err == nil {
		t.Fatal("Notifications with a done context returned no error")
	}
}

// --- batch semantics ------------------------------------------------------------

func TestEnqueueDuplicateKeysWithinAndAcrossBatches(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)

	a := newTask("q")
	a.IdempotencyKey = "k1"
	b := newTask("q") // same key as a, in the same batch
	b.IdempotencyKey = "k1"
	c := newTask("q") // no key
	d := newTask("other")
	d.IdempotencyKey = "k1" // same key, other queue: not a duplicate
	e := a                  // a again, same ID
	res := enqueue(t, s, nil, a, b, c, d, e)

	wantDup := []bool{false, true, false, false, true}
	wantID := []rdq.ID{a.ID, a.ID, c.ID, d.ID, a.ID}
	for i, r := range res {
		if r.Duplicate != wantDup[i] || r.Task == nil || r.Task.ID != wantID[i] {
			t.Fatalf("result %d: duplicate %v, task %v; want duplicate %v, task %s", i, r.Duplicate, r.Task, wantDup[i], wantID[i])
		}
	}
	if res[1].Task == res[0].Task {
		t.Fatal("duplicate results share one *rdq.Task")
	}

	// Across batches: the key and the ID are found in the table.
	f := newTask("q")
	f.IdempotencyKey = "k1"
	g := newTask("q")
	g.IdempotencyKey = "k2"
	res = enqueue(t, s, nil, f, c, g)
	if !res[0].Duplicate || res[0].Task.ID != a.ID {
		t.Fatalf("key k1 again: %+v", res[0])
	}
	if !res[1].Duplicate || res[1].Task.ID != c.ID {
		t.Fatalf("ID of c again: %+v", res[1])
	}
	if res[2].Duplicate || res[2].Task.ID != g.ID {
		t.Fatalf("new key k2: %+v", res[2])
	}
	if _, _, err := s.Get(ctxT(t), b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the in-batch duplicate was stored: %v", err)
	}
}

func TestEnqueueConcurrentSameKeyInsertsOnce(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	ctx := ctxT(t)
	const n = 8
	var wg sync.WaitGroup
	results := make([]store.EnqueueResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nt := newTask("q")
			nt.IdempotencyKey = "same"
			res, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{nt}})
			errs[i] = err
			if err == nil {
				results[i] = res[0]
			}
		}()
	}
	wg.Wait()
	inserted := 0
	var id rdq.ID
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].Duplicate {
			inserted++
			id = results[i].Task.ID
		}
	}
	if inserted != 1 {
		t.Fatalf("%d enqueues inserted the same key", inserted)
	}
	for i := range n {
		if results[i].Task.ID != id {
			t.Fatalf("result %d names task %s, want %s", i, results[i].Task.ID, id)
		}
	}
}

func TestEnqueueFirstFailureIsAttemptOne(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	nt := newTask("q")
	nt.FirstFailure = attempt(rdq.OutcomeRetryableFailure, "upstream said 503")
	res := enqueue(t, s, nil, nt)
	task, history := get(t, s, res[0].Task.ID)
	if task.Attempts != 1 || task.LastError.Message != "upstream said 503" || task.LastError.Fingerprint == "" {
		t.Fatalf("task after enqueue with a first failure: %+v", task)
	}
	if len(history) != 1 || history[0].Number != 1 || history[0].Life != 0 || history[0].LeaseToken != 0 ||
		history[0].Outcome != rdq.OutcomeRetryableFailure || history[0].WorkerID != "w1" {
		t.Fatalf("history: %+v", history)
	}
	if d := history[0].FinishedAt.Sub(history[0].StartedAt); d != 10*time.Millisecond {
		t.Fatalf("attempt duration %s, want 10ms", d)
	}

	bad := newTask("q")
	bad.FirstFailure = attempt(rdq.OutcomeSuccess, "")
	if _, err := s.Enqueue(ctxT(t), store.EnqueueParams{Tasks: []store.NewTask{newTask("q"), bad}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("first failure with outcome SUCCESS: %v", err)
	}
}

func TestFinishMixedStaleAndCurrentTokens(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	enqueue(t, s, nil, newTask("q"), newTask("q"), newTask("q"))
	got := claim(t, s, nil, "q", 3)
	if len(got) != 3 {
		t.Fatalf("claimed %d of 3", len(got))
	}
	t1, t2, t3 := got[0], got[1], got[2]
	stale := store.Lease{ID: t2.ID, Token: t2.LeaseToken - 1}
	errs := finish(t, s, nil,
		store.Completion{Lease: lease(t1), Status: rdq.StatusSucceeded, Attempt: attempt(rdq.OutcomeSuccess, "")},
		store.Completion{Lease: stale, Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, "stale")},
		store.Completion{Lease: lease(t3), Status: rdq.StatusPending, RetryIn: time.Hour, Attempt: attempt(rdq.OutcomeRetryableFailure, "boom")},
		store.Completion{Lease: lease(t1), Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, "again")},
	)
	want := []error{nil, store.ErrLeaseLost, nil, store.ErrLeaseLost}
	for i := range want {
		if !errors.Is(errs[i], want[i]) || (want[i] == nil) != (errs[i] == nil) {
			t.Fatalf("errs[%d] = %v, want %v", i, errs[i], want[i])
		}
	}

	task, history := get(t, s, t1.ID)
	if task.Status != rdq.StatusSucceeded || task.Attempts != 1 || len(history) != 1 || task.FinishedAt.IsZero() || !task.LeaseExpiresAt.IsZero() {
		t.Fatalf("t1: %+v, history %+v", task, history)
	}
	task, history = get(t, s, t2.ID)
	if task.Status != rdq.StatusInFlight || task.Attempts != 0 || len(history) != 0 || task.LeaseToken != t2.LeaseToken {
		t.Fatalf("t2 changed by a stale completion: %+v, history %+v", task, history)
	}
	task, history = get(t, s, t3.ID)
	if task.Status != rdq.StatusPending || task.Attempts != 1 || task.LastError.Message != "boom" || len(history) != 1 ||
		history[0].LeaseToken != t3.LeaseToken || history[0].Number != 1 {
		t.Fatalf("t3: %+v, history %+v", task, history)
	}
	if d := task.NextAttemptAt.Sub(task.UpdatedAt); d != time.Hour {
		t.Fatalf("t3 due %s after its update, want 1h", d)
	}

	// Heartbeat and Release: per-item results too.
	hb, err := s.Heartbeat(ctxT(t), store.HeartbeatParams{Leases: []store.Lease{lease(t2), stale, lease(t1), lease(t2)}, Extend: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if hb[0] != nil || !errors.Is(hb[1], store.ErrLeaseLost) || !errors.Is(hb[2], store.ErrLeaseLost) || hb[3] != nil {
		t.Fatalf("heartbeat results %v", hb)
	}
	task, _ = get(t, s, t2.ID)
	if d := task.LeaseExpiresAt.Sub(task.UpdatedAt); d != time.Hour {
		t.Fatalf("heartbeat set the lease %s from now, want 1h", d)
	}
	rel, err := s.Release(ctxT(t), store.ReleaseParams{Leases: []store.Lease{stale, lease(t2), lease(t2)}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rel[0], store.ErrLeaseLost) || rel[1] != nil || !errors.Is(rel[2], store.ErrLeaseLost) {
		t.Fatalf("release results %v", rel)
	}
	task, history = get(t, s, t2.ID)
	if task.Status != rdq.StatusPending || task.Attempts != 0 || len(history) != 0 || !task.LeaseExpiresAt.IsZero() {
		t.Fatalf("t2 after release: %+v", task)
	}
	// Its next claim has a greater token.
	again := claim(t, s, nil, "q", 10)
	if len(again) != 1 || again[0].ID != t2.ID || again[0].LeaseToken <= t2.LeaseToken {
		t.Fatalf("claim after release: %v", again)
	}
}

func TestIDRoundTrip(t *testing.T) {
	t.Parallel()
	s, schema := pgtest.NewStore(t)
	id := rdq.NewID()
	nt := newTask("q")
	nt.ID = id
	nt.Headers = map[string]string{"traceparent": "00-abc-def-01"}
	nt.IdempotencyKey = "key"
	enqueue(t, s, nil, nt)
	task, _ := get(t, s, id)
	if task.ID != id || task.ID.String() != id.String() {
		t.Fatalf("ID %s came back as %s", id, task.ID)
	}
	if task.Headers["traceparent"] != "00-abc-def-01" || task.IdempotencyKey != "key" || string(task.Payload) != `{"n":1}` ||
		task.ContentType != "application/json" || task.Handler != "h" || task.Queue != "q" {
		t.Fatalf("task fields did not round-trip: %+v", task)
	}
	// The database sees the same UUID text as rdq.
	var text string
	pool := pgtest.Pool(t)
	if err := pool.QueryRow(ctxT(t), fmt.Sprintf("SELECT id::text FROM %s.tasks", schema)).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if text != id.String() {
		t.Fatalf("database has %s, rdq has %s", text, id)
	}
	if _, _, err := s.Get(ctxT(t), rdq.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of an unknown ID: %v", err)
	}
}

// TestAttemptNumbersContinueAcrossRedriveAndLeaseExpiry follows one task
// through two lives, with a lease expiry in the second, and checks that
// attempt numbers never repeat and always continue from the history.
func TestAttemptNumbersContinueAcrossRedriveAndLeaseExpiry(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	base := time.Now().Add(time.Hour).Truncate(time.Microsecond)

	nt := newTask("q")
	nt.FirstFailure = attempt(rdq.OutcomeRetryableFailure, "first")
	id := enqueue(t, s, at(base), nt)[0].Task.ID // attempt 1, life 0

	c := claim(t, s, at(base), "q", 1)[0]
	if errs := finish(t, s, at(base), store.Completion{Lease: lease(c), Status: rdq.StatusDead,
		Attempt: attempt(rdq.OutcomePermanentFailure, "second")}); errs[0] != nil { // attempt 2, life 0
		t.Fatal(errs[0])
	}
	task, _ := get(t, s, id)
	if task.Status != rdq.StatusDead || task.Attempts != 2 {
		t.Fatalf("after two attempts: %+v", task)
	}

	errs, err := s.Redrive(ctxT(t), store.RedriveParams{IDs: []rdq.ID{id}, Actor: "op", Reason: "fixed", Now: at(base)})
	if err != nil || errs[0] != nil {
		t.Fatalf("redrive: %v %v", err, errs)
	}
	task, _ = get(t, s, id)
	if task.Status != rdq.StatusPending || task.Attempts != 0 || task.Life != 1 || task.LastError.Message != "second" || !task.FinishedAt.IsZero() {
		t.Fatalf("after redrive: %+v", task)
	}

	// Life 1: claimed, then the worker vanishes and the lease expires.
	c = claim(t, s, at(base), "q", 1)[0]
	later := base.Add(2 * time.Minute)
	rec, err := s.ReclaimExpired(ctxT(t), store.ReclaimParams{Limit: 10, Lease: time.Minute, WorkerID: "reaper", Now: at(later)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || rec[0].ID != id || rec[0].LeaseToken <= c.LeaseToken || rec[0].Attempts != 1 || rec[0].LeaseOwner != "reaper" ||
		rec[0].LastError.Type != rdq.LeaseExpiredFailure().Type {
		t.Fatalf("reclaimed: %+v", rec)
	}
	// The reclaimer decides: retry without an attempt.
	if errs := finish(t, s, at(later), store.Completion{Lease: lease(rec[0]), Status: rdq.StatusPending}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// The lost worker's late completion is stale.
	if errs := finish(t, s, at(later), store.Completion{Lease: lease(c), Status: rdq.StatusSucceeded, Attempt: attempt(rdq.OutcomeSuccess, "")}); !errors.Is(errs[0], store.ErrLeaseLost) {
		t.Fatalf("late completion of the lost execution: %v", errs[0])
	}
	c = claim(t, s, at(later), "q", 1)[0]
	if errs := finish(t, s, at(later), store.Completion{Lease: lease(c), Status: rdq.StatusSucceeded, Attempt: attempt(rdq.OutcomeSuccess, "")}); errs[0] != nil {
		t.Fatal(errs[0])
	}

	task, history := get(t, s, id)
	if task.Status != rdq.StatusSucceeded || task.Attempts != 2 || task.Life != 1 {
		t.Fatalf("final task: %+v", task)
	}
	want := []struct {
		life    int
		outcome rdq.Outcome
		worker  string
	}{
		{0, rdq.OutcomeRetryableFailure, "w1"},
		{0, rdq.OutcomePermanentFailure, "w1"},
		{1, rdq.OutcomeLeaseExpired, "w1"},
		{1, rdq.OutcomeSuccess, "w1"},
	}
	if len(history) != len(want) {
		t.Fatalf("history has %d attempts, want %d: %+v", len(history), len(want), history)
	}
	for i, w := range want {
		a := history[i]
		if a.Number != i+1 || a.Life != w.life || a.Outcome != w.outcome || a.WorkerID != w.worker {
			t.Fatalf("attempt %d: %+v, want number %d life %d %s by %s", i, a, i+1, w.life, w.outcome, w.worker)
		}
	}
	if history[2].LeaseToken == 0 || !history[2].FinishedAt.Equal(later) || !history[2].StartedAt.Equal(base) {
		t.Fatalf("lease-expired attempt: %+v", history[2])
	}
}

// --- admin --------------------------------------------------------------------

// seedDead makes dead tasks: n per (queue, handler) pair, each dying at its
// own time, with one of two errors. It returns them newest dead first.
func seedDead(t *testing.T, s *pgstore.Store, base time.Time, queues, handlers []string, n int) []*rdq.Task {
	t.Helper()
	var all []*rdq.Task
	step := 0
	for _, q := range queues {
		for _, h := range handlers {
			for i := range n {
				nt := newTask(q)
				nt.Handler = h
				now := base.Add(time.Duration(step) * time.Second)
				step++
				enqueue(t, s, at(now), nt)
				c := claim(t, s, at(now), q, 1)
				if len(c) != 1 {
					t.Fatalf("seeding: claimed %d", len(c))
				}
				msg := fmt.Sprintf("Order %d not found", i)
				if i%2 == 1 {
					msg = fmt.Sprintf("connection refused to 10.0.0.%d", i)
				}
				if errs := finish(t, s, at(now), store.Completion{Lease: lease(c[0]), Status: rdq.StatusDead,
					Attempt: attempt(rdq.OutcomePermanentFailure, msg)}); errs[0] != nil {
					t.Fatal(errs[0])
				}
				task, _ := get(t, s, nt.ID)
				all = append([]*rdq.Task{task}, all...)
			}
		}
	}
	return all
}

func listAll(t *testing.T, s *pgstore.Store, f store.DeadFilter, page int) []*rdq.Task {
	t.Helper()
	var out []*rdq.Task
	var after *store.Cursor
	for {
		got, err := s.ListDead(ctxT(t), store.ListDeadParams{Filter: f, After: after, Limit: page})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got...)
		if len(got) < page {
			return out
		}
		c := store.CursorOf(got[len(got)-1])
		after = &c
	}
}

func ids(tasks []*rdq.Task) []rdq.ID {
	out := make([]rdq.ID, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func equalIDs(a, b []rdq.ID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAdminFiltersAndKeyset(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	all := seedDead(t, s, base, []string{"q1", "q2"}, []string{"ha", "hb"}, 4) // 16 dead tasks

	// Keyset paging over everything, in pages that do not divide 16.
	if got := listAll(t, s, store.DeadFilter{}, 3); !equalIDs(ids(got), ids(all)) {
		t.Fatalf("paged listing differs from newest-first order:\n got %v\nwant %v", ids(got), ids(all))
	}

	filter := func(keep func(*rdq.Task) bool) []rdq.ID {
		var out []rdq.ID
		for _, t := range all {
			if keep(t) {
				out = append(out, t.ID)
			}
		}
		return out
	}
	notFound := all[len(all)-1].LastError // "Order 0 not found": the oldest
	cases := []struct {
		name string
		f    store.DeadFilter
		keep func(*rdq.Task) bool
	}{
		{"queue", store.DeadFilter{Queue: "q2"}, func(t *rdq.Task) bool { return t.Queue == "q2" }},
		{"handler", store.DeadFilter{Handler: "hb"}, func(t *rdq.Task) bool { return t.Handler == "hb" }},
		{"queue+handler", store.DeadFilter{Queue: "q1", Handler: "hb"}, func(t *rdq.Task) bool { return t.Queue == "q1" && t.Handler == "hb" }},
		{"error type", store.DeadFilter{ErrorType: notFound.Type}, func(t *rdq.Task) bool { return t.LastError.Type == notFound.Type }},
		{"fingerprint", store.DeadFilter{Fingerprint: notFound.Fingerprint}, func(t *rdq.Task) bool { return t.LastError.Fingerprint == notFound.Fingerprint }},
		{"message", store.DeadFilter{MessageContains: "CONNECTION REF"}, func(t *rdq.Task) bool { return strings.Contains(t.LastError.Message, "connection ref") }},
		{"message with wildcard characters", store.DeadFilter{MessageContains: "%"}, func(*rdq.Task) bool { return false }},
		{"time range", store.DeadFilter{DeadAfter: all[10].FinishedAt, DeadBefore: all[3].FinishedAt}, func(t *rdq.Task) bool {
			return !t.FinishedAt.Before(all[10].FinishedAt) && t.FinishedAt.Before(all[3].FinishedAt)
		}},
		{"ids", store.DeadFilter{IDs: []rdq.ID{all[2].ID, all[7].ID, rdq.NewID()}}, func(t *rdq.Task) bool { return t.ID == all[2].ID || t.ID == all[7].ID }},
	}
	for _, tc := range cases {
		want := filter(tc.keep)
		if got := ids(listAll(t, s, tc.f, 2)); !equalIDs(got, want) {
			t.Errorf("%s: listed %v, want %v", tc.name, got, want)
		}
		n, err := s.CountDead(ctxT(t), tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(want)) {
			t.Errorf("%s: counted %d, want %d", tc.name, n, len(want))
		}
	}

	groups, err := s.DeadGroups(ctxT(t), store.DeadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Count+groups[1].Count != 16 || groups[0].Count < groups[1].Count {
		t.Fatalf("groups: %+v", groups)
	}
	for _, g := range groups {
		var newest *rdq.Task
		for _, task := range all {
			if task.LastError.Fingerprint == g.Fingerprint {
				newest = task
				break
			}
		}
		if newest == nil || g.ExampleID != newest.ID || g.Message != newest.LastError.Message || !g.LastSeen.Equal(newest.FinishedAt) || g.FirstSeen.After(g.LastSeen) {
			t.Fatalf("group %+v: example should be %v", g, newest)
		}
	}

	// Bulk redrive in chunks with a life limit: one task already redriven
	// once (and dead again) stays dead at MaxLife 1.
	veteran := all[0]
	if errs, err := s.Redrive(ctxT(t), store.RedriveParams{IDs: []rdq.ID{veteran.ID}, Actor: "op"}); err != nil || errs[0] != nil {
		t.Fatalf("redrive veteran: %v %v", err, errs)
	}
	c := claim(t, s, nil, veteran.Queue, 1)
	if errs := finish(t, s, nil, store.Completion{Lease: lease(c[0]), Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, "again")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var total int64
	for {
		res, err := s.RedriveDead(ctxT(t), store.RedriveDeadParams{Filter: store.DeadFilter{Queue: "q1"}, Limit: 3, MaxLife: 1, Actor: "op", Reason: "bulk", Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		wantAtLimit := int64(0)
		if veteran.Queue == "q1" {
			wantAtLimit = 1
		}
		if res.AtLimit != wantAtLimit {
			t.Fatalf("AtLimit %d, want %d", res.AtLimit, wantAtLimit)
		}
		if res.Redriven > 3 {
			t.Fatalf("a chunk of 3 redrove %d", res.Redriven)
		}
		if res.Redriven == 0 {
			break
		}
		total += res.Redriven
	}
	wantMoved := int64(8)
	if veteran.Queue == "q1" {
		wantMoved = 7
	}
	if total != wantMoved {
		t.Fatalf("bulk redrive moved %d, want %d", total, wantMoved)
	}

	// Purge the rest of q2 and audit it.
	n, err := s.PurgeDead(ctxT(t), store.PurgeDeadParams{Filter: store.DeadFilter{Queue: "q2"}, Limit: 100, Actor: "op", Reason: "cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 { // the veteran, if in q2, is dead again
		t.Fatalf("purged %d, want 8", n)
	}
	for _, task := range all {
		_, history, err := s.Get(ctxT(t), task.ID)
		switch {
		case task.Queue == "q2" && !errors.Is(err, store.ErrNotFound):
			t.Fatalf("purged task %s: Get returned %v", task.ID, err)
		case task.Queue == "q1" && (err != nil || len(history) == 0):
			t.Fatalf("task %s of q1 after purging q2: %v, %d attempts", task.ID, err, len(history))
		}
	}
	if _, err := s.PurgeDead(ctxT(t), store.PurgeDeadParams{Limit: 1, Action: "delete"}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("purge with an unknown action: %v", err)
	}

	entries, err := s.ListAudit(ctxT(t), store.ListAuditParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 || entries[0].Action != pgstore.ActionPurge || entries[0].Count != n || entries[0].Reason != "cleanup" ||
		!strings.Contains(entries[0].Filter, `"queue":"q2"`) {
		t.Fatalf("latest audit entry: %+v", entries[0])
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].ID >= entries[i-1].ID {
			t.Fatalf("audit not newest first: %d then %d", entries[i-1].ID, entries[i].ID)
		}
	}
	last := entries[len(entries)-1]
	if last.Action != pgstore.ActionRedrive || len(last.IDs) != 1 || last.IDs[0] != veteran.ID || last.Filter != "" {
		t.Fatalf("first audit entry (redrive by ID): %+v", last)
	}
	bulk, err := s.ListAudit(ctxT(t), store.ListAuditParams{Action: pgstore.ActionRedrive, Actor: "op", BeforeID: entries[0].ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var bulkCount int64
	for _, e := range bulk {
		if e.Reason == "bulk" {
			bulkCount += e.Count
			if e.Filter != `{"queue":"q1"}` {
				t.Fatalf("bulk redrive audit filter %q", e.Filter)
			}
		}
	}
	if bulkCount != total {
		t.Fatalf("bulk redrive audit entries count %d, want %d", bulkCount, total)
	}

	stats, err := s.Stats(ctxT(t), store.StatsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Queue != "q1" || stats[0].Pending != total || stats[0].OldestDueAge != 0 {
		t.Fatalf("stats: %+v", stats)
	}
	stats, err = s.Stats(ctxT(t), store.StatsParams{Now: at(time.Now().Add(3 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if stats[0].OldestDueAge < time.Hour || stats[0].OldestDueAge > 2*time.Hour+time.Minute {
		t.Fatalf("oldest due age two hours after due: %s", stats[0].OldestDueAge)
	}
}

func TestRedriveByIDErrorsAndPayloadEdit(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	dead := seedDead(t, s, time.Now().Add(-time.Minute), []string{"q"}, []string{"h"}, 2)
	pending := enqueue(t, s, nil, newTask("q"))[0].Task
	missing := rdq.NewID()

	errs, err := s.Redrive(ctxT(t), store.RedriveParams{IDs: []rdq.ID{dead[0].ID, pending.ID, missing, dead[0].ID}, Actor: "op"})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], store.ErrNotDead) || !errors.Is(errs[2], store.ErrNotFound) || !errors.Is(errs[3], store.ErrNotDead) {
		t.Fatalf("redrive results: %v", errs)
	}
	task, _ := get(t, s, dead[0].ID)
	if task.Status != rdq.StatusPending || task.Life != 1 || string(task.Payload) != `{"n":1}` {
		t.Fatalf("redriven task: %+v", task)
	}
	if _, err := s.Redrive(ctxT(t), store.RedriveParams{IDs: []rdq.ID{dead[0].ID, dead[1].ID}, Payload: []byte("x")}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("payload edit of two tasks: %v", err)
	}
	errs, err = s.Redrive(ctxT(t), store.RedriveParams{IDs: []rdq.ID{dead[1].ID}, Payload: []byte(`{"fixed":true}`), Actor: "op", Reason: "typo"})
	if err != nil || errs[0] != nil {
		t.Fatalf("payload edit: %v %v", err, errs)
	}
	task, _ = get(t, s, dead[1].ID)
	if string(task.Payload) != `{"fixed":true}` || task.Life != 1 {
		t.Fatalf("edited task: %+v", task)
	}
	entries, err := s.ListAudit(ctxT(t), store.ListAuditParams{Action: pgstore.ActionEditPayload, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Details["old_sha256"] == "" || entries[0].Details["new_sha256"] == entries[0].Details["old_sha256"] ||
		len(entries[0].IDs) != 1 || entries[0].IDs[0] != dead[1].ID || entries[0].Reason != "typo" {
		t.Fatalf("edit audit: %+v", entries)
	}
	// MaxLife refuses the edited task now.
	c := claim(t, s, nil, "q", 10)
	var cs []store.Completion
	for _, task := range c {
		cs = append(cs, store.Completion{Lease: lease(task), Status: rdq.StatusDead, Attempt: attempt(rdq.OutcomePermanentFailure, "x")})
	}
	finish(t, s, nil, cs...)
	errs, err = s.Redrive(ctxT(t), store.RedriveParams{IDs: []rdq.ID{dead[1].ID}, MaxLife: 1})
	if err != nil || !errors.Is(errs[0], store.ErrRedriveLimit) {
		t.Fatalf("redrive past MaxLife: %v %v", err, errs)
	}
}

func TestPurgeSucceededAudits(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	old := time.Now().Add(-48 * time.Hour)
	enqueue(t, s, at(old), newTask("q"), newTask("q"), newTask("q"))
	var cs []store.Completion
	for _, task := range claim(t, s, at(old), "q", 3) {
		cs = append(cs, store.Completion{Lease: lease(task), Status: rdq.StatusSucceeded, Attempt: attempt(rdq.OutcomeSuccess, "")})
	}
	finish(t, s, at(old), cs...)
	enqueue(t, s, nil, newTask("q"))
	for _, task := range claim(t, s, nil, "q", 1) {
		finish(t, s, nil, store.Completion{Lease: lease(task), Status: rdq.StatusSucceeded, Attempt: attempt(rdq.OutcomeSuccess, "")})
	}

	n, err := s.PurgeSucceeded(ctxT(t), store.PurgeSucceededParams{OlderThan: 24 * time.Hour, Limit: 2, Actor: "retention-job"})
	if err != nil || n != 2 {
		t.Fatalf("first chunk: %d %v", n, err)
	}
	n, err = s.PurgeSucceeded(ctxT(t), store.PurgeSucceededParams{OlderThan: 24 * time.Hour, Limit: 2, Actor: "retention-job"})
	if err != nil || n != 1 {
		t.Fatalf("second chunk: %d %v", n, err)
	}
	n, err = s.PurgeSucceeded(ctxT(t), store.PurgeSucceededParams{OlderThan: 24 * time.Hour, Limit: 2, Actor: "retention-job"})
	if err != nil || n != 0 {
		t.Fatalf("nothing left: %d %v", n, err)
	}
	entries, err := s.ListAudit(ctxT(t), store.ListAuditParams{Action: pgstore.ActionRetention, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Count != 1 || entries[1].Count != 2 || entries[0].Actor != "retention-job" {
		t.Fatalf("retention audit: %+v", entries)
	}
	stats, err := s.Stats(ctxT(t), store.StatsParams{SucceededWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Succeeded != 1 {
		t.Fatalf("stats: %+v", stats)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	ctx := ctxT(t)
	checks := map[string]error{}
	_, checks["claim without queues"] = s.Claim(ctx, store.ClaimParams{Limit: 1, Lease: time.Second})
	_, checks["claim limit 0"] = s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Lease: time.Second})
	_, checks["claim lease 0"] = s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1})
	_, checks["heartbeat extend 0"] = s.Heartbeat(ctx, store.HeartbeatParams{Leases: []store.Lease{{ID: rdq.NewID(), Token: 1}}})
	// An invalid completion fails alone, as its own item's error.
	if errs, err := s.Finish(ctx, store.FinishParams{Completions: []store.Completion{{Status: rdq.StatusInFlight}}}); err != nil || len(errs) != 1 {
		t.Errorf("finish bad status: %v, %v; want one item error", errs, err)
	} else {
		checks["finish bad status"] = errs[0]
	}
	_, checks["enqueue bad queue"] = s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "bad queue", Handler: "h"}}})
	_, checks["enqueue zero id"] = s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{Queue: "q", Handler: "h"}}})
	_, checks["list dead limit 0"] = s.ListDead(ctx, store.ListDeadParams{})
	for name, err := range checks {
		if !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%s: %v, want rdq.ErrInvalid", name, err)
		}
	}
}

func TestNotificationsReconnectAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	ch, err := s.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listenerPID := func() int {
		t.Helper()
		var pid int
		err := pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE query = $1`,
			`LISTEN "`+s.Channel()+`"`).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	before := listenerPID()
	if before == 0 {
		t.Fatal("no backend is listening on the store's channel")
	}
	var ok bool
	if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", before).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminating the listener: %v %v", ok, err)
	}

	// Hints sent while reconnecting are lost; keep enqueueing until one
	// arrives on the new connection.
	deadline := time.Now().Add(20 * time.Second)
	for {
		enqueue(t, s, nil, newTask("after"))
		select {
		case q, open := <-ch:
			if !open {
				t.Fatal("the channel closed when the connection was lost")
			}
			if q != "after" {
				t.Fatalf("notification for %q", q)
			}
			if after := listenerPID(); after == before || after == 0 {
				t.Fatalf("listener backend %d after reconnecting, was %d", after, before)
			}
			cancel()
			for range ch {
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no notification within 20s of losing the listener's connection")
		}
	}
}

// Text PostgreSQL cannot store (NUL, bytes that are not UTF-8) is replaced,
// never an error.
func TestUnstorableTextIsReplaced(t *testing.T) {
	t.Parallel()
	s, _ := pgtest.NewStore(t)
	nt := newTask("q")
	// Task fields are validated at intake (Task.Validate refuses them), so
	// what reaches the store unchecked is the text of failures and actors.
	enqueue(t, s, nil, nt)
	c := claim(t, s, nil, "q", 1)
	errs := finish(t, s, nil, store.Completion{Lease: lease(c[0]), Status: rdq.StatusDead, Attempt: &store.AttemptRecord{
		Outcome: rdq.OutcomePermanentFailure, WorkerID: "w\x00",
		Failure: rdq.Failure{Type: "t", Message: "bad \x00\xfe text", Stack: "s\xff", Fingerprint: "fp"},
	}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	task, history := get(t, s, nt.ID)
	if task.LastError.Message != "bad \uFFFD\uFFFD text" || history[0].Stack != "s\uFFFD" || history[0].WorkerID != "w\uFFFD" {
		t.Fatalf("stored failure: %q, %+v", task.LastError.Message, history[0])
	}
	found, err := s.ListDead(ctxT(t), store.ListDeadParams{Filter: store.DeadFilter{MessageContains: "\x00\xfe"}, Limit: 10})
	if err != nil || len(found) != 1 {
		t.Fatalf("searching with the unstorable text: %v %v", found, err)
	}
	if _, err := s.PurgeDead(ctxT(t), store.PurgeDeadParams{Limit: 10, Actor: "op\x00", Reason: "\xff"}); err != nil {
		t.Fatal(err)
	}
}

// TestSuccessInTaskRow checks the history of tasks whose success is kept
// in the task row (no attempts row), next to one that failed first, one
// whose success carries text (kept as a row) and one whose success row was
// written by an earlier schema version (read once, not twice).
func TestSuccessInTaskRow(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	rows := func(id rdq.ID) (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.attempts WHERE task_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	res := enqueue(t, s, at(now), newTask("q"), newTask("q"), newTask("q"), newTask("q"))
	plain, failedFirst, withText, legacy := res[0].Task.ID, res[1].Task.ID, res[2].Task.ID, res[3].Task.ID
	tasks := claim(t, s, at(now), "q", 4)
	if len(tasks) != 4 {
		t.Fatalf("claimed %d tasks, want 4", len(tasks))
	}
	leases := map[rdq.ID]*rdq.Task{}
	for _, task := range tasks {
		leases[task.ID] = task
	}
	ok := func(id rdq.ID) store.Completion {
		return store.Completion{Lease: lease(leases[id]), Status: rdq.StatusSucceeded, Attempt: attempt(rdq.OutcomeSuccess, "")}
	}
	text := ok(withText)
	text.Attempt.Failure.Message = "done, with a note"
	retry := store.Completion{Lease: lease(leases[failedFirst]), Status: rdq.StatusPending, Attempt: attempt(rdq.OutcomeRetryableFailure, "503")}
	done := now.Add(time.Second)
	for i, err := range finish(t, s, at(done), ok(plain), retry, text, ok(legacy)) {
		if err != nil {
			t.Fatalf("completion %d: %v", i, err)
		}
	}
	again := claim(t, s, at(done), "q", 1)
	if len(again) != 1 || again[0].ID != failedFirst {
		t.Fatalf("claimed %v after the retry, want %s", again, failedFirst)
	}
	later := done.Add(time.Second)
	if errs := finish(t, s, at(later), store.Completion{Lease: lease(again[0]), Status: rdq.StatusSucceeded,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w2", Duration: 20 * time.Millisecond}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// The row an earlier version wrote for the same success.
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.attempts (task_id, number, life, outcome, worker_id, lease_token, started_at, finished_at)
		SELECT id, last_attempt_number, life, 'SUCCESS', 'w1', lease_token, $2, finished_at FROM `+schema+`.tasks WHERE id = $1`,
		legacy, done.Add(-10*time.Millisecond)); err != nil {
		t.Fatal(err)
	}

	check := func(id rdq.ID, wantRows int, want ...rdq.Attempt) {
		t.Helper()
		task, history := get(t, s, id)
		if task.Status != rdq.StatusSucceeded {
			t.Errorf("task %s: status %s, want SUCCEEDED", id, task.Status)
		}
		if n := rows(id); n != wantRows {
			t.Errorf("task %s: %d attempts rows, want %d", id, n, wantRows)
		}
		if len(history) != len(want) {
			t.Fatalf("task %s: history %+v, want %d attempts", id, history, len(want))
		}
		for i, w := range want {
			h := history[i]
			if h.TaskID != id || h.Number != w.Number || h.Life != 0 || h.Outcome != w.Outcome || h.WorkerID != w.WorkerID ||
				h.ErrorType != w.ErrorType || h.Message != w.Message || h.LeaseToken != w.LeaseToken ||
				!h.StartedAt.Equal(w.StartedAt) || !h.FinishedAt.Equal(w.FinishedAt) {
				t.Errorf("task %s: attempt %d is %+v, want %+v", id, i+1, h, w)
			}
		}
	}
	success := func(_ rdq.ID, number int, worker string, token int64, start, end time.Time) rdq.Attempt {
		return rdq.Attempt{Number: number, Outcome: rdq.OutcomeSuccess, WorkerID: worker, LeaseToken: token, StartedAt: start, FinishedAt: end}
	}
	tok := func(id rdq.ID) int64 { return leases[id].LeaseToken }
	check(plain, 0, success(plain, 1, "w1", tok(plain), done.Add(-10*time.Millisecond), done))
	withNote := success(withText, 1, "w1", tok(withText), done.Add(-10*time.Millisecond), done)
	withNote.Message = "done, with a note"
	check(withText, 1, withNote)
	check(legacy, 1, success(legacy, 1, "w1", tok(legacy), done.Add(-10*time.Millisecond), done))
	check(failedFirst, 1,
		rdq.Attempt{Number: 1, Outcome: rdq.OutcomeRetryableFailure, WorkerID: "w1", LeaseToken: tok(failedFirst),
			ErrorType: failure("503").Type, Message: "503", StartedAt: done.Add(-10 * time.Millisecond), FinishedAt: done},
		success(failedFirst, 2, "w2", again[0].LeaseToken, later.Add(-20*time.Millisecond), later))
}
