package compliance_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq"
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
		LockTask:  lockTask,
		FailAudit: failAudit,
		Capabilities: storetest.Capabilities{
			Notifications: true, Admin: true, Pause: true, Live: true, PauseHandlers: true, Registry: true, Snooze: true, RetryInPlace: true,
			NotDueCounts: true, WaitingCounts: true, GroupOrigins: true, DeadHistogram: true, DeadGroupKeys: true, Series: true,
		},
	}
}

// lockTask locks task id of schema FOR UPDATE in a transaction of its own
// until unlock rolls it back.
func lockTask(t testing.TB, schema string, id rdq.ID) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatalf("connecting to lock task %s: %v", id, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("beginning the transaction that locks task %s: %v", id, err)
	}
	var n int
	q := "SELECT count(*) FROM (SELECT 1 FROM " + pgx.Identifier{schema, "tasks"}.Sanitize() + " WHERE id = $1 FOR UPDATE) AS l"
	if err := tx.QueryRow(ctx, q, id.String()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("locking task %s: %d rows, %v", id, n, err)
	}
	return func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Errorf("releasing the lock on task %s: %v", id, err)
		}
		if err := conn.Close(ctx); err != nil {
			t.Errorf("closing the connection that locked task %s: %v", id, err)
		}
	}
}

// failAudit makes every later insert into schema's audit table raise.
func failAudit(t testing.TB, schema string) {
	t.Helper()
	pool := pgtest.Pool(t)
	fn := pgx.Identifier{schema, "refuse_audit"}.Sanitize()
	for _, q := range []string{
		"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit write refused by the test'; END $$",
		"CREATE TRIGGER refuse_audit BEFORE INSERT ON " + pgx.Identifier{schema, "audit"}.Sanitize() + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("making the audit writes of %s fail: %v", schema, err)
		}
	}
}

func TestMain(m *testing.M) {
	// Stores log every reclaim at Info; keep test output to what matters.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	storetest.Main(m, harness())
}

func TestCompliance(t *testing.T) { storetest.Run(t, harness()) }
