package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/benchtest"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// stormPolicy is five attempts with short backoff: a task's budget is gone
// within a second of a downstream going away.
var stormPolicy = rdq.Policy{MaxAttempts: 5, InitialBackoff: 20 * time.Millisecond, Multiplier: 2, MaxBackoff: 200 * time.Millisecond, Jitter: rdq.NoJitter}

// TestBreakerOutageProof is the breaker's proof, small enough for every
// test run: a downstream fails every call for a while, then recovers.
// Without the breaker, retrying blindly, every task exhausts its attempts
// and ends dead (the outage lasts at least as long as that takes, so the
// proof holds on a slow machine too); with the breaker, through an outage
// just as long, none does, and the attempts spent during the outage are
// bounded by what the workers had in flight when it tripped plus one probe
// per cool-off, not by the number of tasks. It runs on PostgreSQL;
// sqlitestore's tests run the same proof on SQLite. RDQ_OUTAGE_TASKS and
// RDQ_OUTAGE_SECONDS make it the full-size run the README reports (10000
// tasks, an outage of at least 30 s, 100 slots per worker):
//
//	RDQ_OUTAGE_TASKS=10000 RDQ_OUTAGE_SECONDS=30 go test -run TestBreakerOutageProof -v ./worker/
func TestBreakerOutageProof(t *testing.T) {
	tasks, down := 300, 2*time.Second
	workers, concurrency := 2, 10
	if v := os.Getenv("RDQ_OUTAGE_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("RDQ_OUTAGE_TASKS=%q: %v", v, err)
		}
		tasks = n
	}
	if v := os.Getenv("RDQ_OUTAGE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("RDQ_OUTAGE_SECONDS=%q: %v", v, err)
		}
		down = time.Duration(n) * time.Second
		concurrency = 100 // enough slots for blind retries to keep up with a fixed outage
	}
	breaker := &worker.Breaker{Window: 10 * time.Second, MinFailedTasks: 10, FailureRatio: 0.5,
		CoolOff: 250 * time.Millisecond, MaxCoolOff: time.Second}
	blind, _ := pgtest.NewStore(t)
	guarded, _ := pgtest.NewStore(t)
	without := benchtest.Outage(t, blind, benchtest.OutageConfig{
		Tasks: tasks, Down: down, UntilDead: true, Policy: stormPolicy, Workers: workers, Concurrency: concurrency})
	with := benchtest.Outage(t, guarded, benchtest.OutageConfig{
		Tasks: tasks, Down: without.Down, Policy: stormPolicy, Workers: workers, Concurrency: concurrency,
		Breaker: breaker, Logger: testLogger()})
	t.Logf("%d tasks, %s outage, MaxAttempts 5:", tasks, without.Down.Round(time.Millisecond))
	t.Logf("  without breaker: dead %d, succeeded %d, attempts during outage %d, attempts %d, drained in %s",
		without.Dead, without.Succeeded, without.OutageAttempts, without.Attempts, without.Elapsed.Round(time.Millisecond))
	t.Logf("  with breaker:    dead %d, succeeded %d, attempts during outage %d, attempts %d, drained in %s",
		with.Dead, with.Succeeded, with.OutageAttempts, with.Attempts, with.Elapsed.Round(time.Millisecond))
	if without.Dead == 0 {
		t.Errorf("without the breaker no task ended dead: the outage is too short to prove anything")
	}
	if with.Dead != 0 {
		t.Errorf("with the breaker %d tasks ended dead, want 0", with.Dead)
	}
	if with.Succeeded != int64(tasks) {
		t.Errorf("with the breaker %d of %d tasks succeeded", with.Succeeded, tasks)
	}
	// Per worker: its slots in flight when the breaker tripped
	// (twice, for a claim racing the pause) and the failures its
	// own window judged (each worker judges its own attempts, so
	// up to MinFailedTasks each before the first trip); then one
	// probe per cool-off. A constant, whatever the number of tasks.
	bound := int64(workers*(2*concurrency+breaker.MinFailedTasks) + int(without.Down/breaker.CoolOff) + 1)
	if with.OutageAttempts > bound {
		t.Errorf("with the breaker %d attempts were spent during the outage, want at most %d", with.OutageAttempts, bound)
	}
}

// TestBreakerIgnoresPoisonTask: one task failing on every attempt, among
// tasks that succeed, never trips the breaker: it exhausts its own budget
// and goes dead alone, and nothing is paused or audited.
func TestBreakerIgnoresPoisonTask(t *testing.T) {
	e := newEnv(t)
	poison := e.submit(client.Task{Queue: "q", Handler: "call", Payload: []byte(`"poison"`)})
	var good []rdq.ID
	for range 30 {
		good = append(good, e.submit(client.Task{Queue: "q", Handler: "call", Payload: []byte(`"fine"`)}))
	}
	e.newWorker(worker.Config{Queues: map[string]worker.QueueConfig{"q": {
		Policy:  rdq.Policy{MaxAttempts: 8, InitialBackoff: time.Millisecond, Multiplier: 1, MaxBackoff: time.Millisecond, Jitter: rdq.NoJitter},
		Breaker: &worker.Breaker{MinFailedTasks: 2, FailureRatio: 0.01, CoolOff: time.Hour, MaxCoolOff: time.Hour},
	}}}, map[string]worker.Handler{"call": func(ctx context.Context, t *rdq.Task) error {
		if string(t.Payload) == `"poison"` {
			return errors.New("cannot parse this one")
		}
		return nil
	}})
	_, atts := e.waitStatus(poison, rdq.StatusDead, 20*time.Second)
	for _, id := range good {
		e.waitStatus(id, rdq.StatusSucceeded, 20*time.Second)
	}
	if len(atts) != 8 {
		t.Fatalf("poison task history: %d attempts, want all 8", len(atts))
	}
	paused, err := e.st.PausedHandlers(t.Context(), "")
	if err != nil || len(paused) != 0 {
		t.Fatalf("PausedHandlers = %+v, %v; want none", paused, err)
	}
	audit, err := e.st.ListAudit(t.Context(), store.ListAuditParams{Actor: worker.BreakerActor, Limit: 10})
	if err != nil || len(audit) != 0 {
		t.Fatalf("breaker audit entries = %+v, %v; want none", audit, err)
	}
}

// TestBreakerProbeJudgedByTrippingCause: a probe failing with the cause
// that tripped the breaker re-opens it, and the pause and its audit entry
// keep the original cause; a probe failing with another cause is an
// ordinary failure of its task: the handler resumes, and every task ends
// succeeded.
func TestBreakerProbeJudgedByTrippingCause(t *testing.T) {
	e := newEnv(t)
	down := errors.New("dial tcp 10.0.0.7:443: connect: connection refused")
	conflict := errors.New("409 conflict: the order changed since it was read")
	var ids []rdq.ID
	for range 20 {
		ids = append(ids, e.submit(client.Task{Queue: "q", Handler: "call", Payload: []byte(`{}`)}))
	}
	// Before the pause and at the first probe the downstream is down; the
	// second probe (trip 2) meets a conflict of its own; after that every
	// call succeeds.
	var conflicted atomic.Bool
	e.newWorker(worker.Config{PollInterval: 20 * time.Millisecond, Queues: map[string]worker.QueueConfig{"q": {
		Policy:  rdq.Policy{MaxAttempts: 100, InitialBackoff: 5 * time.Millisecond, Multiplier: 1, MaxBackoff: 5 * time.Millisecond, Jitter: rdq.NoJitter},
		Breaker: &worker.Breaker{MinFailedTasks: 5, FailureRatio: 0.5, CoolOff: 100 * time.Millisecond, MaxCoolOff: time.Second},
	}}}, map[string]worker.Handler{"call": func(ctx context.Context, _ *rdq.Task) error {
		if conflicted.Load() {
			return nil
		}
		ps, err := e.st.PausedHandlers(ctx, "q")
		if err != nil {
			return err
		}
		if len(ps) == 1 && ps[0].Trips >= 2 {
			conflicted.Store(true)
			return conflict
		}
		return down
	}})

	var tripped store.HandlerPause
	waitFor(t, 30*time.Second, func() error {
		ps, err := e.st.PausedHandlers(t.Context(), "q")
		if err != nil {
			return err
		}
		if len(ps) != 1 || ps[0].Trips < 2 {
			return fmt.Errorf("paused handlers %+v, want call re-opened after a failed probe", ps)
		}
		tripped = ps[0]
		return nil
	})
	if want := rdq.Describe(down).Fingerprint; tripped.Fingerprint != want {
		t.Errorf("re-opened pause fingerprint %s, want the outage's %s", tripped.Fingerprint, want)
	}
	if !strings.Contains(tripped.Reason, "attempts failed within") || !strings.Contains(tripped.Reason, "probe failed") {
		t.Errorf("re-opened pause reason %q, want the original cause and the failed probe", tripped.Reason)
	}

	for _, id := range ids {
		e.waitStatus(id, rdq.StatusSucceeded, 30*time.Second)
	}
	ps, err := e.st.PausedHandlers(t.Context(), "q")
	if err != nil || len(ps) != 0 {
		t.Fatalf("PausedHandlers = %+v, %v; want none", ps, err)
	}
	audit, err := e.st.ListAudit(t.Context(), store.ListAuditParams{Actor: worker.BreakerActor, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Newest first: the resume after the conflicting probe, then the
	// pauses, each naming the original cause.
	var pauses, resumes int
	for i, a := range audit {
		switch a.Action {
		case "pause_handler":
			pauses++
			if !strings.Contains(a.Reason, "attempts failed within") {
				t.Errorf("pause audit entry %d: reason %q, want the original cause", i, a.Reason)
			}
		case "resume_handler":
			resumes++
			if i == 0 && !strings.Contains(a.Reason, "another cause") {
				t.Errorf("last resume reason %q, want the probe's other cause", a.Reason)
			}
		}
	}
	if pauses != tripped.Trips || resumes != 1 {
		t.Errorf("audit: %d pauses, %d resumes; want %d pauses (no re-open after the conflicting probe) and 1 resume: %+v",
			pauses, resumes, tripped.Trips, audit)
	}
}

// TestBreakerProbeNeverSnoozes: a probe must be answered, so a probe that
// snoozes spends an attempt (of type "snoozed", another cause than the
// outage's) and the handler resumes at once, instead of the pause waiting
// for the probe's lease to expire.
func TestBreakerProbeNeverSnoozes(t *testing.T) {
	e := newEnv(t)
	down := errors.New("dial tcp 10.0.0.7:443: connect: connection refused")
	var ids []rdq.ID
	for range 20 {
		ids = append(ids, e.submit(client.Task{Queue: "q", Handler: "call", Payload: []byte(`{}`)}))
	}
	var probe atomic.Pointer[rdq.ID]
	e.newWorker(worker.Config{PollInterval: 20 * time.Millisecond, Queues: map[string]worker.QueueConfig{"q": {
		Policy:  rdq.Policy{MaxAttempts: 100, InitialBackoff: 5 * time.Millisecond, Multiplier: 1, MaxBackoff: 5 * time.Millisecond, Jitter: rdq.NoJitter},
		Lease:   30 * time.Second,
		Breaker: &worker.Breaker{MinFailedTasks: 5, FailureRatio: 0.5, CoolOff: 100 * time.Millisecond, MaxCoolOff: time.Second},
	}}}, map[string]worker.Handler{"call": func(ctx context.Context, task *rdq.Task) error {
		if probe.Load() != nil {
			return nil
		}
		ps, err := e.st.PausedHandlers(ctx, "q")
		if err != nil {
			return err
		}
		if len(ps) == 1 && ps[0].Probe.ID == task.ID {
			probe.Store(&task.ID)
			return rdq.Snooze(time.Hour)
		}
		return down
	}})

	waitFor(t, 30*time.Second, func() error {
		if probe.Load() == nil {
			return errors.New("no probe has run")
		}
		return nil
	})
	// Well within the probe's 30 s lease.
	waitFor(t, 10*time.Second, func() error {
		ps, err := e.st.PausedHandlers(t.Context(), "q")
		if err != nil || len(ps) != 0 {
			return fmt.Errorf("paused handlers %+v, %v after the probe snoozed; want the handler resumed", ps, err)
		}
		return nil
	})
	id := *probe.Load()
	task, history := e.waitStatus(id, rdq.StatusPending, 10*time.Second)
	if task.Snoozes != 0 || task.Status != rdq.StatusPending || len(history) == 0 || history[len(history)-1].ErrorType != "snoozed" {
		t.Fatalf("the probe that snoozed: %s, %d snoozes, history %+v; want PENDING, no snooze, its last attempt of type snoozed", task.Status, task.Snoozes, history)
	}
	for _, other := range ids {
		if other != id {
			e.waitStatus(other, rdq.StatusSucceeded, 30*time.Second)
		}
	}
}

// TestBreakerTripsOnLettersOnlyIDs: an outage whose messages carry ids made
// only of letters ("order ordqwxyzabc: ...") groups under one fingerprint
// and trips the breaker before the tasks' budgets are spent; once the
// downstream is back every task succeeds and none is dead.
func TestBreakerTripsOnLettersOnlyIDs(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(12, 1422))
	var ids []rdq.ID
	for range 60 {
		letters := make([]byte, 8)
		for i := range letters {
			letters[i] = byte('a' + rng.IntN(26))
		}
		ids = append(ids, e.submit(client.Task{Queue: "q", Handler: "call", Payload: []byte(`"ord` + string(letters) + `"`)}))
	}
	var down atomic.Bool
	down.Store(true)
	e.newWorker(worker.Config{PollInterval: 20 * time.Millisecond, Queues: map[string]worker.QueueConfig{"q": {
		Policy:  rdq.Policy{MaxAttempts: 8, InitialBackoff: 10 * time.Millisecond, Multiplier: 2, MaxBackoff: 100 * time.Millisecond, Jitter: rdq.NoJitter},
		Breaker: &worker.Breaker{Window: 10 * time.Second, MinFailedTasks: 10, FailureRatio: 0.5, CoolOff: 200 * time.Millisecond, MaxCoolOff: 400 * time.Millisecond},
	}}}, map[string]worker.Handler{"call": func(ctx context.Context, task *rdq.Task) error {
		if down.Load() {
			return fmt.Errorf("order %s: downstream unavailable", strings.Trim(string(task.Payload), `"`))
		}
		return nil
	}})
	var paused []store.HandlerPause
	waitFor(t, 30*time.Second, func() error {
		var err error
		if paused, err = e.st.PausedHandlers(t.Context(), "q"); err != nil || len(paused) > 0 {
			return err
		}
		for _, id := range ids {
			if task, _ := e.get(id); task.Status != rdq.StatusDead {
				return errors.New("the breaker has not tripped")
			}
		}
		return nil // every task dead: the breaker never tripped
	})
	if len(paused) == 0 {
		t.Fatal("every task went dead during the outage; the breaker never tripped")
	}
	if want := rdq.Describe(fmt.Errorf("order %s: downstream unavailable", "ordqwxyzabc")).Fingerprint; paused[0].Fingerprint != want {
		t.Errorf("pause fingerprint %s, want the outage's %s", paused[0].Fingerprint, want)
	}
	down.Store(false)
	for _, id := range ids {
		e.waitStatus(id, rdq.StatusSucceeded, 30*time.Second)
	}
}
