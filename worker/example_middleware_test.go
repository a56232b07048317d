package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/worker"
)

// Middleware wraps every handler: here it adds a tenant read from the task's
// headers to the context, and logs each attempt's result. It runs inside the
// attempt's span and timeout, and a panic in it is a failed attempt like a
// handler's.
func ExampleWorker_Use() {
	ctx := context.Background()
	st, closeStore := openStore(ctx)
	defer closeStore()

	queue := uniqueQueue("reports")
	w, err := worker.New(worker.Config{
		Store:        st,
		Queues:       map[string]worker.QueueConfig{queue: {Timeout: 10 * time.Second}},
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	type tenantKey struct{}
	withTenant := func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, t *rdq.Task) error {
			return next(context.WithValue(ctx, tenantKey{}, t.Headers["tenant"]), t)
		}
	}
	logResult := func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, t *rdq.Task) error {
			err := next(ctx, t)
			fmt.Printf("%s attempt %d: error %v\n", t.Handler, t.NextAttempt(), err)
			return err
		}
	}
	// withTenant is outermost: logResult and the handler see the tenant.
	if err := w.Use(withTenant, logResult); err != nil {
		log.Fatal(err)
	}
	if err := w.Handle("build-report", func(ctx context.Context, t *rdq.Task) error {
		fmt.Println("building the report of", ctx.Value(tenantKey{}))
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
	res, err := c.Submit(ctx, client.Task{Queue: queue, Handler: "build-report", Headers: map[string]string{"tenant": "acme"}})
	if err != nil {
		log.Fatal(err)
	}
	task, _ := waitDone(st, res.Task.ID)
	fmt.Println(task.Status)
	// Output:
	// building the report of acme
	// build-report attempt 1: error <nil>
	// SUCCEEDED
}
