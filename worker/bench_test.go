package worker_test

import (
	"testing"

	"github.com/srjn45/rdq/internal/benchtest"
	"github.com/srjn45/rdq/internal/pgtest"
)

// BenchmarkEndToEnd measures the whole path on PostgreSQL: submit b.N tasks
// in batches, workers claim them, run a no-op handler and finish them, with
// an attempt row written for each. It reports tasks/s from the first submit
// to the last finish written. Sized for a 2-core machine running the
// database too:
//
//	go test -run '^$' -bench BenchmarkEndToEnd -benchtime 20000x ./worker/
func BenchmarkEndToEnd(b *testing.B) {
	st, _ := pgtest.NewStore(b)
	benchtest.EndToEnd(b, st)
}
