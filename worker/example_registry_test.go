package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

// A worker registers itself in the store while it runs; the registry tells
// which waiting tasks no live worker can execute (here: a task of handler
// "b", which this worker lacks, submitted by a newer producer).
func Example_registry() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	queue := uniqueQueue("deploy")
	w, err := worker.New(worker.Config{
		Store: st, Logger: slog.New(slog.DiscardHandler), // ID: hostname-pid-random
		Queues: map[string]worker.QueueConfig{queue: {Concurrency: 4}},
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
	if _, err := c.Submit(ctx, client.Task{Queue: queue, Handler: "b", Delay: time.Hour}); err != nil {
		log.Fatal(err)
	}

	reg, _ := store.RegistryOf(st)
	var ws []store.WorkerInfo
	deadline := time.Now().Add(10 * time.Second)
	for len(ws) == 0 { // the worker registers as it starts
		if ws, err = reg.Workers(ctx, store.WorkersParams{Queue: queue}); err != nil {
			log.Fatal(err)
		}
		if len(ws) == 0 {
			if time.Now().After(deadline) {
				log.Fatal("the worker did not register within 10s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Println(ws[0].ID == w.ID(), ws[0].Handlers, ws[0].Slots, ws[0].Stale)
	us, err := reg.UnservedHandlers(ctx, store.UnservedParams{Queues: []string{queue}})
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range us {
		fmt.Printf("%d task of handler %s: no worker has registered it\n", u.Tasks, u.Handler)
	}

	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Stop(stop); err != nil {
		log.Fatal(err)
	}
	ws, err = reg.Workers(ctx, store.WorkersParams{Queue: queue})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("registered after Stop:", len(ws))
	// Output:
	// true [a] 4 false
	// 1 task of handler b: no worker has registered it
	// registered after Stop: 0
}
