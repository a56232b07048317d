package redisstore_test

import (
	"slices"
	"testing"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
)

// TestAuditAcrossQueuesIsOneEntry: a redrive across three queues writes its
// part of one entry in each queue under one ID, and ListAudit reads the
// parts as one entry, whole on a page of one and not again on the next,
// on a server and on the cluster.
func TestAuditAcrossQueuesIsOneEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) (*redisstore.Store, string)
	}{{"server", openStore}, {"cluster", openClusterStore}} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := tc.open(t)
			ctx := t.Context()
			var ts []store.NewTask
			var ids []rdq.ID
			for _, q := range []string{"qc", "qa", "qb", "qa"} {
				id := rdq.NewID()
				ids = append(ids, id)
				ts = append(ts, store.NewTask{ID: id, Queue: q, Handler: "h",
					FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, WorkerID: "w",
						Failure: rdq.Failure{Type: "E", Message: "boom", Fingerprint: "f"}}})
			}
			if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: ts}); err != nil {
				t.Fatal(err)
			}
			if err := s.PauseQueue(ctx, store.PauseParams{Queue: "qa", Actor: "alice"}); err != nil {
				t.Fatal(err)
			}
			errs, err := s.Redrive(ctx, store.RedriveParams{IDs: ids, Actor: "bob"})
			if err != nil {
				t.Fatal(err)
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Redrive %s: %v", ids[i], err)
				}
			}
			page, err := s.ListAudit(ctx, store.ListAuditParams{Limit: 1})
			if err != nil || len(page) != 1 {
				t.Fatalf("ListAudit(Limit 1) = %+v, %v; want one entry", page, err)
			}
			e := page[0]
			if e.Action != "redrive" || e.Count != 4 || !slices.Equal(e.Queues, []string{"qa", "qb", "qc"}) {
				t.Errorf("redrive entry: action %q, count %d, queues %q; want redrive, 4, [qa qb qc]", e.Action, e.Count, e.Queues)
			}
			if !sameIDs(e.IDs, ids) {
				t.Errorf("redrive entry IDs %v, want %v", e.IDs, ids)
			}
			rest, err := s.ListAudit(ctx, store.ListAuditParams{Limit: 10, BeforeID: e.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(rest) != 1 || rest[0].Action != "pause" || !slices.Equal(rest[0].Queues, []string{"qa"}) {
				t.Errorf("entries before %d = %+v; want the pause of qa alone", e.ID, rest)
			}
		})
	}
}

// sameIDs reports whether a and b hold the same IDs in any order.
func sameIDs(a, b []rdq.ID) bool {
	key := func(ids []rdq.ID) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = id.String()
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
