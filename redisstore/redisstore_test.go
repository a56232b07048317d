package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
)

// TestOpenNamespaceParam: the namespace in a URL reaches the store, and
// the parameter does not reach the client (which refuses options it does
// not know).
func TestOpenNamespaceParam(t *testing.T) {
	s, locator := openStore(t)
	id := rdq.NewID()
	if _, err := s.Enqueue(t.Context(), store.EnqueueParams{Tasks: []store.NewTask{{ID: id, Queue: "q", Handler: "h"}}}); err != nil {
		t.Fatal(err)
	}
	o, err := redisstore.Open(t.Context(), locator, redisstore.Config{Namespace: "ignored"})
	if err != nil {
		t.Fatalf("Open(%s): %v", locator, err)
	}
	defer func() {
		if err := o.Close(); err != nil {
			t.Error(err)
		}
	}()
	if o.Namespace() != s.Namespace() {
		t.Fatalf("Namespace() = %q, want %q from the URL", o.Namespace(), s.Namespace())
	}
	if _, _, err := o.Get(t.Context(), id); err != nil {
		t.Fatalf("Get through the opened store: %v", err)
	}
}

// TestBadConfig: a bad namespace, retention or URL is refused with what
// was wrong, and a password in the URL is never repeated.
func TestBadConfig(t *testing.T) {
	c := client(t)
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, cfg := range []redisstore.Config{
		{Namespace: "a{b}"},
		{Namespace: strings.Repeat("n", 65)},
		{KeyRetention: -time.Second},
	} {
		if _, err := redisstore.New(c, cfg); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("New(%+v) error = %v, want one wrapping rdq.ErrInvalid", cfg, err)
		}
	}
	for _, u := range []string{"redis://user:s3cret@127.0.0.1:1/0?namespace=a%7Bb", "redis://user:s3cret@[::1/0", "mysql://user:s3cret@host/db"} {
		_, err := redisstore.Open(t.Context(), u, redisstore.Config{})
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open error shows the password: %v", err)
		}
	}
}

// TestEnqueueRefusesWholeBatch: a task the store cannot take fails the
// whole batch before anything is written.
func TestEnqueueRefusesWholeBatch(t *testing.T) {
	s, _ := openStore(t)
	good := store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h"}
	bad := store.NewTask{ID: rdq.NewID(), Queue: "q{x}", Handler: "h"}
	if _, err := s.Enqueue(t.Context(), store.EnqueueParams{Tasks: []store.NewTask{good, bad}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("Enqueue with a bad queue name: %v, want an error wrapping rdq.ErrInvalid", err)
	}
	if _, _, err := s.Get(t.Context(), good.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of the good task of a refused batch: %v, want ErrNotFound", err)
	}
}

// TestServerClock: without a Now, times come from the server's clock.
func TestServerClock(t *testing.T) {
	s, _ := openStore(t)
	c := client(t)
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	before, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Enqueue(t.Context(), store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "q", Handler: "h", Delay: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	after, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	got := res[0].Task
	if got.CreatedAt.Before(before.Truncate(time.Microsecond)) || got.CreatedAt.After(after) {
		t.Errorf("CreatedAt %s is not between the server's times %s and %s", got.CreatedAt, before, after)
	}
	if d := got.NextAttemptAt.Sub(got.CreatedAt); d != time.Hour {
		t.Errorf("NextAttemptAt - CreatedAt = %s, want 1h", d)
	}
}

// TestFinishByAnotherStore: a store finishes tasks it claimed through the
// queue it remembers, and tasks another store claimed through the ID
// index; a stale token is refused either way.
func TestFinishByAnotherStore(t *testing.T) {
	ctx := t.Context()
	s, locator := openStore(t)
	o, err := redisstore.Open(ctx, locator, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := o.Close(); err != nil {
			t.Error(err)
		}
	}()
	ids := []rdq.ID{rdq.NewID(), rdq.NewID(), rdq.NewID()}
	var nts []store.NewTask
	for i, id := range ids {
		nts = append(nts, store.NewTask{ID: id, Queue: []string{"a", "b", "a"}[i], Handler: "h"})
	}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: nts}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"a", "b"}, Limit: 3, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("Claim = %d tasks, %v; want 3", len(claimed), err)
	}
	token := map[rdq.ID]int64{}
	for _, c := range claimed {
		token[c.ID] = c.LeaseToken
	}
	done := func(id rdq.ID, tk int64) store.Completion {
		return store.Completion{Lease: store.Lease{ID: id, Token: tk}, Status: rdq.StatusSucceeded,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}}
	}
	// o finishes ids[0] (claimed by s) with a stale token, then the right one.
	errs, err := o.Finish(ctx, store.FinishParams{Completions: []store.Completion{done(ids[0], token[ids[0]]-1), done(ids[1], token[ids[1]])}})
	if err != nil || !errors.Is(errs[0], store.ErrLeaseLost) || errs[1] != nil {
		t.Fatalf("Finish through another store = %v, %v; want [lease lost, nil]", errs, err)
	}
	errs, err = s.Finish(ctx, store.FinishParams{Completions: []store.Completion{done(ids[0], token[ids[0]]), done(ids[2], token[ids[2]]), done(ids[1], token[ids[1]])}})
	if err != nil || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], store.ErrLeaseLost) {
		t.Fatalf("Finish through the claiming store = %v, %v; want [nil, nil, lease lost]", errs, err)
	}
	for _, id := range ids {
		task, attempts, err := s.Get(ctx, id)
		if err != nil || task.Status != rdq.StatusSucceeded || len(attempts) != 1 {
			t.Fatalf("Get(%s) = %+v, %d attempts, %v; want SUCCEEDED with 1 attempt", id, task, len(attempts), err)
		}
	}
}
