package pgstore_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storetest"
)

// harness runs the compliance kit on PostgreSQL: every store is a fresh,
// migrated schema of the test database, and its locator is the schema name
// (the database URL reaches child processes through the environment).
func harness() storetest.Harness {
	return storetest.Harness{
		NewStore: func(t testing.TB) (store.Store, string) {
			s, schema := pgtest.NewStore(t)
			return s, schema
		},
		Open: func(ctx context.Context, schema string) (store.Store, func() error, error) {
			s, closeFn, err := pgtest.Open(ctx, schema)
			if err != nil {
				return nil, nil, err
			}
			return s, closeFn, nil
		},
		Capabilities: storetest.Capabilities{Notifications: true, Admin: true, Pause: true, Live: true, PauseHandlers: true, Snooze: true},
	}
}

func TestMain(m *testing.M) {
	// Stores log every reclaim at Info; keep test output to what matters.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if os.Getenv(envTxChild) != "" {
		os.Exit(txChild())
	}
	storetest.Main(m, harness())
}

func TestCompliance(t *testing.T) { storetest.Run(t, harness()) }
