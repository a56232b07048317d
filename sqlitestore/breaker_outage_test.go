package sqlitestore_test

import (
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/benchtest"
	"github.com/srjn45/rdq/worker"
)

// TestBreakerOutageProof is the circuit breaker's proof on SQLite, as the
// worker package runs it on PostgreSQL: a downstream fails every call for a
// while, then recovers. Without the breaker, retrying blindly, every task
// exhausts its attempts and ends dead (the outage lasts at least as long as
// that takes, so the proof holds on a slow machine too); with the breaker,
// through an outage just as long, none does, and the attempts spent during
// the outage are bounded by what the workers had in flight when it tripped
// plus one probe per cool-off, not by the number of tasks.
// RDQ_OUTAGE_TASKS and RDQ_OUTAGE_SECONDS make it the full-size run the
// README reports (10000 tasks, an outage of at least 30 s, 100 slots per
// worker):
//
//	RDQ_OUTAGE_TASKS=10000 RDQ_OUTAGE_SECONDS=30 go test -run TestBreakerOutageProof -v -timeout 30m ./sqlitestore/
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
	// Five attempts with short backoff: a task's budget is gone within a
	// second of the downstream going away.
	policy := rdq.Policy{MaxAttempts: 5, InitialBackoff: 20 * time.Millisecond, Multiplier: 2, MaxBackoff: 200 * time.Millisecond, Jitter: rdq.NoJitter}
	breaker := &worker.Breaker{Window: 10 * time.Second, MinFailedTasks: 10, FailureRatio: 0.5,
		CoolOff: 250 * time.Millisecond, MaxCoolOff: time.Second}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	blind, _ := newStore(t)
	guarded, _ := newStore(t)
	without := benchtest.Outage(t, blind, benchtest.OutageConfig{
		Tasks: tasks, Down: down, UntilDead: true, Policy: policy, Workers: workers, Concurrency: concurrency})
	with := benchtest.Outage(t, guarded, benchtest.OutageConfig{
		Tasks: tasks, Down: without.Down, Policy: policy, Workers: workers, Concurrency: concurrency,
		Breaker: breaker, Logger: logger})
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
	// Per worker: its slots in flight when the breaker tripped (twice, for
	// a claim racing the pause) and the failures its own window judged
	// (each worker judges its own attempts, so up to MinFailedTasks each
	// before the first trip); then one probe per cool-off. A constant,
	// whatever the number of tasks.
	bound := int64(workers*(2*concurrency+breaker.MinFailedTasks) + int(without.Down/breaker.CoolOff) + 1)
	if with.OutageAttempts > bound {
		t.Errorf("with the breaker %d attempts were spent during the outage, want at most %d", with.OutageAttempts, bound)
	}
}
