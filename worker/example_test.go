package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// openStore opens the examples' store: the PostgreSQL database that
// RDQ_DATABASE_URL names, in a schema of their own, migrated (Migrate is
// safe to run at every start). It returns the store with a function that
// closes its pool.
func openStore(ctx context.Context) (*pgstore.Store, func()) {
	pool, err := pgxpool.New(ctx, os.Getenv("RDQ_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := pgstore.New(pool, pgstore.Config{Schema: "rdq_example_worker", Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		err = st.Migrate(ctx)
	}
	if err != nil {
		pool.Close()
		log.Fatal(err)
	}
	return st, pool.Close
}

// uniqueQueue returns name with a fresh suffix, so that every run of an
// example has queues of its own in the shared schema.
func uniqueQueue(name string) string { return name + "-" + rdq.NewID().String() }

// waitDone polls until the task has succeeded or gone dead.
func waitDone(st *pgstore.Store, id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		task, attempts, err := st.Get(context.Background(), id)
		if err != nil {
			log.Fatal(err)
		}
		if task.Status == rdq.StatusSucceeded || task.Status == rdq.StatusDead {
			return task, attempts
		}
	}
	log.Fatalf("task %s did not finish", id)
	return nil, nil
}

// A worker runs a handler that fails once and then succeeds; the task's
// history shows both attempts.
func Example() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	queue := uniqueQueue("emails")
	w, err := worker.New(worker.Config{
		Store: st,
		Queues: map[string]worker.QueueConfig{
			queue: {
				Policy:      rdq.Policy{MaxAttempts: 5, InitialBackoff: 10 * time.Millisecond},
				Concurrency: 4,
			},
		},
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Handle("send-welcome", func(ctx context.Context, t *rdq.Task) error {
		if t.NextAttempt() == 1 {
			return errors.New("smtp: connection refused")
		}
		return nil // sent
	}); err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			log.Print(err)
		}
	}()

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Submit(ctx, client.Task{Queue: queue, Handler: "send-welcome", Payload: []byte(`{"user":42}`)})
	if err != nil {
		log.Fatal(err)
	}

	task, attempts := waitDone(st, res.Task.ID)
	fmt.Println(task.Status)
	for _, a := range attempts {
		fmt.Printf("attempt %d: %s %s\n", a.Number, a.Outcome, a.Message)
	}
	// Output:
	// SUCCEEDED
	// attempt 1: RETRYABLE_FAILURE smtp: connection refused
	// attempt 2: SUCCESS
}

// A handler says which failures retrying cannot fix: rdq.Permanent sends the
// task to the dead-letter queue at once, whatever attempts remain.
func ExampleHandler() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	queue := uniqueQueue("orders")
	w, err := worker.New(worker.Config{
		Store:        st,
		Queues:       map[string]worker.QueueConfig{queue: {}},
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Handle("ship", func(ctx context.Context, t *rdq.Task) error {
		var order struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(t.Payload, &order); err != nil {
			return rdq.Permanent(fmt.Errorf("decoding order: %w", err))
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			log.Print(err)
		}
	}()

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Submit(ctx, client.Task{Queue: queue, Handler: "ship", Payload: []byte(`not json`)})
	if err != nil {
		log.Fatal(err)
	}
	task, attempts := waitDone(st, res.Task.ID)
	fmt.Println(task.Status, len(attempts), attempts[0].Outcome)
	fmt.Println(attempts[0].ErrorType)
	// Output:
	// DEAD 1 PERMANENT_FAILURE
	// *json.SyntaxError
}

// A queue with a circuit breaker: while the payment provider is down, the
// breaker trips after ten distinct tasks failed with the same error, and
// pauses the handler on every worker; the other tasks wait with their
// attempts untouched. Once the provider is back, one probe succeeds and the
// handler resumes: no task ends in the dead-letter queue.
func ExampleBreaker() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	var down atomic.Bool
	down.Store(true)
	queue := uniqueQueue("payments")
	start := time.Now()
	w, err := worker.New(worker.Config{
		Store: st,
		Queues: map[string]worker.QueueConfig{
			queue: {
				Policy:      rdq.Policy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond},
				Concurrency: 10,
				Breaker: &worker.Breaker{
					MinFailedTasks: 10,          // distinct tasks failing with one cause
					CoolOff:        time.Second, // then one probe, after the provider is back
				},
			},
		},
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Handle("charge", func(ctx context.Context, t *rdq.Task) error {
		if down.Load() {
			return errors.New("payment provider unavailable")
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	var ids []rdq.ID
	for range 50 {
		res, err := c.Submit(ctx, client.Task{Queue: queue, Handler: "charge", Payload: []byte(`{}`)})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		paused, err := st.PausedHandlers(ctx, queue)
		if err != nil {
			log.Fatal(err)
		}
		if len(paused) == 1 {
			fmt.Println("breaker:", paused[0].State, "by", paused[0].Actor)
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("the breaker did not trip within 30s")
		}
	}
	down.Store(false) // the provider is back

	dead := 0
	for _, id := range ids {
		if task, _ := waitDone(st, id); task.Status == rdq.StatusDead {
			dead++
		}
	}
	fmt.Println("dead:", dead)
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// The breaker's audit entries since the start, oldest first, of this
	// queue (the schema's other queues have breakers too).
	audit, err := st.ListAudit(ctx, store.ListAuditParams{Actor: worker.BreakerActor, Since: start.Add(-time.Minute), Limit: 100})
	if err != nil {
		log.Fatal(err)
	}
	for i := len(audit) - 1; i >= 0; i-- {
		var filter struct{ Queue string }
		if err := json.Unmarshal([]byte(audit[i].Filter), &filter); err != nil {
			log.Fatal(err)
		}
		if filter.Queue == queue {
			fmt.Println(audit[i].Action, audit[i].Details["handler"])
		}
	}
	// Output:
	// breaker: open by breaker
	// dead: 0
	// pause_handler charge
	// resume_handler charge
}
