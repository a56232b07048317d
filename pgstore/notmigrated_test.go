package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// A store on a schema that was never migrated returns store.ErrNotMigrated
// from every kind of call, and migrating it ends that.
func TestNotMigratedSchema(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.SchemaName()
	s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
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
		"Redrive": func() error {
			_, err := s.Redrive(ctx, store.RedriveParams{IDs: []rdq.ID{rdq.NewID()}, Actor: "a", Reason: "r"})
			return err
		},
		"PausedQueues": func() error { _, err := s.PausedQueues(ctx); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrNotMigrated) {
			t.Errorf("%s on an unmigrated schema: %v, want store.ErrNotMigrated", name, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pgtest.DropSchema(pool, schema); err != nil {
			t.Error(err)
		}
	})
	for name, call := range calls {
		if err := call(); errors.Is(err, store.ErrNotMigrated) {
			t.Errorf("%s after Migrate: %v", name, err)
		}
	}
}
