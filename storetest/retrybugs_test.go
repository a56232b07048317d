package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Defects of store.InPlaceRetrier, laid over the SQLite store's: each
// bends a correct retry in place (its input, or what it wrote, changed
// through the database file) into what a store with that defect does.
const (
	// A kept task keeps the old token: its lease is not fenced anew.
	bugInPlaceTokenKept sqliteBug = "in-place-token-kept"
	// A kept task's attempt is recorded but not counted in Attempts.
	bugInPlaceNotCounted sqliteBug = "in-place-not-counted"
	// A task of a paused handler is kept in flight instead of held.
	bugInPlaceIgnoresHandlerPause sqliteBug = "in-place-ignores-handler-pause"
	// A stale lease of a task in flight is taken for the current one.
	bugInPlaceAcceptsStale sqliteBug = "in-place-accepts-stale"
	// A correct store whose harness leaves out store.InPlaceRetrier.
	bugUndeclaredInPlace sqliteBug = "undeclared-retry-in-place"
)

func (b *buggyStore) RetryInPlace(ctx context.Context, p store.RetryInPlaceParams) ([]store.RetryInPlaceResult, error) {
	if b.bug == bugInPlaceAcceptsStale {
		p.Retries = slices.Clone(p.Retries)
		for i, c := range p.Retries {
			if tk, _, err := b.Get(ctx, c.ID); err == nil && tk.Status == rdq.StatusInFlight {
				p.Retries[i].Token = tk.LeaseToken
			}
		}
	}
	res, err := b.Store.RetryInPlace(ctx, p)
	if err != nil {
		return res, err
	}
	switch b.bug {
	case bugInPlaceTokenKept, bugInPlaceNotCounted, bugInPlaceIgnoresHandlerPause:
	default:
		return res, nil
	}
	db, err := sql.Open("sqlite", "file:"+b.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	now := clock(p.Now).UnixMicro()
	for i, c := range p.Retries {
		r := &res[i]
		switch {
		case b.bug == bugInPlaceTokenKept && r.Task != nil:
			_, err = db.ExecContext(ctx, `UPDATE rdq_tasks SET lease_token = ? WHERE id = ?`, c.Token, c.ID[:])
			r.Task.LeaseToken = c.Token
		case b.bug == bugInPlaceNotCounted && r.Task != nil:
			_, err = db.ExecContext(ctx, `UPDATE rdq_tasks SET attempts = attempts - 1 WHERE id = ?`, c.ID[:])
			r.Task.Attempts--
		case b.bug == bugInPlaceIgnoresHandlerPause && r.Task == nil && r.Err == nil:
			// Left held for its paused handler: lease it as if it were not.
			_, err = db.ExecContext(ctx, `UPDATE rdq_tasks
SET status = 'IN_FLIGHT', held = 0, lease_token = lease_token + 1, lease_expires_at = ?1, lease_owner = ?2,
	claimed_at = ?3, updated_at = ?3
WHERE id = ?4 AND status = 'PENDING' AND held = 1`, now+p.Lease.Microseconds(), c.Attempt.WorkerID, now, c.ID[:])
			if err == nil {
				var tk *rdq.Task
				if tk, _, err = b.Get(ctx, c.ID); err == nil && tk.Status == rdq.StatusInFlight {
					r.Task = tk
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("laying %s over task %s: %w", b.bug, c.ID, err)
		}
	}
	return res, nil
}

// TestSQLiteRetryInPlace checks that the RetryInPlace part passes on the
// SQLite store without a defect, so that the defects above are what fail
// it.
func TestSQLiteRetryInPlace(t *testing.T) {
	runSQLitePart(t, sqliteHarness(""), "RetryInPlace")
}
