package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/execlog"
	"github.com/srjn45/rdq/worker"
)

// Environment of a chaos child process. Main runs the child when envChild
// is set.
const (
	envChild   = "RDQ_STORETEST_CHILD"
	envLocator = "RDQ_STORETEST_LOCATOR"
	envQueue   = "RDQ_STORETEST_QUEUE"
	envLog     = "RDQ_STORETEST_EXEC_LOG"
	envWorker  = "RDQ_STORETEST_WORKER_ID"
	childChaos = "chaos"
)

// Timing of chaos workers: a short lease, frequent heartbeats and
// reclaims, so executions lost to a kill are retried within about two
// seconds, with a margin of seven missed heartbeats before a live worker
// could lose its lease on a loaded machine.
const (
	chaosLease       = 2 * time.Second
	chaosHeartbeat   = 250 * time.Millisecond
	chaosReclaim     = 250 * time.Millisecond
	chaosPoll        = 50 * time.Millisecond
	chaosConcurrency = 2
	chaosHandler     = "chaos"
)

// chaosPolicy retries fast and dead-letters after four attempts, so kills
// and failures drive tasks both to success and to the dead-letter queue.
var chaosPolicy = rdq.Policy{MaxAttempts: 4, InitialBackoff: 20 * time.Millisecond, Multiplier: 2, MaxBackoff: 200 * time.Millisecond}

// childMain runs a chaos worker process: it opens the store the parent
// named, runs a worker with a handler that logs every execution's start and
// end, and stops gracefully when its standard input closes. It returns the
// process exit code.
func childMain(h Harness) int {
	if os.Getenv(envChild) != childChaos {
		fmt.Fprintf(os.Stderr, "storetest: unknown child mode %q\n", os.Getenv(envChild))
		return 2
	}
	if err := runChild(h); err != nil {
		fmt.Fprintf(os.Stderr, "storetest chaos child: %v\n", err)
		return 1
	}
	return 0
}

func runChild(h Harness) error {
	ctx := context.Background()
	elog, err := execlog.Create(os.Getenv(envLog))
	if err != nil {
		return fmt.Errorf("opening the execution log: %w", err)
	}
	// Every record is written straight to the file, and a failed write is
	// kept for elog.Err; closing after the last one loses nothing.
	defer elog.Close()

	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, closeStore, err := h.Open(openCtx, os.Getenv(envLocator))
	cancel()
	if err != nil {
		return fmt.Errorf("opening the store: %w", err)
	}

	w, err := worker.New(worker.Config{
		Store:  s,
		ID:     os.Getenv(envWorker),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Queues: map[string]worker.QueueConfig{os.Getenv(envQueue): {
			Policy:            chaosPolicy,
			Concurrency:       chaosConcurrency,
			Lease:             chaosLease,
			HeartbeatInterval: chaosHeartbeat,
			Timeout:           20 * time.Second,
		}},
		PollInterval:    chaosPoll,
		ReclaimInterval: chaosReclaim,
		PurgeInterval:   worker.Disabled,
		FinishInterval:  5 * time.Millisecond,
	})
	if err != nil {
		return errors.Join(fmt.Errorf("creating the worker: %w", err), closeStore())
	}
	err = w.Handle(chaosHandler, elog.Handler())
	if err != nil {
		return errors.Join(fmt.Errorf("registering the chaos handler: %w", err), closeStore())
	}
	if err := w.Start(ctx); err != nil {
		return errors.Join(fmt.Errorf("starting the worker: %w", err), closeStore())
	}
	// The parent closes our standard input to stop us, and it closes when
	// the parent dies, so no child outlives a test run. A read error means
	// the same: the parent is gone.
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "storetest chaos child: reading standard input: %v; stopping\n", err)
	}

	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return errors.Join(w.Stop(stopCtx), closeStore(), elog.Err())
}
