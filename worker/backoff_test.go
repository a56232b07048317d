package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// finishRecorder is a store that keeps every completion the worker hands to
// Finish.
type finishRecorder struct {
	*pgstore.Store
	mu          sync.Mutex
	completions []store.Completion
}

func (r *finishRecorder) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	r.mu.Lock()
	r.completions = append(r.completions, p.Completions...)
	r.mu.Unlock()
	return r.Store.Finish(ctx, p)
}

// With a policy without jitter, every retry waits the policy's delay for
// the attempt number that failed (the second backoff twice the first with
// multiplier 2), and the task dies with its last attempt: in the same
// completion, at that attempt's end, without a further backoff.
func TestBackoffFollowsAttemptNumbers(t *testing.T) {
	e := newEnv(t)
	rec := &finishRecorder{Store: e.st}
	policy := rdq.Policy{
		MaxAttempts:    3,
		InitialBackoff: 40 * time.Millisecond,
		Multiplier:     2,
		MaxBackoff:     time.Second,
		Jitter:         rdq.NoJitter,
	}
	calls := newCounter()
	e.newWorker(worker.Config{
		Store:  rec,
		Queues: map[string]worker.QueueConfig{"q": {Policy: policy}},
	}, map[string]worker.Handler{
		"broken": func(ctx context.Context, task *rdq.Task) error {
			calls.inc(task.ID)
			return errFlaky
		},
	})
	id := e.submit(client.Task{Queue: "q", Handler: "broken"})
	task, attempts := e.waitStatus(id, rdq.StatusDead, 20*time.Second)

	if n := calls.get(id); n != 3 {
		t.Errorf("handler ran %d times, want MaxAttempts (3)", n)
	}
	checkAttempts(t, attempts, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure, rdq.OutcomeRetryableFailure)
	rec.mu.Lock()
	cs := append([]store.Completion(nil), rec.completions...)
	rec.mu.Unlock()
	if len(cs) != 3 {
		t.Fatalf("%d completions, want one per attempt (3): %+v", len(cs), cs)
	}
	for i, want := range []time.Duration{policy.InitialBackoff, 2 * policy.InitialBackoff} {
		if cs[i].Status != rdq.StatusPending || cs[i].RetryIn != want {
			t.Errorf("completion of attempt %d: %s in %s, want a retry in %s", i+1, cs[i].Status, cs[i].RetryIn, want)
		}
	}
	if cs[1].RetryIn != 2*cs[0].RetryIn {
		t.Errorf("second backoff %s, want twice the first (%s)", cs[1].RetryIn, cs[0].RetryIn)
	}
	if cs[2].Status != rdq.StatusDead || cs[2].Attempt == nil {
		t.Errorf("completion of attempt 3: %s with attempt %v, want dead with the attempt recorded", cs[2].Status, cs[2].Attempt)
	}
	if len(attempts) == 3 && !task.FinishedAt.Equal(attempts[2].FinishedAt) {
		t.Errorf("task died at %s, %s after its last attempt ended; want at that attempt's end",
			task.FinishedAt, task.FinishedAt.Sub(attempts[2].FinishedAt))
	}
}
