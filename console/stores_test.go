package console_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// consoleReads are the optional store capabilities the console uses; both
// stores must have them.
type consoleReads interface {
	store.Store
	store.Admin
	store.NotDueCounter
	store.DeadHistogrammer
	store.DeadGroupKeyer
}

func TestStoreConsoleReads(t *testing.T) {
	pg, _ := pgtest.NewStore(t)
	sq, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sq.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := sq.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]consoleReads{"pgstore": pg, "sqlitestore": sq} {
		t.Run(name, func(t *testing.T) { testConsoleReads(t, s) })
	}
}

func testConsoleReads(t *testing.T, s consoleReads) {
	ctx := context.Background()
	start := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int, m int) *time.Time {
		x := start.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
		return &x
	}
	// Group A: two dead in hour 1, one in hour 5 (queue emails and
	// billing); group B: one in hour 5; one before the window.
	a1 := addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "A", at: at(1, 0)})
	addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "A", at: at(1, 59)})
	addDead(t, s, deadSpec{queue: "billing", handler: "charge", errType: "timeout", msg: "A", at: at(5, 30)})
	addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "validation", msg: "B", at: at(5, 0)})
	addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "A", at: at(-1, 0)})
	fa, fb := rdq.Fingerprint("timeout", "A"), rdq.Fingerprint("validation", "B")

	h, err := s.DeadHistogram(ctx, start, time.Hour, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 2, 0, 0, 0, 2}; !slices.Equal(h[""], want) || len(h) != 1 {
		t.Errorf("histogram %v, want %v", h, want)
	}
	h, err = s.DeadHistogram(ctx, start, time.Hour, 6, []string{fa, fb, "0000"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h[fa], []int64{0, 2, 0, 0, 0, 1}) || !slices.Equal(h[fb], []int64{0, 0, 0, 0, 0, 1}) || !slices.Equal(h["0000"], make([]int64, 6)) {
		t.Errorf("histogram by fingerprint %v", h)
	}
	if _, err := s.DeadHistogram(ctx, start, 0, 6, nil); err == nil {
		t.Error("a zero width was accepted")
	}

	keys, err := s.DeadGroupKeys(ctx, []string{fa, fb, "0000"})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]string{{"billing", "charge"}, {"emails", "send"}}; !slices.Equal(keys[fa], want) || len(keys[fb]) != 1 || len(keys) != 2 {
		t.Errorf("group keys %v", keys)
	}

	// A redriven task leaves the histogram and the keys.
	if errs, err := s.Redrive(ctx, store.RedriveParams{IDs: []rdq.ID{a1}, Delay: time.Hour, Actor: "t", Reason: "r", Now: at(6, 0)}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	h, err = s.DeadHistogram(ctx, start, time.Hour, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 1, 0, 0, 0, 2}; !slices.Equal(h[""], want) {
		t.Errorf("histogram after redrive %v, want %v", h[""], want)
	}

	// NotDueCounts: the redriven task is due an hour after its redrive;
	// a new task is due at once.
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Now: at(6, 0), Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "emails", Handler: "send"}}}); err != nil {
		t.Fatal(err)
	}
	nd, err := s.NotDueCounts(ctx, at(6, 30))
	if err != nil {
		t.Fatal(err)
	}
	if nd["emails"] != 1 || len(nd) != 1 {
		t.Errorf("not due at 6:30: %v", nd)
	}
	if nd, err = s.NotDueCounts(ctx, at(7, 30)); err != nil || len(nd) != 0 {
		t.Errorf("not due at 7:30: %v %v", nd, err)
	}
}
