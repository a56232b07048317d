package crosslang

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
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

// Size of the mixed chaos run: sized for two cores and a CI budget.
const (
	chaosTasks      = 1000
	chaosKills      = 20
	chaosPerKind    = 2 // Go and Java worker processes alive at any time, each
	chaosPhaseLimit = 3 * time.Minute
	chaosDrainLimit = 3 * time.Minute
)

// execEvent is one line of an execution log.
type execEvent struct {
	kind   string // "start" or "end"
	task   rdq.ID
	token  int64
	at     time.Time
	result string
}

func parseExecLine(line string) (execEvent, error) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return execEvent{}, fmt.Errorf("malformed execution log line %q", line)
	}
	ev := execEvent{kind: f[0]}
	var err error
	if ev.task, err = rdq.ParseID(f[1]); err != nil {
		return ev, err
	}
	if ev.token, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return ev, err
	}
	ns, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return ev, err
	}
	ev.at = time.Unix(0, ns)
	switch {
	case ev.kind == "start" && len(f) == 4:
	case ev.kind == "end" && len(f) == 5:
		ev.result = f[4]
	default:
		return ev, fmt.Errorf("malformed execution log line %q", line)
	}
	return ev, nil
}

// readExecLog reads the whole lines of an execution log.
func readExecLog(path string) ([]execEvent, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []execEvent
	for line := range strings.Lines(string(data)) {
		if !strings.HasSuffix(line, "\n") {
			break // being written
		}
		ev, err := parseExecLine(strings.TrimSuffix(line, "\n"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

// proc is a chaos worker process of either language.
type proc struct {
	id      string
	lang    string // "go" or "java"
	logPath string
	java    *javaProc
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	done    chan struct{}
	waitErr error
	errPath string

	killed   bool
	killTime time.Time
	stopping bool
}

func (p *proc) exited() bool {
	if p.java != nil {
		return p.java.exited()
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// busy reports whether p's log shows an execution that started and has not ended.
func (p *proc) busy() (bool, error) {
	evs, err := readExecLog(p.logPath)
	if err != nil {
		return false, err
	}
	open := map[[2]any]bool{}
	for _, ev := range evs {
		k := [2]any{ev.task, ev.token}
		if ev.kind == "start" {
			open[k] = true
		} else {
			delete(open, k)
		}
	}
	return len(open) > 0, nil
}

type chaosRun struct {
	t      *testing.T
	dir    string
	schema string
	procs  []*proc
	n      map[string]int
}

func (c *chaosRun) spawn(lang string) *proc {
	c.t.Helper()
	c.n[lang]++
	id := fmt.Sprintf("%s-worker-%d", lang, c.n[lang])
	p := &proc{id: id, lang: lang, logPath: filepath.Join(c.dir, id+".log"), errPath: filepath.Join(c.dir, id+".stderr"), done: make(chan struct{})}
	if lang == "java" {
		p.java = startJava(c.t, "WorkerMain", c.dir, id, javaWorkerEnv(c.schema, id, "chaos", p.logPath))
	} else {
		exe, err := os.Executable()
		if err != nil {
			c.t.Fatal(err)
		}
		errFile, err := os.Create(p.errPath)
		if err != nil {
			c.t.Fatal(err)
		}
		defer errFile.Close()
		p.cmd = exec.Command(exe)
		p.cmd.Env = append(os.Environ(), envChild+"=go-worker", envSchema+"="+c.schema, envQueues+"=chaos",
			envLog+"="+p.logPath, envWorker+"="+id, pgtest.EnvURL+"="+pgtest.URL())
		p.cmd.Stdout, p.cmd.Stderr = errFile, errFile
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			c.t.Fatal(err)
		}
		if err := p.cmd.Start(); err != nil {
			c.t.Fatal(err)
		}
		go func() {
			p.waitErr = p.cmd.Wait()
			close(p.done)
		}()
	}
	c.procs = append(c.procs, p)
	return p
}

func (c *chaosRun) stderr(p *proc) string {
	if p.java != nil {
		return p.java.stderr()
	}
	b, _ := os.ReadFile(p.errPath)
	return string(b)
}

func (c *chaosRun) checkAlive() {
	c.t.Helper()
	for _, p := range c.procs {
		if !p.killed && !p.stopping && p.exited() {
			c.t.Fatalf("worker %s exited unexpectedly:\n%s", p.id, c.stderr(p))
		}
	}
}

func (c *chaosRun) kill(p *proc) {
	p.killed = true
	if p.java != nil {
		p.java.kill()
	} else {
		_ = p.cmd.Process.Kill() // exiting already if this fails
		<-p.done
		_ = p.stdin.Close()
	}
	p.killTime = time.Now()
}

func (c *chaosRun) killAll() {
	for _, p := range c.procs {
		if !p.exited() || !p.killed {
			c.kill(p)
		}
	}
}

func (c *chaosRun) stopAll() {
	c.t.Helper()
	for _, p := range c.procs {
		if p.killed || p.exited() {
			continue
		}
		p.stopping = true
		if p.java != nil {
			p.java.stop(c.t)
			continue
		}
		_ = p.stdin.Close()
		select {
		case <-p.done:
			if p.waitErr != nil {
				c.t.Errorf("worker %s did not stop cleanly: %v\n%s", p.id, p.waitErr, c.stderr(p))
			}
		case <-time.After(30 * time.Second):
			c.t.Errorf("worker %s did not stop within 30s", p.id)
		}
	}
}

// execution is one run of a handler under one lease token.
type execution struct {
	worker string
	task   rdq.ID
	token  int64
	start  time.Time
	end    time.Time
	result string
	killed bool
}

func (c *chaosRun) executions() ([]*execution, error) {
	var out []*execution
	for _, p := range c.procs {
		evs, err := readExecLog(p.logPath)
		if err != nil {
			return nil, err
		}
		open := map[[2]any]*execution{}
		for _, ev := range evs {
			k := [2]any{ev.task, ev.token}
			if ev.kind == "start" {
				if open[k] != nil {
					return nil, fmt.Errorf("%s: task %s token %d started twice", p.id, ev.task, ev.token)
				}
				e := &execution{worker: p.id, task: ev.task, token: ev.token, start: ev.at}
				open[k] = e
				out = append(out, e)
				continue
			}
			e := open[k]
			if e == nil {
				return nil, fmt.Errorf("%s: task %s token %d ended without starting", p.id, ev.task, ev.token)
			}
			e.end, e.result = ev.at, ev.result
			delete(open, k)
		}
		for _, e := range open {
			if !p.killed {
				return nil, fmt.Errorf("%s: execution of %s token %d never ended, yet the worker was not killed", p.id, e.task, e.token)
			}
			e.end, e.killed = p.killTime, true
		}
	}
	return out, nil
}

// TestMixedChaos runs Go and Java worker processes on the same queue (two of
// each at all times) over 1,000 tasks that succeed, fail once, always fail
// or fail permanently, SIGKILLing busy workers of both languages at least 20
// times. Then: no task lost (each SUCCEEDED or DEAD with attempts 1..n), no
// two executions of a task overlapping, fencing tokens strictly increasing
// with execution start per task, every killed execution recorded as a
// LEASE_EXPIRED attempt with its token and worker, and every other attempt
// matching an execution that ended that way.
func TestMixedChaos(t *testing.T) {
	requireJava(t)
	began := time.Now()
	st, schema := pgtest.NewStore(t)
	c := &chaosRun{t: t, dir: t.TempDir(), schema: schema, n: map[string]int{}}
	t.Cleanup(c.killAll)

	var ids []rdq.ID
	for start := 0; start < chaosTasks; start += 250 {
		var batch []store.NewTask
		for i := start; i < min(start+250, chaosTasks); i++ {
			mode := "ok"
			switch i % 20 {
			case 0, 1:
				mode = "always"
			case 2:
				mode = "permanent"
			case 3, 4, 5:
				mode = "flaky"
			}
			payload, err := json.Marshal(chaosPayload{Mode: mode, SleepMS: 100 + (i*37)%200})
			if err != nil {
				t.Fatal(err)
			}
			nt := store.NewTask{ID: rdq.NewID(), Queue: "chaos", Handler: "chaos", Payload: payload, ContentType: "application/json"}
			batch = append(batch, nt)
			ids = append(ids, nt.ID)
		}
		if _, err := st.Enqueue(t.Context(), store.EnqueueParams{Tasks: batch}); err != nil {
			t.Fatal(err)
		}
	}
	for range chaosPerKind {
		c.spawn("go")
		c.spawn("java")
	}

	rng := rand.New(rand.NewPCG(uint64(began.UnixNano()), 7))
	midTask := map[string]int{}
	for midTask["go"]+midTask["java"] < chaosKills || midTask["go"] < chaosKills/4 || midTask["java"] < chaosKills/4 {
		if time.Since(began) > chaosPhaseLimit {
			t.Fatalf("only %v kills mid-task after %s", midTask, chaosPhaseLimit)
		}
		c.checkAlive()
		time.Sleep(time.Duration(80+rng.IntN(150)) * time.Millisecond)
		// Alternate languages so both are killed often.
		lang := []string{"go", "java"}[rng.IntN(2)]
		if midTask["go"] < midTask["java"] {
			lang = "go"
		} else if midTask["java"] < midTask["go"] {
			lang = "java"
		}
		var busy []*proc
		for _, p := range c.procs {
			if p.lang != lang || p.killed || p.exited() {
				continue
			}
			b, err := p.busy()
			if err != nil {
				t.Fatal(err)
			}
			if b {
				busy = append(busy, p)
			}
		}
		if len(busy) == 0 {
			continue
		}
		victim := busy[rng.IntN(len(busy))]
		c.kill(victim)
		if b, err := victim.busy(); err != nil {
			t.Fatal(err)
		} else if b {
			midTask[lang]++
		}
		c.spawn(lang)
	}
	killPhase := time.Since(began)

	remaining := slices.Clone(ids)
	drainStart := time.Now()
	for len(remaining) > 0 {
		if time.Since(drainStart) > chaosDrainLimit {
			t.Fatalf("%d of %d tasks not SUCCEEDED or DEAD %s after the kills (e.g. %s)", len(remaining), len(ids), chaosDrainLimit, remaining[0])
		}
		c.checkAlive()
		time.Sleep(200 * time.Millisecond)
		remaining = slices.DeleteFunc(remaining, func(id rdq.ID) bool {
			tk, _ := getTask(t, st, id)
			return tk.Status == rdq.StatusSucceeded || tk.Status == rdq.StatusDead
		})
	}
	c.stopAll()

	tasks := map[rdq.ID]*rdq.Task{}
	atts := map[rdq.ID][]rdq.Attempt{}
	for _, id := range ids {
		tasks[id], atts[id] = getTask(t, st, id)
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
	byLang := map[string]int{}
	for _, e := range execs {
		byLang[strings.SplitN(e.worker, "-", 2)[0]]++
	}
	t.Logf("mixed chaos: %d tasks, %d processes started (%d Go, %d Java), kills mid-task %v, executions %v, "+
		"%d killed mid-task, %d LEASE_EXPIRED attempts, %d SUCCEEDED, %d DEAD; kill phase %s, total %s",
		len(ids), len(c.procs), c.n["go"], c.n["java"], midTask, byLang, rep.killed, rep.leaseExpired,
		rep.succeeded, rep.dead, killPhase.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if rep.killed < chaosKills {
		t.Errorf("%d executions killed mid-task, want at least %d", rep.killed, chaosKills)
	}
	if byLang["go"] == 0 || byLang["java"] == 0 {
		t.Errorf("executions by language %v: both must take part", byLang)
	}
}

type chaosReport struct{ killed, leaseExpired, succeeded, dead int }

func checkChaos(tasks map[rdq.ID]*rdq.Task, atts map[rdq.ID][]rdq.Attempt, execs []*execution) (chaosReport, []error) {
	var rep chaosReport
	var errs []error
	fail := func(id rdq.ID, format string, args ...any) {
		errs = append(errs, fmt.Errorf("task %s: %s", id, fmt.Sprintf(format, args...)))
	}
	byTask := map[rdq.ID][]*execution{}
	for _, e := range execs {
		if tasks[e.task] == nil {
			errs = append(errs, fmt.Errorf("execution of unknown task %s by %s", e.task, e.worker))
			continue
		}
		byTask[e.task] = append(byTask[e.task], e)
	}
	ids := make([]rdq.ID, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b rdq.ID) int { return bytes.Compare(a[:], b[:]) })
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
			fail(id, "Attempts = %d but %d attempts recorded", tk.Attempts, len(history))
		}
		byToken := map[int64]rdq.Attempt{}
		successes := 0
		for i, a := range history {
			if a.Number != i+1 {
				fail(id, "attempt numbers are not 1..n: %s", outcomes(history))
				break
			}
			if _, dup := byToken[a.LeaseToken]; dup {
				fail(id, "two attempts with lease token %d", a.LeaseToken)
			}
			byToken[a.LeaseToken] = a
			if a.Outcome == rdq.OutcomeSuccess {
				successes++
			}
			if a.Outcome == rdq.OutcomeLeaseExpired {
				rep.leaseExpired++
			}
		}
		if (tk.Status == rdq.StatusSucceeded) != (successes == 1) || successes > 1 {
			fail(id, "%s with %d successful attempts", tk.Status, successes)
		}
		es := byTask[id]
		// Fencing: ordered by start, tokens strictly increase and executions never overlap.
		slices.SortFunc(es, func(a, b *execution) int { return a.start.Compare(b.start) })
		for i := 1; i < len(es); i++ {
			prev, e := es[i-1], es[i]
			if e.token <= prev.token {
				fail(id, "execution by %s started after %s's but has token %d <= %d", e.worker, prev.worker, e.token, prev.token)
			}
			if e.start.Before(prev.end) {
				fail(id, "executions overlap: token %d (%s) started before token %d (%s, killed %v) ended", e.token, e.worker, prev.token, prev.worker, prev.killed)
			}
		}
		slices.SortFunc(es, func(a, b *execution) int { return cmp.Compare(a.token, b.token) })
		logged := map[int64]*execution{}
		for _, e := range es {
			if logged[e.token] != nil {
				fail(id, "two executions with token %d", e.token)
			}
			logged[e.token] = e
			a, recorded := byToken[e.token]
			switch {
			case e.killed:
				rep.killed++
				if !recorded || a.Outcome != rdq.OutcomeLeaseExpired || a.WorkerID != e.worker {
					fail(id, "execution with token %d by %s was killed but its attempt is %+v", e.token, e.worker, a)
				}
			case e.result == "ok" || e.result == "err":
				if !recorded {
					fail(id, "execution with token %d ended %s but no attempt records it", e.token, e.result)
				} else if a.Outcome != rdq.OutcomeLeaseExpired && (a.Outcome == rdq.OutcomeSuccess) != (e.result == "ok") {
					fail(id, "execution with token %d ended %s but its attempt is %s", e.token, e.result, a.Outcome)
				}
			}
		}
		for _, a := range history {
			if a.Outcome == rdq.OutcomeLeaseExpired {
				continue
			}
			if e := logged[a.LeaseToken]; e == nil || e.killed {
				fail(id, "attempt %d (%s, token %d) matches no execution that ended", a.Number, a.Outcome, a.LeaseToken)
			}
		}
	}
	return rep, errs
}
