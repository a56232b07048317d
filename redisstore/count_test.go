package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
)

// TestCountDeadByMessageAndLife: counts by message and life walk a queue's
// dead tasks over several scripts, through dead times many tasks share,
// and count a task whose record is missing from its own hash.
func TestCountDeadByMessageAndLife(t *testing.T) {
	s, _ := openStore(t)
	c := client(t)
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	defer redisstore.SetCountBudget(700)()
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	const n = 9000
	var ids []rdq.ID
	for i := 0; i < n; i += 3000 {
		at := now.Add(time.Duration(i/3000) * time.Second)
		ts := make([]store.NewTask, 0, 3000)
		for j := i; j < i+3000; j++ {
			msg := fmt.Sprintf("failure %d", j)
			if j%3 == 0 {
				msg += " Zebra"
			}
			id := rdq.NewID()
			ids = append(ids, id)
			ts = append(ts, store.NewTask{ID: id, Queue: fmt.Sprintf("q%d", j%2), Handler: "h",
				FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, WorkerID: "w",
					Failure: rdq.Failure{Type: "E", Message: msg, Fingerprint: "f"}}})
		}
		if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: ts, Now: &at}); err != nil {
			t.Fatal(err)
		}
	}
	// Tasks buried before the records were kept have none.
	if err := c.HDel(ctx, s.Namespace()+":{q0}:dm", ids[0].String(), ids[2].String(), ids[3].String()).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    store.DeadFilter
		want int64
	}{
		{store.DeadFilter{MessageContains: "zEBRA"}, n / 3},
		{store.DeadFilter{MessageContains: "zebra", Queue: "q0"}, n / 6},
		{store.DeadFilter{MessageContains: "zebra", DeadAfter: now.Add(time.Second), DeadBefore: now.Add(2 * time.Second)}, 1000},
		{store.DeadFilter{LifeBelow: 1}, n},
		{store.DeadFilter{LifeMin: 1}, 0},
		{store.DeadFilter{LifeBelow: 1, MessageContains: "failure 1"}, 1111},
	} {
		got, err := s.CountDead(ctx, tc.f)
		if err != nil {
			t.Fatalf("CountDead(%+v): %v", tc.f, err)
		}
		if got != tc.want {
			t.Errorf("CountDead(%+v) = %d, want %d", tc.f, got, tc.want)
		}
	}
	// A task that leaves the dead-letter queue takes its record along.
	if errs, err := s.Redrive(ctx, store.RedriveParams{IDs: []rdq.ID{ids[1]}, Actor: "op"}); err != nil || errs[0] != nil {
		t.Fatalf("Redrive: %v %v", err, errs)
	}
	if ok, err := c.HExists(ctx, s.Namespace()+":{q1}:dm", ids[1].String()).Result(); err != nil || ok {
		t.Errorf("the record of a redriven task: present %v, %v; want it gone", ok, err)
	}
	for {
		n, err := s.PurgeDead(ctx, store.PurgeDeadParams{Limit: 5000, Action: "purge", Actor: "op"})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	for _, q := range []string{"q0", "q1"} {
		if n, err := c.HLen(ctx, s.Namespace()+":{"+q+"}:dm").Result(); err != nil || n != 0 {
			t.Errorf("records of queue %s after every dead task was purged: %d, %v; want none", q, n, err)
		}
	}
}
