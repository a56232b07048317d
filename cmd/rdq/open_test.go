package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

// TestBackendShowsTheStoresCapabilities checks that the store a command
// opens keeps its optional capabilities behind the command's wrapper: rdq
// bench runs its workers on it, and a worker that cannot find them claims
// every retry afresh and polls instead of listening.
func TestBackendShowsTheStoresCapabilities(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.NewStore(t)
	for name, c := range map[string]struct {
		url, schema string
		notifies    bool
	}{
		"PostgreSQL": {url: pgtest.URL(), schema: schema, notifies: true},
		"SQLite":     {url: "sqlite:" + filepath.Join(t.TempDir(), "rdq.db")},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			e := &env{ctx: ctx, stdout: io.Discard, stderr: io.Discard}
			e.g.databaseURL, e.g.schema = c.url, c.schema
			b, err := e.openBackend(true)
			if err != nil {
				t.Fatal(err)
			}
			defer b.close()
			if _, ok := store.InPlaceRetrierOf(b); !ok {
				t.Error("store.InPlaceRetrierOf finds no retries in place behind the backend")
			}
			if _, ok := store.LiveTasksOf(b); !ok {
				t.Error("store.LiveTasksOf finds no live tasks behind the backend")
			}
			if _, ok := store.NotifierOf(b); ok != c.notifies {
				t.Errorf("store.NotifierOf finds notifications: %v, want %v", ok, c.notifies)
			}
		})
	}
}
