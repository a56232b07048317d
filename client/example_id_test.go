package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
)

// Choose the task's ID before submitting, so a Submit that fails without
// saying whether the task was stored (a connection lost around the commit)
// can simply be repeated: the repeat returns the stored task as a
// duplicate instead of creating a second one.
func ExampleTask_id() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}

	task := client.Task{
		ID:      rdq.NewID(), // chosen once, kept across retries
		Queue:   uniqueQueue("invoices"),
		Handler: "send-invoice",
		Payload: []byte(`{"invoice":1017}`),
	}
	var res client.Result
	for try := 1; try <= 3; try++ {
		if res, err = c.Submit(ctx, task); err == nil {
			break
		}
		log.Printf("submit failed (try %d), repeating with the same ID: %v", try, err)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored:", res.Task.ID == task.ID)

	// A repeat after a success that went unnoticed is harmless.
	again, err := c.Submit(ctx, task)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("duplicate:", again.Duplicate, "same task:", again.Task.ID == task.ID)
	// Output:
	// stored: true
	// duplicate: true same task: true
}

// Schedule the first attempt for an absolute time instead of after a delay.
func ExampleTask_runAt() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	tomorrow := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	res, err := c.Submit(ctx, client.Task{
		Queue:   uniqueQueue("reports"),
		Handler: "daily-report",
		RunAt:   tomorrow,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("due within a second of RunAt:", res.Task.NextAttemptAt.Sub(tomorrow).Abs() < time.Second)
	// Output:
	// due within a second of RunAt: true
}
