package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
)

// exampleStore opens a store in a fresh schema of the test database and
// returns it with a function that drops the schema.
func exampleStore() (*pgstore.Store, func()) {
	ctx := context.Background()
	pool, err := pgtest.NewPool(ctx)
	if err != nil {
		log.Fatal(err)
	}
	schema := pgtest.SchemaName()
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	return st, func() {
		if err := pgtest.DropSchema(pool, schema); err != nil {
			log.Print(err)
		}
		pool.Close()
	}
}

// Submitting a task with an idempotency key: submitting it again returns
// the task already stored.
func Example() {
	st, cleanup := exampleStore()
	defer cleanup()
	ctx := context.Background()

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	task := client.Task{
		Queue:          "emails",
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
	st, cleanup := exampleStore()
	defer cleanup()
	ctx := context.Background()

	c, err := client.New(client.Config{Store: st, ID: "checkout"})
	if err != nil {
		log.Fatal(err)
	}
	callErr := errors.New("payment gateway: 503 service unavailable")
	res, err := c.Submit(ctx, client.Task{
		Queue:        "payments",
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
	st, cleanup := exampleStore()
	defer cleanup()
	ctx := context.Background()

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	results, err := c.SubmitMany(ctx, []client.Task{
		{Queue: "thumbnails", Handler: "resize", Payload: []byte("img-1"), IdempotencyKey: "img-1"},
		{Queue: "thumbnails", Handler: "resize", Payload: []byte("img-2"), IdempotencyKey: "img-2"},
		{Queue: "thumbnails", Handler: "resize", Payload: []byte("img-1"), IdempotencyKey: "img-1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		fmt.Printf("%d: %s duplicate=%v\n", i, r.Task.Payload, r.Duplicate)
	}

	// An invalid task fails the whole batch, naming its index.
	_, err = c.SubmitMany(ctx, []client.Task{
		{Queue: "thumbnails", Handler: "resize"},
		{Queue: "thumbnails", Handler: ""},
	})
	fmt.Println(err)
	// Output:
	// 0: img-1 duplicate=false
	// 1: img-2 duplicate=false
	// 2: img-1 duplicate=true
	// client: task 1: rdq: invalid input: handler name is empty
}
