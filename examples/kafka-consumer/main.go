// Command kafka-consumer shows the pattern rdq exists for: a Kafka consumer
// whose handler fails hands the record to rdq and commits its offset,
// instead of blocking the partition, looping through a retry topic, or
// dropping the record into a DLQ topic that holds a bare payload. A separate
// worker process retries it with the same handler, and dead-letters it with
// its full history when retrying cannot help.
//
// It runs as two processes sharing one rdq store (RDQ_DATABASE_URL; rdq's
// default SQLite file when unset):
//
//	kafka-consumer consume -brokers localhost:9092 -topic orders -group indexer
//	kafka-consumer work
//
// The consumer (Consumer) reads with franz-go in a consumer group, with
// automatic commits off:
//
//   - it calls the handler once per record; on success there is nothing
//     more to do;
//   - on failure it submits the record through an rdq client (a producer
//     needs nothing but the client package and a store) with the error as
//     FirstFailure, which rdq records as attempt 1, and an idempotency key
//     built from topic, partition, offset and record key, so a rebalance, a
//     crash before the commit or a deliberate offset rewind that delivers the
//     record again cannot submit it twice;
//   - once every record of a poll is handled or handed over, it commits the
//     offsets. If handing a record to rdq fails, it stops without
//     committing, so nothing is lost: the records are read again.
//
// The worker (NewWorker) runs the same handler on the rdq queue: transient
// failures are retried on the queue's backoff schedule, and a failure marked
// rdq.Permanent (a record that cannot be decoded, an order that fails
// validation) goes straight to the dead-letter queue, where `rdq dlq`
// shows it with every attempt, the consumer's first one included.
//
// The demo's orders say how their indexing goes (FailTimes, Invalid), so
// that the test (on franz-go's in-process broker, kfake) can check every
// outcome; a real handler calls a real service.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
	"github.com/srjn45/rdq/worker"
)

// The rdq queue and handler name the consumer hands failed records to.
const (
	Queue   = "orders-retry"
	Handler = "index-order"
)

// Order is a record's value.
type Order struct {
	ID int `json:"id"`
	// FailTimes is how many attempts fail with a transient error before
	// indexing succeeds (a demo stand-in for a flaky search service).
	FailTimes int `json:"fail_times,omitempty"`
	// Invalid orders fail validation: a permanent failure.
	Invalid bool `json:"invalid,omitempty"`
}

// ErrSearchDown is the transient failure of the downstream search index.
var ErrSearchDown = errors.New("search index unavailable")

// Index is the application's handler: the same function serves the
// consumer's first try (attempt 1) and rdq's retries.
func Index(_ context.Context, value []byte, attempt int) error {
	var o Order
	if err := json.Unmarshal(value, &o); err != nil {
		return rdq.Permanent(fmt.Errorf("decoding order: %w", err)) // retrying cannot fix bad JSON
	}
	if o.Invalid {
		return rdq.Permanent(fmt.Errorf("order %d fails validation", o.ID))
	}
	if attempt <= o.FailTimes {
		return fmt.Errorf("indexing order %d: %w", o.ID, ErrSearchDown)
	}
	return nil
}

// Consumer reads records with a franz-go group consumer, runs Handle on
// each, hands failures to rdq and commits offsets.
type Consumer struct {
	// Kafka is a group consumer created with kgo.DisableAutoCommit and
	// kgo.BlockRebalanceOnPoll (NewKafkaClient), so that offsets are
	// committed only after every record of a poll is handled or handed to
	// rdq.
	Kafka *kgo.Client
	// Rdq submits failed records.
	Rdq *client.Client
	// Handle processes one record; an error hands it to rdq.
	Handle func(ctx context.Context, r *kgo.Record) error
	// Log receives a line per failed record and per commit. Nil discards.
	Log *slog.Logger
	// Stats counts what happened; read it at any time.
	Stats Stats
}

// Stats are a Consumer's counters.
type Stats struct {
	// Processed records succeeded on the consumer's first try.
	Processed atomic.Int64
	// Handed records failed and were submitted to rdq as new tasks.
	Handed atomic.Int64
	// Duplicates failed again after they had been handed over already
	// (delivered again after a rewind or a crash before the commit);
	// rdq returned the existing task and stored nothing.
	Duplicates atomic.Int64
	// Committed is how many records' offsets have been committed.
	Committed atomic.Int64
}

// NewKafkaClient returns a group consumer of topic for a Consumer: manual
// commits, no rebalance while a poll is being handled, and a new group
// starting at the earliest offset.
func NewKafkaClient(brokers []string, group, topic string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
}

// Run consumes until ctx is done (returning nil) or a record cannot be
// handed to rdq or offsets cannot be committed (returning the error, with
// the current poll's offsets uncommitted, so its records are read again).
func (c *Consumer) Run(ctx context.Context) error {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A poll blocks rebalances until AllowRebalance; whatever way Run
	// returns, it lets them go on, so Close can leave the group.
	defer c.Kafka.AllowRebalance()
	for {
		fetches := c.Kafka.PollFetches(ctx)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			// The client retries fetch errors by itself.
			log.Warn("fetch failed", "topic", topic, "partition", partition, "error", err)
		})
		n := 0
		var handErr error
		fetches.EachRecord(func(r *kgo.Record) {
			if handErr == nil {
				handErr = c.handle(ctx, log, r)
				n++
			}
		})
		if handErr != nil {
			if ctx.Err() != nil {
				return nil
			}
			return handErr
		}
		if err := c.Kafka.CommitUncommittedOffsets(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("committing offsets: %w", err)
		}
		c.Stats.Committed.Add(int64(n))
		c.Kafka.AllowRebalance()
	}
}

// handle runs the handler on r and hands a failure to rdq.
func (c *Consumer) handle(ctx context.Context, log *slog.Logger, r *kgo.Record) error {
	err := c.Handle(ctx, r)
	if err == nil {
		c.Stats.Processed.Add(1)
		return nil
	}
	res, serr := c.Rdq.Submit(ctx, client.Task{
		Queue:       Queue,
		Handler:     Handler,
		Payload:     r.Value,
		ContentType: "application/json",
		Headers: map[string]string{
			"kafka-topic":     r.Topic,
			"kafka-partition": strconv.Itoa(int(r.Partition)),
			"kafka-offset":    strconv.FormatInt(r.Offset, 10),
		},
		IdempotencyKey: IdempotencyKey(r),
		FirstFailure:   err,
	})
	if serr != nil {
		return fmt.Errorf("handing %s/%d@%d to rdq: %w (offsets not committed)", r.Topic, r.Partition, r.Offset, serr)
	}
	if res.Duplicate {
		c.Stats.Duplicates.Add(1)
	} else {
		c.Stats.Handed.Add(1)
	}
	log.Info("record handed to rdq", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
		"task_id", res.Task.ID.String(), "duplicate", res.Duplicate, "error", err.Error())
	return nil
}

// IdempotencyKey identifies a record for rdq: topic, partition and offset,
// plus a hash of the record key (which tells apart a record of a topic that
// was deleted and created again). Keys longer than rdq allows are hashed.
func IdempotencyKey(r *kgo.Record) string {
	key := fmt.Sprintf("kafka:%s/%d/%d", r.Topic, r.Partition, r.Offset)
	if len(r.Key) > 0 {
		sum := sha256.Sum256(r.Key)
		key += "/" + hex.EncodeToString(sum[:8])
	}
	if len(key) > rdq.MaxIdempotencyKeyLength {
		sum := sha256.Sum256([]byte(key))
		key = "kafka:" + hex.EncodeToString(sum[:])
	}
	return key
}

// Policy is the retry queue's policy: five attempts in all, the consumer's
// first one included.
var Policy = rdq.Policy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute}

// NewWorker returns a worker that retries handed-over records with Index.
// cfg.Queues is set to the retry queue with policy.
func NewWorker(cfg worker.Config, policy rdq.Policy) (*worker.Worker, error) {
	cfg.Queues = map[string]worker.QueueConfig{Queue: {Policy: policy}}
	w, err := worker.New(cfg)
	if err != nil {
		return nil, err
	}
	err = w.Handle(Handler, func(ctx context.Context, t *rdq.Task) error {
		return Index(ctx, t.Payload, t.NextAttempt())
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "consume" && args[0] != "work") {
		return errors.New("usage: kafka-consumer consume [-brokers host:port,...] [-topic T] [-group G] | kafka-consumer work")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "localhost:9092", "Kafka bootstrap brokers, comma-separated")
	topic := fs.String("topic", "orders", "topic to consume")
	group := fs.String("group", "indexer", "consumer group")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	url := storeurl.FromEnv()
	st, err := storeurl.Open(ctx, url, storeurl.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("opening %s: %w", storeurl.Describe(url), err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "error", err)
		}
	}()
	log.Info("store opened", "store", storeurl.Describe(url))

	if args[0] == "work" {
		return work(ctx, st, log)
	}
	kc, err := NewKafkaClient(strings.Split(*brokers, ","), *group, *topic)
	if err != nil {
		return err
	}
	defer kc.Close()
	rc, err := client.New(client.Config{Store: st, ID: "kafka-consumer", Policies: map[string]rdq.Policy{Queue: Policy}})
	if err != nil {
		return err
	}
	c := &Consumer{Kafka: kc, Rdq: rc, Log: log, Handle: func(ctx context.Context, r *kgo.Record) error {
		return Index(ctx, r.Value, 1)
	}}
	return c.Run(ctx)
}

// work runs the retry worker until ctx is done.
func work(ctx context.Context, st store.Store, log *slog.Logger) error {
	w, err := NewWorker(worker.Config{Store: st, Logger: log}, Policy)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.Stop(stopCtx)
}
