package crosslang

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		// Re-executed as a Go worker process of the chaos test.
		os.Exit(goChildMain())
	}
	goleak.VerifyTestMain(m)
}
