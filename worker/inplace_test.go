package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// claimCounter wraps a store and counts how often Claim returned each task;
// the accessors of package store see through it to the wrapped store's
// capabilities.
type claimCounter struct {
	store.Store
	mu      sync.Mutex
	claimed map[rdq.ID]int
}

func newClaimCounter(s store.Store) *claimCounter {
	return &claimCounter{Store: s, claimed: map[rdq.ID]int{}}
}

func (c *claimCounter) Unwrap() store.Store { return c.Store }

func (c *claimCounter) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	tasks, err := c.Store.Claim(ctx, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tasks {
		c.claimed[t.ID]++
	}
	return tasks, err
}

func (c *claimCounter) claims(id rdq.ID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claimed[id]
}

// plainStore hides every optional capability of the store it embeds.
type plainStore struct{ store.Store }

// counterValue reads the counter name{queue} from reg (0 when absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name, queue string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queue {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A retry due before the next poll runs again in the worker that ran the
// failed attempt, under a new lease the store kept for it, without a claim:
// each attempt is recorded under its own, greater token, and the handler
// sees the attempt and token of each run.
func TestRetryInPlaceRunsTheRetryUnderANewLease(t *testing.T) {
	e := newEnv(t)
	counted := newClaimCounter(e.st)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var seen []string
	w := e.newWorker(worker.Config{
		Store:        counted,
		Metrics:      reg,
		PollInterval: time.Second,
		Queues:       map[string]worker.QueueConfig{"q": {Policy: fastPolicy(5)}},
	}, map[string]worker.Handler{
		"flaky": func(ctx context.Context, task *rdq.Task) error {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%d@%d", task.NextAttempt(), task.LeaseToken))
			mu.Unlock()
			if task.NextAttempt() <= 2 {
				return errFlaky
			}
			return nil
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "flaky"})
	task, attempts := e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)

	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure, rdq.OutcomeSuccess)
	if n := counted.claims(id); n != 1 {
		t.Errorf("the task was claimed %d times, want 1: its retries ran in place", n)
	}
	if n := counterValue(t, reg, "rdq_worker_retried_in_place_total", "q"); n != 2 {
		t.Errorf("rdq_worker_retried_in_place_total = %v, want 2", n)
	}
	if task.Attempts != 3 {
		t.Errorf("task attempts %d, want 3", task.Attempts)
	}
	var want []string
	for i, a := range attempts {
		if a.WorkerID != w.ID() {
			t.Errorf("attempt %d by %q, want %q", a.Number, a.WorkerID, w.ID())
		}
		if i > 0 && a.LeaseToken <= attempts[i-1].LeaseToken {
			t.Errorf("lease tokens not increasing: %d then %d", attempts[i-1].LeaseToken, a.LeaseToken)
		}
		want = append(want, fmt.Sprintf("%d@%d", i+1, a.LeaseToken))
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("handler saw attempt@token %v, want %v", seen, want)
	}
}

// A store without the capability gets every retry through the queue, as
// before: a claim per attempt.
func TestRetryWithoutInPlaceGoesThroughTheQueue(t *testing.T) {
	e := newEnv(t)
	counted := newClaimCounter(plainStore{e.st})
	e.newWorker(worker.Config{
		Store:  counted,
		Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(5)}},
	}, map[string]worker.Handler{
		"flaky": func(ctx context.Context, task *rdq.Task) error {
			if task.NextAttempt() <= 2 {
				return errFlaky
			}
			return nil
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "flaky"})
	_, attempts := e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure, rdq.OutcomeSuccess)
	if n := counted.claims(id); n != 3 {
		t.Errorf("the task was claimed %d times, want 3", n)
	}
}

// A retry is not kept in a queue paused while its attempt ran: the attempt
// is recorded and the task waits, unrun, for the queue to be resumed.
func TestRetryInPlaceStopsAtAPausedQueue(t *testing.T) {
	e := newEnv(t)
	calls := newCounter()
	running, fail := make(chan struct{}), make(chan struct{})
	e.newWorker(worker.Config{
		PollInterval: time.Second,
		Queues:       map[string]worker.QueueConfig{"q": {Policy: fastPolicy(5)}},
	}, map[string]worker.Handler{
		"flaky": func(ctx context.Context, task *rdq.Task) error {
			if calls.inc(task.ID) == 1 {
				close(running)
				<-fail
			}
			return errFlaky
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "flaky"})
	<-running
	e.pauseQueue("q")
	close(fail)
	task, attempts := e.waitStatus(id, rdq.StatusPending, 10*time.Second)
	if task.Status != rdq.StatusPending || task.Attempts != 1 || len(attempts) != 1 {
		t.Fatalf("task %s with %d attempts (%d recorded), want PENDING with 1", task.Status, task.Attempts, len(attempts))
	}
	if n := calls.get(id); n != 1 {
		t.Errorf("handler ran %d times in a paused queue, want 1", n)
	}
}

// A worker that stops while a retry kept in place waits out its delay gives
// the task back, due at once and unrun, with no attempt counted for it.
func TestStopReleasesARetryKeptInPlace(t *testing.T) {
	e := newEnv(t)
	calls := newCounter()
	reg := prometheus.NewRegistry()
	policy := rdq.Policy{MaxAttempts: 5, InitialBackoff: 30 * time.Second, Multiplier: 1, MaxBackoff: 30 * time.Second, Jitter: rdq.NoJitter}
	w := e.createWorker(worker.Config{
		Metrics:      reg,
		PollInterval: time.Minute,
		Queues:       map[string]worker.QueueConfig{"q": {Policy: policy}},
	}, map[string]worker.Handler{
		"flaky": func(ctx context.Context, task *rdq.Task) error {
			calls.inc(task.ID)
			return errFlaky
		},
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := e.submit(client.Task{Queue: "q", Handler: "flaky"})
	deadline := time.Now().Add(10 * time.Second)
	for counterValue(t, reg, "rdq_worker_retried_in_place_total", "q") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the retry was not kept in place within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	task, attempts := e.get(id)
	if task.Status != rdq.StatusPending || task.Attempts != 1 || len(attempts) != 1 || !task.LeaseExpiresAt.IsZero() {
		t.Errorf("after Stop: task %s, %d attempts (%d recorded), lease until %v; want PENDING, 1, released", task.Status, task.Attempts, len(attempts), task.LeaseExpiresAt)
	}
	if time.Until(task.NextAttemptAt) > time.Second {
		t.Errorf("released task due at %v, want now", task.NextAttemptAt)
	}
	if n := calls.get(id); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}
