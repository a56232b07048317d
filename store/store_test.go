package store_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/leakcheck"
	"github.com/srjn45/rdq/store"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestDeadFilterJSON(t *testing.T) {
	id := rdq.MustParseID("01a228ed-a53d-73cc-99e1-178fe0033ab9")
	after := time.Date(2026, 11, 29, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		filter store.DeadFilter
		want   string
	}{
		{store.DeadFilter{}, `{}`},
		{store.DeadFilter{Queue: "emails", Fingerprint: "21801068f00756d9"}, `{"queue":"emails","fingerprint":"21801068f00756d9"}`},
		{store.DeadFilter{IDs: []rdq.ID{id}, DeadAfter: after, MessageContains: "timeout"},
			`{"ids":["01a228ed-a53d-73cc-99e1-178fe0033ab9"],"dead_after":"2026-11-29T09:00:00Z","message_contains":"timeout"}`},
		{store.DeadFilter{Queue: "emails", LifeMin: 2, LifeBelow: 5}, `{"queue":"emails","life_min":2,"life_below":5}`},
	} {
		got, err := json.Marshal(c.filter)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", c.filter, err)
		}
		if string(got) != c.want {
			t.Errorf("Marshal(%+v) = %s, want %s", c.filter, got, c.want)
		}
	}
}

func TestCursorOf(t *testing.T) {
	task := &rdq.Task{ID: rdq.NewID(), FinishedAt: time.Unix(1700000000, 0)}
	if c := store.CursorOf(task); c.ID != task.ID || !c.FinishedAt.Equal(task.FinishedAt) {
		t.Errorf("CursorOf = %+v, want the task's finish time and ID", c)
	}
}

func TestAuditEntryTouchesQueue(t *testing.T) {
	cases := []struct {
		name  string
		e     store.AuditEntry
		queue string
		want  bool
	}{
		{"recorded", store.AuditEntry{Queues: []string{"a", "b"}, Filter: `{"queue":"c"}`}, "b", true},
		{"recorded wins over the filter", store.AuditEntry{Queues: []string{"a", "b"}, Filter: `{"queue":"c"}`}, "c", false},
		{"written before queues, by filter", store.AuditEntry{Filter: `{"queue":"c","handler":"h"}`}, "c", true},
		{"written before queues, other queue", store.AuditEntry{Filter: `{"queue":"c"}`}, "d", false},
		{"written before queues, by ids", store.AuditEntry{Filter: `{"ids":["x"]}`}, "c", false},
		{"no filter", store.AuditEntry{}, "c", false},
		{"filter not JSON", store.AuditEntry{Filter: `queue=c`}, "c", false},
	}
	for _, c := range cases {
		if got := c.e.TouchesQueue(c.queue); got != c.want {
			t.Errorf("%s: TouchesQueue(%q) = %v, want %v", c.name, c.queue, got, c.want)
		}
	}
	if got := store.AuditQueues("b", "", "a", "b"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("AuditQueues = %q, want [a b]", got)
	}
}

func TestSeriesWindow(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 30, 20, 0, time.UTC)
	p, err := store.SeriesWindow(time.Minute, now.Add(-15*time.Minute), time.Time{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if start := store.SeriesStart(p, now); start.After(now.Add(-15*time.Minute)) || p.Now != nil || p.Buckets != 16 {
		t.Errorf("15 minutes: %d buckets from %s (Now %v), want 16 from at or before 14:15:20", p.Buckets, start, p.Now)
	}
	until := now.Add(-2 * time.Hour)
	p, err = store.SeriesWindow(time.Hour, until.Add(-24*time.Hour), until, now)
	if err != nil {
		t.Fatal(err)
	}
	if p.Now == nil || !p.Now.Equal(until) || p.Buckets != 25 {
		t.Errorf("a day until 2h ago by hour: %d buckets, Now %v; want 25, %s", p.Buckets, p.Now, until)
	}
	for _, c := range []struct {
		width        time.Duration
		since, until time.Time
		want         string
	}{
		{time.Second, now.Add(-time.Hour), time.Time{}, "use minute or hour"},
		{time.Minute, time.Time{}, time.Time{}, "must be set"},
		{time.Minute, now.Add(time.Minute), time.Time{}, "must be set and before"},
		{time.Minute, now.Add(-time.Hour), now.Add(time.Hour), "in the future"},
		{time.Minute, now.Add(-2 * 24 * time.Hour), time.Time{}, "read hours"},
		{time.Hour, now.Add(-9 * 24 * time.Hour), time.Time{}, "past the counts kept"},
	} {
		_, err := store.SeriesWindow(c.width, c.since, c.until, now)
		if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SeriesWindow(%s, %s, %s): %v, want rdq.ErrInvalid saying %q", c.width, c.since, c.until, err, c.want)
		}
	}
	if _, err := store.SeriesWindow(time.Hour, now.Add(-store.SeriesRetention), time.Time{}, now); err != nil {
		t.Errorf("the whole retention by hour: %v", err)
	}
}
