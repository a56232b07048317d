package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

type config struct {
	engine   string
	redisURL string
	pgURL    string
	n        int
	failOnce bool
	slots    int
}

type result struct {
	insertPerS, workPerS, heapMiB float64
	// done counts the successful executions, failed the failed ones.
	done, failed int64
}

const batch = 5000

// run empties the engine's database, inserts cfg.n tasks, drains them and
// reports the rates.
func run(ctx context.Context, cfg config) (result, error) {
	switch cfg.engine {
	case "rdq", "asynq":
		opt, err := redis.ParseURL(cfg.redisURL)
		if err != nil {
			return result{}, err
		}
		c := redis.NewClient(opt)
		defer c.Close()
		if err := c.FlushDB(ctx).Err(); err != nil {
			return result{}, fmt.Errorf("emptying %s: %w", cfg.redisURL, err)
		}
		if cfg.engine == "asynq" {
			return runAsynq(ctx, cfg, opt)
		}
		st, err := redisstore.New(c, redisstore.Config{Namespace: "peerbench"})
		if err != nil {
			return result{}, err
		}
		return runRDQ(ctx, cfg, st)
	case "pg":
		pool, err := pgxpool.New(ctx, cfg.pgURL)
		if err != nil {
			return result{}, err
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS rdq_peerbench CASCADE"); err != nil {
			return result{}, err
		}
		st, err := pgstore.New(pool, pgstore.Config{Schema: "rdq_peerbench", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return result{}, err
		}
		if err := st.Migrate(ctx); err != nil {
			return result{}, err
		}
		return runRDQ(ctx, cfg, st)
	}
	return result{}, fmt.Errorf("unknown engine %q: want rdq, asynq or pg", cfg.engine)
}

func payload(i int) []byte { return fmt.Appendf(nil, `{"n":%d}`, i) }

// wait returns once done reaches n (or ctx ends).
func wait(ctx context.Context, done *atomic.Int64, n int64) error {
	for done.Load() < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond) // the progress poll's interval
	}
	return nil
}

func heapMiB() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

func runRDQ(ctx context.Context, cfg config, st store.Store) (result, error) {
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		return result{}, err
	}
	var done, failed atomic.Int64
	w, err := worker.New(worker.Config{Store: st, Logger: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond,
		Queues: map[string]worker.QueueConfig{"default": {
			Concurrency: cfg.slots,
			// immediate retries, so fail-once measures the engine, not backoff
			Policy: rdq.Policy{MaxAttempts: 5, InitialBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond, Jitter: rdq.NoJitter},
		}}})
	if err != nil {
		return result{}, err
	}
	w.Handle("noop", func(ctx context.Context, t *rdq.Task) error {
		if cfg.failOnce && t.NextAttempt() == 1 {
			failed.Add(1)
			return errors.New("transient failure")
		}
		done.Add(1)
		return nil
	})
	t0 := time.Now()
	tasks := make([]client.Task, 0, batch)
	for i := 0; i < cfg.n; i += batch {
		tasks = tasks[:0]
		for j := range min(batch, cfg.n-i) {
			tasks = append(tasks, client.Task{Queue: "default", Handler: "noop", Payload: payload(i + j), ContentType: "application/json"})
		}
		if _, err := c.SubmitMany(ctx, tasks); err != nil {
			return result{}, err
		}
	}
	insert := time.Since(t0)
	t1 := time.Now()
	if err := w.Start(ctx); err != nil {
		return result{}, err
	}
	err = wait(ctx, &done, int64(cfg.n))
	work := time.Since(t1)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if serr := w.Stop(stopCtx); err == nil {
		err = serr
	}
	return result{insertPerS: float64(cfg.n) / insert.Seconds(), workPerS: float64(cfg.n) / work.Seconds(), heapMiB: heapMiB(),
		done: done.Load(), failed: failed.Load()}, err
}

// quiet discards Asynq's logs.
type quiet struct{}

func (quiet) Debug(...any) {}
func (quiet) Info(...any)  {}
func (quiet) Warn(...any)  {}
func (quiet) Error(...any) {}
func (quiet) Fatal(...any) {}

func runAsynq(ctx context.Context, cfg config, opt *redis.Options) (result, error) {
	ro := asynq.RedisClientOpt{Addr: opt.Addr, Username: opt.Username, Password: opt.Password, DB: opt.DB, PoolSize: 128}
	c := asynq.NewClient(ro)
	defer c.Close()
	var done, failed atomic.Int64
	t0 := time.Now()
	for i := 0; i < cfg.n; i += batch {
		size := min(batch, cfg.n-i)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 64 {
			wg.Go(func() {
				for j := g; j < size; j += 64 {
					if _, err := c.EnqueueContext(ctx, asynq.NewTask("noop", payload(i+j)), asynq.MaxRetry(4), asynq.Queue("default")); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return result{}, err
		}
	}
	insert := time.Since(t0)
	srv := asynq.NewServer(ro, asynq.Config{
		Concurrency: cfg.slots,
		Queues:      map[string]int{"default": 1},
		// immediate retries, as rdq's half, checked for every 10 ms
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return 0 },
		DelayedTaskCheckInterval: 10 * time.Millisecond,
		Logger:                   quiet{},
		LogLevel:                 asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(ctx context.Context, t *asynq.Task) error {
		if n, _ := asynq.GetRetryCount(ctx); cfg.failOnce && n == 0 {
			failed.Add(1)
			return errors.New("transient failure")
		}
		done.Add(1)
		return nil
	})
	t1 := time.Now()
	if err := srv.Start(mux); err != nil {
		return result{}, err
	}
	err := wait(ctx, &done, int64(cfg.n))
	work := time.Since(t1)
	srv.Shutdown()
	return result{insertPerS: float64(cfg.n) / insert.Seconds(), workPerS: float64(cfg.n) / work.Seconds(), heapMiB: heapMiB(),
		done: done.Load(), failed: failed.Load()}, err
}
