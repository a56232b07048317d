package tasks_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

// openStore opens the example's store: the PostgreSQL database that
// RDQ_DATABASE_URL names, in a schema of its own, migrated (Migrate is safe
// to run at every start). It returns the store with a function that closes
// its pool.
func openStore(ctx context.Context) (*pgstore.Store, func()) {
	pool, err := pgxpool.New(ctx, os.Getenv("RDQ_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := pgstore.New(pool, pgstore.Config{Schema: "rdq_example_tasks"})
	if err == nil {
		err = st.Migrate(ctx)
	}
	if err != nil {
		pool.Close()
		log.Fatal(err)
	}
	return st, pool.Close
}

// List the tasks waiting in a queue, then cancel one: it goes to the
// dead-letter queue with a CANCELLED attempt naming who and why.
func Example() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()
	queue := "shipping-" + rdq.NewID().String() // a queue of this run's own
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	for _, order := range []string{"41", "42"} {
		if _, err := c.Submit(ctx, client.Task{Queue: queue, Handler: "ship", IdempotencyKey: "order-" + order, Delay: time.Hour}); err != nil {
			log.Fatal(err)
		}
	}

	lt, err := tasks.New(st, tasks.Config{})
	if err != nil {
		log.Fatal(err)
	}
	page, err := lt.List(ctx, store.StatePending, tasks.Filter{Queue: queue}, tasks.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("waiting:", len(page.Tasks))

	t, err := lt.ByKey(ctx, queue, "order-42")
	if err != nil {
		log.Fatal(err)
	}
	errs, err := lt.Cancel(ctx, []rdq.ID{t.ID}, tasks.Change{Actor: "alice", Reason: "order 42 was refunded"})
	if err != nil || errs[0] != nil {
		log.Fatal(err, errs)
	}
	d, err := lt.Show(ctx, t.ID)
	if err != nil {
		log.Fatal(err)
	}
	last := d.Attempts[len(d.Attempts)-1]
	fmt.Println(d.Task.Status, last.Outcome, last.WorkerID+":", last.Message)
	// Output:
	// waiting: 2
	// DEAD CANCELLED alice: order 42 was refunded
}
