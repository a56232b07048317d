package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
)

// server is a redis-server process of a test's own, on a loopback port,
// with its data in the test's temporary directory.
type server struct {
	t    *testing.T
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
}

// startServer starts redis-server with the given extra settings, skipping
// the test when it is not installed (failing under CI=true).
func startServer(t *testing.T, settings ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found (%v): run scripts/redis.sh", err)
		}
		t.Skipf("redis-server not found (%v): run scripts/redis.sh", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dir: t.TempDir(), port: port}
	s.args = append([]string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--daemonize", "no", "--maxmemory-policy", "noeviction"}, settings...)
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *server) url() string {
	return fmt.Sprintf("redis://127.0.0.1:%d/0?namespace=durability", s.port)
}

// start starts the server and waits until it answers and has loaded its
// data.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1})
	defer func() {
		if err := c.Close(); err != nil {
			s.t.Error(err)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d did not come up: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond) // the interval between readiness probes
	}
}

// kill ends the server with SIGKILL and waits for it.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait() // killed: its exit status says so
	s.cmd = nil
}

// acked is what the store acknowledged under load: tasks whose Enqueue
// returned them, and tasks whose Finish (success) returned no error.
type acked struct {
	mu       sync.Mutex
	enqueued []rdq.ID
	finished []rdq.ID
	// enough is closed once target finishes were acknowledged.
	target int
	enough chan struct{}
	once   sync.Once
}

// load submits, claims and finishes tasks as fast as it can until ctx is
// done, recording what the store acknowledged.
func load(ctx context.Context, s *redisstore.Store, a *acked, worker string) {
	for ctx.Err() == nil {
		batch := make([]store.NewTask, 20)
		for i := range batch {
			batch[i] = store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h", Payload: []byte("x")}
		}
		res, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: batch})
		if err == nil {
			a.mu.Lock()
			for _, r := range res {
				a.enqueued = append(a.enqueued, r.Task.ID)
			}
			a.mu.Unlock()
		}
		claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 20, Lease: time.Minute, WorkerID: worker})
		if err != nil || len(claimed) == 0 {
			continue
		}
		cs := make([]store.Completion, len(claimed))
		for i, t := range claimed {
			cs[i] = store.Completion{Lease: store.Lease{ID: t.ID, Token: t.LeaseToken}, Status: rdq.StatusSucceeded,
				Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: worker}}
		}
		errs, err := s.Finish(ctx, store.FinishParams{Completions: cs})
		if err != nil {
			continue
		}
		a.mu.Lock()
		for i, e := range errs {
			if e == nil {
				a.finished = append(a.finished, claimed[i].ID)
			}
		}
		if len(a.finished) >= a.target {
			a.once.Do(func() { close(a.enough) })
		}
		a.mu.Unlock()
	}
}

// killUnderLoad runs load on srv, SIGKILLs the server once enough was
// acknowledged, restarts it and returns how many acknowledged submits and
// finishes it lost, and how many there were.
func killUnderLoad(t *testing.T, srv *server) (lostEnq, lostFin, enq, fin int) {
	t.Helper()
	st, err := redisstore.Open(t.Context(), srv.url(), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := acked{target: 2000, enough: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { load(ctx, st, &a, "w"+strconv.Itoa(i)) })
	}
	select {
	case <-a.enough:
	case <-time.After(5 * time.Minute):
		cancel()
		wg.Wait()
		t.Fatalf("the load did not reach %d acknowledged finishes in 5 minutes", a.target)
	}
	srv.kill() // under load: the workers' calls fail from here on
	cancel()
	wg.Wait()
	if err := st.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		t.Error(err)
	}
	srv.start()
	st, err = redisstore.Open(t.Context(), srv.url(), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, id := range a.enqueued {
		if _, _, err := st.Get(t.Context(), id); errors.Is(err, store.ErrNotFound) {
			lostEnq++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range a.finished {
		tk, _, err := st.Get(t.Context(), id)
		if errors.Is(err, store.ErrNotFound) || err == nil && tk.Status != rdq.StatusSucceeded {
			lostFin++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return lostEnq, lostFin, len(a.enqueued), len(a.finished)
}

// TestNothingAcknowledgedLostAfterSIGKILL: with appendfsync always, a
// server killed with SIGKILL under load and restarted from its append-only
// file still has every task whose submit it acknowledged and every finish
// it acknowledged.
func TestNothingAcknowledgedLostAfterSIGKILL(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	lostEnq, lostFin, enq, fin := killUnderLoad(t, srv)
	t.Logf("appendfsync always: %d acknowledged submits, %d lost; %d acknowledged finishes, %d lost", enq, lostEnq, fin, lostFin)
	if lostEnq > 0 || lostFin > 0 {
		t.Fatalf("after SIGKILL with appendfsync always, %d of %d acknowledged submits and %d of %d acknowledged finishes were lost", lostEnq, enq, lostFin, fin)
	}
}

// TestEverysecLossWindow measures what appendfsync everysec (Redis's
// default) loses when the server process is killed: Redis writes the
// append-only file before it replies, so the process's death loses
// nothing the store acknowledged; only a crash of the whole host loses
// what the kernel had not yet synced (up to about a second). The test
// reports the figures and fails if the process's death lost anything.
func TestEverysecLossWindow(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "everysec")
	lostEnq, lostFin, enq, fin := killUnderLoad(t, srv)
	t.Logf("appendfsync everysec: %d acknowledged submits, %d lost; %d acknowledged finishes, %d lost", enq, lostEnq, fin, lostFin)
	if lostEnq > 0 || lostFin > 0 {
		t.Fatalf("after SIGKILL of the process with appendfsync everysec, %d of %d acknowledged submits and %d of %d acknowledged finishes were lost", lostEnq, enq, lostFin, fin)
	}
}

// TestDurabilityCheck: a server without an append-only file, or that
// evicts any key, is reported, warned about, and refused with
// RequireDurable.
func TestDurabilityCheck(t *testing.T) {
	srv := startServer(t, "--appendonly", "no", "--maxmemory-policy", "allkeys-lru")
	st, err := redisstore.Open(t.Context(), srv.url(), redisstore.Config{})
	if err != nil {
		t.Fatalf("Open without RequireDurable: %v", err)
	}
	problems, err := st.CheckDurability(t.Context())
	if cerr := st.Close(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil || len(problems) != 2 {
		t.Fatalf("CheckDurability = %q, %v; want the append-only file and the eviction policy", problems, err)
	}
	if _, err := redisstore.Open(t.Context(), srv.url(), redisstore.Config{RequireDurable: true}); !errors.Is(err, redisstore.ErrNotDurable) {
		t.Fatalf("Open with RequireDurable on a server without persistence: %v, want ErrNotDurable", err)
	}

	good := startServer(t, "--appendonly", "yes")
	st, err = redisstore.Open(t.Context(), good.url(), redisstore.Config{RequireDurable: true})
	if err != nil {
		t.Fatalf("Open with RequireDurable on a server with an append-only file: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Error(err)
	}
}
