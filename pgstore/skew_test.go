package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// skew is how far the skewed database's clock runs ahead of this process's.
const skew = time.Hour

// skewedStore starts a throwaway PostgreSQL cluster whose clock runs skew
// ahead (scripts/skewed-postgres.sh, libfaketime), stopped when the test
// ends, and returns a migrated store on it. Without PostgreSQL's binaries or
// libfaketime the test is skipped, unless CI is set: there it fails.
func skewedStore(t *testing.T) *pgstore.Store {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "scripts", "skewed-postgres.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: the server may run as another user, who must reach
	// the directory.
	dir, err := os.MkdirTemp("", "rdq-skew-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "bash", script, "start", dir, fmt.Sprint(port), fmt.Sprintf("+%ds", int(skew.Seconds()))).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 && os.Getenv("CI") != "true" {
		t.Skipf("no skewed PostgreSQL on this machine (CI=true makes this a failure): %s", out)
	}
	if err != nil {
		t.Fatalf("starting a PostgreSQL cluster with a skewed clock: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("stopping the skewed PostgreSQL cluster: %v\n%s", err, out)
		}
	})
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?pool_max_conns=6", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var dbNow time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if off := time.Until(dbNow); off < skew-5*time.Minute || off > skew+5*time.Minute {
		t.Fatalf("the skewed database's clock is %s off this process's, want about %s: libfaketime did not take", off, skew)
	}
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// nearSkewed fails unless got is within a few minutes of this process's
// clock plus skew plus d: on the store's clock, not on the worker's.
func nearSkewed(t *testing.T, what string, got time.Time, d time.Duration) {
	t.Helper()
	want := time.Now().Add(skew + d)
	if off := got.Sub(want); off < -5*time.Minute || off > 5*time.Minute {
		t.Errorf("%s = %s, %s from this process's clock; want the store's clock (%s ahead) plus %s",
			what, got.UTC().Format(time.RFC3339), time.Until(got).Round(time.Second), skew, d)
	}
}

// TestClockSkew runs a store on a database whose clock is an hour ahead of
// the test's and its workers'. (SQLite's store reads the clock of the
// process it runs in, which is the worker's: a skew between the two cannot
// arise there, so the test is PostgreSQL's alone.)
func TestClockSkew(t *testing.T) {
	t.Parallel()
	s := skewedStore(t)
	t.Run("Store", func(t *testing.T) { testStoreClockUnderSkew(t, s) })
	t.Run("Worker", func(t *testing.T) { testWorkerUnderSkew(t, s) })
	t.Run("WorkerLeases", func(t *testing.T) { testWorkerLeasesUnderSkew(t, s) })
}

// Due times, leases and their expiry follow the store's clock: on a
// database an hour ahead of the worker, a task due now is claimed and run
// at once, and a lease expires when the database says so.
func testStoreClockUnderSkew(t *testing.T, s *pgstore.Store) {
	ctx := t.Context()

	res, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "q", Handler: "h", Payload: []byte(`{}`)},
		{ID: rdq.NewID(), Queue: "q", Handler: "h", Payload: []byte(`{}`)},
		{ID: rdq.NewID(), Queue: "later", Handler: "h", Payload: []byte(`{}`), Delay: 30 * time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	nearSkewed(t, "NextAttemptAt of a task due now", res[0].Task.NextAttemptAt, 0)
	nearSkewed(t, "NextAttemptAt of a task due in 30m", res[2].Task.NextAttemptAt, 30*time.Minute)

	got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, WorkerID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Claim of a task due now on the store's clock returned %d tasks, want 1", len(got))
	}
	nearSkewed(t, "LeaseExpiresAt", got[0].LeaseExpiresAt, time.Minute)
	errs, err := s.Heartbeat(ctx, store.HeartbeatParams{Leases: []store.Lease{{ID: got[0].ID, Token: got[0].LeaseToken}}, Extend: 10 * time.Minute})
	if err != nil || errs[0] != nil {
		t.Fatalf("Heartbeat: %v, %v", errs, err)
	}
	tk, _, err := s.Get(ctx, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	nearSkewed(t, "LeaseExpiresAt after a heartbeat", tk.LeaseExpiresAt, 10*time.Minute)
	if later, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"later"}, Limit: 1, Lease: time.Minute, WorkerID: "w"}); err != nil || len(later) != 0 {
		t.Fatalf("Claim of a task due in 30m on the store's clock = %d tasks, %v; want none", len(later), err)
	}

	// A lease of 100ms expires 100ms later on the store's clock; on the
	// worker's it would not for an hour.
	short, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1, Lease: 100 * time.Millisecond, WorkerID: "lost"})
	if err != nil || len(short) != 1 {
		t.Fatalf("Claim: %d tasks, %v", len(short), err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		back, err := s.ReclaimExpired(ctx, store.ReclaimParams{Queues: []string{"q"}, Limit: 10, Lease: time.Minute, WorkerID: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if len(back) == 1 && back[0].ID == short[0].ID {
			break
		}
		if len(back) != 0 {
			t.Fatalf("ReclaimExpired took %v, want only the task whose lease expired", back)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lease of 100ms on the store's clock had not expired 30s later")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, atts, err := s.Get(ctx, short[0].ID)
	if err != nil || len(atts) != 1 {
		t.Fatalf("history of the reclaimed task: %v, %v", atts, err)
	}
	nearSkewed(t, "the LEASE_EXPIRED attempt's FinishedAt", atts[0].FinishedAt, 0)
}

// A worker on a database an hour ahead of it runs a task submitted now at
// once, retries it after its backoff on the store's clock, and records its
// attempts at the store's times.
func testWorkerUnderSkew(t *testing.T, s *pgstore.Store) {
	c, err := client.New(client.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan int, 10)
	w, err := worker.New(worker.Config{
		Store: s,
		Queues: map[string]worker.QueueConfig{"q": {Policy: rdq.Policy{
			MaxAttempts: 2, InitialBackoff: 50 * time.Millisecond, Jitter: rdq.NoJitter,
		}}},
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("h", func(ctx context.Context, tk *rdq.Task) error {
		ran <- tk.NextAttempt()
		if tk.NextAttempt() == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	res, err := c.Submit(t.Context(), client.Task{Queue: "q", Handler: "h", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		select {
		case n := <-ran:
			if n != want {
				t.Fatalf("attempt %d ran, want %d", n, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("attempt %d of a task due now on the store's clock did not run within 30s", want)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		tk, atts, err := s.Get(t.Context(), res.Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status == rdq.StatusSucceeded {
			nearSkewed(t, "FinishedAt", tk.FinishedAt, 0)
			for _, a := range atts {
				nearSkewed(t, fmt.Sprintf("attempt %d FinishedAt", a.Number), a.FinishedAt, 0)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s 30s after its last attempt ran, want SUCCEEDED", tk.ID, tk.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A worker on a database an hour ahead of it extends the leases of running
// tasks to the store's clock plus the lease (not to its own clock, which
// the store would see as an hour expired), reclaims a lease that expired on
// the store's clock (not an hour later), and snoozes a task until the
// store's clock plus the snooze.
func testWorkerLeasesUnderSkew(t *testing.T, s *pgstore.Store) {
	ctx := t.Context()
	const lease = 2 * time.Second
	release := make(chan struct{})
	ran := make(chan rdq.ID, 10)
	w, err := worker.New(worker.Config{
		Store: s,
		Queues: map[string]worker.QueueConfig{
			"beat":   {Lease: lease, HeartbeatInterval: 50 * time.Millisecond},
			"lost":   {Policy: rdq.Policy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, Jitter: rdq.NoJitter}},
			"snooze": {},
		},
		PollInterval:    20 * time.Millisecond,
		ReclaimInterval: 50 * time.Millisecond,
		Logger:          slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("beat", func(ctx context.Context, tk *rdq.Task) error {
		ran <- tk.ID
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("lost", func(ctx context.Context, tk *rdq.Task) error {
		ran <- tk.ID
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("snooze", func(ctx context.Context, tk *rdq.Task) error {
		ran <- tk.ID
		return rdq.Snooze(30 * time.Minute)
	}); err != nil {
		t.Fatal(err)
	}

	// A task leased for 100ms to a worker that is gone, before this worker
	// starts: only a reclaim on the store's clock frees it.
	res, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "lost", Handler: "lost", Payload: []byte(`{}`)},
		{ID: rdq.NewID(), Queue: "beat", Handler: "beat", Payload: []byte(`{}`)},
		{ID: rdq.NewID(), Queue: "snooze", Handler: "snooze", Payload: []byte(`{}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lost, beat, snoozed := res[0].Task.ID, res[1].Task.ID, res[2].Task.ID
	if got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"lost"}, Limit: 1, Lease: 100 * time.Millisecond, WorkerID: "gone"}); err != nil || len(got) != 1 {
		t.Fatalf("Claim of the task whose worker goes away: %d tasks, %v", len(got), err)
	}

	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
	t.Cleanup(stop)

	want := map[rdq.ID]string{lost: "the task whose lease expired", beat: "the long task", snoozed: "the snoozing task"}
	for len(want) > 0 {
		select {
		case id := <-ran:
			if _, ok := want[id]; !ok {
				t.Fatalf("task %s ran twice", id)
			}
			delete(want, id)
		case <-time.After(30 * time.Second):
			t.Fatalf("%v had not run 30s after the worker started", want)
		}
	}

	// The long task's lease, once a heartbeat has extended it, ends a lease
	// after the store's clock.
	first := waitTask(t, s, beat, "claimed", func(tk *rdq.Task) bool { return tk.Status == rdq.StatusInFlight })
	beaten := waitTask(t, s, beat, "extended by a heartbeat", func(tk *rdq.Task) bool {
		return tk.Status == rdq.StatusInFlight && tk.LeaseToken == first.LeaseToken && !tk.LeaseExpiresAt.Equal(first.LeaseExpiresAt)
	})
	nearSkewed(t, "LeaseExpiresAt after a heartbeat", beaten.LeaseExpiresAt, lease)

	snoozedTask := waitTask(t, s, snoozed, "snoozed", func(tk *rdq.Task) bool { return tk.Status == rdq.StatusPending })
	nearSkewed(t, "NextAttemptAt of a task snoozed for 30m", snoozedTask.NextAttemptAt, 30*time.Minute)

	stop()
	for id, what := range map[rdq.ID]string{lost: "the reclaimed task", beat: "the long task"} {
		tk, atts, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status != rdq.StatusSucceeded {
			t.Errorf("%s is %s, want SUCCEEDED", what, tk.Status)
		}
		if id == lost {
			if len(atts) != 2 || atts[0].Outcome != rdq.OutcomeLeaseExpired || atts[0].WorkerID != "gone" {
				t.Errorf("history of %s: %+v, want the expired lease of worker gone, then a success", what, atts)
			}
			continue
		}
		if len(atts) != 1 {
			t.Errorf("history of %s: %+v, want one attempt (a lease kept by heartbeats is never reclaimed)", what, atts)
		}
	}
}

// waitTask polls task id of s until ok holds, for up to 30s.
func waitTask(t *testing.T, s *pgstore.Store, id rdq.ID, what string, ok func(*rdq.Task) bool) *rdq.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tk, _, err := s.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not %s within 30s (%s, lease until %s)", id, what, tk.Status, tk.LeaseExpiresAt)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
