package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
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
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
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

// fixedGatherer serves the same families every time: a test changes them
// to see whether a scrape encodes them again.
type fixedGatherer struct{ mfs []*dto.MetricFamily }

func (g fixedGatherer) Gather() ([]*dto.MetricFamily, error) { return g.mfs, nil }

// Within MetricsCacheTTL a scrape is a copy of bytes: each format (and
// compression) is encoded once per gathering, however many scrapers ask,
// and a gzipped or protobuf scrape carries what the plain one does.
func TestMetricsEncodedOncePerTTL(t *testing.T) {
	counter := &dto.MetricFamily{Name: proto.String("rdq_test_total"), Help: proto.String("A test counter."), Type: dto.MetricType_COUNTER.Enum(),
		Metric: []*dto.Metric{{Counter: &dto.Counter{Value: proto.Float64(1)}}}}
	tokens, err := NewTokens(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: stubStore{}, Auth: tokens, Gatherer: fixedGatherer{[]*dto.MetricFamily{counter}}, MetricsCacheTTL: time.Minute,
		Logger: slog.New(slog.DiscardHandler), Ready: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	s.scrape.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := s.OpsHandler()
	scrape := func(accept, encoding string) (string, http.Header) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Accept", accept)
		r.Header.Set("Accept-Encoding", encoding)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("scrape: %d %s", w.Code, w.Body)
		}
		body := w.Body.Bytes()
		if w.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		return string(body), w.Header()
	}
	const prometheusAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
	const protoAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
	plain, hdr := scrape(prometheusAccept, "")
	if !strings.Contains(plain, "rdq_test_total 1") || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("plain scrape: %s %q", plain, hdr.Get("Content-Type"))
	}
	if zipped, hdr := scrape(prometheusAccept, "gzip"); zipped != plain || hdr.Get("Content-Encoding") != "gzip" {
		t.Errorf("gzipped scrape: %q %q, want the plain one gzipped", zipped, hdr.Get("Content-Encoding"))
	}
	if _, hdr := scrape(prometheusAccept, "gzip;q=0, identity"); hdr.Get("Content-Encoding") != "" {
		t.Errorf("a scraper refusing gzip got %q", hdr.Get("Content-Encoding"))
	}
	pb, hdr := scrape(protoAccept, "")
	if !strings.Contains(hdr.Get("Content-Type"), "encoding=delimited") {
		t.Errorf("protobuf scrape: Content-Type %q", hdr.Get("Content-Type"))
	}
	dec := expfmt.NewDecoder(strings.NewReader(pb), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var got dto.MetricFamily
	if err := dec.Decode(&got); err != nil || got.GetName() != "rdq_test_total" || got.GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Errorf("protobuf scrape decodes to %v, %v", &got, err)
	}

	// The families change; scrapes within the TTL, of every format, still
	// serve the encodings made for the first scrapes.
	counter.Metric[0].Counter.Value = proto.Float64(42)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for _, enc := range []string{"", "gzip"} {
				if body, _ := scrape(prometheusAccept, enc); body != plain {
					t.Errorf("a scrape within the TTL encoded the families again:\n%s", body)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if body, _ := scrape(prometheusAccept, "gzip"); !strings.Contains(body, "rdq_test_total 42") {
		t.Errorf("a scrape after the TTL: %s", body)
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
