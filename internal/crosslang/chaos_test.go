package crosslang

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/execlog"
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
	tail     *execlog.Tail // follows the execution log while the process runs
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
	p.tail = execlog.NewTail(p.logPath)
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
			payload, err := json.Marshal(execlog.MixPayload(i, 100, 200))
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
			b, err := p.tail.Busy()
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
		if b, err := victim.tail.Busy(); err != nil {
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
	rep, errs := execlog.Check(tasks, atts, execs)
	for i, err := range errs {
		if i == 20 {
			t.Errorf("... and %d more violations", len(errs)-i)
			break
		}
		t.Error(err)
	}
	byLang := map[string]int{}
	for _, e := range execs {
		byLang[strings.SplitN(e.Worker, "-", 2)[0]]++
	}
	t.Logf("mixed chaos: %d tasks, %d processes started (%d Go, %d Java), kills mid-task %v, executions %v, "+
		"%d killed mid-task, %d LEASE_EXPIRED attempts, %d SUCCEEDED, %d DEAD; kill phase %s, total %s",
		len(ids), len(c.procs), c.n["go"], c.n["java"], midTask, byLang, rep.Killed, rep.LeaseExpired,
		rep.Succeeded, rep.Dead, killPhase.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if rep.Killed < chaosKills {
		t.Errorf("%d executions killed mid-task, want at least %d", rep.Killed, chaosKills)
	}
	if byLang["go"] == 0 || byLang["java"] == 0 {
		t.Errorf("executions by language %v: both must take part", byLang)
	}
}
