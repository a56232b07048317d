package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memHarness runs the kit's single-process parts on the in-memory
// reference store. The chaos test needs a store that other processes can
// open, which an in-memory one is not; its checker is tested below.
func memHarness(bugs memBugs) Harness {
	var (
		mu     sync.Mutex
		stores = map[string]*memStore{}
	)
	return Harness{
		NewStore: func(t testing.TB) (store.Store, string) {
			s := newMemStore()
			s.bugs = bugs
			mu.Lock()
			defer mu.Unlock()
			locator := fmt.Sprintf("mem-%d", len(stores))
			stores[locator] = s
			return s, locator
		},
		// Open reaches a store of this process only: enough for every
		// test but the chaos test.
		Open: func(_ context.Context, locator string) (store.Store, func() error, error) {
			mu.Lock()
			defer mu.Unlock()
			s := stores[locator]
			if s == nil {
				return nil, nil, errors.New("no in-memory store " + locator + " in this process")
			}
			return s, func() error { return nil }, nil
		},
		Capabilities: Capabilities{Notifications: true, Admin: true, Pause: true},
	}
}

func runSingleProcess(t *testing.T, h Harness) {
	t.Run("Capabilities", func(t *testing.T) { checkCapabilities(t, h) })
	t.Run("Contract", func(t *testing.T) { runContract(t, h) })
	t.Run("Admin", func(t *testing.T) { runAdmin(t, h) })
	t.Run("Notifications", func(t *testing.T) { testNotifications(t, h) })
	t.Run("Pause", func(t *testing.T) { testPause(t, h) })
	t.Run("Property", func(t *testing.T) { runProperty(t, h) })
}

// TestReferenceStore checks the kit against a store that keeps the
// contract: every test must pass.
func TestReferenceStore(t *testing.T) {
	runSingleProcess(t, memHarness(memBugs{}))
}

// envBug selects the defect TestBrokenStore injects.
const envBug = "STORETEST_SELFTEST_BUG"

var bugs = map[string]memBugs{
	"accept-stale-finish":   {acceptStaleFinish: true},
	"claim-not-due":         {claimNotDue: true},
	"reclaim-keeps-token":   {reclaimKeepsToken: true},
	"heartbeat-no-extend":   {heartbeatNoExtend: true},
	"redrive-keeps-attempt": {redriveKeepsAttempt: true},
	"number-from-count":     {numberFromCount: true},
	"release-counts":        {releaseCounts: true},
	"ignore-pause":          {ignorePause: true},
	"undeclared-admin":      {}, // a correct store whose harness hides store.Admin
}

// TestBrokenStore runs the kit on a store with the defect named by
// STORETEST_SELFTEST_BUG; TestKitDetectsBugs runs it in a child process and
// expects it to fail.
func TestBrokenStore(t *testing.T) {
	name := os.Getenv(envBug)
	if name == "" {
		t.Skip("run by TestKitDetectsBugs")
	}
	h := memHarness(bugs[name])
	if name == "undeclared-admin" {
		h.Capabilities.Admin = false
	}
	runSingleProcess(t, h)
}

// TestKitDetectsBugs proves the kit's sensitivity: for each deliberate
// defect, both the contract tests and the property test must fail; a
// harness that leaves out a capability its store has must fail too.
func TestKitDetectsBugs(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name := range bugs {
		parts := []string{"Contract", "Property"}
		switch name {
		case "undeclared-admin":
			parts = []string{"Capabilities"}
		case "ignore-pause":
			parts = []string{"Pause"}
		}
		for _, part := range parts {
			t.Run(name+"/"+part, func(t *testing.T) {
				t.Parallel()
				cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestBrokenStore$/^"+part+"$", "-rapid.nofailfile", "-rapid.shrinktime=2s", "-test.count=1")
				cmd.Env = append(os.Environ(), envBug+"="+name)
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatalf("the kit passed (or could not run: %v) on a store with defect %s:\n%s", err, name, out)
				}
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStore/"+part) {
					t.Fatalf("the kit did not fail in %s on a store with defect %s:\n%s", part, name, out)
				}
			})
		}
	}
}

func TestChaosMinimums(t *testing.T) {
	got := ChaosConfig{Processes: 2, Tasks: 5000}.withMinimums()
	want := ChaosConfig{Processes: MinChaosProcesses, Tasks: 5000, Kills: MinChaosKills}
	if got != want {
		t.Fatalf("withMinimums() = %+v, want %+v", got, want)
	}
}

func TestParseExecLine(t *testing.T) {
	id := rdq.NewID()
	ev, err := parseExecLine("end " + id.String() + " 7 1700000000000000001 ok")
	if err != nil {
		t.Fatal(err)
	}
	if ev.kind != "end" || ev.task != id || ev.token != 7 || ev.at.UnixNano() != 1700000000000000001 || ev.result != "ok" {
		t.Fatalf("parsed %+v", ev)
	}
	for _, bad := range []string{"", "start", "start x 1 2", "start " + id.String() + " x 2", "end " + id.String() + " 1 2", "end " + id.String() + " 1 2 maybe", "begin " + id.String() + " 1 2"} {
		if _, err := parseExecLine(bad); err == nil {
			t.Errorf("parseExecLine(%q) succeeded", bad)
		}
	}
}

// chaosFixture is a consistent chaos outcome: one task, three executions
// (the second killed mid-task), and its history.
func chaosFixture() (map[rdq.ID]*rdq.Task, map[rdq.ID][]rdq.Attempt, []*execution) {
	id := rdq.NewID()
	t0 := time.Unix(1700000000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tasks := map[rdq.ID]*rdq.Task{id: {ID: id, Status: rdq.StatusSucceeded, Attempts: 3}}
	atts := map[rdq.ID][]rdq.Attempt{id: {
		{TaskID: id, Number: 1, Outcome: rdq.OutcomeRetryableFailure, LeaseToken: 1, WorkerID: "w1"},
		{TaskID: id, Number: 2, Outcome: rdq.OutcomeLeaseExpired, LeaseToken: 2, WorkerID: "w2"},
		{TaskID: id, Number: 3, Outcome: rdq.OutcomeSuccess, LeaseToken: 4, WorkerID: "w3"},
	}}
	execs := []*execution{
		{worker: "w1", task: id, token: 1, start: ms(0), end: ms(30), result: "err"},
		{worker: "w2", task: id, token: 2, start: ms(100), end: ms(120), killed: true},
		{worker: "w3", task: id, token: 4, start: ms(2000), end: ms(2030), result: "ok"},
	}
	return tasks, atts, execs
}

func TestCheckChaos(t *testing.T) {
	tasks, atts, execs := chaosFixture()
	if rep, errs := checkChaos(tasks, atts, execs); len(errs) != 0 || rep.killed != 1 || rep.leaseExpired != 1 || rep.succeeded != 1 || rep.executions != 3 {
		t.Fatalf("consistent outcome: report %+v, errors %v", rep, errs)
	}
	cases := map[string]struct {
		mutate func(*rdq.Task, []rdq.Attempt, []*execution) []*execution
		want   string
	}{
		"overlap": {func(_ *rdq.Task, _ []rdq.Attempt, es []*execution) []*execution {
			es[2].start = es[1].end.Add(-time.Millisecond)
			return es
		}, "overlap"},
		"start order": {func(_ *rdq.Task, _ []rdq.Attempt, es []*execution) []*execution {
			es[1].start, es[1].end = es[0].start.Add(-time.Second), es[0].start.Add(-time.Second)
			return es
		}, "not after"},
		"killed not recorded": {func(_ *rdq.Task, a []rdq.Attempt, es []*execution) []*execution {
			a[1].Outcome = rdq.OutcomeRetryableFailure
			return es
		}, "not recorded as a LEASE_EXPIRED"},
		"lost worker": {func(_ *rdq.Task, a []rdq.Attempt, es []*execution) []*execution {
			a[1].WorkerID = "someone-else"
			return es
		}, "names worker"},
		"not terminal": {func(tk *rdq.Task, _ []rdq.Attempt, es []*execution) []*execution {
			tk.Status = rdq.StatusPending
			return es
		}, "want SUCCEEDED or DEAD"},
		"number gap": {func(_ *rdq.Task, a []rdq.Attempt, es []*execution) []*execution {
			a[2].Number = 4
			return es
		}, "not 1..n"},
		"same token twice": {func(_ *rdq.Task, _ []rdq.Attempt, es []*execution) []*execution {
			dup := *es[2]
			dup.start, dup.end = es[2].end.Add(time.Second), es[2].end.Add(2*time.Second)
			return append(es, &dup)
		}, "two executions with lease token"},
		"ok recorded as failure": {func(_ *rdq.Task, a []rdq.Attempt, es []*execution) []*execution {
			es[0].result = "ok"
			return es
		}, "want SUCCESS"},
		"attempt without execution": {func(_ *rdq.Task, _ []rdq.Attempt, es []*execution) []*execution {
			return es[1:]
		}, "matches no execution"},
		"succeeded without success": {func(tk *rdq.Task, a []rdq.Attempt, es []*execution) []*execution {
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
		_, errs := checkChaos(tasks, atts, execs)
		found := false
		for _, err := range errs {
			found = found || strings.Contains(err.Error(), c.want)
		}
		if !found {
			t.Errorf("%s: errors %v, want one containing %q", name, errs, c.want)
		}
	}
}
