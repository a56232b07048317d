package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
)

// countingStore counts the failure-chart queries; when gate is set, each
// waits for it to close.
type countingStore struct {
	*pgstore.Store
	calls atomic.Int64
	gate  chan struct{}
	fail  atomic.Bool
}

func (s *countingStore) DeadHistogram(ctx context.Context, since time.Time, width time.Duration, buckets int, fps []string) (map[string][]int64, error) {
	if fps == nil {
		s.calls.Add(1)
		if s.gate != nil {
			<-s.gate
		}
		if s.fail.Load() {
			return nil, errors.New("database unreachable")
		}
	}
	return s.Store.DeadHistogram(ctx, since, width, buckets, fps)
}

// testClock is a settable clock for Config.Now.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func newClock(t time.Time) *testClock        { c := &testClock{}; c.set(t); return c }
func chartTotal(n string) string {
	return `aria-label="` + n + ` tasks went dead in the last 24 hours"`
}
func overviewOf(t *testing.T, c *console.Console) string { return serve(t, c, "/") }

func serve(t *testing.T, c *console.Console, path string) string {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("X-Test-User", userAdmin)
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

func newChartConsole(t *testing.T, s *countingStore, clock *testClock) *console.Console {
	t.Helper()
	c, err := console.New(console.Config{Store: s, Authorize: authorize, Actor: actor, Now: clock.now, ChartMaxAge: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// The overview's chart is counted at most once per ChartMaxAge; a chart a
// little older is shown while one background recount replaces it; a much
// older one, or one of a past hour, is recounted before the page renders.
func TestOverviewChartIsCachedAndRecounted(t *testing.T) {
	pg, _ := pgtest.NewStore(t)
	s := &countingStore{Store: pg}
	clock := newClock(time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute))
	c := newChartConsole(t, s, clock)
	deadAt := func() *time.Time { at := clock.now().Add(-time.Minute); return &at }
	for range 2 {
		addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "m", at: deadAt()})
	}
	body := overviewOf(t, c)
	mustContain(t, body, chartTotal("2"), "recounted at most every 10s")
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("%d chart queries for the first view, want 1", n)
	}

	// Fresh: served from the cache, even though a task died since.
	addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "m", at: deadAt()})
	for range 5 {
		mustContain(t, overviewOf(t, c), chartTotal("2"))
	}
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("%d chart queries for six views within the maximum age, want 1", n)
	}

	// Stale but recent: the old chart is shown while it is recounted.
	clock.advance(15 * time.Second)
	mustContain(t, overviewOf(t, c), chartTotal("2"))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(overviewOf(t, c), chartTotal("3")) {
		if time.Now().After(deadline) {
			t.Fatal("the stale chart was never recounted")
		}
		time.Sleep(5 * time.Millisecond) // polling for the background recount
	}
	if n := s.calls.Load(); n != 2 {
		t.Fatalf("%d chart queries after one recount, want 2", n)
	}

	// Much older: recounted before the page renders.
	clock.advance(time.Minute)
	addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "m", at: deadAt()})
	mustContain(t, overviewOf(t, c), chartTotal("4"))
	if n := s.calls.Load(); n != 3 {
		t.Fatalf("%d chart queries, want 3", n)
	}

	// A new hour: the chart moves on at once, even within the maximum age.
	clock.set(clock.now().Truncate(time.Hour).Add(time.Hour))
	overviewOf(t, c)
	if n := s.calls.Load(); n != 4 {
		t.Fatalf("%d chart queries after the hour turned, want 4", n)
	}

	// A failing recount with nothing fresh enough to show is an error page,
	// and the next view tries again.
	clock.advance(time.Hour)
	s.fail.Store(true)
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Test-User", userAdmin)
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, req)
	if rec.Code < 500 {
		t.Fatalf("overview with a failing chart query: %d, want a 5xx", rec.Code)
	}
	s.fail.Store(false)
	mustContain(t, overviewOf(t, c), chartTotal("4"))
}

// Many viewers of a cold or expired chart share one query.
func TestOverviewChartOneQueryForManyViewers(t *testing.T) {
	pg, _ := pgtest.NewStore(t)
	s := &countingStore{Store: pg, gate: make(chan struct{})}
	clock := newClock(time.Now())
	c := newChartConsole(t, s, clock)
	addDead(t, s, deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "m"})
	const viewers = 16
	var wg sync.WaitGroup
	var started atomic.Int64
	bodies := make([]string, viewers)
	for i := range viewers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-Test-User", userAdmin)
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, req)
			bodies[i] = rec.Body.String()
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.calls.Load() == 0 || started.Load() < viewers {
		if time.Now().After(deadline) {
			t.Fatal("no chart query started")
		}
		time.Sleep(time.Millisecond) // polling for the viewers to arrive
	}
	close(s.gate)
	wg.Wait()
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("%d chart queries for %d concurrent viewers, want 1", n, viewers)
	}
	for i, b := range bodies {
		if !strings.Contains(b, chartTotal("1")) {
			t.Fatalf("viewer %d did not get the chart", i)
		}
	}
}
