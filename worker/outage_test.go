package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/worker"
)

// pgBin is where the outage test finds PostgreSQL's server programs.
const pgBin = "/usr/lib/postgresql/15/bin"

// cluster is a throwaway PostgreSQL cluster in a temporary directory, on its
// own port: a test may stop and start it at will, never touching the shared
// server.
type cluster struct {
	t    *testing.T
	dir  string
	port int
	cred *syscall.Credential // run the server as this user (initdb refuses root)
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if _, err := os.Stat(filepath.Join(pgBin, "initdb")); err != nil {
		t.Fatalf("this test starts its own PostgreSQL cluster and needs %s/initdb (run scripts/postgres.sh): %v", pgBin, err)
	}
	dir, err := os.MkdirTemp("", "rdq-outage-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir}
	t.Cleanup(func() {
		c.pgctl("stop", "-m", "immediate") // may already be stopped
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing the cluster: %v", err)
		}
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the cluster must run as the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.start()
	return c
}

func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *cluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *cluster) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(pgBin, prog), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

func (c *cluster) pgctl(args ...string) ([]byte, error) {
	return c.run("pg_ctl", append([]string{"-D", c.data(), "-w"}, args...)...)
}

func (c *cluster) start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", c.port, c.dir)
	if out, err := c.pgctl("start", "-o", opts, "-l", filepath.Join(c.dir, "log")); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		c.t.Fatalf("starting the cluster: %v\n%s\n%s", err, out, log)
	}
}

// stop stops the cluster abruptly, as a crash or a failover would.
func (c *cluster) stop() {
	c.t.Helper()
	if out, err := c.pgctl("stop", "-m", "immediate"); err != nil {
		c.t.Fatalf("stopping the cluster: %v\n%s", err, out)
	}
}

// execution is one run of a handler, as the handler saw it.
type execution struct {
	token      int64
	start, end time.Time
}

// TestDatabaseOutageLongerThanLease stops the database for longer than the
// lease while handlers run, then starts it again. Workers cancel handlers
// whose lease they cannot renew before it expires, so no two executions of
// a task overlap, and every task ends SUCCEEDED or DEAD.
func TestDatabaseOutageLongerThanLease(t *testing.T) {
	cl := newCluster(t)
	ctx := context.Background()
	const (
		lease   = 2 * time.Second
		outage  = 2*lease + time.Second
		tasks   = 8
		workers = 2
		runFor  = outage + 3*time.Second // handlers outlive the outage
	)

	var mu sync.Mutex
	runs := map[rdq.ID][]execution{}
	handler := func(ctx context.Context, task *rdq.Task) error {
		ex := execution{token: task.LeaseToken, start: time.Now()}
		defer func() {
			ex.end = time.Now()
			mu.Lock()
			runs[task.ID] = append(runs[task.ID], ex)
			mu.Unlock()
		}()
		select {
		case <-time.After(runFor):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}

	openStore := func() *pgstore.Store {
		pool, err := pgxpool.New(ctx, cl.url())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := pgstore.New(pool, pgstore.Config{Schema: "rdq", Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := openStore()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range workers {
		e := &env{t: t}
		e.newWorker(worker.Config{
			Store: openStore(),
			ID:    fmt.Sprintf("outage-w%d", i),
			Queues: map[string]worker.QueueConfig{"q": {
				Policy:            rdq.Policy{MaxAttempts: 6, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
				Concurrency:       tasks,
				Lease:             lease,
				HeartbeatInterval: lease / 4,
				Timeout:           time.Minute,
			}},
			PollInterval:    100 * time.Millisecond,
			ReclaimInterval: 200 * time.Millisecond,
		}, map[string]worker.Handler{"work": handler})
	}

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var ids []rdq.ID
	for range tasks {
		res, err := c.Submit(ctx, client.Task{Queue: "q", Handler: "work"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	// Wait until every task is running, then take the database away.
	waitFor(t, 20*time.Second, func() error {
		n, err := countInFlight(ctx, st, ids)
		if err != nil {
			return err
		}
		if n < tasks {
			return fmt.Errorf("%d of %d tasks in flight", n, tasks)
		}
		return nil
	})
	cl.stop()
	down := time.Now()
	// An outage longer than the lease: wait on the clock, which is the
	// point of the test (not a stand-in for a condition).
	<-time.After(outage)
	cl.start()
	t.Logf("database down for %s", time.Since(down))

	waitFor(t, 90*time.Second, func() error {
		for _, id := range ids {
			task, _, err := st.Get(ctx, id)
			if err != nil {
				return err
			}
			if task.Status != rdq.StatusSucceeded && task.Status != rdq.StatusDead {
				return fmt.Errorf("task %s is %s", id, task.Status)
			}
		}
		return nil
	})

	mu.Lock()
	defer mu.Unlock()
	interrupted := 0
	for _, id := range ids {
		ex := runs[id]
		sort.Slice(ex, func(i, j int) bool { return ex[i].start.Before(ex[j].start) })
		for i := 1; i < len(ex); i++ {
			if ex[i].start.Before(ex[i-1].end) {
				t.Errorf("task %s: execution with token %d started %s before the one with token %d ended",
					id, ex[i].token, ex[i-1].end.Sub(ex[i].start), ex[i-1].token)
			}
			if ex[i].token <= ex[i-1].token {
				t.Errorf("task %s: tokens %d then %d do not increase", id, ex[i-1].token, ex[i].token)
			}
		}
		if len(ex) > 1 {
			interrupted++
		}
	}
	if interrupted == 0 {
		t.Errorf("no task ran more than once: the outage interrupted nothing, so the test proved nothing")
	}
}

// countInFlight counts the tasks of ids that are IN_FLIGHT.
func countInFlight(ctx context.Context, st *pgstore.Store, ids []rdq.ID) (int, error) {
	n := 0
	for _, id := range ids {
		task, _, err := st.Get(ctx, id)
		if err != nil {
			return 0, errors.Join(fmt.Errorf("reading task %s", id), err)
		}
		if task.Status == rdq.StatusInFlight {
			n++
		}
	}
	return n, nil
}
