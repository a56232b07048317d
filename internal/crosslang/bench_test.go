package crosslang

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/pgtest"
)

// BenchmarkJavaEndToEnd measures the Java worker's end-to-end throughput on
// PostgreSQL, shaped like the Go worker's BenchmarkEndToEnd (worker/): one
// Java process submits b.N tasks in batches of 500 while two Java workers
// (concurrency 200 each) claim them, run a no-op handler and finish them,
// each success in its history. It reports tasks/s from the first submit
// to the last finish written, as measured inside the JVM (JVM start-up
// excluded). Compare with the Go figure of the same run:
//
//	go test -run '^$' -bench JavaEndToEnd -benchtime 20000x ./internal/crosslang/
//	go test -run '^$' -bench EndToEnd -benchtime 20000x ./worker/
func BenchmarkJavaEndToEnd(b *testing.B) {
	cp := requireJava(b)
	_, schema := pgtest.NewStore(b)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-Xmx1g", "-cp", cp, "io.github.srjn45.rdq.testkit.BenchMain", strconv.Itoa(b.N))
	cmd.Env = append(os.Environ(), "RDQ_DATABASE_URL="+pgtest.URL(), "RDQ_SCHEMA="+schema)
	b.ResetTimer()
	out, err := cmd.CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("java BenchMain: %v\n%s", err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "tasks_per_sec="); ok {
			tps, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(tps, "tasks/s")
			return
		}
	}
	b.Fatalf("no tasks_per_sec in the output of BenchMain:\n%s", out)
}
