// Package leakcheck fails a test binary that leaves goroutines running.
//
// It covers what the core module's tests need from a goroutine leak
// detector with the standard library alone, so that the module's go.mod
// names no test-only dependency and no user inherits one. The other
// modules use go.uber.org/goleak.
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Settle is how long Find waits for goroutines to exit before it reports
// them: tests stop goroutines without waiting for their last instructions.
const Settle = 5 * time.Second

// Main runs the tests and, when they pass, fails the binary (exit code 1)
// if goroutines other than the runtime's and the test framework's are still
// running after Settle. Call it from TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Find returns an error listing the stacks of the goroutines that are
// running besides the caller, the runtime's and the test framework's,
// waiting up to Settle for them to exit; nil when there are none.
func Find() error {
	deadline := time.Now().Add(Settle)
	wait := time.Millisecond
	for {
		leaked := running()
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutine(s) still running after the tests:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// running returns the stacks of the goroutines other than the caller's
// that no filter accepts.
func running() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range bytes.Split(buf, []byte("\n\n")) {
		if i == 0 { // the caller's goroutine comes first
			continue
		}
		if s := string(g); !benign(s) {
			out = append(out, s)
		}
	}
	return out
}

// benignFrames are functions whose presence marks a goroutine as the
// runtime's or the test framework's.
var benignFrames = []string{
	"testing.RunTests(",
	"testing.(*T).Run(",
	"testing.(*T).Parallel(",
	"testing.runFuzzing(",
	"testing.runFuzzTests(",
	"testing.(*M).startAlarm",
	"testing.tRunner.func1",
	"os/signal.signal_recv(",
	"os/signal.loop(",
	"runtime.ensureSigM(",
	"runtime.ReadTrace(",
	"runtime/trace.Start.func1(",
}

func benign(stack string) bool {
	if strings.TrimSpace(stack) == "" {
		return true
	}
	for _, f := range benignFrames {
		if strings.Contains(stack, f) {
			return true
		}
	}
	return false
}
