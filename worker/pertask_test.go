package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// A task's own MaxAttempts replaces the queue's: with a queue budget of 10,
// a task that asked for 2 is dead after 2 failed attempts, and one that
// asked for more than the queue allows tasks to ask is lowered to the
// limit.
func TestTaskMaxAttemptsReplacesThePolicys(t *testing.T) {
	e := newEnv(t)
	pol := fastPolicy(10)
	pol.TaskMaxAttempts = 3
	fail := errors.New("down")
	e.newWorker(worker.Config{Queues: map[string]worker.QueueConfig{"q": {Policy: pol, Concurrency: 2}}},
		map[string]worker.Handler{"h": func(ctx context.Context, t *rdq.Task) error { return fail }})
	two := e.submit(client.Task{Queue: "q", Handler: "h", MaxAttempts: 2})
	task, history := e.waitStatus(two, rdq.StatusDead, 10*time.Second)
	if task.MaxAttempts != 2 || len(history) != 2 {
		t.Fatalf("task with MaxAttempts 2: dead after %d attempts (MaxAttempts %d), want 2", len(history), task.MaxAttempts)
	}
	// Submitted past the client's check (a client without the policy
	// allows the default limit of 100): the worker holds it to 3.
	many := e.submit(client.Task{Queue: "q", Handler: "h", MaxAttempts: 50})
	_, history = e.waitStatus(many, rdq.StatusDead, 10*time.Second)
	if len(history) != 3 {
		t.Fatalf("task asking for 50 attempts on a queue allowing 3: dead after %d attempts, want 3", len(history))
	}
}

// A task's own MaxAttempts bounds its lost executions too: a task that
// asked for 2 attempts, on a queue whose budget is 10, is dead once the
// worker reclaims its second expired lease.
func TestTaskMaxAttemptsBoundsLostExecutions(t *testing.T) {
	e := newEnv(t)
	// The worker reclaims the queue's expired leases but has no handler
	// for the task, so only the test claims it.
	e.newWorker(worker.Config{
		Queues:          map[string]worker.QueueConfig{"q": {Policy: fastPolicy(10)}},
		ReclaimInterval: 20 * time.Millisecond,
	}, map[string]worker.Handler{"other": func(ctx context.Context, t *rdq.Task) error { return nil }})
	id := e.submit(client.Task{Queue: "q", Handler: "lost", MaxAttempts: 2})
	for lost := 1; lost <= 2; lost++ {
		var claimed []*rdq.Task
		waitFor(t, 10*time.Second, func() error {
			var err error
			claimed, err = e.st.Claim(context.Background(), store.ClaimParams{
				Queues: []string{"q"}, Handlers: []string{"lost"}, Limit: 1, Lease: 10 * time.Millisecond, WorkerID: "gone"})
			if err == nil && len(claimed) == 0 {
				tk, _ := e.get(id)
				err = fmt.Errorf("task not claimable: %s, %d attempts", tk.Status, tk.Attempts)
			}
			return err
		})
		waitFor(t, 10*time.Second, func() error {
			if tk, _ := e.get(id); tk.Status == rdq.StatusInFlight {
				return fmt.Errorf("execution %d lost, not reclaimed yet", lost)
			}
			return nil
		})
	}
	task, history := e.get(id)
	if task.Status != rdq.StatusDead || len(history) != 2 {
		t.Fatalf("task with MaxAttempts 2 after two lost executions: %s with %d attempts, want DEAD with 2", task.Status, len(history))
	}
	for _, a := range history {
		if a.Outcome != rdq.OutcomeLeaseExpired || a.WorkerID != "gone" {
			t.Errorf("attempt %+v, want a LEASE_EXPIRED of worker gone", a)
		}
	}
}

// A task's own Timeout replaces the queue's.
func TestTaskTimeoutReplacesTheQueues(t *testing.T) {
	e := newEnv(t)
	e.newWorker(worker.Config{Queues: map[string]worker.QueueConfig{"q": {Policy: fastPolicy(1), Timeout: time.Minute}}},
		map[string]worker.Handler{"h": func(ctx context.Context, t *rdq.Task) error {
			<-ctx.Done()
			return ctx.Err()
		}})
	id := e.submit(client.Task{Queue: "q", Handler: "h", Timeout: 50 * time.Millisecond})
	_, history := e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	if len(history) != 1 || history[0].ErrorType != "timeout" || history[0].Message != "handler timed out after 50ms" {
		t.Fatalf("history %+v, want one timeout after the task's 50ms", history)
	}
}

// A snooze puts the task back without spending an attempt or writing
// history; the task's Snoozes counts it. Past the policy's MaxSnoozes a
// snooze is a failed attempt of type "snoozed".
func TestSnoozeSpendsNoAttempt(t *testing.T) {
	e := newEnv(t)
	pol := fastPolicy(2)
	pol.MaxSnoozes = 3
	var runs atomic.Int32
	e.newWorker(worker.Config{Queues: map[string]worker.QueueConfig{"q": {Policy: pol}}},
		map[string]worker.Handler{
			"later": func(ctx context.Context, t *rdq.Task) error {
				if runs.Add(1) <= 3 {
					return rdq.Snooze(time.Millisecond)
				}
				return nil
			},
			"never": func(ctx context.Context, t *rdq.Task) error { return rdq.Snooze(time.Millisecond) },
		})
	id := e.submit(client.Task{Queue: "q", Handler: "later"})
	task, history := e.waitStatus(id, rdq.StatusSucceeded, 10*time.Second)
	if task.Attempts != 1 || task.Snoozes != 3 || len(history) != 1 || history[0].Outcome != rdq.OutcomeSuccess {
		t.Fatalf("after 3 snoozes and a success: attempts %d, snoozes %d, history %+v; want 1 attempt, 3 snoozes, one SUCCESS", task.Attempts, task.Snoozes, history)
	}

	// Snoozing forever: 3 free snoozes, then each snooze is an attempt
	// until the budget of 2 is spent.
	id = e.submit(client.Task{Queue: "q", Handler: "never"})
	task, history = e.waitStatus(id, rdq.StatusDead, 10*time.Second)
	if task.Snoozes != 3 || len(history) != 2 {
		t.Fatalf("a task that always snoozes: snoozes %d, %d attempts; want 3 and 2", task.Snoozes, len(history))
	}
	for _, a := range history {
		if a.ErrorType != "snoozed" || a.Outcome != rdq.OutcomeRetryableFailure {
			t.Fatalf("attempt %+v, want a RETRYABLE_FAILURE of type snoozed", a)
		}
	}
}
