package storetest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storetest"
)

// harness connects the kit to a backend; here the SQLite store, whose
// locator is simply the database file a worker process opens.
func harness() storetest.Harness {
	return storetest.Harness{
		NewStore: func(t testing.TB) (store.Store, string) {
			path := filepath.Join(t.TempDir(), "rdq.db")
			s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			})
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return s, path
		},
		Open: func(ctx context.Context, path string) (store.Store, func() error, error) {
			s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
		// With Admin, the kit checks that a mutation whose audit entry
		// cannot be written changes nothing: make the audit writes fail.
		FailAudit: func(t testing.TB, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := db.Close(); err != nil {
					t.Error(err)
				}
			}()
			if _, err := db.Exec(`CREATE TRIGGER refuse_audit BEFORE INSERT ON rdq_audit
				BEGIN SELECT RAISE(ABORT, 'audit write refused'); END`); err != nil {
				t.Fatal(err)
			}
		},
		// Declare exactly the optional interfaces the store implements;
		// Run fails otherwise.
		Capabilities: storetest.Capabilities{Admin: true},
		// Optionally, a bigger chaos test than the minimum.
		Chaos: storetest.ChaosConfig{Tasks: 2000},
	}
}

// A backend's test package runs the whole kit from one test function:
//
//	func TestCompliance(t *testing.T) { storetest.Run(t, harness()) }
func ExampleRun() {
	testCompliance := func(t *testing.T) { storetest.Run(t, harness()) }
	_ = testCompliance
}

// The same package's TestMain hands control to Main, which runs the chaos
// test's worker processes and checks for leaked goroutines:
//
//	func TestMain(m *testing.M) { storetest.Main(m, harness()) }
func ExampleMain() {
	testMain := func(m *testing.M) { storetest.Main(m, harness()) }
	_ = testMain
}
