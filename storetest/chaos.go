package storetest

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/execlog"
	"github.com/srjn45/rdq/store"
)

// Bounds on the chaos test's phases; generous, for loaded CI machines.
const (
	chaosKillPhaseLimit = 3 * time.Minute
	chaosDrainLimit     = 3 * time.Minute
)

// runChaos runs real worker processes (this test binary, re-executed by
// Main) against the store while killing them with SIGKILL mid-task, then
// checks from the store's history and the processes' execution logs that
// no task was lost and no two executions of a task overlapped.
func runChaos(t *testing.T, h Harness) {
	if !mainCalled.Load() {
		t.Fatal("the chaos test runs this test binary as worker processes: the package's TestMain must call storetest.Main")
	}
	cfg := h.Chaos.withMinimums()
	began := time.Now()
	s, locator := h.NewStore(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("finding the test binary to run workers: %v", err)
	}
	c := &chaosRun{t: t, exe: exe, dir: t.TempDir(), locator: locator, queue: "chaos"}
	t.Cleanup(c.killAll)

	ids := chaosEnqueue(t, s, c.queue, cfg.Tasks)
	for range cfg.Processes {
		c.spawn()
	}

	// Kill phase: kill a worker that is executing a task, respawn it,
	// until enough workers died mid-task.
	rng := rand.New(rand.NewPCG(uint64(began.UnixNano()), 1))
	for c.midTaskKills < cfg.Kills {
		if time.Since(began) > chaosKillPhaseLimit {
			t.Fatalf("only %d of %d kills mid-task after %s: the workers are not executing tasks", c.midTaskKills, cfg.Kills, chaosKillPhaseLimit)
		}
		c.checkAlive()
		time.Sleep(time.Duration(60+rng.IntN(120)) * time.Millisecond)
		victim := c.pickBusy(rng)
		if victim == nil {
			continue
		}
		c.kill(victim)
		c.spawn()
	}
	killPhase := time.Since(began)

	// Drain: the surviving workers finish everything.
	remaining := slices.Clone(ids)
	drainStart := time.Now()
	for len(remaining) > 0 {
		if time.Since(drainStart) > chaosDrainLimit {
			t.Fatalf("%d of %d tasks still not SUCCEEDED or DEAD %s after the last kill (e.g. %s)", len(remaining), len(ids), chaosDrainLimit, remaining[0])
		}
		c.checkAlive()
		time.Sleep(200 * time.Millisecond)
		remaining = slices.DeleteFunc(remaining, func(id rdq.ID) bool {
			tk, _, err := s.Get(t.Context(), id)
			if err != nil {
				t.Fatalf("Get(%s) during the chaos test: %v", id, err)
			}
			return tk.Status == rdq.StatusSucceeded || tk.Status == rdq.StatusDead
		})
	}
	c.stopAll()

	// Verify.
	tasks := make(map[rdq.ID]*rdq.Task, len(ids))
	atts := make(map[rdq.ID][]rdq.Attempt, len(ids))
	for _, id := range ids {
		tk, a, err := s.Get(t.Context(), id)
		if err != nil {
			t.Fatalf("task %s lost: %v", id, err)
		}
		tasks[id], atts[id] = tk, a
	}
	execs, err := c.executions()
	if err != nil {
		t.Fatal(err)
	}
	rep, errs := execlog.Check(tasks, atts, execs)
	for i, err := range errs {
		if i == 20 {
			t.Errorf("... and %d more violations", len(errs)-i)
			break
		}
		t.Error(err)
	}
	t.Logf("chaos: %d processes (%d started in all), %d tasks, %d kills mid-task (%d kills in all), "+
		"%d executions of which %d killed mid-task, %d LEASE_EXPIRED attempts, %d SUCCEEDED, %d DEAD; "+
		"kill phase %s, total %s",
		cfg.Processes, len(c.procs), len(ids), c.midTaskKills, c.kills, rep.Executions, rep.Killed, rep.LeaseExpired,
		rep.Succeeded, rep.Dead, killPhase.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if rep.Killed < cfg.Kills {
		t.Errorf("%d executions killed mid-task, want at least %d", rep.Killed, cfg.Kills)
	}
}

// chaosEnqueue enqueues n chaos tasks: most succeed, some fail once, some
// always fail and some fail permanently.
func chaosEnqueue(t *testing.T, s store.Store, queue string, n int) []rdq.ID {
	t.Helper()
	ids := make([]rdq.ID, 0, n)
	for start := 0; start < n; start += 250 {
		var batch []store.NewTask
		for i := start; i < min(start+250, n); i++ {
			payload, err := json.Marshal(execlog.MixPayload(i, 20, 60))
			if err != nil {
				t.Fatal(err)
			}
			nt := store.NewTask{ID: rdq.NewID(), Queue: queue, Handler: chaosHandler, Payload: payload, ContentType: "application/json"}
			batch = append(batch, nt)
			ids = append(ids, nt.ID)
		}
		if _, err := s.Enqueue(t.Context(), store.EnqueueParams{Tasks: batch}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
	}
	return ids
}

// chaosProc is one worker process.
type chaosProc struct {
	id       string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	logPath  string
	errPath  string
	done     chan struct{} // closed when the process has exited
	waitErr  error
	killed   bool
	killTime time.Time // after the process was reaped
	stopping bool

	tail *execlog.Tail // follows the execution log while the process runs
}

type chaosRun struct {
	t       *testing.T
	exe     string
	dir     string
	locator string
	queue   string

	procs        []*chaosProc
	kills        int
	midTaskKills int
}

func (c *chaosRun) spawn() {
	c.t.Helper()
	n := len(c.procs)
	p := &chaosProc{
		id:      fmt.Sprintf("chaos-worker-%d", n),
		logPath: filepath.Join(c.dir, fmt.Sprintf("exec-%d.log", n)),
		errPath: filepath.Join(c.dir, fmt.Sprintf("stderr-%d.log", n)),
		done:    make(chan struct{}),
	}
	p.tail = execlog.NewTail(p.logPath)
	errFile, err := os.Create(p.errPath)
	if err != nil {
		c.t.Fatal(err)
	}
	defer errFile.Close()
	p.cmd = exec.Command(c.exe)
	p.cmd.Env = append(os.Environ(),
		envChild+"="+childChaos,
		envLocator+"="+c.locator,
		envQueue+"="+c.queue,
		envLog+"="+p.logPath,
		envWorker+"="+p.id,
	)
	p.cmd.Stdout, p.cmd.Stderr = errFile, errFile
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		c.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("starting a worker process: %v", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
}

func (p *chaosProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *chaosProc) stderrTail() string {
	b, err := os.ReadFile(p.errPath)
	if err != nil {
		return fmt.Sprintf("(reading its output: %v)", err)
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// checkAlive fails the test if a worker exited that was neither killed nor
// stopped.
func (c *chaosRun) checkAlive() {
	c.t.Helper()
	for _, p := range c.procs {
		if !p.killed && !p.stopping && p.exited() {
			c.t.Fatalf("worker process %s exited unexpectedly (%v); its output:\n%s", p.id, p.waitErr, p.stderrTail())
		}
	}
}

// pickBusy returns a random live worker that is executing a task, or nil.
func (c *chaosRun) pickBusy(rng *rand.Rand) *chaosProc {
	c.t.Helper()
	var busy []*chaosProc
	for _, p := range c.procs {
		if p.killed || p.stopping || p.exited() {
			continue
		}
		b, err := p.tail.Busy()
		if err != nil {
			c.t.Fatal(err)
		}
		if b {
			busy = append(busy, p)
		}
	}
	if len(busy) == 0 {
		return nil
	}
	return busy[rng.IntN(len(busy))]
}

// kill kills p with SIGKILL and records when it was gone; the kill counts
// as mid-task if p's log shows an execution that started and did not end.
func (c *chaosRun) kill(p *chaosProc) {
	c.t.Helper()
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil && !p.exited() {
		c.t.Fatalf("killing %s: %v", p.id, err)
	}
	<-p.done
	p.killTime = time.Now()
	c.kills++
	b, err := p.tail.Busy()
	if err != nil {
		c.t.Fatal(err)
	}
	if b {
		c.midTaskKills++
	}
}

// stopAll stops every live worker gracefully (by closing its standard
// input) and checks that each exits cleanly.
func (c *chaosRun) stopAll() {
	c.t.Helper()
	var live []*chaosProc
	for _, p := range c.procs {
		if !p.killed && !p.exited() {
			p.stopping = true
			if err := p.stdin.Close(); err != nil {
				c.t.Errorf("closing the input of %s: %v", p.id, err)
			}
			live = append(live, p)
		}
	}
	deadline := time.After(30 * time.Second)
	for _, p := range live {
		select {
		case <-p.done:
			if p.waitErr != nil {
				c.t.Errorf("worker process %s did not stop cleanly: %v; its output:\n%s", p.id, p.waitErr, p.stderrTail())
			}
		case <-deadline:
			c.t.Errorf("worker process %s did not stop within 30s of being asked to", p.id)
		}
	}
}

// killAll kills whatever still runs; registered with t.Cleanup so no
// worker process outlives the test.
func (c *chaosRun) killAll() {
	for _, p := range c.procs {
		if !p.exited() {
			p.killed = true
			_ = p.cmd.Process.Kill() // already exiting if this fails
		}
		<-p.done
		_ = p.stdin.Close() // the pipe may already be closed by Wait
	}
}

// executions reads every worker's execution log.
func (c *chaosRun) executions() ([]*execlog.Execution, error) {
	var out []*execlog.Execution
	for _, p := range c.procs {
		events, err := execlog.ReadFile(p.logPath)
		if err != nil {
			return nil, err
		}
		es, err := execlog.Executions(p.id, events, p.killed, p.killTime)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}
