package crosslang

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/execlog"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/worker"
)

// Environment of a Go worker process; the names match the Java testkit's.
const (
	envChild  = "RDQ_CROSSLANG_CHILD"
	envSchema = "RDQ_SCHEMA"
	envQueues = "RDQ_QUEUES"
	envLog    = "RDQ_EXEC_LOG"
	envWorker = "RDQ_WORKER_ID"
)

// Chaos timing shared by the Go and the Java workers (the Java testkit's
// defaults are the same): a short lease, frequent heartbeats and reclaims.
const (
	chaosLease       = 2 * time.Second
	chaosHeartbeat   = 250 * time.Millisecond
	chaosReclaim     = 250 * time.Millisecond
	chaosPoll        = 50 * time.Millisecond
	chaosConcurrency = 2
)

var chaosPolicy = rdq.Policy{MaxAttempts: 4, InitialBackoff: 20 * time.Millisecond, Multiplier: 2, MaxBackoff: 200 * time.Millisecond}

// goChildMain runs a Go chaos worker: the same handler and timings as the
// Java testkit's chaos worker, stopping gracefully when stdin closes.
func goChildMain() int {
	if err := runGoChild(); err != nil {
		fmt.Fprintf(os.Stderr, "crosslang go worker: %v\n", err)
		return 1
	}
	return 0
}

func runGoChild() error {
	ctx := context.Background()
	elog, err := execlog.Create(os.Getenv(envLog))
	if err != nil {
		return err
	}
	defer elog.Close()
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	st, closeStore, err := pgtest.Open(openCtx, os.Getenv(envSchema))
	cancel()
	if err != nil {
		return err
	}
	queues := map[string]worker.QueueConfig{}
	for _, q := range strings.Split(os.Getenv(envQueues), ",") {
		queues[q] = worker.QueueConfig{Policy: chaosPolicy, Concurrency: chaosConcurrency, Lease: chaosLease,
			HeartbeatInterval: chaosHeartbeat, Timeout: 20 * time.Second}
	}
	w, err := worker.New(worker.Config{
		Store:           st,
		ID:              os.Getenv(envWorker),
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Queues:          queues,
		PollInterval:    chaosPoll,
		ReclaimInterval: chaosReclaim,
		PurgeInterval:   worker.Disabled,
		FinishInterval:  5 * time.Millisecond,
	})
	if err != nil {
		return errors.Join(err, closeStore())
	}
	if err := w.Handle("chaos", elog.Handler()); err != nil {
		return errors.Join(err, closeStore())
	}
	if err := w.Start(ctx); err != nil {
		return errors.Join(err, closeStore())
	}
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "reading stdin: %v; stopping\n", err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return errors.Join(w.Stop(stopCtx), closeStore(), elog.Err())
}
