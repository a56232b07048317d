package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
	"github.com/srjn45/rdq/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	topic   = "orders"
	records = 2000
)

// order i of the test: every tenth fails transiently (one to three times,
// then succeeds on a retry), every twentieth is invalid and every
// twentieth is not JSON at all (both permanent): about 20% fail.
func order(i int) (value []byte, transient, permanent bool) {
	switch {
	case i%10 == 3:
		v, _ := json.Marshal(Order{ID: i, FailTimes: 1 + i%3})
		return v, true, false
	case i%20 == 7:
		v, _ := json.Marshal(Order{ID: i, Invalid: true})
		return v, false, true
	case i%20 == 17:
		return []byte(fmt.Sprintf(`{"id": %d, "fail_ti`, i)), false, true
	}
	v, _ := json.Marshal(Order{ID: i})
	return v, false, false
}

// TestConsumerOnKafka runs the consumer and a separate retry worker against
// franz-go's in-process broker: 2,000 records, about 20% failing
// transiently or permanently. The first consumer crashes halfway through a
// poll (records handed to rdq, offsets not committed); its replacement
// reads them again; then a new group rewinds to the start and reads
// everything again. No record may be submitted twice, and every record must
// end processed by the consumer, SUCCEEDED after retries, or DEAD with its
// history starting at the consumer's first failure.
func TestConsumerOnKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	// Produce the records, keyed by order.
	wantTransient, wantPermanent := 0, 0
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range records {
		v, transient, permanent := order(i)
		if transient {
			wantTransient++
		}
		if permanent {
			wantPermanent++
		}
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "order-%d", i), Value: v})
	}
	err = producer.ProduceSync(ctx, recs...).FirstErr()
	producer.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantFailed := wantTransient + wantPermanent
	if wantFailed < records/6 || wantFailed > records/4 {
		t.Fatalf("%d of %d records fail; the test wants about 20%%", wantFailed, records)
	}

	// The consumer and the worker are separate: each opens the store
	// itself, as two processes would.
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "rdq.db")
	openStore := func() storeurl.Store {
		st, err := storeurl.Open(ctx, dbURL, storeurl.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		})
		return st
	}
	consumerStore, workerStore := openStore(), openStore()

	fast := Policy
	fast.InitialBackoff, fast.MaxBackoff, fast.Jitter = 5*time.Millisecond, 20*time.Millisecond, rdq.NoJitter
	w, err := NewWorker(worker.Config{Store: workerStore, Logger: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond, FinishInterval: 2 * time.Millisecond}, fast)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			t.Error(err)
		}
	}()

	rc, err := client.New(client.Config{Store: consumerStore, ID: "kafka-consumer", Policies: map[string]rdq.Policy{Queue: fast}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{} // record → times the consumer's handler ran on it
	newConsumer := func(parent context.Context, group string, handle func(context.Context, *kgo.Record) error) (*Consumer, func() error) {
		kc, err := NewKafkaClient(brokers, group, topic, kgo.FetchMaxBytes(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		c := &Consumer{Kafka: kc, Rdq: rc, Handle: func(ctx context.Context, r *kgo.Record) error {
			mu.Lock()
			seen[fmt.Sprintf("%d@%d", r.Partition, r.Offset)]++
			mu.Unlock()
			return handle(ctx, r)
		}}
		cctx, ccancel := context.WithCancel(parent)
		done := make(chan error, 1)
		go func() { done <- c.Run(cctx) }()
		return c, func() error {
			ccancel()
			err := <-done
			kc.Close()
			return err
		}
	}
	index := func(ctx context.Context, r *kgo.Record) error { return Index(ctx, r.Value, 1) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// 1. A consumer that crashes: after handing 50 records to rdq, it
	// dies in the middle of a poll (its context is cancelled, so the next
	// hand-over fails), before committing it.
	crashAfter := 50
	crashCtx, crash := context.WithCancel(ctx)
	defer crash()
	first, stopFirst := newConsumer(crashCtx, "indexer", func(ctx context.Context, r *kgo.Record) error {
		err := index(ctx, r)
		if err != nil {
			if crashAfter--; crashAfter < 0 {
				crash()
			}
		}
		return err
	})
	waitFor("the first consumer to crash", func() bool { return crashCtx.Err() != nil })
	if err := stopFirst(); err != nil {
		t.Fatalf("first consumer: %v", err)
	}
	handedBeforeCrash := first.Stats.Handed.Load()
	if handedBeforeCrash < 50 || first.Stats.Committed.Load() >= records {
		t.Fatalf("first consumer handed %d and committed %d records; the crash came too late to test anything",
			handedBeforeCrash, first.Stats.Committed.Load())
	}

	// 2. Its replacement in the same group resumes from the last commit,
	// reading again the records of the crashed poll.
	second, stopSecond := newConsumer(ctx, "indexer", index)
	waitFor("the second consumer to commit the rest", func() bool {
		return first.Stats.Committed.Load()+second.Stats.Committed.Load() >= records
	})
	if err := stopSecond(); err != nil {
		t.Fatalf("second consumer: %v", err)
	}
	if got := first.Stats.Committed.Load() + second.Stats.Committed.Load(); got != records {
		t.Errorf("%d offsets committed in group indexer, want %d", got, records)
	}
	if second.Stats.Duplicates.Load() == 0 {
		t.Error("the replacement consumer read none of the crashed poll's handed records again; the crash tested nothing")
	}
	if got := first.Stats.Handed.Load() + second.Stats.Handed.Load(); got != int64(wantFailed) {
		t.Errorf("group indexer handed %d new tasks to rdq, want %d (one per failing record)", got, wantFailed)
	}

	// 3. An offset rewind: a new group reads the topic from the start.
	// Every failure is handed over again and rdq returns the existing task.
	replay, stopReplay := newConsumer(ctx, "indexer-replay", index)
	waitFor("the replay to commit everything", func() bool { return replay.Stats.Committed.Load() >= records })
	if err := stopReplay(); err != nil {
		t.Fatalf("replay consumer: %v", err)
	}
	if replay.Stats.Handed.Load() != 0 || replay.Stats.Duplicates.Load() != int64(wantFailed) {
		t.Errorf("replay: %d new tasks and %d duplicates, want 0 and %d",
			replay.Stats.Handed.Load(), replay.Stats.Duplicates.Load(), wantFailed)
	}
	mu.Lock()
	if len(seen) != records {
		t.Errorf("the consumers saw %d distinct records, want %d", len(seen), records)
	}
	mu.Unlock()

	// 4. The worker finishes every handed record: exactly one task per
	// failing record, transient ones SUCCEEDED, permanent ones DEAD.
	var stats store.QueueStats
	waitFor("the worker to finish every task", func() bool {
		all, err := consumerStore.Stats(ctx, store.StatsParams{SucceededWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if s.Queue == Queue {
				stats = s
			}
		}
		return stats.Pending == 0 && stats.InFlight == 0 && stats.Succeeded+stats.Dead >= int64(wantFailed)
	})
	if stats.Succeeded != int64(wantTransient) || stats.Dead != int64(wantPermanent) {
		t.Errorf("queue %s: %d succeeded and %d dead, want %d and %d", Queue, stats.Succeeded, stats.Dead, wantTransient, wantPermanent)
	}

	// Every dead task has its history: the consumer's first failure as
	// attempt 1 and nothing after it, since the failure was permanent.
	dead, err := consumerStore.ListDead(ctx, store.ListDeadParams{Filter: store.DeadFilter{Queue: Queue}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != wantPermanent {
		t.Fatalf("%d dead tasks listed, want %d", len(dead), wantPermanent)
	}
	keys := map[string]bool{}
	for _, d := range dead {
		_, attempts, err := consumerStore.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomePermanentFailure || attempts[0].WorkerID != "kafka-consumer" ||
			attempts[0].Message == "" || d.Headers["kafka-topic"] != topic {
			t.Errorf("dead task %s (%s): history %+v, headers %v", d.ID, d.IdempotencyKey, attempts, d.Headers)
		}
		if keys[d.IdempotencyKey] {
			t.Errorf("two dead tasks share idempotency key %s", d.IdempotencyKey)
		}
		keys[d.IdempotencyKey] = true
	}
}

func TestIdempotencyKey(t *testing.T) {
	r := &kgo.Record{Topic: "orders", Partition: 3, Offset: 42, Key: []byte("order-7")}
	k := IdempotencyKey(r)
	if k != IdempotencyKey(&kgo.Record{Topic: "orders", Partition: 3, Offset: 42, Key: []byte("order-7")}) {
		t.Error("the key is not deterministic")
	}
	for _, other := range []*kgo.Record{
		{Topic: "orders", Partition: 3, Offset: 43, Key: []byte("order-7")},
		{Topic: "orders", Partition: 4, Offset: 42, Key: []byte("order-7")},
		{Topic: "orders2", Partition: 3, Offset: 42, Key: []byte("order-7")},
		{Topic: "orders", Partition: 3, Offset: 42, Key: []byte("order-8")},
		{Topic: "orders", Partition: 3, Offset: 42},
	} {
		if IdempotencyKey(other) == k {
			t.Errorf("records %+v and %+v share key %s", r, other, k)
		}
	}
	long := &kgo.Record{Topic: string(make([]byte, 249)), Key: []byte("k")}
	if n := len(IdempotencyKey(long)); n > rdq.MaxIdempotencyKeyLength {
		t.Errorf("key for a long topic is %d bytes; rdq's limit is %d", n, rdq.MaxIdempotencyKeyLength)
	}
}

func TestUsage(t *testing.T) {
	if err := run(context.Background(), nil, nil); err == nil {
		t.Error("no subcommand: no error")
	}
}
