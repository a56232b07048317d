package sqlitestore_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// openStore opens and migrates a store on path, closed in t.Cleanup.
func openStore(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func newStore(t testing.TB) (*sqlitestore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rdq.db")
	return openStore(t, path), path
}

func newTasks(queue string, n int) []store.NewTask {
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{ID: rdq.NewID(), Queue: queue, Handler: "h", Payload: []byte(strconv.Itoa(i))}
	}
	return ts
}

func enqueue(t testing.TB, s store.Store, now time.Time, ts ...store.NewTask) {
	t.Helper()
	if _, err := s.Enqueue(t.Context(), store.EnqueueParams{Tasks: ts, Now: &now}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
}

func claim(t testing.TB, s store.Store, now time.Time, queue string, limit int, lease time.Duration, worker string) []*rdq.Task {
	t.Helper()
	got, err := s.Claim(t.Context(), store.ClaimParams{Queues: []string{queue}, Limit: limit, Lease: lease, WorkerID: worker, Now: &now})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return got
}

func get(t testing.TB, s store.Store, id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	t.Helper()
	tk, atts, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return tk, atts
}

func epoch() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// TestClaimAtomicGoroutines claims from several Stores on one file (as
// separate processes would) and several goroutines per Store at once: every
// task is claimed exactly once.
func TestClaimAtomicGoroutines(t *testing.T) {
	t.Parallel()
	s0, path := newStore(t)
	now := epoch()
	const n = 400
	enqueue(t, s0, now, newTasks("q", n)...)
	stores := []*sqlitestore.Store{s0, openStore(t, path), openStore(t, path)}

	var (
		mu    sync.Mutex
		seen  = map[rdq.ID]int{}
		wg    sync.WaitGroup
		errCh = make(chan error, 12)
	)
	for i := range 12 {
		s := stores[i%len(stores)]
		wg.Go(func() {
			for {
				got, err := s.Claim(context.Background(), store.ClaimParams{
					Queues: []string{"q"}, Limit: 7, Lease: time.Minute, WorkerID: fmt.Sprint("w", i), Now: &now,
				})
				if err != nil {
					errCh <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					seen[tk.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errCh)
	for err := range errCh {
		t.Fatalf("Claim: %v", err)
	}
	if len(seen) != n {
		t.Fatalf("claimed %d distinct tasks, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("task %s claimed %d times", id, c)
		}
	}
}

const (
	envChildDB = "RDQ_SQLITESTORE_TEST_CHILD_DB"
	envChildAt = "RDQ_SQLITESTORE_TEST_CHILD_AT"
)

// TestClaimChildProcess is the body of a child process of
// TestClaimAtomicProcesses: it claims until the queue is empty and prints
// every claimed ID. It does nothing in a normal test run.
func TestClaimChildProcess(t *testing.T) {
	path := os.Getenv(envChildDB)
	if path == "" {
		t.Skip("runs only as a child process of TestClaimAtomicProcesses")
	}
	at, err := strconv.ParseInt(os.Getenv(envChildAt), 10, 64)
	if err != nil {
		t.Fatalf("bad %s: %v", envChildAt, err)
	}
	now := time.UnixMicro(at)
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	// Every child migrates too: concurrent Migrate must be safe.
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for {
		got, err := s.Claim(t.Context(), store.ClaimParams{Queues: []string{"q"}, Limit: 5, Lease: time.Minute, WorkerID: fmt.Sprint("p", os.Getpid()), Now: &now})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if len(got) == 0 {
			return
		}
		for _, tk := range got {
			fmt.Fprintf(out, "claimed %s\n", tk.ID)
		}
	}
}

// TestClaimAtomicProcesses runs several OS processes claiming from one
// database file at once: every task is claimed by exactly one of them.
func TestClaimAtomicProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	s, path := newStore(t)
	now := epoch()
	const n = 600
	enqueue(t, s, now, newTasks("q", n)...)

	const procs = 3
	outs := make([]strings.Builder, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestClaimChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChildDB+"="+path, envChildAt+"="+strconv.FormatInt(now.UnixMicro(), 10))
		cmd.Stdout = &outs[i]
		cmd.Stderr = &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting child: %v", err)
		}
		cmds[i] = cmd
	}
	seen := map[string]int{}
	perProc := make([]int, procs)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		for line := range strings.Lines(outs[i].String()) {
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "claimed "); ok {
				seen[id]++
				perProc[i]++
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("children claimed %d distinct tasks, want %d (per process %v)", len(seen), n, perProc)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("task %s claimed %d times", id, c)
		}
	}
	t.Logf("claims per process: %v", perProc)
}

// TestFencingAndReclaim: expiry alone does not end a lease; a reclaim
// does, records the lost execution and fences the old token out.
func TestFencingAndReclaim(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	now := epoch()
	nt := newTasks("q", 1)[0]
	enqueue(t, s, now, nt)
	claimedAt := now.Add(time.Second)
	tk := claim(t, s, claimedAt, "q", 1, 10*time.Second, "w1")[0]
	old := store.Lease{ID: tk.ID, Token: tk.LeaseToken}

	// Expired but not reclaimed: the lease is still current.
	late := claimedAt.Add(20 * time.Second)
	errs, err := s.Heartbeat(ctx, store.HeartbeatParams{Leases: []store.Lease{old}, Extend: time.Second, Now: &late})
	if err != nil || errs[0] != nil {
		t.Fatalf("heartbeat after expiry, before reclaim: %v %v", err, errs)
	}
	expiredAt := late.Add(2 * time.Second)
	got, err := s.ReclaimExpired(ctx, store.ReclaimParams{Limit: 10, Lease: time.Minute, WorkerID: "reaper", Now: &expiredAt})
	if err != nil || len(got) != 1 {
		t.Fatalf("ReclaimExpired = %d tasks, %v; want 1", len(got), err)
	}
	re := got[0]
	if re.LeaseToken <= old.Token || re.LeaseOwner != "reaper" || re.Attempts != 1 {
		t.Fatalf("reclaimed task: token %d (old %d), owner %q, attempts %d", re.LeaseToken, old.Token, re.LeaseOwner, re.Attempts)
	}
	if want := expiredAt.Add(time.Minute); !re.LeaseExpiresAt.Equal(want) {
		t.Errorf("reclaimed lease expires %s, want %s", re.LeaseExpiresAt, want)
	}
	// The old token is fenced out everywhere, and nothing changed.
	for name, call := range map[string]func() ([]error, error){
		"heartbeat": func() ([]error, error) {
			return s.Heartbeat(ctx, store.HeartbeatParams{Leases: []store.Lease{old}, Extend: time.Hour, Now: &expiredAt})
		},
		"finish": func() ([]error, error) {
			return s.Finish(ctx, store.FinishParams{Now: &expiredAt, Completions: []store.Completion{{
				Lease: old, Status: rdq.StatusSucceeded, Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess},
			}}})
		},
		"release": func() ([]error, error) {
			return s.Release(ctx, store.ReleaseParams{Leases: []store.Lease{old}, Now: &expiredAt})
		},
	} {
		errs, err := call()
		if err != nil || len(errs) != 1 || !errors.Is(errs[0], store.ErrLeaseLost) {
			t.Errorf("%s with the old token: %v, %v; want ErrLeaseLost", name, errs, err)
		}
	}
	after, atts := get(t, s, tk.ID)
	if after.Status != rdq.StatusInFlight || after.LeaseToken != re.LeaseToken || !after.LeaseExpiresAt.Equal(re.LeaseExpiresAt) {
		t.Errorf("stale calls changed the task: %+v", after)
	}
	if len(atts) != 1 {
		t.Fatalf("history has %d attempts, want 1", len(atts))
	}
	a := atts[0]
	lost := rdq.LeaseExpiredFailure()
	if a.Number != 1 || a.Outcome != rdq.OutcomeLeaseExpired || a.WorkerID != "w1" || a.LeaseToken != old.Token ||
		!a.StartedAt.Equal(claimedAt) || !a.FinishedAt.Equal(expiredAt) || a.ErrorType != lost.Type || a.Message != lost.Message {
		t.Errorf("lease-expired attempt = %+v", a)
	}
	if after.LastError != (rdq.ErrorSummary{Type: lost.Type, Message: lost.Message, Fingerprint: lost.Fingerprint}) {
		t.Errorf("last error = %+v", after.LastError)
	}
	// The new token works.
	errs, err = s.Finish(ctx, store.FinishParams{Now: &expiredAt, Completions: []store.Completion{{
		Lease: store.Lease{ID: re.ID, Token: re.LeaseToken}, Status: rdq.StatusPending, RetryIn: time.Second,
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish with the new token: %v %v", err, errs)
	}
}

// TestAttemptNumbersAcrossLives: numbers come from the history (max + 1),
// through a first failure, a dead end, a redrive, a lost lease and another
// redrive.
func TestAttemptNumbersAcrossLives(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	now := epoch()
	f := rdq.Describe(errors.New("boom 42"))
	nt := newTasks("q", 1)[0]
	nt.FirstFailure = &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: f, WorkerID: "producer", Duration: time.Millisecond}
	enqueue(t, s, now, nt)

	finish := func(c store.Completion) {
		t.Helper()
		errs, err := s.Finish(ctx, store.FinishParams{Completions: []store.Completion{c}, Now: &now})
		if err != nil || errs[0] != nil {
			t.Fatalf("Finish: %v %v", err, errs)
		}
	}
	redrive := func() {
		t.Helper()
		errs, err := s.Redrive(ctx, store.RedriveParams{IDs: []rdq.ID{nt.ID}, Actor: "op", Now: &now})
		if err != nil || errs[0] != nil {
			t.Fatalf("Redrive: %v %v", err, errs)
		}
	}
	tk := claim(t, s, now, "q", 1, time.Minute, "w")[0]
	finish(store.Completion{Lease: store.Lease{ID: tk.ID, Token: tk.LeaseToken}, Status: rdq.StatusDead,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: "w"}})
	redrive()
	tk = claim(t, s, now, "q", 1, time.Minute, "w")[0]
	if tk.Attempts != 0 || tk.Life != 1 {
		t.Fatalf("after redrive: attempts %d life %d", tk.Attempts, tk.Life)
	}
	now = now.Add(2 * time.Minute)
	re, err := s.ReclaimExpired(ctx, store.ReclaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, WorkerID: "reaper", Now: &now})
	if err != nil || len(re) != 1 {
		t.Fatalf("ReclaimExpired: %d, %v", len(re), err)
	}
	finish(store.Completion{Lease: store.Lease{ID: tk.ID, Token: re[0].LeaseToken}, Status: rdq.StatusDead})
	redrive()
	tk = claim(t, s, now, "q", 1, time.Minute, "w")[0]
	finish(store.Completion{Lease: store.Lease{ID: tk.ID, Token: tk.LeaseToken}, Status: rdq.StatusSucceeded,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}})

	final, atts := get(t, s, nt.ID)
	type row struct {
		number, life int
		outcome      rdq.Outcome
	}
	want := []row{{1, 0, rdq.OutcomeRetryableFailure}, {2, 0, rdq.OutcomePermanentFailure}, {3, 1, rdq.OutcomeLeaseExpired}, {4, 2, rdq.OutcomeSuccess}}
	if len(atts) != len(want) {
		t.Fatalf("history has %d attempts, want %d: %+v", len(atts), len(want), atts)
	}
	for i, w := range want {
		if got := (row{atts[i].Number, atts[i].Life, atts[i].Outcome}); got != w {
			t.Errorf("attempt %d = %+v, want %+v", i, got, w)
		}
	}
	if final.Status != rdq.StatusSucceeded || final.Life != 2 || final.Attempts != 1 {
		t.Errorf("final task: status %s life %d attempts %d", final.Status, final.Life, final.Attempts)
	}
	if final.LastError.Type != rdq.LeaseExpiredFailure().Type {
		t.Errorf("last error kept through redrive = %+v", final.LastError)
	}
}

// TestMigrateConcurrentAndIdempotent opens one fresh file from many Stores
// at once, each migrating; then migrates again.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Config{})
			if err != nil {
				errs <- err
				return
			}
			errs <- errors.Join(s.Migrate(context.Background()), s.Migrate(context.Background()), s.Close())
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open/Migrate: %v", err)
		}
	}
	db := rawDB(t, path)
	var n, v int
	if err := db.QueryRow(`SELECT count(*), max(version) FROM rdq_schema_migrations`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if want := sqlitestore.LatestVersion(); n != sqlitestore.MigrationCount() || v != want {
		t.Errorf("schema_migrations has %d rows, max version %d; want %d, %d", n, v, sqlitestore.MigrationCount(), want)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	_, path := newStore(t)
	db := rawDB(t, path)
	if _, err := db.Exec(`INSERT INTO rdq_schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Migrate on a newer schema: %v, want an error saying it is newer", err)
	}
}

// rawDB opens the file directly, for inspection, closed in t.Cleanup.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// TestDurableAcrossReopen: what was committed is there after Close and a
// new Open, with its history.
func TestDurableAcrossReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "d.db")
	now := epoch()
	s1, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	nt := newTasks("q", 1)[0]
	nt.Headers = map[string]string{"traceparent": "00-abc-def-01"}
	nt.IdempotencyKey = "k1"
	enqueue(t, s1, now, nt)
	tk := claim(t, s1, now, "q", 1, time.Minute, "w")[0]
	errs, err := s1.Finish(t.Context(), store.FinishParams{Now: &now, Completions: []store.Completion{{
		Lease: store.Lease{ID: tk.ID, Token: tk.LeaseToken}, Status: rdq.StatusPending, RetryIn: time.Minute,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: rdq.Describe(errors.New("x")), WorkerID: "w", Duration: time.Second},
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Finish: %v %v", err, errs)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, path)
	got, atts := get(t, s2, nt.ID)
	if got.Status != rdq.StatusPending || got.Attempts != 1 || got.Headers["traceparent"] != "00-abc-def-01" ||
		got.IdempotencyKey != "k1" || !got.NextAttemptAt.Equal(now.Add(time.Minute)) || len(atts) != 1 ||
		!atts[0].StartedAt.Equal(now.Add(-time.Second)) {
		t.Errorf("after reopen: %+v, attempts %+v", got, atts)
	}
	res, err := s2.Enqueue(t.Context(), store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "q", Handler: "h", IdempotencyKey: "k1"}}, Now: &now})
	if err != nil || !res[0].Duplicate || res[0].Task.ID != nt.ID {
		t.Errorf("idempotency after reopen: %+v, %v", res, err)
	}
}

// TestWriteWaitsForLock: a write waits while another connection holds the
// write lock, and fails after BusyTimeout if it is never released.
func TestWriteWaitsForLock(t *testing.T) {
	t.Parallel()
	_, path := newStore(t)
	db := rawDB(t, path)
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	patient, err := sqlitestore.Open(ctx, path, sqlitestore.Config{BusyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		_, err := patient.Enqueue(ctx, store.EnqueueParams{Tasks: newTasks("q", 1)})
		done <- err
	}()
	<-started

	// While the patient write waits, a write with a short busy timeout
	// gives up after it.
	short, err := sqlitestore.Open(ctx, path, sqlitestore.Config{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	start := time.Now()
	_, err = short.Enqueue(ctx, store.EnqueueParams{Tasks: newTasks("q", 1)})
	if err == nil {
		t.Fatal("Enqueue succeeded while another connection held the write lock")
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("Enqueue gave up after %s, before its busy timeout", waited)
	}
	select {
	case err := <-done:
		t.Fatalf("the patient Enqueue returned (%v) while the write lock was held", err)
	default:
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Enqueue after the lock was released: %v", err)
	}
	// Reads never waited.
	if _, err := patient.CountDead(ctx, store.DeadFilter{}); err != nil {
		t.Errorf("CountDead: %v", err)
	}
}

// TestAdminFilters covers the dead-letter filters, paging and the audit of
// a bulk redrive and purge on SQLite specifics: Unicode case folding, IDs
// as blobs, time bounds in microseconds.
func TestAdminFilters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	now := epoch()
	ts := newTasks("q1", 6)
	ts[4].Queue, ts[5].Queue = "q2", "q2"
	ts[5].Handler = "other"
	enqueue(t, s, now, ts...)
	msgs := []string{"ÉCHEC de connexion", "timeout after 3s", "timeout after 5s", "nil pointer", "échec total", "disk full"}
	deadAt := map[rdq.ID]time.Time{}
	for _, q := range []string{"q1", "q2"} {
		for _, tk := range claim(t, s, now, q, 10, time.Minute, "w") {
			i, _ := strconv.Atoi(string(tk.Payload))
			at := now.Add(time.Duration(i) * time.Second)
			errs, err := s.Finish(ctx, store.FinishParams{Now: &at, Completions: []store.Completion{{
				Lease: store.Lease{ID: tk.ID, Token: tk.LeaseToken}, Status: rdq.StatusDead,
				Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Describe(errors.New(msgs[i]))},
			}}})
			if err != nil || errs[0] != nil {
				t.Fatalf("Finish: %v %v", err, errs)
			}
			deadAt[tk.ID] = at
		}
	}
	ids := func(tasks []*rdq.Task) []int {
		var out []int
		for _, tk := range tasks {
			i, _ := strconv.Atoi(string(tk.Payload))
			out = append(out, i)
		}
		return out
	}
	list := func(f store.DeadFilter) []int {
		t.Helper()
		got, err := s.ListDead(ctx, store.ListDeadParams{Filter: f, Limit: 100})
		if err != nil {
			t.Fatalf("ListDead(%+v): %v", f, err)
		}
		return ids(got)
	}
	for _, tc := range []struct {
		name string
		f    store.DeadFilter
		want []int
	}{
		{"all newest first", store.DeadFilter{}, []int{5, 4, 3, 2, 1, 0}},
		{"queue", store.DeadFilter{Queue: "q2"}, []int{5, 4}},
		{"handler", store.DeadFilter{Handler: "other"}, []int{5}},
		{"unicode case-insensitive message", store.DeadFilter{MessageContains: "échec"}, []int{4, 0}},
		{"message with LIKE metacharacters", store.DeadFilter{MessageContains: "%"}, nil},
		{"time range", store.DeadFilter{DeadAfter: now.Add(time.Second), DeadBefore: now.Add(3 * time.Second)}, []int{2, 1}},
		{"ids", store.DeadFilter{IDs: []rdq.ID{ts[1].ID, ts[3].ID, rdq.NewID()}}, []int{3, 1}},
		{"fingerprint", store.DeadFilter{Fingerprint: rdq.Describe(errors.New("timeout after 9s")).Fingerprint}, []int{2, 1}},
	} {
		if got := list(tc.f); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	// Keyset paging neither skips nor repeats.
	var paged []int
	var after *store.Cursor
	for {
		page, err := s.ListDead(ctx, store.ListDeadParams{After: after, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, ids(page)...)
		c := store.CursorOf(page[len(page)-1])
		after = &c
	}
	if fmt.Sprint(paged) != "[5 4 3 2 1 0]" {
		t.Errorf("paged listing = %v", paged)
	}
	groups, err := s.DeadGroups(ctx, store.DeadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 5 || groups[0].Count != 2 || groups[0].ExampleID != ts[2].ID || !groups[0].FirstSeen.Equal(deadAt[ts[1].ID]) {
		t.Errorf("groups = %+v", groups)
	}
	res, err := s.RedriveDead(ctx, store.RedriveDeadParams{Filter: store.DeadFilter{Queue: "q1"}, Limit: 3, Actor: "alice", Reason: "fixed", Spread: time.Minute, Now: &now})
	if err != nil || res.Redriven != 3 {
		t.Fatalf("RedriveDead = %+v, %v", res, err)
	}
	for _, i := range []int{3, 2, 1} { // the newest three of q1
		tk, _ := get(t, s, ts[i].ID)
		if tk.Status != rdq.StatusPending || tk.Life != 1 || tk.NextAttemptAt.Before(now) || !tk.NextAttemptAt.Before(now.Add(time.Minute)) {
			t.Errorf("redriven task %d: %s life %d next %s", i, tk.Status, tk.Life, tk.NextAttemptAt)
		}
	}
	n, err := s.PurgeDead(ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: []rdq.ID{ts[5].ID}}, Limit: 10, Actor: "bob", Reason: "junk"})
	if err != nil || n != 1 {
		t.Fatalf("PurgeDead = %d, %v", n, err)
	}
	audit, err := s.ListAudit(ctx, store.ListAuditParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 2 || audit[0].Action != "purge" || audit[0].Actor != "bob" || len(audit[0].IDs) != 1 || audit[0].IDs[0] != ts[5].ID ||
		audit[1].Action != "redrive" || audit[1].Count != 3 || !strings.Contains(audit[1].Filter, `"queue":"q1"`) || audit[0].ID <= audit[1].ID {
		t.Errorf("audit = %+v", audit)
	}
	byActor, err := s.ListAudit(ctx, store.ListAuditParams{Actor: "alice", Limit: 10})
	if err != nil || len(byActor) != 1 || byActor[0].Reason != "fixed" {
		t.Errorf("audit by actor = %+v, %v", byActor, err)
	}
	stats, err := s.Stats(ctx, store.StatsParams{Now: &now})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 2 || stats[0].Queue != "q1" || stats[0].Pending != 3 || stats[0].Dead != 1 || stats[1].Dead != 1 {
		t.Errorf("stats = %+v", stats)
	}
}

// TestRedriveDeadSpread: a bulk redrive spreads the tasks' next attempts
// uniformly over [now+Delay, now+Delay+Spread), whole chunks of tasks with
// consecutive row ids included, and puts them all at now+Delay without a
// spread.
func TestRedriveDeadSpread(t *testing.T) {
	t.Parallel()
	const n, bins = 4000, 20
	s, path := newStore(t)
	seedDeadBulk(t, path, n)
	db := rawDB(t, path)
	ctx := t.Context()
	now := epoch()
	redriveAll := func(spread time.Duration) {
		t.Helper()
		var total int64
		for {
			res, err := s.RedriveDead(ctx, store.RedriveDeadParams{Limit: 1000, Delay: 10 * time.Second, Spread: spread, Actor: "a", Now: &now})
			if err != nil {
				t.Fatal(err)
			}
			if res.Redriven == 0 {
				break
			}
			total += res.Redriven
		}
		if total != n {
			t.Fatalf("redrove %d of %d", total, n)
		}
	}
	due := func() []int64 {
		t.Helper()
		rows, err := db.Query(`SELECT next_attempt_at FROM rdq_tasks`)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v-now.Add(10*time.Second).UnixMicro())
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
		return got
	}

	redriveAll(time.Hour)
	spread := time.Hour.Microseconds()
	var counts [bins]int
	for _, d := range due() {
		if d < 0 || d >= spread {
			t.Fatalf("next attempt at now+10s+%s, want within the hour's spread", time.Duration(d)*time.Microsecond)
		}
		counts[d*bins/spread]++
	}
	// n/bins = 200 expected per bin; a uniform draw falls below 100 or
	// above 300 with a probability under 1e-12.
	for i, c := range counts {
		if c < 100 || c > 300 {
			t.Errorf("bin %d of %d holds %d of %d tasks: %v", i, bins, c, n, counts)
			break
		}
	}

	if _, err := db.Exec(`UPDATE rdq_tasks SET status = 'DEAD', finished_at = ?`, now.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	redriveAll(0)
	for _, d := range due() {
		if d != 0 {
			t.Fatalf("without a spread, next attempt at now+10s+%s", time.Duration(d)*time.Microsecond)
		}
	}
}

// TestQueryPlansUseIndexes checks with EXPLAIN QUERY PLAN that the claim
// and every dead-letter filter read an index and need no sort.
func TestQueryPlansUseIndexes(t *testing.T) {
	t.Parallel()
	_, path := newStore(t)
	db := rawDB(t, path)
	for _, tc := range append(sqlitestore.PlanCases(), sqlitestore.LivePlanCases()...) {
		rows, err := db.Query("EXPLAIN QUERY PLAN "+tc.SQL, tc.Args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "; ")
		if !strings.Contains(text, "USING INDEX "+tc.Index) && !strings.Contains(text, "USING COVERING INDEX "+tc.Index) &&
			!(tc.Index == "pk" && strings.Contains(text, "sqlite_autoindex_rdq_tasks_1")) &&
			!(tc.Index == "rowid" && strings.Contains(text, "SEARCH rdq_tasks USING INTEGER PRIMARY KEY (rowid=?)")) {
			t.Errorf("%s: plan %q does not use %s", tc.Name, text, tc.Index)
		}
		if tc.NoSort && strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: plan %q sorts", tc.Name, text)
		}
	}
}

// TestPathWithURISyntax: characters that mean something in a URI are part
// of the file name.
func TestPathWithURISyntax(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%20")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rdq?.db")
	s := openStore(t, path)
	enqueue(t, s, epoch(), newTasks("q", 1)...)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not at the given path: %v", err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
}
