package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq/store"
)

// statsTimeout bounds the Admin.Stats call of one scrape.
const statsTimeout = 10 * time.Second

type metrics struct {
	submittedTotal *prometheus.CounterVec
	requestsTotal  *prometheus.CounterVec
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

func (m *metrics) request(method string, code Code) {
	c := string(code)
	if c == "" {
		c = "ok"
	}
	m.requestsTotal.WithLabelValues(method, c).Inc()
}

// StatsCollector exports per-queue gauges read from Admin.Stats at every
// scrape, so every server node reports the same, store-wide numbers:
//
//	rdq_queue_tasks{queue, status}          tasks by status: pending, in_flight, dead
//	rdq_queue_dead_tasks{queue}             the dead-letter queue's depth
//	rdq_queue_oldest_due_age_seconds{queue} how long the longest-waiting due task has waited
//
// A failed read is reported as a scrape error.
type StatsCollector struct {
	admin   store.Admin
	log     *slog.Logger
	tasks   *prometheus.Desc
	dead    *prometheus.Desc
	dueAge  *prometheus.Desc
	timeout time.Duration
}

// NewStatsCollector returns a collector over admin; log (nil for
// slog.Default()) receives failed reads.
func NewStatsCollector(admin store.Admin, log *slog.Logger) *StatsCollector {
	if log == nil {
		log = slog.Default()
	}
	return &StatsCollector{
		admin:   admin,
		log:     log,
		timeout: statsTimeout,
		tasks: prometheus.NewDesc("rdq_queue_tasks",
			"Tasks in the store by queue and status (pending, in_flight, dead).", []string{"queue", "status"}, nil),
		dead: prometheus.NewDesc("rdq_queue_dead_tasks",
			"Depth of the dead-letter queue, by queue.", []string{"queue"}, nil),
		dueAge: prometheus.NewDesc("rdq_queue_oldest_due_age_seconds",
			"How long the longest-waiting due pending task of the queue has been due.", []string{"queue"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.dead
	ch <- c.dueAge
}

// Collect implements prometheus.Collector.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	stats, err := c.admin.Stats(ctx, store.StatsParams{SucceededWindow: time.Minute})
	if err != nil {
		c.log.Error("rdq metrics: reading queue statistics", "error", err)
		ch <- prometheus.NewInvalidMetric(c.tasks, fmt.Errorf("reading queue statistics: %w", err))
		return
	}
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.Pending), s.Queue, "pending")
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.InFlight), s.Queue, "in_flight")
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.Dead), s.Queue, "dead")
		ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(s.Dead), s.Queue)
		ch <- prometheus.MustNewConstMetric(c.dueAge, prometheus.GaugeValue, s.OldestDueAge.Seconds(), s.Queue)
	}
}
