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

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// TestMain is Main, so the chaos test can run this binary as its worker
// processes, on the SQLite store with the defect TestBrokenStore names.
func TestMain(m *testing.M) { Main(m, sqliteHarness(sqliteBug(os.Getenv(envBug)))) }

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
		// LockTask marks the task as held by another transaction, which
		// claims and reclaims pass over.
		LockTask: func(t testing.TB, locator string, id rdq.ID) func() {
			mu.Lock()
			s := stores[locator]
			mu.Unlock()
			s.mu.Lock()
			defer s.mu.Unlock()
			s.locked[id] = true
			return func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				delete(s.locked, id)
			}
		},
		FailAudit: func(t testing.TB, locator string) {
			mu.Lock()
			s := stores[locator]
			mu.Unlock()
			s.mu.Lock()
			defer s.mu.Unlock()
			s.failAudit = true
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
	"audit-after-change":    {auditAfterChange: true},
	"no-notify":             {noNotify: true},
	"locked-blocks-claim":   {lockedBlocksClaim: true},
	"last-completion-wins":  {lastCompletionWins: true},
	"ignore-handlers":       {ignoreHandlers: true},
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
	if part, ok := sqliteBugParts[sqliteBug(name)]; ok {
		runSQLitePart(t, sqliteHarness(sqliteBug(name)), part)
		return
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
//
// The parts the reference store lacks (live tasks, handler pauses, the
// console's reads, chaos) are checked on the SQLite store with a defect
// laid over it.
func TestKitDetectsBugs(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string][]string{}
	for name := range bugs {
		parts := []string{"Contract", "Property"}
		switch name {
		case "undeclared-admin":
			parts = []string{"Capabilities"}
		case "ignore-pause":
			parts = []string{"Pause"}
		case "audit-after-change":
			parts = []string{"Admin"}
		case "no-notify":
			parts = []string{"Notifications"}
		case "locked-blocks-claim", "last-completion-wins":
			parts = []string{"Contract"}
		}
		all[name] = parts
	}
	for bug, part := range sqliteBugParts {
		all[string(bug)] = []string{part}
	}
	for name, parts := range all {
		for _, part := range parts {
			t.Run(name+"/"+part, func(t *testing.T) {
				t.Parallel()
				cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestBrokenStore$/^"+part+"$", "-rapid.nofailfile", "-rapid.shrinktime=2s", "-rapid.steps=60", "-test.count=1")
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
