package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// TestSeriesCountersExpire: a finish batch writes its queue's minute and
// hour counters once per field, summed over the batch, and each counter
// hash expires after the series retention.
func TestSeriesCountersExpire(t *testing.T) {
	s, _ := openStore(t)
	c := client(t)
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := t.Context()
	now := time.Now().UTC()
	var nts []store.NewTask
	for range 5 {
		nts = append(nts, store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h"})
	}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: nts, Now: &now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 5, Lease: time.Minute, WorkerID: "w", Now: &now})
	if err != nil || len(got) != 5 {
		t.Fatalf("Claim: %d tasks, %v", len(got), err)
	}
	var cs []store.Completion
	for _, tk := range got {
		cs = append(cs, store.Completion{Lease: store.Lease{ID: tk.ID, Token: tk.LeaseToken}, Status: rdq.StatusSucceeded,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}})
	}
	if errs, err := s.Finish(ctx, store.FinishParams{Completions: cs, Now: &now}); err != nil || errs[0] != nil {
		t.Fatalf("Finish: %v %v", err, errs)
	}
	p := s.Namespace() + ":{q}"
	for _, k := range []string{
		p + ":sm:" + strconv.FormatInt(now.UnixMicro()/int64(time.Minute/time.Microsecond), 10),
		p + ":sh:" + strconv.FormatInt(now.UnixMicro()/int64(time.Hour/time.Microsecond), 10),
	} {
		v, err := c.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 1 || v["Sh"] != "5" {
			t.Errorf("%s = %v, want the 5 successes of handler h", k, v)
		}
		ttl, err := c.TTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < store.SeriesRetention || ttl > store.SeriesRetention+time.Hour {
			t.Errorf("TTL of %s = %s, want the retention %s and at most an hour more", k, ttl, store.SeriesRetention)
		}
	}
}
