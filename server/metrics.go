package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq/store"
)

// statsTimeout bounds the Admin.Stats call of one scrape.
const statsTimeout = 10 * time.Second

type metrics struct {
	submittedTotal *prometheus.CounterVec
	requestsTotal  *prometheus.CounterVec
	signInsTotal   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, admin store.Admin, log *slog.Logger) (*metrics, error) {
	m := &metrics{
		submittedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "server", Name: "submitted_total",
			Help: "Tasks stored through the API (duplicates excluded), by queue.",
		}, []string{"queue"}),
		requestsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "server", Name: "requests_total",
			Help: "API requests, by method and result code (ok or a stable error code).",
		}, []string{"method", "code"}),
		signInsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "server", Name: "console_signins_total",
			Help: "Console sign-in attempts, by result: ok, invalid (unknown token), throttled or error.",
		}, []string{"result"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.submittedTotal, err = register(reg, m.submittedTotal); err != nil {
		return nil, err
	}
	if m.requestsTotal, err = register(reg, m.requestsTotal); err != nil {
		return nil, err
	}
	if m.signInsTotal, err = register(reg, m.signInsTotal); err != nil {
		return nil, err
	}
	if admin != nil {
		if err := reg.Register(NewStatsCollector(admin, log)); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("server: registering the queue statistics collector: %w", err)
			}
		}
	}
	return m, nil
}

// register registers c, or returns the identical collector already
// registered, so that several services can share a registerer.
func register(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("server: registering metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) submitted(queue string, n int) {
	m.submittedTotal.WithLabelValues(queue).Add(float64(n))
}

func (m *metrics) signIn(result string) {
	m.signInsTotal.WithLabelValues(result).Inc()
}

func (m *metrics) request(method string, code Code) {
	c := string(code)
	if c == "" {
		c = "ok"
	}
	m.requestsTotal.WithLabelValues(method, c).Inc()
}

// StatsInterval is how often StatsCollector reads the queue statistics at
// most: scrapes in between, however many scrapers there are, are served
// from the last reading.
const StatsInterval = 15 * time.Second

// StatsCollector exports per-queue gauges read from Admin.Stats, so every
// server node reports the same, store-wide numbers:
//
//	rdq_queue_tasks{queue, status}          tasks by status: pending, in_flight, dead
//	rdq_queue_dead_tasks{queue}             the dead-letter queue's depth
//	rdq_queue_oldest_due_age_seconds{queue} how long the longest-waiting due task has waited
//	rdq_queue_stats_age_seconds             how old the reading is
//
// The statistics cost a query, so scrapes never run it themselves: they
// are served from the last reading, and a scrape that finds it older than
// StatsInterval starts one refresh in the background (only the first
// scrape waits for a reading). Whatever the number of scrapers, the store
// sees at most one Stats query per StatsInterval. A failed read is logged
// and the last good reading kept; with no reading at all it is reported as
// a scrape error.
type StatsCollector struct {
	admin    store.Admin
	log      *slog.Logger
	tasks    *prometheus.Desc
	dead     *prometheus.Desc
	dueAge   *prometheus.Desc
	age      *prometheus.Desc
	timeout  time.Duration
	interval time.Duration
	now      func() time.Time

	mu         sync.Mutex
	stats      []store.QueueStats
	readAt     time.Time     // when stats were read; zero before the first reading
	lastErr    error         // of the last refresh, if it failed
	tried      time.Time     // when the last refresh started
	refreshing chan struct{} // closed when the running refresh ends; nil if none
}

// NewStatsCollector returns a collector over admin; log (nil for
// slog.Default()) receives failed reads.
func NewStatsCollector(admin store.Admin, log *slog.Logger) *StatsCollector {
	if log == nil {
		log = slog.Default()
	}
	return &StatsCollector{
		admin:    admin,
		log:      log,
		timeout:  statsTimeout,
		interval: StatsInterval,
		now:      time.Now,
		tasks: prometheus.NewDesc("rdq_queue_tasks",
			"Tasks in the store by queue and status (pending, in_flight, dead).", []string{"queue", "status"}, nil),
		dead: prometheus.NewDesc("rdq_queue_dead_tasks",
			"Depth of the dead-letter queue, by queue.", []string{"queue"}, nil),
		dueAge: prometheus.NewDesc("rdq_queue_oldest_due_age_seconds",
			"How long the longest-waiting due pending task of the queue has been due.", []string{"queue"}, nil),
		age: prometheus.NewDesc("rdq_queue_stats_age_seconds",
			"Age of the queue statistics reading the rdq_queue_* gauges show.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.dead
	ch <- c.dueAge
	ch <- c.age
}

// Collect implements prometheus.Collector.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	now := c.now()
	if c.refreshing == nil && now.Sub(c.tried) >= c.interval {
		c.tried = now
		done := make(chan struct{})
		c.refreshing = done
		go c.refresh(done)
	}
	wait := c.refreshing
	first := c.readAt.IsZero()
	c.mu.Unlock()
	if first && wait != nil {
		// Nothing to serve yet: wait for the first reading.
		<-wait
	}

	c.mu.Lock()
	stats, readAt, lastErr := c.stats, c.readAt, c.lastErr
	c.mu.Unlock()
	if readAt.IsZero() {
		if lastErr == nil {
			lastErr = errors.New("no reading yet")
		}
		ch <- prometheus.NewInvalidMetric(c.tasks, fmt.Errorf("reading queue statistics: %w", lastErr))
		return
	}
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, max(c.now().Sub(readAt), 0).Seconds())
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.Pending), s.Queue, "pending")
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.InFlight), s.Queue, "in_flight")
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.Dead), s.Queue, "dead")
		ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(s.Dead), s.Queue)
		ch <- prometheus.MustNewConstMetric(c.dueAge, prometheus.GaugeValue, s.OldestDueAge.Seconds(), s.Queue)
	}
}

// refresh reads the statistics once and closes done.
func (c *StatsCollector) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	stats, err := c.admin.Stats(ctx, store.StatsParams{SucceededWindow: time.Minute})
	c.mu.Lock()
	if err != nil {
		c.lastErr = err
	} else {
		c.stats, c.readAt, c.lastErr = stats, c.now(), nil
	}
	c.refreshing = nil
	c.mu.Unlock()
	close(done)
	if err != nil {
		c.log.Error("rdq metrics: reading queue statistics", "error", err)
	}
}
