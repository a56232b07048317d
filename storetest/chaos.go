package storetest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
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
	rep, errs := checkChaos(tasks, atts, execs)
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
		cfg.Processes, len(c.procs), len(ids), c.midTaskKills, c.kills, rep.executions, rep.killed, rep.leaseExpired,
		rep.succeeded, rep.dead, killPhase.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if rep.killed < cfg.Kills {
		t.Errorf("%d executions killed mid-task, want at least %d", rep.killed, cfg.Kills)
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
			mode := "ok"
			switch i % 20 {
			case 0, 1:
				mode = "always"
			case 2:
				mode = "permanent"
			case 3, 4, 5:
				mode = "flaky"
			}
			payload, err := json.Marshal(chaosPayload{Mode: mode, SleepMS: 20 + (i*37)%60})
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

type execKey struct {
	task  rdq.ID
	token int64
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

	// Incremental reading of the execution log.
	off     int64
	partial []byte
	open    map[execKey]bool
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
		open:    map[execKey]bool{},
	}
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

// readLog reads what p appended to its execution log since the last call
// and tracks the executions that started and have not ended.
func (p *chaosProc) readLog() error {
	f, err := os.Open(p.logPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(p.off, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	p.off += int64(len(data))
	p.partial = append(p.partial, data...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return nil
		}
		ev, err := parseExecLine(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
		if err != nil {
			return fmt.Errorf("%s: %w", p.logPath, err)
		}
		k := execKey{ev.task, ev.token}
		if ev.kind == "start" {
			p.open[k] = true
		} else {
			delete(p.open, k)
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
		if err := p.readLog(); err != nil {
			c.t.Fatal(err)
		}
		if len(p.open) > 0 {
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
	if err := p.readLog(); err != nil {
		c.t.Fatal(err)
	}
	if len(p.open) > 0 {
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

// execEvent is one line of an execution log.
type execEvent struct {
	kind   string // "start" or "end"
	task   rdq.ID
	token  int64
	at     time.Time
	result string // of an end: "ok", "err" or "cancelled"
}

func parseExecLine(line string) (execEvent, error) {
	f := strings.Fields(line)
	bad := func(why string) (execEvent, error) {
		return execEvent{}, fmt.Errorf("malformed execution log line %q: %s", line, why)
	}
	if len(f) < 4 {
		return bad("too few fields")
	}
	ev := execEvent{kind: f[0]}
	var err error
	if ev.task, err = rdq.ParseID(f[1]); err != nil {
		return bad(err.Error())
	}
	if ev.token, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return bad(err.Error())
	}
	ns, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return bad(err.Error())
	}
	ev.at = time.Unix(0, ns)
	switch {
	case ev.kind == "start" && len(f) == 4:
	case ev.kind == "end" && len(f) == 5 && (f[4] == "ok" || f[4] == "err" || f[4] == "cancelled"):
		ev.result = f[4]
	default:
		return bad("unknown event")
	}
	return ev, nil
}

// execution is one run of a handler on one task under one lease token, as
// the worker processes logged it.
type execution struct {
	worker string
	task   rdq.ID
	token  int64
	start  time.Time
	// end is when the handler returned or, for an execution killed
	// mid-task, when its process was gone.
	end    time.Time
	result string // "ok", "err", "cancelled", or "" when killed
	killed bool
}

// executions reads every worker's execution log.
func (c *chaosRun) executions() ([]*execution, error) {
	var out []*execution
	for _, p := range c.procs {
		data, err := os.ReadFile(p.logPath)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		open := map[execKey]*execution{}
		for line := range strings.Lines(string(data)) {
			if !strings.HasSuffix(line, "\n") {
				return nil, fmt.Errorf("%s: partial last line %q", p.logPath, line)
			}
			ev, err := parseExecLine(strings.TrimSuffix(line, "\n"))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.logPath, err)
			}
			k := execKey{ev.task, ev.token}
			switch ev.kind {
			case "start":
				if open[k] != nil {
					return nil, fmt.Errorf("%s: task %s token %d started twice", p.id, ev.task, ev.token)
				}
				e := &execution{worker: p.id, task: ev.task, token: ev.token, start: ev.at}
				open[k] = e
				out = append(out, e)
			case "end":
				e := open[k]
				if e == nil {
					return nil, fmt.Errorf("%s: task %s token %d ended without starting", p.id, ev.task, ev.token)
				}
				e.end, e.result = ev.at, ev.result
				delete(open, k)
			}
		}
		for _, e := range open {
			if !p.killed {
				return nil, fmt.Errorf("%s: the execution of task %s with token %d never ended, yet the worker was not killed", p.id, e.task, e.token)
			}
			e.end, e.killed = p.killTime, true
		}
	}
	return out, nil
}

type chaosReport struct {
	executions, killed, leaseExpired, succeeded, dead int
}

// checkChaos checks the outcome of a chaos run: every task SUCCEEDED or
// DEAD; attempt numbers 1..n; for each task, executions ordered by token
// never overlap and start in token order; every execution killed mid-task
// is a LEASE_EXPIRED attempt with its token and worker; every other attempt
// is an execution that ended with the matching result.
func checkChaos(tasks map[rdq.ID]*rdq.Task, atts map[rdq.ID][]rdq.Attempt, execs []*execution) (chaosReport, []error) {
	var rep chaosReport
	var errs []error
	fail := func(id rdq.ID, format string, args ...any) {
		errs = append(errs, fmt.Errorf("task %s: %s", id, fmt.Sprintf(format, args...)))
	}
	byTask := map[rdq.ID][]*execution{}
	for _, e := range execs {
		if tasks[e.task] == nil {
			errs = append(errs, fmt.Errorf("execution of unknown task %s (token %d) by %s", e.task, e.token, e.worker))
			continue
		}
		byTask[e.task] = append(byTask[e.task], e)
	}
	ids := make([]rdq.ID, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareIDs)
	for _, id := range ids {
		tk, history := tasks[id], atts[id]
		switch tk.Status {
		case rdq.StatusSucceeded:
			rep.succeeded++
		case rdq.StatusDead:
			rep.dead++
		default:
			fail(id, "ended %s, want SUCCEEDED or DEAD", tk.Status)
		}
		if tk.Attempts != len(history) {
			fail(id, "Attempts = %d but %d attempts are recorded", tk.Attempts, len(history))
		}
		successes := 0
		byToken := map[int64]rdq.Attempt{}
		for i, a := range history {
			if a.Number != i+1 {
				fail(id, "attempt numbers %v are not 1..n", numbers(history))
				break
			}
			if a.Outcome == rdq.OutcomeSuccess {
				successes++
			}
			if a.Outcome == rdq.OutcomeLeaseExpired {
				rep.leaseExpired++
			}
			if _, dup := byToken[a.LeaseToken]; dup {
				fail(id, "two attempts recorded with lease token %d", a.LeaseToken)
			}
			byToken[a.LeaseToken] = a
		}
		if want := map[bool]int{true: 1, false: 0}[tk.Status == rdq.StatusSucceeded]; successes != want {
			fail(id, "%s with %d successful attempts", tk.Status, successes)
		}
		if n := len(history); n == 0 {
			fail(id, "finished without any attempt")
		} else if last := history[n-1]; (tk.Status == rdq.StatusSucceeded) != (last.Outcome == rdq.OutcomeSuccess) {
			fail(id, "%s but its last attempt is %s", tk.Status, last.Outcome)
		}

		es := byTask[id]
		slices.SortFunc(es, func(a, b *execution) int { return cmp.Compare(a.token, b.token) })
		logged := map[int64]*execution{}
		for i, e := range es {
			rep.executions++
			if logged[e.token] != nil {
				fail(id, "two executions with lease token %d (by %s and %s)", e.token, logged[e.token].worker, e.worker)
			}
			logged[e.token] = e
			if i > 0 {
				prev := es[i-1]
				if !e.start.After(prev.start) {
					fail(id, "execution with token %d started at %s, not after the one with token %d (%s)", e.token, fmtNano(e.start), prev.token, fmtNano(prev.start))
				}
				if e.start.Before(prev.end) {
					fail(id, "executions overlap: token %d (%s) started at %s, before token %d (%s) ended at %s (killed: %v)",
						e.token, e.worker, fmtNano(e.start), prev.token, prev.worker, fmtNano(prev.end), prev.killed)
				}
			}
			a, recorded := byToken[e.token]
			switch {
			case e.killed:
				rep.killed++
				if !recorded || a.Outcome != rdq.OutcomeLeaseExpired {
					fail(id, "execution with token %d was killed mid-task but is not recorded as a LEASE_EXPIRED attempt (attempt: %v)", e.token, a)
				} else if a.WorkerID != e.worker {
					fail(id, "the LEASE_EXPIRED attempt of token %d names worker %q, but %q ran it", e.token, a.WorkerID, e.worker)
				}
			case e.result == "ok" || e.result == "err":
				want := rdq.OutcomeSuccess
				if e.result == "err" {
					want = "a failure"
				}
				switch {
				case !recorded:
					fail(id, "execution with token %d ended (%s) but no attempt records it", e.token, e.result)
				case a.Outcome == rdq.OutcomeLeaseExpired:
					// The worker died or lost the lease before its finish
					// was written: the execution is recorded as lost.
				case (a.Outcome == rdq.OutcomeSuccess) != (e.result == "ok"):
					fail(id, "execution with token %d ended %q but its attempt is %s, want %s", e.token, e.result, a.Outcome, want)
				}
			}
		}
		for _, a := range history {
			if a.Outcome == rdq.OutcomeLeaseExpired {
				continue
			}
			e := logged[a.LeaseToken]
			if e == nil || e.killed {
				fail(id, "attempt %d (%s, token %d) matches no execution that ended", a.Number, a.Outcome, a.LeaseToken)
			}
		}
	}
	return rep, errs
}

func fmtNano(t time.Time) string { return t.Format("15:04:05.000000") }
