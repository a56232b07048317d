package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq/store"
)

// countingAdmin answers Stats and counts the calls; the rest of store.Admin
// is not used.
type countingAdmin struct {
	store.Admin
	calls atomic.Int32
	fail  atomic.Bool
}

func (a *countingAdmin) Stats(ctx context.Context, p store.StatsParams) ([]store.QueueStats, error) {
	n := a.calls.Add(1)
	if a.fail.Load() {
		return nil, errors.New("database is down")
	}
	return []store.QueueStats{{Queue: "orders", Pending: int64(n), Dead: 2}}, nil
}

// Scrapers share one reading, however many they are.
func TestStatsCollectorQueriesOnceForManyScrapes(t *testing.T) {
	admin := &countingAdmin{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatsCollector(admin, slog.New(slog.DiscardHandler)))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := admin.calls.Load(); n != 1 {
		t.Fatalf("200 scrapes by 8 scrapers ran %d Stats queries, want 1", n)
	}
}

// One reading per StatsInterval, refreshed in the background.
func TestStatsCollectorQueriesOncePerInterval(t *testing.T) {
	admin := &countingAdmin{}
	c := NewStatsCollector(admin, slog.New(slog.DiscardHandler))
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := admin.calls.Load(); n != 1 {
		t.Fatalf("200 scrapes ran %d Stats queries, want 1", n)
	}
	body := scrape(t, reg)
	if !strings.Contains(body, `rdq_queue_tasks{queue="orders",status="pending"} 1`) {
		t.Errorf("gauges: %s", body)
	}

	// Past the interval, one scrape starts one refresh in the background
	// and is served the old reading meanwhile.
	advance(StatsInterval)
	for range 5 {
		scrape(t, reg)
	}
	waitUntil(t, "a second reading", func() bool {
		return strings.Contains(scrape(t, reg), `rdq_queue_tasks{queue="orders",status="pending"} 2`)
	})
	if n := admin.calls.Load(); n != 2 {
		t.Errorf("%d Stats queries after one interval, want 2", n)
	}

	// A failed refresh keeps the last good reading.
	admin.fail.Store(true)
	advance(StatsInterval)
	scrape(t, reg)
	waitUntil(t, "the failed refresh", func() bool { return admin.calls.Load() == 3 })
	if body := scrape(t, reg); !strings.Contains(body, `status="pending"} 2`) || !strings.Contains(body, "rdq_queue_stats_age_seconds 15") {
		t.Errorf("after a failed refresh: %s", body)
	}
}

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			fmt.Fprintf(&b, "%s %g\n", name, m.GetGauge().GetValue())
		}
	}
	return b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The operational endpoints can be served apart from the API.
func TestOpsHandlerIsSeparable(t *testing.T) {
	reg := prometheus.NewRegistry()
	tokens, err := NewTokens(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{
		Store: stubStore{}, Auth: tokens, Gatherer: reg, Logger: slog.New(slog.DiscardHandler),
		Ready: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, path string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code
	}
	api, ops, both := s.APIHandler(), s.OpsHandler(), s.Handler()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if c := get(ops, path); c != 200 {
			t.Errorf("ops %s: %d", path, c)
		}
		if c := get(both, path); c != 200 {
			t.Errorf("handler %s: %d", path, c)
		}
		if c := get(api, path); c != 404 {
			t.Errorf("api %s: %d, want 404", path, c)
		}
	}
	if c := get(ops, "/v1/queues"); c != 404 {
		t.Errorf("ops /v1/queues: %d, want 404", c)
	}
	if c := get(api, "/v1/queues"); c != 401 {
		t.Errorf("api /v1/queues without a token: %d, want 401", c)
	}
}

// stubStore is a store.Store that no test here calls.
type stubStore struct{ store.Store }
