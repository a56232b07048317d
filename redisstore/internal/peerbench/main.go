// Command peerbench drains the same workload through rdq on Redis and
// through Asynq (github.com/hibiken/asynq), the Go task queue on Redis, on
// the same server, with the protocol of the PostgreSQL peer bench: insert N
// tasks in batches of 5,000, then start one worker with 2,000 slots and time
// the drain; with -fail-once every task fails its first attempt and is
// retried at once. -engine pg runs rdq on PostgreSQL (pgstore) the same way,
// for the figure of the same minutes. It prints one line per run;
// scripts/bench-redis.sh runs the engines in interleaved rounds and prints
// the medians.
//
// Asynq has no batch submit: its half submits each batch of 5,000 with 64
// concurrent Enqueue calls. Only the drain rate (work_per_s) is compared.
//
// It is a module of its own, so that no module a user imports requires
// Asynq.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.engine, "engine", "rdq", "rdq (rdq on Redis), asynq, or pg (rdq on PostgreSQL)")
	flag.StringVar(&cfg.redisURL, "redis-url", "redis://127.0.0.1:6390/15", "the Redis server and database (emptied before each run)")
	flag.StringVar(&cfg.pgURL, "database-url", os.Getenv("RDQ_DATABASE_URL"), "the PostgreSQL database, for -engine pg (its schema rdq_peerbench is dropped before each run)")
	flag.IntVar(&cfg.n, "n", 100000, "tasks")
	flag.BoolVar(&cfg.failOnce, "fail-once", false, "every task fails its first attempt")
	flag.IntVar(&cfg.slots, "workers", 2000, "worker concurrency")
	flag.Parse()
	r, err := run(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s n=%d fail_once=%v insert_per_s=%.0f work_per_s=%.0f heap_mib=%.1f\n", cfg.engine, cfg.n, cfg.failOnce,
		r.insertPerS, r.workPerS, r.heapMiB)
}
