package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

// TestConcurrentEnqueueSharingKeysDoesNotDeadlock submits many batches at
// once that share idempotency keys in different orders. Inserting rows in
// batch order makes two batches wait on each other's keys (40P01); every
// call must succeed, and each key must name one task.
func TestConcurrentEnqueueSharingKeysDoesNotDeadlock(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	const calls, keys = 40, 500
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Warm the pool, so the calls start together rather than staggered by
	// connection set-up.
	var warm sync.WaitGroup
	for range 8 {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if _, err := st.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "warm", Handler: "h"}}}); err != nil {
				t.Error(err)
			}
		}()
	}
	warm.Wait()

	var wg sync.WaitGroup
	errs := make([]error, calls)
	results := make([][]store.EnqueueResult, calls)
	start := make(chan struct{})
	for c := range calls {
		order := rand.Perm(keys)
		tasks := make([]store.NewTask, keys)
		for i, k := range order {
			tasks[i] = store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h", IdempotencyKey: fmt.Sprintf("key-%d", k)}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[c], errs[c] = st.Enqueue(ctx, store.EnqueueParams{Tasks: tasks})
		}()
	}
	close(start)
	wg.Wait()

	owner := map[string]rdq.ID{}
	for c, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", c, err)
			continue
		}
		for _, r := range results[c] {
			k := r.Task.IdempotencyKey
			if id, ok := owner[k]; ok && id != r.Task.ID {
				t.Errorf("key %s names two tasks: %s and %s", k, id, r.Task.ID)
			}
			owner[k] = r.Task.ID
		}
	}
	if err := errors.Join(errs...); err == nil && len(owner) != keys {
		t.Errorf("%d keys have a task, want %d", len(owner), keys)
	}
}
