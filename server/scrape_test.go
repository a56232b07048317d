package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// countingGatherer counts its gatherings.
type countingGatherer struct {
	g prometheus.Gatherer
	n atomic.Int32
}

func (c *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.n.Add(1)
	return c.g.Gather()
}

func scrapeService(t *testing.T, cfg Config) (*Service, *countingGatherer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "rdq_test_total", Help: "A test counter."}))
	g := &countingGatherer{g: reg}
	tokens, err := NewTokens(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Auth, cfg.Gatherer, cfg.Logger = stubStore{}, tokens, g, slog.New(slog.DiscardHandler)
	cfg.Ready = func(context.Context) error { return nil }
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, g
}

func scrapeAs(h http.Handler, authz string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// However many scrapers there are, the registry is gathered once per
// MetricsCacheTTL.
func TestMetricsGatheredOncePerTTL(t *testing.T) {
	s, g := scrapeService(t, Config{MetricsCacheTTL: time.Minute})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	s.scrape.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := s.OpsHandler()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 40 {
		wg.Go(func() {
			w := scrapeAs(h, "")
			// 503 is the bound on scrapes encoded at once.
			if w.Code != http.StatusOK && w.Code != http.StatusServiceUnavailable {
				failed.Add(1)
			}
			if w.Code == http.StatusOK && !strings.Contains(w.Body.String(), "rdq_test_total 0") {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Errorf("%d scrapes failed", failed.Load())
	}
	if n := g.n.Load(); n != 1 {
		t.Errorf("40 scrapes within the TTL gathered %d times, want 1", n)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if w := scrapeAs(h, ""); w.Code != http.StatusOK {
		t.Errorf("scrape after the TTL: %d", w.Code)
	}
	if n := g.n.Load(); n != 2 {
		t.Errorf("a scrape after the TTL: %d gatherings in all, want 2", n)
	}
}

// With a metrics token, /metrics answers only to it, on Handler and
// OpsHandler; a weak metrics token is refused at start.
func TestMetricsToken(t *testing.T) {
	const tok = "mT9xQ2vL7kR4pZ8nW3cB6yH1jD5fG0sA-uEoIiRtYqX"
	s, _ := scrapeService(t, Config{MetricsToken: tok})
	for name, h := range map[string]http.Handler{"Handler": s.Handler(), "OpsHandler": s.OpsHandler()} {
		for _, authz := range []string{"", "Bearer wrong", "Bearer " + tok[:len(tok)-1], "Basic " + tok} {
			w := scrapeAs(h, authz)
			if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "metrics token") || strings.Contains(w.Body.String(), "rdq_test_total") {
				t.Errorf("%s with %q: %d %s", name, authz, w.Code, w.Body)
			}
		}
		if w := scrapeAs(h, "Bearer "+tok); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "rdq_test_total") {
			t.Errorf("%s with the token: %d", name, w.Code)
		}
		r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("%s /healthz needs no token: %d", name, w.Code)
		}
	}
	tokens, err := NewTokens(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Store: stubStore{}, Auth: tokens, Gatherer: prometheus.NewRegistry(), MetricsToken: "metrics-token"})
	if err == nil || !strings.Contains(err.Error(), "MetricsToken") || !strings.Contains(err.Error(), "openssl rand") {
		t.Errorf("a weak metrics token: %v", err)
	}
}

// BenchmarkScrape serves /metrics from a registry with the Go and process
// collectors: "cached" with the default MetricsCacheTTL, "uncached"
// gathering for every scrape (as before the cache). Time per scrape is
// what a scraper costs the server.
func BenchmarkScrape(b *testing.B) {
	for _, bc := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", 0}, {"uncached", time.Nanosecond}} {
		b.Run(bc.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			tokens, err := NewTokens(nil)
			if err != nil {
				b.Fatal(err)
			}
			s, err := New(Config{Store: stubStore{}, Auth: tokens, Gatherer: reg, MetricsCacheTTL: bc.ttl, Logger: slog.New(slog.DiscardHandler),
				Ready: func(context.Context) error { return nil }})
			if err != nil {
				b.Fatal(err)
			}
			h := s.OpsHandler()
			b.ReportAllocs()
			for b.Loop() {
				if w := scrapeAs(h, ""); w.Code != http.StatusOK {
					b.Fatalf("scrape: %d", w.Code)
				}
			}
		})
	}
}
