package tasks_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

// List the tasks waiting in a queue, then cancel one: it goes to the
// dead-letter queue with a CANCELLED attempt naming who and why.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rdq-tasks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "rdq.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	for _, order := range []string{"41", "42"} {
		if _, err := c.Submit(ctx, client.Task{Queue: "shipping", Handler: "ship", IdempotencyKey: "order-" + order, Delay: time.Hour}); err != nil {
			log.Fatal(err)
		}
	}

	lt, err := tasks.New(st, tasks.Config{})
	if err != nil {
		log.Fatal(err)
	}
	page, err := lt.List(ctx, store.StatePending, tasks.Filter{Queue: "shipping"}, tasks.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("waiting:", len(page.Tasks))

	t, err := lt.ByKey(ctx, "shipping", "order-42")
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
