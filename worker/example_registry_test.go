package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// A worker registers itself in the store while it runs; the registry tells
// which waiting tasks no live worker can execute (here: a task of handler
// "b", which this worker lacks, submitted by a newer producer).
func Example_registry() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rdq-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "rdq.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Print(err)
		}
	}()
	if err := st.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	w, err := worker.New(worker.Config{
		Store: st, ID: "worker-1", Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]worker.QueueConfig{"deploy": {Concurrency: 4}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Handle("a", func(context.Context, *rdq.Task) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Submit(ctx, client.Task{Queue: "deploy", Handler: "b", Delay: time.Hour}); err != nil {
		log.Fatal(err)
	}

	reg, _ := store.RegistryOf(st)
	var ws []store.WorkerInfo
	deadline := time.Now().Add(10 * time.Second)
	for len(ws) == 0 { // the worker registers as it starts
		if ws, err = reg.Workers(ctx, store.WorkersParams{}); err != nil {
			log.Fatal(err)
		}
		if len(ws) == 0 {
			if time.Now().After(deadline) {
				log.Fatal("the worker did not register within 10s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Println(ws[0].ID, ws[0].Queues, ws[0].Handlers, ws[0].Slots, ws[0].Stale)
	us, err := reg.UnservedHandlers(ctx, store.UnservedParams{})
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range us {
		fmt.Printf("%d task of handler %s in queue %s: no worker has registered it\n", u.Tasks, u.Handler, u.Queue)
	}

	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Stop(stop); err != nil {
		log.Fatal(err)
	}
	ws, err = reg.Workers(ctx, store.WorkersParams{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("registered after Stop:", len(ws))
	// Output:
	// worker-1 [deploy] [a] 4 false
	// 1 task of handler b in queue deploy: no worker has registered it
	// registered after Stop: 0
}
