package redisstore_test

import (
	"maps"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// TestWaitingCountsWalksInChunks: a handler with more tasks not due than
// one script walks is counted whole, over several calls.
func TestWaitingCountsWalksInChunks(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()
	now := time.Now().UTC()
	const n = 12345
	nts := make([]store.NewTask, n)
	for i := range nts {
		nts[i] = store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h", Delay: time.Duration(i+1) * time.Second}
	}
	nts = append(nts, store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h"})
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: nts, Now: &now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, WorkerID: "w", Now: &now})
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim: %d tasks, %v", len(got), err)
	}
	c := store.Completion{Lease: store.Lease{ID: got[0].ID, Token: got[0].LeaseToken}, Status: rdq.StatusPending, RetryIn: time.Hour,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: rdq.Failure{Type: "E", Message: "m", Fingerprint: "f"}, WorkerID: "w"}}
	if errs, err := s.Finish(ctx, store.FinishParams{Completions: []store.Completion{c}, Now: &now}); err != nil || errs[0] != nil {
		t.Fatalf("Finish: %v %v", err, errs)
	}
	w, err := s.WaitingCounts(ctx, &now)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]store.WaitingCounts{"q": {Retrying: 1, Scheduled: n}}; !maps.Equal(w, want) {
		t.Fatalf("WaitingCounts = %+v, want %+v", w, want)
	}
}
