package server

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// DefaultMetricsCacheTTL is how long /metrics serves one gathering of
// Config.Gatherer, and each encoding of it, when Config.MetricsCacheTTL is
// zero.
const DefaultMetricsCacheTTL = time.Second

// cachedGatherer gathers from g at most once per ttl, however many
// scrapers ask, and encodes each gathering at most once per exposition
// format and compression: a scrape within ttl of the last gathering is
// served from it, and concurrent scrapes share one gathering and one
// encoding. What a scrape costs is thus a copy of bytes, whatever the
// number of scrapers.
type cachedGatherer struct {
	g   prometheus.Gatherer
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex // held while gathering and encoding
	at     time.Time  // of the last gathering; zero before the first
	mfs    []*dto.MetricFamily
	err    error
	bodies map[string][]byte // encodings of mfs, by format and compression
}

// refresh gathers when the last gathering is older than ttl; c.mu is held.
func (c *cachedGatherer) refresh() {
	now := c.now()
	if c.at.IsZero() || now.Sub(c.at) >= c.ttl || now.Before(c.at) {
		c.mfs, c.err = c.g.Gather()
		c.at = now
		c.bodies = map[string][]byte{}
	}
}

// Gather implements prometheus.Gatherer. The families it returns are
// shared between scrapes and must not be changed.
func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh()
	return c.mfs, c.err
}

// encoded returns the current gathering encoded in format, gzipped if gz
// is set. The bytes are shared between scrapes and must not be changed.
func (c *cachedGatherer) encoded(format expfmt.Format, gz bool) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh()
	if c.err != nil {
		return nil, c.err
	}
	key := string(format)
	if gz {
		key += "\x00gzip"
	}
	if b, ok := c.bodies[key]; ok {
		return b, nil
	}
	var buf bytes.Buffer
	var zw *gzip.Writer
	var w interface{ Write([]byte) (int, error) } = &buf
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	enc := expfmt.NewEncoder(w, format)
	for _, mf := range c.mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", mf.GetName(), err)
		}
	}
	if closer, ok := enc.(expfmt.Closer); ok {
		if err := closer.Close(); err != nil {
			return nil, err
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	c.bodies[key] = buf.Bytes()
	return buf.Bytes(), nil
}

// acceptsGzip reports whether an Accept-Encoding value accepts gzip.
func acceptsGzip(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := 1.0
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			var err error
			if q, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				q = 0
			}
		}
		return q > 0
	}
	return false
}

// metricsHandler serves the cached gatherer, behind the metrics token
// when one is set.
func (s *Service) metricsHandler() http.Handler {
	h := http.HandlerFunc(s.serveMetrics)
	if s.metricsToken == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.metricsToken) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rdq metrics"`)
			writeProblem(w, r, errorf(CodeUnauthenticated, `/metrics needs "Authorization: Bearer <the metrics token>"`))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveMetrics writes the current gathering in the format the scraper
// accepts (Prometheus text unless it asks for protobuf), gzipped when it
// accepts gzip.
func (s *Service) serveMetrics(w http.ResponseWriter, r *http.Request) {
	format := expfmt.Negotiate(r.Header)
	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	body, err := s.scrape.encoded(format, gz)
	if err != nil {
		s.log.ErrorContext(r.Context(), "rdq metrics: serving a scrape", "error", err)
		writeProblem(w, r, errorf(CodeInternal, "gathering the metrics failed; the server log has the details"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", string(format))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Vary", "Accept, Accept-Encoding")
	if gz {
		h.Set("Content-Encoding", "gzip")
	}
	// A failed write means the scraper went away.
	_, _ = w.Write(body)
}
