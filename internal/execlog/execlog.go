// Package execlog is the execution log that the chaos tests' worker
// processes keep, in Go and in Java, and the check that holds those logs
// against what the store recorded.
//
// A worker appends "start ID TOKEN UNIXNANOS" when a handler starts on a task
// under a lease token, and "end ID TOKEN UNIXNANOS RESULT" when it returns,
// RESULT being ok, err or cancelled. Each line is one write to a file opened
// with O_APPEND, so a process killed with SIGKILL leaves whole lines only.
package execlog

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srjn45/rdq"
)

// Writer appends events to one process's execution log. It is safe for
// concurrent use.
type Writer struct {
	mu     sync.Mutex
	f      *os.File
	failed error // the first write that failed, for Err
}

// Create opens the log at path for appending, creating it if needed.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("execlog: %w", err)
	}
	return &Writer{f: f}, nil
}

// Start records that a handler started on task id under token, now.
func (w *Writer) Start(id rdq.ID, token int64) error {
	return w.write(fmt.Sprintf("start %s %d %d\n", id, token, time.Now().UnixNano()))
}

// End records that the handler of task id under token returned result (ok,
// err or cancelled), now.
func (w *Writer) End(id rdq.ID, token int64, result string) error {
	return w.write(fmt.Sprintf("end %s %d %d %s\n", id, token, time.Now().UnixNano(), result))
}

func (w *Writer) write(line string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.WriteString(line); err != nil {
		err = fmt.Errorf("execlog: %w", err)
		if w.failed == nil {
			w.failed = err
		}
		return err
	}
	return nil
}

// Err returns the first write that failed, if any: a log with a gap cannot
// prove anything, so the process reports it when it stops.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// Close closes the log.
func (w *Writer) Close() error { return w.f.Close() }

// Payload tells the chaos handler how to behave.
type Payload struct {
	// Mode is "ok" (succeed), "flaky" (fail the first attempt of a life),
	// "always" (fail retryably every time) or "permanent" (fail
	// permanently).
	Mode string `json:"mode"`
	// SleepMS is how long the handler works.
	SleepMS int `json:"sleep_ms"`
}

// MixPayload returns the payload of the i-th task of a chaos run: of every
// 20 tasks, 14 succeed, 3 fail once ("flaky"), 2 always fail and 1 fails
// permanently; each works baseMS plus up to spreadMS milliseconds, varying
// with i.
func MixPayload(i, baseMS, spreadMS int) Payload {
	mode := "ok"
	switch i % 20 {
	case 0, 1:
		mode = "always"
	case 2:
		mode = "permanent"
	case 3, 4, 5:
		mode = "flaky"
	}
	return Payload{Mode: mode, SleepMS: baseMS + (i*37)%spreadMS}
}

// Handler returns the chaos tests' handler, which logs to w: it works for
// the payload's SleepMS, logging its start and its end, then fails or not
// as the payload's Mode says. Cancelled first, it logs "cancelled" and
// returns the cancellation's cause. Write failures are kept for Err.
func (w *Writer) Handler() func(ctx context.Context, tk *rdq.Task) error {
	return func(ctx context.Context, tk *rdq.Task) error {
		var p Payload
		if err := json.Unmarshal(tk.Payload, &p); err != nil {
			return rdq.Permanent(fmt.Errorf("decoding the chaos payload: %w", err))
		}
		_ = w.Start(tk.ID, tk.LeaseToken) // kept for Err
		timer := time.NewTimer(time.Duration(p.SleepMS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			_ = w.End(tk.ID, tk.LeaseToken, "cancelled") // kept for Err
			return context.Cause(ctx)
		}
		var err error
		switch p.Mode {
		case "flaky":
			if tk.Attempts == 0 {
				err = errors.New("flaky: the first attempt of a life fails")
			}
		case "always":
			err = fmt.Errorf("always fails (attempt %d)", tk.NextAttempt())
		case "permanent":
			err = rdq.Permanent(errors.New("permanently broken"))
		}
		result := "ok"
		if err != nil {
			result = "err"
		}
		_ = w.End(tk.ID, tk.LeaseToken, result) // kept for Err
		return err
	}
}

// Event is one line of an execution log.
type Event struct {
	Kind   string // "start" or "end"
	Task   rdq.ID
	Token  int64
	At     time.Time
	Result string // of an end: "ok", "err" or "cancelled"
}

// ParseLine parses one line, without its newline.
func ParseLine(line string) (Event, error) {
	f := strings.Fields(line)
	bad := func(why string) (Event, error) {
		return Event{}, fmt.Errorf("malformed execution log line %q: %s", line, why)
	}
	if len(f) < 4 {
		return bad("too few fields")
	}
	ev := Event{Kind: f[0]}
	var err error
	if ev.Task, err = rdq.ParseID(f[1]); err != nil {
		return bad(err.Error())
	}
	if ev.Token, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return bad(err.Error())
	}
	ns, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return bad(err.Error())
	}
	ev.At = time.Unix(0, ns)
	switch {
	case ev.Kind == "start" && len(f) == 4:
	case ev.Kind == "end" && len(f) == 5 && (f[4] == "ok" || f[4] == "err" || f[4] == "cancelled"):
		ev.Result = f[4]
	default:
		return bad("unknown event")
	}
	return ev, nil
}

// ReadFile reads a whole execution log; a log that does not exist (a process
// that never ran a handler) has no events. A last line without its newline
// is an error: every line is written whole.
func ReadFile(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("execlog: %w", err)
	}
	var out []Event
	for line := range strings.Lines(string(data)) {
		if !strings.HasSuffix(line, "\n") {
			return nil, fmt.Errorf("execlog: %s: partial last line %q", path, line)
		}
		ev, err := ParseLine(strings.TrimSuffix(line, "\n"))
		if err != nil {
			return nil, fmt.Errorf("execlog: %s: %w", path, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

type key struct {
	task  rdq.ID
	token int64
}

// Tail follows a log that its process may still be writing: each call
// reads what was appended since the last one, whole lines only.
type Tail struct {
	path    string
	off     int64
	partial []byte
	events  []Event
	open    map[key]bool
}

// NewTail follows the log at path from its start.
func NewTail(path string) *Tail { return &Tail{path: path, open: map[key]bool{}} }

// Events returns every event the log holds whole lines of so far.
func (t *Tail) Events() ([]Event, error) {
	f, err := os.Open(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return t.events, nil
	}
	if err != nil {
		return nil, fmt.Errorf("execlog: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("execlog: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("execlog: %w", err)
	}
	t.off += int64(len(data))
	t.partial = append(t.partial, data...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return t.events, nil
		}
		ev, err := ParseLine(string(t.partial[:i]))
		t.partial = t.partial[i+1:]
		if err != nil {
			return nil, fmt.Errorf("execlog: %s: %w", t.path, err)
		}
		t.events = append(t.events, ev)
		if k := (key{ev.Task, ev.Token}); ev.Kind == "start" {
			t.open[k] = true
		} else {
			delete(t.open, k)
		}
	}
}

// Busy reports whether the log shows an execution that started and has not
// ended, as of what it holds now.
func (t *Tail) Busy() (bool, error) {
	if _, err := t.Events(); err != nil {
		return false, err
	}
	return len(t.open) > 0, nil
}

// Execution is one run of a handler on one task under one lease token.
type Execution struct {
	Worker string
	Task   rdq.ID
	Token  int64
	Start  time.Time
	// End is when the handler returned or, for an execution killed
	// mid-task, when its process was gone.
	End    time.Time
	Result string // "ok", "err", "cancelled", or "" when killed
	Killed bool
}

// Executions pairs the events of worker's log into executions. An
// execution that never ended is one its process was killed during: killedAt
// is its end. It is an error if the process was not killed.
func Executions(worker string, events []Event, killed bool, killedAt time.Time) ([]*Execution, error) {
	var out []*Execution
	open := map[key]*Execution{}
	for _, ev := range events {
		k := key{ev.Task, ev.Token}
		if ev.Kind == "start" {
			if open[k] != nil {
				return nil, fmt.Errorf("%s: task %s token %d started twice", worker, ev.Task, ev.Token)
			}
			e := &Execution{Worker: worker, Task: ev.Task, Token: ev.Token, Start: ev.At}
			open[k] = e
			out = append(out, e)
			continue
		}
		e := open[k]
		if e == nil {
			return nil, fmt.Errorf("%s: task %s token %d ended without starting", worker, ev.Task, ev.Token)
		}
		e.End, e.Result = ev.At, ev.Result
		delete(open, k)
	}
	for _, e := range open {
		if !killed {
			return nil, fmt.Errorf("%s: the execution of task %s with token %d never ended, yet the worker was not killed", worker, e.Task, e.Token)
		}
		e.End, e.Killed = killedAt, true
	}
	return out, nil
}

// Report counts what a chaos run did.
type Report struct {
	Executions, Killed, LeaseExpired, Succeeded, Dead int
}

// Check holds the executions of a chaos run against the tasks and their
// histories as the store holds them at the end: every task SUCCEEDED or
// DEAD, with attempts numbered 1..n and exactly one success if it
// succeeded; for each task, executions in token order start in time order
// and never overlap; every execution killed mid-task is a LEASE_EXPIRED
// attempt with its token and worker; every other attempt is an execution
// that ended with the matching result. It returns every violation.
func Check(tasks map[rdq.ID]*rdq.Task, atts map[rdq.ID][]rdq.Attempt, execs []*Execution) (Report, []error) {
	var rep Report
	var errs []error
	fail := func(id rdq.ID, format string, args ...any) {
		errs = append(errs, fmt.Errorf("task %s: %s", id, fmt.Sprintf(format, args...)))
	}
	byTask := map[rdq.ID][]*Execution{}
	for _, e := range execs {
		if tasks[e.Task] == nil {
			errs = append(errs, fmt.Errorf("execution of unknown task %s (token %d) by %s", e.Task, e.Token, e.Worker))
			continue
		}
		byTask[e.Task] = append(byTask[e.Task], e)
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
			rep.Succeeded++
		case rdq.StatusDead:
			rep.Dead++
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
				rep.LeaseExpired++
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
		slices.SortFunc(es, func(a, b *Execution) int { return cmp.Compare(a.Token, b.Token) })
		logged := map[int64]*Execution{}
		for i, e := range es {
			rep.Executions++
			if logged[e.Token] != nil {
				fail(id, "two executions with lease token %d (by %s and %s)", e.Token, logged[e.Token].Worker, e.Worker)
			}
			logged[e.Token] = e
			if i > 0 {
				prev := es[i-1]
				if !e.Start.After(prev.Start) {
					fail(id, "execution with token %d started at %s, not after the one with token %d (%s)", e.Token, fmtNano(e.Start), prev.Token, fmtNano(prev.Start))
				}
				if e.Start.Before(prev.End) {
					fail(id, "executions overlap: token %d (%s) started at %s, before token %d (%s) ended at %s (killed: %v)",
						e.Token, e.Worker, fmtNano(e.Start), prev.Token, prev.Worker, fmtNano(prev.End), prev.Killed)
				}
			}
			a, recorded := byToken[e.Token]
			switch {
			case e.Killed:
				rep.Killed++
				if !recorded || a.Outcome != rdq.OutcomeLeaseExpired {
					fail(id, "execution with token %d was killed mid-task but is not recorded as a LEASE_EXPIRED attempt (attempt: %v)", e.Token, a)
				} else if a.WorkerID != e.Worker {
					fail(id, "the LEASE_EXPIRED attempt of token %d names worker %q, but %q ran it", e.Token, a.WorkerID, e.Worker)
				}
			case e.Result == "ok" || e.Result == "err":
				want := rdq.OutcomeSuccess
				if e.Result == "err" {
					want = "a failure"
				}
				switch {
				case !recorded:
					fail(id, "execution with token %d ended (%s) but no attempt records it", e.Token, e.Result)
				case a.Outcome == rdq.OutcomeLeaseExpired:
					// The worker died or lost the lease before its finish
					// was written: the execution is recorded as lost.
				case (a.Outcome == rdq.OutcomeSuccess) != (e.Result == "ok"):
					fail(id, "execution with token %d ended %q but its attempt is %s, want %s", e.Token, e.Result, a.Outcome, want)
				}
			}
		}
		for _, a := range history {
			if a.Outcome == rdq.OutcomeLeaseExpired {
				continue
			}
			if e := logged[a.LeaseToken]; e == nil || e.Killed {
				fail(id, "attempt %d (%s, token %d) matches no execution that ended", a.Number, a.Outcome, a.LeaseToken)
			}
		}
	}
	return rep, errs
}

func numbers(atts []rdq.Attempt) []int {
	out := make([]int, len(atts))
	for i, a := range atts {
		out[i] = a.Number
	}
	return out
}

func fmtNano(t time.Time) string { return t.Format("15:04:05.000000") }
