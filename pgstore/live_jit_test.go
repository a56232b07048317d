package pgstore_test

import (
	"testing"

	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

// TestWaitingListingLeavesJITAlone: the listing of waiting tasks of every
// queue turns JIT off for itself only; in a caller's transaction the
// setting is as the caller left it afterwards, and the transaction goes
// on.
func TestWaitingListingLeavesJITAlone(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, _ := pgtest.NewStore(t)
	tx, err := pgtest.Pool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, err := tx.Exec(ctx, `SET LOCAL jit = on`); err != nil {
		t.Fatal(err)
	}
	view := s.WithTx(tx)
	for _, state := range []store.TaskState{store.StatePending, store.StateRetrying} {
		if _, err := view.ListTasks(ctx, store.ListTasksParams{State: state, Limit: 10}); err != nil {
			t.Fatalf("ListTasks %s: %v", state, err)
		}
	}
	var jit string
	if err := tx.QueryRow(ctx, `SHOW jit`).Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "on" {
		t.Errorf("after the listing the caller's transaction has jit = %s, want on", jit)
	}
}
