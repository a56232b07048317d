package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Defaults of /metrics.
const (
	// DefaultMetricsCacheTTL is how long /metrics serves one gathering of
	// Config.Gatherer when Config.MetricsCacheTTL is zero.
	DefaultMetricsCacheTTL = time.Second
	// maxScrapesInFlight bounds the /metrics responses being encoded at
	// once; more scrapers get 503.
	maxScrapesInFlight = 4
)

// cachedGatherer gathers from g at most once per ttl, however many
// scrapers ask: a scrape within ttl of the last gathering is served from
// it, and concurrent scrapes share one gathering.
type cachedGatherer struct {
	g   prometheus.Gatherer
	ttl time.Duration
	now func() time.Time

	mu  sync.Mutex // held while gathering
	at  time.Time  // of the last gathering; zero before the first
	mfs []*dto.MetricFamily
	err error
}

// Gather implements prometheus.Gatherer. The families it returns are
// shared between scrapes and must not be changed.
func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.at.IsZero() || now.Sub(c.at) >= c.ttl || now.Before(c.at) {
		c.mfs, c.err = c.g.Gather()
		c.at = now
	}
	return c.mfs, c.err
}

// metricsHandler serves the cached gatherer, behind the metrics token
// when one is set.
func (s *Service) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.scrape, promhttp.HandlerOpts{
		MaxRequestsInFlight: maxScrapesInFlight,
		ErrorLog:            slogPrinter{s},
	})
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

// slogPrinter is promhttp's error log on the service's logger.
type slogPrinter struct{ s *Service }

func (p slogPrinter) Println(v ...any) {
	p.s.log.Error("rdq metrics: serving a scrape", "error", fmt.Sprint(v...))
}
