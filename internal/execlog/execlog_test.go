package execlog

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// A log written by a Writer reads back as the events written, paired into
// executions; an execution that never ended counts as killed only when its
// process was.
func TestWriteReadPair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exec.log")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := rdq.NewID(), rdq.NewID()
	tail := NewTail(path)
	if err := w.Start(a, 1); err != nil {
		t.Fatal(err)
	}
	if busy, err := tail.Busy(); err != nil || !busy {
		t.Fatalf("after a start: busy %v, %v; want busy", busy, err)
	}
	for _, err := range []error{w.End(a, 1, "ok"), w.Start(b, 3)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := ReadFile(path)
	if err != nil || len(events) != 3 {
		t.Fatalf("read %d events (%v), want 3", len(events), err)
	}
	if _, err := Executions("w", events, false, time.Time{}); err == nil {
		t.Error("an execution that never ended, of a process not killed: no error")
	}
	killedAt := time.Now()
	es, err := Executions("w", events, true, killedAt)
	if err != nil || len(es) != 2 {
		t.Fatalf("%d executions (%v), want 2", len(es), err)
	}
	if e := es[0]; e.Task != a || e.Token != 1 || e.Result != "ok" || e.Killed || !e.End.After(e.Start) && !e.End.Equal(e.Start) {
		t.Errorf("first execution %+v", e)
	}
	if e := es[1]; e.Task != b || !e.Killed || !e.End.Equal(killedAt) {
		t.Errorf("killed execution %+v", e)
	}
	if err := os.WriteFile(path, []byte("start "+a.String()+" 1 5"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "partial last line") {
		t.Errorf("a partial last line: %v, want an error", err)
	}
}

func TestParseLine(t *testing.T) {
	id := rdq.NewID()
	ev, err := ParseLine("end " + id.String() + " 7 1700000000000000001 ok")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != "end" || ev.Task != id || ev.Token != 7 || ev.At.UnixNano() != 1700000000000000001 || ev.Result != "ok" {
		t.Fatalf("parsed %+v", ev)
	}
	for _, bad := range []string{"", "start", "start x 1 2", "start " + id.String() + " x 2", "end " + id.String() + " 1 2", "end " + id.String() + " 1 2 maybe", "begin " + id.String() + " 1 2"} {
		if _, err := ParseLine(bad); err == nil {
			t.Errorf("ParseLine(%q) succeeded", bad)
		}
	}
}

// chaosFixture is a consistent chaos outcome: one task, three executions
// (the second killed mid-task), and its history.
func chaosFixture() (map[rdq.ID]*rdq.Task, map[rdq.ID][]rdq.Attempt, []*Execution) {
	id := rdq.NewID()
	t0 := time.Unix(1700000000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tasks := map[rdq.ID]*rdq.Task{id: {ID: id, Status: rdq.StatusSucceeded, Attempts: 3}}
	atts := map[rdq.ID][]rdq.Attempt{id: {
		{TaskID: id, Number: 1, Outcome: rdq.OutcomeRetryableFailure, LeaseToken: 1, WorkerID: "w1"},
		{TaskID: id, Number: 2, Outcome: rdq.OutcomeLeaseExpired, LeaseToken: 2, WorkerID: "w2"},
		{TaskID: id, Number: 3, Outcome: rdq.OutcomeSuccess, LeaseToken: 4, WorkerID: "w3"},
	}}
	execs := []*Execution{
		{Worker: "w1", Task: id, Token: 1, Start: ms(0), End: ms(30), Result: "err"},
		{Worker: "w2", Task: id, Token: 2, Start: ms(100), End: ms(120), Killed: true},
		{Worker: "w3", Task: id, Token: 4, Start: ms(2000), End: ms(2030), Result: "ok"},
	}
	return tasks, atts, execs
}

func TestCheckChaos(t *testing.T) {
	tasks, atts, execs := chaosFixture()
	if rep, errs := Check(tasks, atts, execs); len(errs) != 0 || rep.Killed != 1 || rep.LeaseExpired != 1 || rep.Succeeded != 1 || rep.Executions != 3 {
		t.Fatalf("consistent outcome: report %+v, errors %v", rep, errs)
	}
	cases := map[string]struct {
		mutate func(*rdq.Task, []rdq.Attempt, []*Execution) []*Execution
		want   string
	}{
		"overlap": {func(_ *rdq.Task, _ []rdq.Attempt, es []*Execution) []*Execution {
			es[2].Start = es[1].End.Add(-time.Millisecond)
			return es
		}, "overlap"},
		"start order": {func(_ *rdq.Task, _ []rdq.Attempt, es []*Execution) []*Execution {
			es[1].Start, es[1].End = es[0].Start.Add(-time.Second), es[0].Start.Add(-time.Second)
			return es
		}, "not after"},
		"killed not recorded": {func(_ *rdq.Task, a []rdq.Attempt, es []*Execution) []*Execution {
			a[1].Outcome = rdq.OutcomeRetryableFailure
			return es
		}, "not recorded as a LEASE_EXPIRED"},
		"lost worker": {func(_ *rdq.Task, a []rdq.Attempt, es []*Execution) []*Execution {
			a[1].WorkerID = "someone-else"
			return es
		}, "names worker"},
		"not terminal": {func(tk *rdq.Task, _ []rdq.Attempt, es []*Execution) []*Execution {
			tk.Status = rdq.StatusPending
			return es
		}, "want SUCCEEDED or DEAD"},
		"number gap": {func(_ *rdq.Task, a []rdq.Attempt, es []*Execution) []*Execution {
			a[2].Number = 4
			return es
		}, "not 1..n"},
		"same token twice": {func(_ *rdq.Task, _ []rdq.Attempt, es []*Execution) []*Execution {
			dup := *es[2]
			dup.Start, dup.End = es[2].End.Add(time.Second), es[2].End.Add(2*time.Second)
			return append(es, &dup)
		}, "two executions with lease token"},
		"ok recorded as failure": {func(_ *rdq.Task, a []rdq.Attempt, es []*Execution) []*Execution {
			es[0].Result = "ok"
			return es
		}, "want SUCCESS"},
		"attempt without execution": {func(_ *rdq.Task, _ []rdq.Attempt, es []*Execution) []*Execution {
			return es[1:]
		}, "matches no execution"},
		"succeeded without success": {func(tk *rdq.Task, a []rdq.Attempt, es []*Execution) []*Execution {
			tk.Status = rdq.StatusDead
			return es
		}, "DEAD with 1 successful"},
	}
	for name, c := range cases {
		tasks, atts, execs := chaosFixture()
		var tk *rdq.Task
		var a []rdq.Attempt
		for k := range tasks {
			tk, a = tasks[k], atts[k]
		}
		execs = c.mutate(tk, a, execs)
		_, errs := Check(tasks, atts, execs)
		found := false
		for _, err := range errs {
			found = found || strings.Contains(err.Error(), c.want)
		}
		if !found {
			t.Errorf("%s: errors %v, want one containing %q", name, errs, c.want)
		}
	}
}

func TestMixPayload(t *testing.T) {
	count := map[string]int{}
	for i := range 40 {
		p := MixPayload(i, 20, 60)
		count[p.Mode]++
		if p.SleepMS < 20 || p.SleepMS >= 80 {
			t.Errorf("task %d works %d ms, want 20 to 79", i, p.SleepMS)
		}
	}
	if want := map[string]int{"ok": 28, "flaky": 6, "always": 4, "permanent": 2}; !maps.Equal(count, want) {
		t.Errorf("modes of 40 tasks %v, want %v", count, want)
	}
}
