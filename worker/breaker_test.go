package worker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/benchtest"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// outageStores are the stores the breaker's proof runs on.
var outageStores = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"postgres", func(t *testing.T) store.Store { st, _ := pgtest.NewStore(t); return st }},
	{"sqlite", func(t *testing.T) store.Store {
		st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		})
		if err := st.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

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
// per cool-off, not by the number of tasks. RDQ_OUTAGE_TASKS and
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
	for _, s := range outageStores {
		t.Run(s.name, func(t *testing.T) {
			without := benchtest.Outage(t, s.open(t), benchtest.OutageConfig{
				Tasks: tasks, Down: down, UntilDead: true, Policy: stormPolicy, Workers: workers, Concurrency: concurrency})
			with := benchtest.Outage(t, s.open(t), benchtest.OutageConfig{
				Tasks: tasks, Down: without.Down, Policy: stormPolicy, Workers: workers, Concurrency: concurrency,
				Breaker: breaker, Logger: testLogger()})
			t.Logf("%s, %d tasks, %s outage, MaxAttempts 5:", s.name, tasks, without.Down.Round(time.Millisecond))
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
		})
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
