// Package storetest is the compliance kit for rdq storage backends: the
// tests a store.Store implementation must pass to be correct.
//
// A backend proves itself with one TestMain and one test function in its own
// package:
//
//	func TestMain(m *testing.M) { storetest.Main(m, harness()) }
//
//	func TestCompliance(t *testing.T) { storetest.Run(t, harness()) }
//
//	func harness() storetest.Harness {
//		return storetest.Harness{
//			NewStore: func(t testing.TB) (store.Store, string) {
//				// a fresh, empty, migrated store for this test, and a
//				// locator that reaches the same data from another process
//			},
//			Open: func(ctx context.Context, locator string) (store.Store, func() error, error) {
//				// open the store a locator names, in a chaos child process
//			},
//			FailAudit: func(t testing.TB, locator string) {
//				// make every later audit write of the store fail
//			},
//			Capabilities: storetest.Capabilities{Admin: true, Notifications: true},
//		}
//	}
//
// Run checks four things:
//
//   - Contract: one subtest per rule of the store.Store contract (package
//     store documents them): enqueue and idempotency, due-only and ordered
//     claims, fencing tokens, heartbeats, finish, release, reclaim of expired
//     leases with their LEASE_EXPIRED attempts, redrive, purge. Time travels
//     through the Now field every method takes, so nothing sleeps.
//   - Admin, Notifications, Pause, Live, PauseHandlers, Registry, Snooze,
//     RetryInPlace, NotDueCounts, WaitingCounts, GroupOrigins,
//     DeadHistogram, DeadGroupKeys and Series, when the Capabilities say the backend has
//     them: every dead-letter filter
//     against a brute-force scan, keyset paging, groups, bulk redrive and
//     purge, the audit log and statistics; push notifications; pausing and
//     resuming queues; listing, retrying now and cancelling live tasks;
//     pausing one handler, probing it after a cool-off and resuming it; the
//     registry of running workers and the tasks none of them serves;
//     snoozing a leased task without counting an attempt; recording a
//     failed attempt and leasing its task again in one step; the console's
//     reads: the tasks not due per queue, the waiting tasks split into
//     retrying, scheduled and held, when a failure group first failed,
//     dead tasks counted by time
//     bucket, and the queues and handlers of each failure group; attempts
//     and their outcomes counted per minute or hour, queue and handler.
//   - Property: a rapid state machine drives random sequences of enqueue,
//     claim, heartbeat, finish (with current and stale tokens), release,
//     reclaim, redrive, retry in place (with RetryInPlace) and time travel,
//     and compares the store with a simple in-memory model after every
//     step.
//   - Chaos: real worker processes (the test binary, re-executed by Main,
//     each running a worker.Worker on a store from Harness.Open) claim and
//     execute tasks while the test kills them with SIGKILL mid-task and
//     starts replacements. Every task must end SUCCEEDED or DEAD, none may
//     be lost, no two executions of a task may overlap (judged by the
//     fencing tokens and the execution intervals the workers log), and
//     every killed execution must appear as a LEASE_EXPIRED attempt with its
//     token and worker. ChaosConfig can make the test bigger, never smaller.
//
// Harness.LockTask (for stores with row locks) lets the contract tests
// check that claims and reclaims pass over locked tasks; Harness.FailAudit
// (required with Admin) lets the admin tests check that a mutation whose
// audit entry cannot be written changes nothing.
//
// Capabilities only switch off what a backend genuinely lacks (a whole
// interface such as store.Admin); no correctness rule can be skipped, and Run
// fails if a store implements an interface its Capabilities leave out.
//
// Tests are written against the store's contract only: a backend needs
// millisecond (or finer) timestamp precision and must honour the Now field
// of every parameter struct. Subtests run in parallel, each on its own store
// from Harness.NewStore; the property test uses one store, with a queue of
// its own for every generated case.
package storetest

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Capabilities declares the optional parts of the store contract a backend
// implements. Each one corresponds to an interface; Run checks that the
// declaration matches the store, so a capability cannot be left out to skip
// tests that fail.
type Capabilities struct {
	// Notifications: the store implements store.Notifier and delivers a
	// hint for a queue after tasks are enqueued into it.
	Notifications bool
	// Admin: the store implements store.Admin (the dead-letter queue and
	// operations interface).
	Admin bool
	// Pause: the store implements store.Pauser (pausing queues).
	Pause bool
	// Live: the store implements store.LiveTasks (listing, retrying now
	// and cancelling tasks that are not dead).
	Live bool
	// PauseHandlers: the store implements store.HandlerPauser (pausing
	// one handler of a queue; the circuit breaker's storage).
	PauseHandlers bool
	// Registry: the store implements store.WorkerRegistry (the registry of
	// running workers and the tasks none of them serves).
	Registry bool
	// Snooze: the store implements store.Snoozer (putting a leased task
	// back to wait without counting an attempt).
	Snooze bool
	// RetryInPlace: the store implements store.InPlaceRetrier (recording a
	// failed attempt and leasing its task again to the same worker).
	RetryInPlace bool
	// NotDueCounts: the store implements store.NotDueCounter (counting,
	// per queue, the waiting tasks not due yet).
	NotDueCounts bool
	// WaitingCounts: the store implements store.WaitingCounter (splitting,
	// per queue, the waiting tasks into retrying, scheduled and held).
	WaitingCounts bool
	// GroupOrigins: the store implements store.GroupOriginReader (when a
	// failure group's failure first happened).
	GroupOrigins bool
	// DeadHistogram: the store implements store.DeadHistogrammer
	// (counting dead tasks by when they went dead).
	DeadHistogram bool
	// DeadGroupKeys: the store implements store.DeadGroupKeyer (the
	// queues and handlers of each failure group's dead tasks).
	DeadGroupKeys bool
	// Series: the store implements store.SeriesReader (attempts and their
	// outcomes counted per minute, queue and handler).
	Series bool
}

// ChaosConfig sizes the multi-process chaos test. Zero fields take the
// minimums; values below a minimum are raised to it, so a backend can make
// the test larger but never smaller.
type ChaosConfig struct {
	// Processes is how many worker processes run at once; at least
	// MinChaosProcesses.
	Processes int
	// Tasks is how many tasks are enqueued; at least MinChaosTasks.
	Tasks int
	// Kills is how many worker processes are killed with SIGKILL while
	// executing a task; at least MinChaosKills.
	Kills int
}

// The minimum size of the chaos test.
const (
	MinChaosProcesses = 4
	MinChaosTasks     = 1000
	MinChaosKills     = 20
)

func (c ChaosConfig) withMinimums() ChaosConfig {
	c.Processes = max(c.Processes, MinChaosProcesses)
	c.Tasks = max(c.Tasks, MinChaosTasks)
	c.Kills = max(c.Kills, MinChaosKills)
	return c
}

// Harness connects the kit to a backend.
type Harness struct {
	// NewStore returns a fresh, empty, migrated store for one test, plus a
	// locator string that Open accepts in another process to reach the
	// same data. It registers the store's teardown with t.Cleanup and
	// fails t if the store cannot be created. Tests run in parallel, so
	// NewStore must be safe to call concurrently, and stores it returns
	// must not share data.
	NewStore func(t testing.TB) (s store.Store, locator string)
	// Open opens the store a locator from NewStore names: in chaos worker
	// processes, and in the test process to check that state persists
	// beyond one handle. close releases what Open acquired.
	Open func(ctx context.Context, locator string) (s store.Store, close func() error, err error)
	// Capabilities declares the optional interfaces the store implements.
	Capabilities Capabilities
	// Chaos sizes the chaos test; the zero value is the minimum size.
	Chaos ChaosConfig
	// LockTask, for a store with row locks, holds in a transaction of its
	// own the lock a concurrent claim or finish of task id would hold
	// (PostgreSQL: SELECT ... FOR UPDATE), until unlock is called. The kit
	// then checks that Claim and ReclaimExpired pass over the locked task
	// at once and take the next one. Nil for a store whose writes lock the
	// whole store (SQLite), where no claim runs beside another write.
	LockTask func(t testing.TB, locator string, id rdq.ID) (unlock func())
	// FailAudit makes every later audit write of the store a locator names
	// fail (a trigger raising on insert into its audit table, say). The kit
	// then checks that a mutation whose audit entry cannot be written fails
	// and changes nothing. Required when Capabilities.Admin is set.
	FailAudit func(t testing.TB, locator string)
}

func (h Harness) validate() error {
	if h.NewStore == nil {
		return errors.New("storetest: Harness.NewStore is nil")
	}
	if h.Open == nil {
		return errors.New("storetest: Harness.Open is nil: the chaos test needs it to reach the store from worker processes")
	}
	if h.Capabilities.Admin && h.FailAudit == nil {
		return errors.New("storetest: Harness.FailAudit is nil: a store with Admin must let the kit check that a mutation whose audit entry cannot be written changes nothing")
	}
	return nil
}

// Run runs the whole compliance kit against the backend h describes: the
// contract tests, the admin and notification tests the Capabilities
// declare, the property test and the multi-process chaos test. The chaos
// test needs Main in the package's TestMain.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if os.Getenv(envChild) != "" {
		t.Fatal("storetest: a chaos worker process is running tests: the package's TestMain must call storetest.Main")
	}
	if err := h.validate(); err != nil {
		t.Fatal(err)
	}
	t.Run("Capabilities", func(t *testing.T) {
		t.Parallel()
		checkCapabilities(t, h)
	})
	t.Run("Contract", func(t *testing.T) { runContract(t, h) })
	if h.Capabilities.Admin {
		t.Run("Admin", func(t *testing.T) { runAdmin(t, h) })
	}
	if h.Capabilities.Notifications {
		t.Run("Notifications", func(t *testing.T) {
			t.Parallel()
			testNotifications(t, h)
		})
	}
	if h.Capabilities.Pause {
		t.Run("Pause", func(t *testing.T) {
			t.Parallel()
			testPause(t, h)
		})
	}
	if h.Capabilities.Live {
		t.Run("Live", func(t *testing.T) { runLive(t, h) })
	}
	if h.Capabilities.PauseHandlers {
		t.Run("PauseHandlers", func(t *testing.T) {
			t.Parallel()
			testHandlerPause(t, h)
		})
	}
	if h.Capabilities.Registry {
		t.Run("Registry", func(t *testing.T) {
			t.Parallel()
			testRegistry(t, h)
		})
	}
	if h.Capabilities.Snooze {
		t.Run("Snooze", func(t *testing.T) {
			t.Parallel()
			testSnooze(t, h)
		})
	}
	if h.Capabilities.RetryInPlace {
		t.Run("RetryInPlace", func(t *testing.T) { runRetryInPlace(t, h) })
	}
	if h.Capabilities.NotDueCounts {
		t.Run("NotDueCounts", func(t *testing.T) {
			t.Parallel()
			testNotDueCounts(t, h)
		})
	}
	if h.Capabilities.WaitingCounts {
		t.Run("WaitingCounts", func(t *testing.T) {
			t.Parallel()
			testWaitingCounts(t, h)
		})
	}
	if h.Capabilities.GroupOrigins {
		t.Run("GroupOrigins", func(t *testing.T) {
			t.Parallel()
			testGroupOrigins(t, h)
		})
	}
	if h.Capabilities.DeadHistogram {
		t.Run("DeadHistogram", func(t *testing.T) {
			t.Parallel()
			testDeadHistogram(t, h)
		})
	}
	if h.Capabilities.DeadGroupKeys {
		t.Run("DeadGroupKeys", func(t *testing.T) {
			t.Parallel()
			testDeadGroupKeys(t, h)
		})
	}
	if h.Capabilities.Series {
		t.Run("Series", func(t *testing.T) {
			t.Parallel()
			testSeries(t, h)
		})
	}
	if h.Capabilities.PauseHandlers && h.Capabilities.Pause {
		t.Run("ProbeInPausedQueue", func(t *testing.T) {
			t.Parallel()
			testProbeInPausedQueue(t, h)
		})
	}
	t.Run("Property", func(t *testing.T) {
		t.Parallel()
		runProperty(t, h)
	})
	t.Run("Chaos", func(t *testing.T) {
		t.Parallel()
		runChaos(t, h)
	})
}

// checkCapabilities fails when the declared capabilities do not match the
// interfaces the store implements (found with the accessors of package
// store, as every caller finds them).
func checkCapabilities(t *testing.T, h Harness) {
	s, _ := h.NewStore(t)
	has := func(_ any, ok bool) bool { return ok }
	for _, c := range []struct {
		flag     string
		declared bool
		iface    string
		has      bool
	}{
		{"Admin", h.Capabilities.Admin, "store.Admin", has(store.AdminOf(s))},
		{"Notifications", h.Capabilities.Notifications, "store.Notifier", has(store.NotifierOf(s))},
		{"Pause", h.Capabilities.Pause, "store.Pauser", has(store.PauserOf(s))},
		{"Live", h.Capabilities.Live, "store.LiveTasks", has(store.LiveTasksOf(s))},
		{"Snooze", h.Capabilities.Snooze, "store.Snoozer", has(store.SnoozerOf(s))},
		{"RetryInPlace", h.Capabilities.RetryInPlace, "store.InPlaceRetrier", has(store.InPlaceRetrierOf(s))},
		{"PauseHandlers", h.Capabilities.PauseHandlers, "store.HandlerPauser", has(store.HandlerPauserOf(s))},
		{"Registry", h.Capabilities.Registry, "store.WorkerRegistry", has(store.RegistryOf(s))},
		{"NotDueCounts", h.Capabilities.NotDueCounts, "store.NotDueCounter", has(store.NotDueCounterOf(s))},
		{"WaitingCounts", h.Capabilities.WaitingCounts, "store.WaitingCounter", has(store.WaitingCounterOf(s))},
		{"GroupOrigins", h.Capabilities.GroupOrigins, "store.GroupOriginReader", has(store.GroupOriginReaderOf(s))},
		{"DeadHistogram", h.Capabilities.DeadHistogram, "store.DeadHistogrammer", has(store.DeadHistogrammerOf(s))},
		{"DeadGroupKeys", h.Capabilities.DeadGroupKeys, "store.DeadGroupKeyer", has(store.DeadGroupKeyerOf(s))},
		{"Series", h.Capabilities.Series, "store.SeriesReader", has(store.SeriesReaderOf(s))},
	} {
		if c.has != c.declared {
			t.Errorf("Capabilities.%s is %v but the store (%T) implementing %s is %v: declare exactly what the store implements",
				c.flag, c.declared, s, c.iface, c.has)
		}
	}
}

// Main is the TestMain of a backend's test package. In a process the chaos
// test started as a worker, it runs the worker and exits; otherwise it runs
// the tests with goleak.VerifyTestMain, which fails the package when
// goroutines leak.
func Main(m *testing.M, h Harness) {
	if os.Getenv(envChild) != "" {
		os.Exit(childMain(h))
	}
	mainCalled.Store(true)
	goleak.VerifyTestMain(m)
}

// mainCalled records that the test binary's TestMain is Main, so the chaos
// test can re-execute it as a worker.
var mainCalled atomic.Bool
