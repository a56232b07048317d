package crosslang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/srjn45/rdq"
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

type chaosPayload struct {
	Mode    string `json:"mode"`
	SleepMS int    `json:"sleep_ms"`
}

// execLogWriter appends whole lines to an execution log opened with O_APPEND.
type execLogWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (l *execLogWriter) write(kind string, id rdq.ID, token int64, result string) error {
	line := fmt.Sprintf("%s %s %d %d", kind, id, token, time.Now().UnixNano())
	if result != "" {
		line += " " + result
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.WriteString(line + "\n")
	return err
}

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
	f, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	elog := &execLogWriter{f: f}
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
	var logErr error
	var once sync.Once
	w.Handle("chaos", func(ctx context.Context, tk *rdq.Task) error {
		note := func(kind, result string) {
			if err := elog.write(kind, tk.ID, tk.LeaseToken, result); err != nil {
				once.Do(func() { logErr = err })
			}
		}
		var p chaosPayload
		if err := json.Unmarshal(tk.Payload, &p); err != nil {
			return rdq.Permanent(err)
		}
		note("start", "")
		timer := time.NewTimer(time.Duration(p.SleepMS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			note("end", "cancelled")
			return context.Cause(ctx)
		}
		var err error
		switch p.Mode {
		case "flaky":
			if tk.Attempts == 0 {
				err = errors.New("flaky: the first attempt of a life fails")
			}
		case "always":
			err = fmt.Errorf("always fails (attempt %d)", tk.NextAttempt())
		case "permanent":
			err = rdq.Permanent(errors.New("permanently broken"))
		}
		if err != nil {
			note("end", "err")
		} else {
			note("end", "ok")
		}
		return err
	})
	if err := w.Start(ctx); err != nil {
		return errors.Join(err, closeStore())
	}
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "reading stdin: %v; stopping\n", err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return errors.Join(w.Stop(stopCtx), closeStore(), logErr)
}
