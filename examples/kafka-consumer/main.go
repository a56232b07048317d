// Command kafka-consumer shows the pattern rdq exists for: a message
// consumer whose handler fails hands the message to rdq and commits its
// offset, instead of blocking the partition, looping through a retry topic,
// or dropping the message into a DLQ topic that holds a bare payload.
//
// The consumer here reads from an in-memory partition so that the example
// runs anywhere; with a real Kafka (or SQS, or RabbitMQ) client only
// consume changes. The rdq side is the same:
//
//   - on failure, client.Submit the message with the error as FirstFailure
//     (attempt 1 of its history) and an idempotency key built from topic,
//     partition and offset, so a rebalance that redelivers the message
//     cannot submit it twice;
//
//   - a worker retries it with the same handler on the queue's backoff
//     schedule, and dead-letters it with its full history when the
//     attempts run out or the error is permanent;
//
//   - a message that failed permanently (rdq.Permanent) goes straight to
//     the dead-letter queue, where it waits for a fix and a redrive
//     instead of being retried.
//
//     go run ./examples/kafka-consumer
//     go run ./examples/kafka-consumer -v   # also print the worker's logs
//     RDQ_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test go run ./examples/kafka-consumer
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
	"github.com/srjn45/rdq/worker"
)

const (
	topic   = "orders"
	queue   = "orders-retry"
	handler = "index-order"
)

// message is what a consumer client hands the application.
type message struct {
	Topic     string
	Partition int
	Offset    int64
	Value     []byte
}

// order is the message body.
type order struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}

// errSearchDown is the transient failure of the downstream search index.
var errSearchDown = errors.New("search index unavailable")

// indexer is the application's handler: the same function serves the
// consumer's first try and rdq's retries.
type indexer struct {
	searchDown atomic.Bool
}

func (ix *indexer) index(_ context.Context, body []byte) error {
	var o order
	if err := json.Unmarshal(body, &o); err != nil {
		return rdq.Permanent(fmt.Errorf("decoding order: %w", err)) // retrying cannot fix bad JSON
	}
	if ix.searchDown.Load() {
		return fmt.Errorf("indexing order %d: %w", o.ID, errSearchDown)
	}
	return nil
}

var verbose = flag.Bool("v", false, "print the worker's logs to stderr")

func main() {
	flag.Parse()
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	url := storeurl.FromEnv()
	st, err := storeurl.Open(ctx, url, storeurl.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("opening %s: %w", storeurl.Describe(url), err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "kafka-consumer: closing the store:", err)
		}
	}()
	fmt.Fprintln(out, "using", storeurl.Describe(url))

	ix := &indexer{}
	ix.searchDown.Store(true) // an outage: every first try fails

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		return err
	}
	w, err := worker.New(worker.Config{
		Store:  st,
		Logger: logger,
		Queues: map[string]worker.QueueConfig{queue: {
			Policy: rdq.Policy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, Jitter: rdq.NoJitter},
		}},
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := w.Handle(handler, func(ctx context.Context, t *rdq.Task) error { return ix.index(ctx, t.Payload) }); err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			fmt.Fprintln(os.Stderr, "kafka-consumer: stopping the worker:", err)
		}
	}()

	// The consumer loop: try once, hand failures to rdq, commit the offset.
	base := time.Now().Unix() * 10 // each run reads new offsets, so its keys are new
	partition := []message{
		{topic, 0, base + 1, []byte(`{"id": 1, "email": "ada@example.com"}`)},
		{topic, 0, base + 2, []byte(`{"id": 2, "email": "alan@example.com"}`)},
		{topic, 0, base + 3, []byte(`{"id": 3, "email": `)}, // truncated by a buggy producer
	}
	var submitted []rdq.ID
	for _, m := range partition {
		err := ix.index(ctx, m.Value)
		if err == nil {
			continue // commit
		}
		res, serr := c.Submit(ctx, client.Task{
			Queue:          queue,
			Handler:        handler,
			Payload:        m.Value,
			ContentType:    "application/json",
			IdempotencyKey: fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset),
			FirstFailure:   err,
		})
		if serr != nil {
			return fmt.Errorf("handing offset %d to rdq: %w (not committing it)", m.Offset, serr)
		}
		fmt.Fprintf(out, "offset %d failed (%v): handed to rdq as %s, offset committed\n", m.Offset, err, res.Task.ID)
		submitted = append(submitted, res.Task.ID)
	}

	fmt.Fprintln(out, "the search index recovers")
	ix.searchDown.Store(false)

	for _, id := range submitted {
		t, attempts, err := waitFinished(ctx, st, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "task %s: %s after %d %s\n", t.ID, t.Status, len(attempts), plural(len(attempts), "attempt", "attempts"))
		for _, a := range attempts {
			fmt.Fprintln(out, strings.TrimRight(fmt.Sprintf("   #%d %-17s %s", a.Number, a.Outcome, a.Message), " "))
		}
	}
	return nil
}

// waitFinished polls the store until the task succeeded or went dead.
func waitFinished(ctx context.Context, st store.Store, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		t, attempts, err := st.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if t.Status == rdq.StatusSucceeded || t.Status == rdq.StatusDead {
			return t, attempts, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("task %s still %s: %w", id, t.Status, ctx.Err())
		case <-tick.C:
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
