package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// regBugs are deliberate defects of the reference registry, each of which
// the kit's Registry part must detect.
type regBugs struct {
	refreshResetsStart bool // a refresh replaces StartedAt
	neverExpire        bool // expired entries are listed and kept
	staleServes        bool // stale workers count as serving
	deadLetterServed   bool // DeadLetterUnserved ignores live workers
}

// memRegistry is the reference store.WorkerRegistry over a memStore.
type memRegistry struct {
	*memStore
	rmu     sync.Mutex
	workers map[string]*memWorker
	rbugs   regBugs
}

type memWorker struct {
	info          store.WorkerInfo
	stale, expire time.Duration
}

var _ store.WorkerRegistry = (*memRegistry)(nil)

func (m *memRegistry) RegisterWorker(_ context.Context, p store.RegisterWorkerParams) error {
	if err := store.ValidateRegistration(p); err != nil {
		return err
	}
	now := clock(p.Now)
	m.rmu.Lock()
	defer m.rmu.Unlock()
	for id, w := range m.workers {
		if id != p.Worker.ID && !m.rbugs.neverExpire && !now.Before(w.info.LastSeen.Add(w.expire)) {
			delete(m.workers, id)
		}
	}
	info := p.Worker
	info.Queues = slices.Compact(slices.Sorted(slices.Values(info.Queues)))
	info.Handlers = slices.Compact(slices.Sorted(slices.Values(info.Handlers)))
	info.StartedAt, info.LastSeen, info.Stale = now, now, false
	if old, ok := m.workers[info.ID]; ok && !m.rbugs.refreshResetsStart {
		info.StartedAt = old.info.StartedAt
	}
	m.workers[info.ID] = &memWorker{info: info, stale: p.StaleAfter, expire: p.ExpireAfter}
	return nil
}

func (m *memRegistry) DeregisterWorker(_ context.Context, id string) error {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	delete(m.workers, id)
	return nil
}

// live returns the unexpired workers at now, each with Stale set.
func (m *memRegistry) live(now time.Time) []store.WorkerInfo {
	var out []store.WorkerInfo
	for _, w := range m.workers {
		if !m.rbugs.neverExpire && !now.Before(w.info.LastSeen.Add(w.expire)) {
			continue
		}
		info := w.info
		info.Stale = !now.Before(info.LastSeen.Add(w.stale))
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b store.WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (m *memRegistry) served(now time.Time, queue, handler string) bool {
	for _, w := range m.live(now) {
		if (!w.Stale || m.rbugs.staleServes) && w.Serves(queue, handler) {
			return true
		}
	}
	return false
}

func (m *memRegistry) Workers(_ context.Context, p store.WorkersParams) ([]store.WorkerInfo, error) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	out := []store.WorkerInfo{}
	for _, w := range m.live(clock(p.Now)) {
		if p.Queue == "" || slices.Contains(w.Queues, p.Queue) {
			out = append(out, w)
		}
	}
	return out, nil
}

func (m *memRegistry) UnservedHandlers(_ context.Context, p store.UnservedParams) ([]store.UnservedHandler, error) {
	if p.DueOnly && len(p.Queues) == 0 {
		return nil, fmt.Errorf("%w: DueOnly needs at least one queue", rdq.ErrInvalid)
	}
	now := clock(p.Now)
	m.rmu.Lock()
	defer m.rmu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	by := map[[2]string]*store.UnservedHandler{}
	for _, mt := range m.tasks {
		t := mt.t
		if t.Status != rdq.StatusPending || (len(p.Queues) > 0 && !slices.Contains(p.Queues, t.Queue)) || m.served(now, t.Queue, t.Handler) {
			continue
		}
		if p.DueOnly && t.NextAttemptAt.After(now) {
			continue
		}
		k := [2]string{t.Queue, t.Handler}
		u := by[k]
		if u == nil {
			u = &store.UnservedHandler{Queue: t.Queue, Handler: t.Handler, OldestDue: t.NextAttemptAt}
			by[k] = u
		}
		u.Tasks++
		if t.NextAttemptAt.Before(u.OldestDue) {
			u.OldestDue = t.NextAttemptAt
		}
	}
	out := []store.UnservedHandler{}
	for _, u := range by {
		u.Waiting = max(now.Sub(u.OldestDue), 0)
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b store.UnservedHandler) int {
		return strings.Compare(a.Queue+"\x00"+a.Handler, b.Queue+"\x00"+b.Handler)
	})
	return out, nil
}

func (m *memRegistry) DeadLetterUnserved(_ context.Context, p store.DeadLetterUnservedParams) (int64, error) {
	if err := store.ValidateDeadLetterUnserved(p); err != nil {
		return 0, err
	}
	now := clock(p.Now)
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if m.served(now, p.Queue, p.Handler) && !m.rbugs.deadLetterServed {
		return 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	due := m.sorted(func(mt *memTask) bool {
		return mt.t.Status == rdq.StatusPending && mt.t.Queue == p.Queue && mt.t.Handler == p.Handler &&
			!mt.t.NextAttemptAt.After(now.Add(-p.Grace))
	}, func(a, b *memTask) int { return a.t.NextAttemptAt.Compare(b.t.NextAttemptAt) })
	if len(due) > p.Limit {
		due = due[:p.Limit]
	}
	var ids []rdq.ID
	for _, mt := range due {
		m.record(mt, store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: p.Failure, WorkerID: p.Actor}, 0, now)
		mt.t.Status, mt.t.FinishedAt, mt.t.UpdatedAt = rdq.StatusDead, now, now
		ids = append(ids, mt.t.ID)
	}
	if len(ids) > 0 {
		m.addAudit(now, store.AuditEntry{Actor: p.Actor, Action: "dead_letter_unserved", IDs: ids, Count: int64(len(ids)), Reason: p.Failure.Message})
	}
	return int64(len(ids)), nil
}

func memRegistryHarness(b regBugs) Harness {
	h := memHarness(memBugs{})
	var (
		mu     sync.Mutex
		stores = map[string]store.Store{}
	)
	newStore := h.NewStore
	h.NewStore = func(t testing.TB) (store.Store, string) {
		s, locator := newStore(t)
		r := &memRegistry{memStore: s.(*memStore), workers: map[string]*memWorker{}, rbugs: b}
		mu.Lock()
		defer mu.Unlock()
		stores[locator] = r
		return r, locator
	}
	h.Open = func(_ context.Context, locator string) (store.Store, func() error, error) {
		mu.Lock()
		defer mu.Unlock()
		s := stores[locator]
		if s == nil {
			return nil, nil, errors.New("no in-memory store " + locator + " in this process")
		}
		return s, func() error { return nil }, nil
	}
	h.Capabilities.Registry = true
	return h
}

// TestReferenceRegistry checks the Registry part against a registry that
// keeps the contract.
func TestReferenceRegistry(t *testing.T) {
	h := memRegistryHarness(regBugs{})
	t.Run("Capabilities", func(t *testing.T) { checkCapabilities(t, h) })
	t.Run("Registry", func(t *testing.T) { testRegistry(t, h) })
}

const envRegBug = "STORETEST_SELFTEST_REGISTRY_BUG"

var regBugSet = map[string]regBugs{
	"refresh-resets-start": {refreshResetsStart: true},
	"never-expire":         {neverExpire: true},
	"stale-serves":         {staleServes: true},
	"dead-letter-served":   {deadLetterServed: true},
	"undeclared-registry":  {}, // a correct registry whose harness hides it
}

// TestBrokenRegistry runs the Registry part on the defect named by
// STORETEST_SELFTEST_REGISTRY_BUG; TestKitDetectsRegistryBugs runs it in a
// child process and expects it to fail.
func TestBrokenRegistry(t *testing.T) {
	name := os.Getenv(envRegBug)
	if name == "" {
		t.Skip("run by TestKitDetectsRegistryBugs")
	}
	h := memRegistryHarness(regBugSet[name])
	if name == "undeclared-registry" {
		h.Capabilities.Registry = false
	}
	t.Run("Capabilities", func(t *testing.T) { checkCapabilities(t, h) })
	t.Run("Registry", func(t *testing.T) { testRegistry(t, h) })
}

// TestKitDetectsRegistryBugs proves the Registry part fails on every
// defect, and Capabilities on a harness that hides the registry.
func TestKitDetectsRegistryBugs(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name := range regBugSet {
		part := "Registry"
		if name == "undeclared-registry" {
			part = "Capabilities"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestBrokenRegistry$/^"+part+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), envRegBug+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the kit passed (or could not run: %v) on a registry with defect %s:\n%s", err, name, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenRegistry/"+part) {
				t.Fatalf("the kit did not fail in %s on a registry with defect %s:\n%s", part, name, out)
			}
		})
	}
}
