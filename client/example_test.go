package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
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
	st, err := pgstore.New(pool, pgstore.Config{Schema: "rdq_example_client"})
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

// Submitting a task with an idempotency key: submitting it again returns
// the task already stored.
func Example() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	task := client.Task{
		Queue:          uniqueQueue("emails"),
		Handler:        "send-welcome",
		Payload:        []byte(`{"user":42}`),
		ContentType:    "application/json",
		IdempotencyKey: "welcome-42",
	}
	first, err := c.Submit(ctx, task)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Task.Status, "duplicate:", first.Duplicate)

	again, err := c.Submit(ctx, task)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same task:", again.Task.ID == first.Task.ID, "duplicate:", again.Duplicate)
	// Output:
	// PENDING duplicate: false
	// same task: true duplicate: true
}

// Handing rdq a call that just failed: the failure is recorded as attempt 1
// and the task is retried by a worker.
func ExampleClient_Submit_firstFailure() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	c, err := client.New(client.Config{Store: st, ID: "checkout"})
	if err != nil {
		log.Fatal(err)
	}
	callErr := errors.New("payment gateway: 503 service unavailable")
	res, err := c.Submit(ctx, client.Task{
		Queue:        uniqueQueue("payments"),
		Handler:      "capture",
		Payload:      []byte(`{"order":"A-1001"}`),
		FirstFailure: callErr,
	})
	if err != nil {
		log.Fatal(err)
	}
	_, attempts, err := c.Get(ctx, res.Task.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range attempts {
		fmt.Printf("attempt %d by %s: %s (%s) %s\n", a.Number, a.WorkerID, a.Outcome, a.ErrorType, a.Message)
	}
	// Output:
	// attempt 1 by checkout: RETRYABLE_FAILURE (*errors.errorString) payment gateway: 503 service unavailable
}

// Submitting a batch in one round trip. Results are in input order.
func ExampleClient_SubmitMany() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	queue := uniqueQueue("thumbnails")
	results, err := c.SubmitMany(ctx, []client.Task{
		{Queue: queue, Handler: "resize", Payload: []byte("img-1"), IdempotencyKey: "img-1"},
		{Queue: queue, Handler: "resize", Payload: []byte("img-2"), IdempotencyKey: "img-2"},
		{Queue: queue, Handler: "resize", Payload: []byte("img-1"), IdempotencyKey: "img-1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		fmt.Printf("%d: %s duplicate=%v\n", i, r.Task.Payload, r.Duplicate)
	}

	// An invalid task fails the whole batch, naming its index.
	_, err = c.SubmitMany(ctx, []client.Task{
		{Queue: queue, Handler: "resize"},
		{Queue: queue, Handler: ""},
	})
	fmt.Println(err)
	// Output:
	// 0: img-1 duplicate=false
	// 1: img-2 duplicate=false
	// 2: img-1 duplicate=true
	// client: task 1: rdq: invalid input: handler name is empty
}
