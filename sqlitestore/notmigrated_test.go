package sqlitestore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// A store on a file that was never migrated returns store.ErrNotMigrated
// from reads and writes alike, and migrating it ends that.
func TestNotMigratedFile(t *testing.T) {
	ctx := t.Context()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	calls := map[string]func() error{
		"Enqueue": func() error {
			_, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "q", Handler: "h"}}})
			return err
		},
		"Claim": func() error {
			_, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, WorkerID: "w"})
			return err
		},
		"Get":       func() error { _, _, err := s.Get(ctx, rdq.NewID()); return err },
		"ListDead":  func() error { _, err := s.ListDead(ctx, store.ListDeadParams{Limit: 1}); return err },
		"CountDead": func() error { _, err := s.CountDead(ctx, store.DeadFilter{}); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrNotMigrated) {
			t.Errorf("%s on an unmigrated file: %v, want store.ErrNotMigrated", name, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for name, call := range calls {
		if err := call(); errors.Is(err, store.ErrNotMigrated) {
			t.Errorf("%s after Migrate: %v", name, err)
		}
	}
}
