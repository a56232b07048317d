package pgstore_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/srjn45/rdq/internal/leakcheck"
)

func TestMain(m *testing.M) {
	// Stores log every reclaim at Info; keep test output to what matters.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if os.Getenv(envTxChild) != "" {
		os.Exit(txChild())
	}
	leakcheck.Main(m)
}
