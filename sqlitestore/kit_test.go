package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storetest"
)

// harness runs the compliance kit on SQLite files: each test gets a fresh
// file in its temporary directory, and the locator is the file's path.
func harness() storetest.Harness {
	return storetest.Harness{
		NewStore: func(t testing.TB) (store.Store, string) {
			t.Helper()
			path := filepath.Join(t.TempDir(), "rdq.db")
			return openStore(t, path), path
		},
		Open: func(ctx context.Context, locator string) (store.Store, func() error, error) {
			s, err := sqlitestore.Open(ctx, locator, sqlitestore.Config{})
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
		// Every write locks the whole database, so there are no row locks
		// for a claim to pass over: no LockTask.
		FailAudit: func(t testing.TB, path string) {
			t.Helper()
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.ExecContext(t.Context(), `CREATE TRIGGER refuse_audit BEFORE INSERT ON rdq_audit
				BEGIN SELECT RAISE(ABORT, 'audit write refused by the test'); END`)
			if cerr := db.Close(); cerr != nil {
				t.Error(cerr)
			}
			if err != nil {
				t.Fatalf("making the audit writes of %s fail: %v", path, err)
			}
		},
		// SQLite cannot push a change to another process: no Notifier.
		Capabilities: storetest.Capabilities{
			Admin: true, Pause: true, Live: true, PauseHandlers: true, Registry: true, Snooze: true, RetryInPlace: true,
			NotDueCounts: true, WaitingCounts: true, GroupOrigins: true, DeadHistogram: true, DeadGroupKeys: true, Series: true,
		},
	}
}

func TestMain(m *testing.M) { storetest.Main(m, harness()) }

func TestCompliance(t *testing.T) { storetest.Run(t, harness()) }
