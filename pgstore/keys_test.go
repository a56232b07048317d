package pgstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// TestEnqueueRacingPurgeNeverRunsTwice: enqueues of keys whose tasks are
// being purged at that very moment never insert a new task. Each key's
// resubmission sees either the task (a duplicate) or, once the purge has
// committed, its kept key (a purged duplicate), however the two
// transactions interleave; without the key table as the arbiter, an
// enqueue that waited on the purge's row lock would insert after it.
func TestEnqueueRacingPurgeNeverRunsTwice(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, _ := pgtest.NewStore(t)
	base := time.Now().UTC().Truncate(time.Millisecond)
	const rounds, perRound = 20, 25
	for round := range rounds {
		now := base.Add(time.Duration(round) * time.Minute)
		var originals []store.NewTask
		for i := range perRound {
			nt := newTask("q")
			nt.IdempotencyKey = fmt.Sprintf("r%d-k%d", round, i)
			originals = append(originals, nt)
		}
		enqueue(t, s, at(now), originals...)
		claimed := claim(t, s, at(now), "q", perRound)
		if len(claimed) != perRound {
			t.Fatalf("claimed %d of %d", len(claimed), perRound)
		}
		var cs []store.Completion
		for _, c := range claimed {
			cs = append(cs, store.Completion{Lease: lease(c), Status: rdq.StatusSucceeded, Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}})
		}
		finish(t, s, at(now), cs...)

		later := now.Add(2 * time.Hour)
		var wg sync.WaitGroup
		results := make([]store.EnqueueResult, perRound)
		errs := make(chan error, perRound+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.PurgeSucceeded(ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 1000, Actor: "retention", Now: &later}); err != nil {
				errs <- err
			}
		}()
		for i := range perRound {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nt := newTask("q")
				nt.IdempotencyKey = originals[i].IdempotencyKey
				res, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{nt}, Now: &later})
				if err != nil {
					errs <- err
					return
				}
				results[i] = res[0]
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i, r := range results {
			if !r.Duplicate || r.Task.ID != originals[i].ID {
				t.Fatalf("round %d: resubmitting %s during its purge: Duplicate=%v Purged=%v ID=%s; want a duplicate of %s",
					round, originals[i].IdempotencyKey, r.Duplicate, r.Purged, r.Task.ID, originals[i].ID)
			}
		}
		if got := claim(t, s, at(later), "q", 1000); len(got) != 0 {
			t.Fatalf("round %d: %d tasks ran again", round, len(got))
		}
	}
}

// TestKeyRetentionIsConfigurable: a short KeyRetention frees a purged
// task's key once it has passed and the maintenance pruned it; a negative
// one is refused.
func TestKeyRetentionIsConfigurable(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, schema := pgtest.NewStore(t)
	if _, err := pgstore.New(pgtest.Pool(t), pgstore.Config{Schema: schema, KeyRetention: -time.Second}); err == nil {
		t.Fatal("a negative KeyRetention was accepted")
	}
	s, err := pgstore.New(pgtest.Pool(t), pgstore.Config{Schema: schema, KeyRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	nt := newTask("q")
	nt.IdempotencyKey = "k"
	enqueue(t, s, at(now), nt)
	c := claim(t, s, at(now), "q", 1)[0]
	finish(t, s, at(now), store.Completion{Lease: lease(c), Status: rdq.StatusSucceeded, Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess}})
	purgeAt := now.Add(2 * time.Hour)
	if n, err := s.PurgeSucceeded(ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 10, Now: &purgeAt}); err != nil || n != 1 {
		t.Fatalf("PurgeSucceeded = %d, %v", n, err)
	}
	for _, tc := range []struct {
		after  time.Duration
		purged bool
	}{{59 * time.Minute, true}, {61 * time.Minute, false}} {
		when := purgeAt.Add(tc.after)
		if _, err := s.PurgeSucceeded(ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 10, Now: &when}); err != nil {
			t.Fatal(err)
		}
		again := newTask("q")
		again.IdempotencyKey = "k"
		res := enqueue(t, s, at(when), again)[0]
		if res.Purged != tc.purged || (tc.purged && res.Task.ID != nt.ID) || (!tc.purged && (res.Duplicate || res.Task.ID != again.ID)) {
			t.Fatalf("%s after the purge: Duplicate=%v Purged=%v ID=%s", tc.after, res.Duplicate, res.Purged, res.Task.ID)
		}
	}
}

// TestConcurrentEnqueuesOfOneKeyAroundPurge: two enqueues of one key at
// once never both insert, whether they race the purge of the key's task
// (both see the task or its kept key) or the pruning of the key once its
// retention has passed (one inserts a new task, the other sees that one):
// the key row is the arbiter, and ON CONFLICT DO UPDATE ... WHERE judges
// the latest committed version of it, after waiting for the other's lock.
func TestConcurrentEnqueuesOfOneKeyAroundPurge(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, schema := pgtest.NewStore(t)
	s, err := pgstore.New(pgtest.Pool(t), pgstore.Config{Schema: schema, KeyRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().UTC().Truncate(time.Millisecond)
	const rounds, keys = 10, 10
	for round := range rounds {
		now := base.Add(time.Duration(round) * 24 * time.Hour)
		var originals []store.NewTask
		for i := range keys {
			nt := newTask("q")
			nt.IdempotencyKey = fmt.Sprintf("r%d-k%d", round, i)
			originals = append(originals, nt)
		}
		enqueue(t, s, at(now), originals...)
		var cs []store.Completion
		for _, c := range claim(t, s, at(now), "q", keys) {
			cs = append(cs, store.Completion{Lease: lease(c), Status: rdq.StatusSucceeded, Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}})
		}
		finish(t, s, at(now), cs...)

		// Half the keys race their task's purge, half the pruning of the
		// key after its retention (the first race of each half purges or
		// prunes every key at once; the later ones race an enqueue that
		// meets the purged key or none).
		purgeAt := now.Add(2 * time.Hour)
		pruneAt := purgeAt.Add(2 * time.Hour)
		race := func(when time.Time, key string) [2]store.EnqueueResult {
			var wg sync.WaitGroup
			var out [2]store.EnqueueResult
			errs := make(chan error, 3)
			wg.Add(3)
			go func() {
				defer wg.Done()
				if _, err := s.PurgeSucceeded(ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 1000, Actor: "retention", Now: &when}); err != nil {
					errs <- err
				}
			}()
			for i := range out {
				go func() {
					defer wg.Done()
					nt := newTask("q")
					nt.IdempotencyKey = key
					res, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{nt}, Now: &when})
					if err != nil {
						errs <- err
						return
					}
					out[i] = res[0]
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			return out
		}
		for i, nt := range originals[:keys/2] {
			for _, r := range race(purgeAt, nt.IdempotencyKey) {
				if !r.Duplicate || r.Task.ID != originals[i].ID {
					t.Fatalf("round %d: enqueue of %s during its purge: Duplicate=%v ID=%s; want a duplicate of %s",
						round, nt.IdempotencyKey, r.Duplicate, r.Task.ID, originals[i].ID)
				}
			}
		}
		// The other keys' tasks are purged, then their keys pruned while
		// two enqueues of each arrive.
		if _, err := s.PurgeSucceeded(ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 1000, Actor: "retention", Now: &purgeAt}); err != nil {
			t.Fatal(err)
		}
		for _, nt := range originals[keys/2:] {
			rs := race(pruneAt, nt.IdempotencyKey)
			fresh := 0
			for _, r := range rs {
				if !r.Duplicate {
					fresh++
				}
			}
			if fresh != 1 || rs[0].Task.ID != rs[1].Task.ID {
				t.Fatalf("round %d: two enqueues of %s as its key is pruned: %d inserted, IDs %s and %s; want one task",
					round, nt.IdempotencyKey, fresh, rs[0].Task.ID, rs[1].Task.ID)
			}
		}
		got := claim(t, s, at(pruneAt), "q", 1000)
		if len(got) != keys/2 {
			t.Fatalf("round %d: %d tasks to run after the races, want %d (one per pruned key)", round, len(got), keys/2)
		}
		cs = cs[:0]
		for _, c := range got {
			cs = append(cs, store.Completion{Lease: lease(c), Status: rdq.StatusSucceeded, Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}})
		}
		finish(t, s, at(pruneAt), cs...)
	}
}
