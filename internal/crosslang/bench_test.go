package crosslang

import (
	"bytes"
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
// to the last finish written and the JVM's CPU time per task, as measured
// inside the JVM after warm-up rounds that last until the JIT has settled
// (BenchMain says how; JVM start-up and JIT warm-up excluded). A run of
// fewer than 1,000 tasks, such as -benchtime 1x, checks the path and warms
// one round only. Compare with the Go figure of the same run:
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
	if b.N < 1000 {
		cmd.Env = append(cmd.Env, "RDQ_BENCH_WARMUP_ROUNDS=1")
	}
	b.ResetTimer()
	var warmups bytes.Buffer
	cmd.Stderr = &warmups
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("java BenchMain: %v\n%s%s", err, warmups.Bytes(), out)
	}
	b.Logf("BenchMain's warm-up:\n%s", warmups.Bytes())
	var reported int
	for _, f := range strings.Fields(string(out)) {
		for key, unit := range map[string]string{"tasks_per_sec=": "tasks/s", "cpu_us_per_task=": "cpu-µs/task"} {
			if v, ok := strings.CutPrefix(f, key); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("BenchMain printed %s: %v", f, err)
				}
				b.ReportMetric(x, unit)
				reported++
			}
		}
	}
	if reported != 2 {
		b.Fatalf("no tasks_per_sec and cpu_us_per_task in the output of BenchMain:\n%s", out)
	}
}
