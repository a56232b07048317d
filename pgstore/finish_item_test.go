package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

// TestFinishRefusedItemFailsAlone makes the database refuse one completion
// of a batch (a check constraint added to this test's schema stands for any
// value the database cannot store or index): that completion gets the
// database's error and the rest of the batch is applied.
func TestFinishRefusedItemFailsAlone(t *testing.T) {
	st, schema := pgtest.NewStore(t)
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(ctx, `ALTER TABLE `+schema+`.attempts ADD CONSTRAINT refuse_me CHECK (message IS DISTINCT FROM 'refuse me')`); err != nil {
		t.Fatal(err)
	}
	var tasks []store.NewTask
	for range 4 {
		tasks = append(tasks, store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h"})
	}
	if _, err := st.Enqueue(ctx, store.EnqueueParams{Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	claimed, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 4, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claimed %d: %v", len(claimed), err)
	}
	comps := make([]store.Completion, 4)
	for i, c := range claimed {
		comps[i] = store.Completion{
			Lease:   store.Lease{ID: c.ID, Token: c.LeaseToken},
			Status:  rdq.StatusDead,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: rdq.Describe(errors.New("fine")), WorkerID: "w"},
		}
	}
	comps[2].Attempt.Failure = rdq.Describe(errors.New("refuse me"))
	errs, err := st.Finish(ctx, store.FinishParams{Completions: comps})
	if err != nil {
		t.Fatalf("Finish failed as a whole: %v", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(errs[2], &pgErr) || pgErr.ConstraintName != "refuse_me" {
		t.Errorf("refused completion: %v, want the check violation", errs[2])
	}
	for i, c := range claimed {
		task, _, err := st.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := rdq.StatusDead
		if i == 2 {
			want = rdq.StatusInFlight
		} else if errs[i] != nil {
			t.Errorf("completion %d: %v, want nil beside a refused one", i, errs[i])
		}
		if task.Status != want {
			t.Errorf("task %d is %s, want %s", i, task.Status, want)
		}
	}
}
