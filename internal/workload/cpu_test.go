package workload

import (
	"crypto/sha256"
	"runtime"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestProcessCPUAdvances checks that the process's CPU time, which rdq
// bench reports per task, grows by the CPU a fixed amount of work takes:
// two million SHA-256 blocks take well over 20ms on any current CPU,
// however loaded the machine (CPU time, not wall time).
func TestProcessCPUAdvances(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the process's CPU time is not read on this platform")
	}
	before := processCPU()
	if before <= 0 {
		t.Fatalf("processCPU() = %s at start, want the CPU the test binary has used so far", before)
	}
	sum := sha256.Sum256(nil)
	for range 2_000_000 {
		sum = sha256.Sum256(sum[:])
	}
	if got := processCPU() - before; got < 20*time.Millisecond {
		t.Fatalf("processCPU() grew by %s over two million hashes (last %x), want at least 20ms", got, sum[:4])
	}
}
