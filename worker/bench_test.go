package worker_test

import (
	"context"
	"testing"

	"github.com/srjn45/rdq/internal/benchtest"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/internal/workload"
	"github.com/srjn45/rdq/pgstore"
)

// warmStore returns a store on a fresh schema that has run 5,000 no-op
// tasks and been analyzed (see workload.Analyze), so that the benchmarks
// measure the plans of a table in use, not those made for an empty one.
func warmStore(b *testing.B) *pgstore.Store {
	b.Helper()
	st, schema := pgtest.NewStore(b)
	ctx := context.Background()
	if _, err := workload.Run(ctx, workload.Config{Store: st, Queue: "warmup", Kind: workload.NoOp, Tasks: 5000}); err != nil {
		b.Fatal(err)
	}
	if err := workload.Analyze(ctx, pgtest.URL(), schema); err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkEndToEnd measures the whole path on PostgreSQL: submit b.N tasks
// in batches, workers claim them, run a no-op handler and finish them, with
// each success in its history, on a warmed-up table (see warmStore).
// It reports tasks/s from the first submit to the last finish written. Sized for a 2-core machine running the
// database too:
//
//	go test -run '^$' -bench BenchmarkEndToEnd -benchtime 20000x ./worker/
func BenchmarkEndToEnd(b *testing.B) {
	st := warmStore(b)
	benchtest.EndToEnd(b, st)
}

// BenchmarkFailOnce is the fail-once workload on PostgreSQL: every task
// fails its first attempt, is retried at once and succeeds. Compare its
// tasks/s with BenchmarkEndToEnd's:
//
//	go test -run '^$' -bench 'EndToEnd|FailOnce' -benchtime 20000x ./worker/
func BenchmarkFailOnce(b *testing.B) {
	st := warmStore(b)
	benchtest.Workload(b, st, workload.FailOnce)
}

// BenchmarkStorm is the failure storm on PostgreSQL: every attempt fails,
// tasks are retried at once until their 5 attempts are spent and they are
// dead, every attempt in their history. Its attempts/s compares with the
// no-op tasks/s (an attempt is a claim and a finish either way):
//
//	go test -run '^$' -bench Storm -benchtime 100000x ./worker/
func BenchmarkStorm(b *testing.B) {
	st := warmStore(b)
	benchtest.Workload(b, st, workload.Storm)
}
