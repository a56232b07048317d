package worker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq"
)

// metrics holds the worker's Prometheus collectors. They are always
// created, and registered only when a Registerer is configured.
type metrics struct {
	attempts        *prometheus.CounterVec   // queue, outcome
	deadLettered    *prometheus.CounterVec   // queue
	handlerDuration *prometheus.HistogramVec // queue, handler
	claimLatency    *prometheus.HistogramVec // queue
	reclaimed       *prometheus.CounterVec   // queue
	leaseLost       *prometheus.CounterVec   // queue
	released        *prometheus.CounterVec   // queue
	snoozed         *prometheus.CounterVec   // queue
	retriedInPlace  *prometheus.CounterVec   // queue
	resultsDropped  *prometheus.CounterVec   // queue
	inFlightVec     *prometheus.GaugeVec     // queue
	purged          prometheus.Counter

	breakerState       *prometheus.GaugeVec   // queue, handler
	breakerTransitions *prometheus.CounterVec // queue, handler, to
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "attempts_total",
			Help: "Attempts recorded, by queue and outcome (SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED).",
		}, []string{"queue", "outcome"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "dead_lettered_total",
			Help: "Tasks moved to the dead-letter queue, by queue.",
		}, []string{"queue"}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "handler_duration_seconds",
			Help:    "Time handlers ran, by queue and handler.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"queue", "handler"}),
		claimLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "claim_duration_seconds",
			Help:    "Latency of claim calls to the store, by queue.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"queue"}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "reclaimed_total",
			Help: "Tasks whose lease expired, reclaimed by this worker's maintenance, by queue.",
		}, []string{"queue"}),
		leaseLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "leases_lost_total",
			Help: "Executions of this worker whose lease was lost (taken over after expiry), by queue.",
		}, []string{"queue"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "released_total",
			Help: "Tasks released unfinished without counting an attempt, by queue: at shutdown, or claimed while their handler's circuit breaker was tripping.",
		}, []string{"queue"}),
		snoozed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "snoozed_total",
			Help: "Tasks whose handler snoozed them (rdq.Snooze) back to waiting without spending an attempt, by queue.",
		}, []string{"queue"}),
		retriedInPlace: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "retried_in_place_total",
			Help: "Failed attempts whose retry this worker ran at once under a lease kept from the failed one (store.InPlaceRetrier), by queue.",
		}, []string{"queue"}),
		resultsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "results_dropped_total",
			Help: "Results this worker gave up writing because the task's lease expired first (the task is reclaimed and retried), by queue.",
		}, []string{"queue"}),
		inFlightVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "in_flight",
			Help: "Handlers running now, by queue.",
		}, []string{"queue"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "purged_total",
			Help: "Succeeded tasks purged after their retention by this worker.",
		}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "breaker_state",
			Help: "Circuit breaker state by queue and handler, as this worker last saw it: 0 closed, 1 open, 2 half-open.",
		}, []string{"queue", "handler"}),
		breakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "breaker_transitions_total",
			Help: "Circuit breaker transitions this worker made, by queue, handler and new state (open, half_open, closed).",
		}, []string{"queue", "handler", "to"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.attempts, err = register(reg, m.attempts); err != nil {
		return nil, err
	}
	if m.deadLettered, err = register(reg, m.deadLettered); err != nil {
		return nil, err
	}
	if m.snoozed, err = register(reg, m.snoozed); err != nil {
		return nil, err
	}
	if m.retriedInPlace, err = register(reg, m.retriedInPlace); err != nil {
		return nil, err
	}
	if m.handlerDuration, err = register(reg, m.handlerDuration); err != nil {
		return nil, err
	}
	if m.claimLatency, err = register(reg, m.claimLatency); err != nil {
		return nil, err
	}
	if m.reclaimed, err = register(reg, m.reclaimed); err != nil {
		return nil, err
	}
	if m.leaseLost, err = register(reg, m.leaseLost); err != nil {
		return nil, err
	}
	if m.released, err = register(reg, m.released); err != nil {
		return nil, err
	}
	if m.resultsDropped, err = register(reg, m.resultsDropped); err != nil {
		return nil, err
	}
	if m.inFlightVec, err = register(reg, m.inFlightVec); err != nil {
		return nil, err
	}
	if m.purged, err = register(reg, m.purged); err != nil {
		return nil, err
	}
	if m.breakerState, err = register(reg, m.breakerState); err != nil {
		return nil, err
	}
	if m.breakerTransitions, err = register(reg, m.breakerTransitions); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the identical collector already
// registered (by another worker sharing the registerer).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("worker: registering metrics: %w", err)
}

// queueMetrics are one queue's children of the collectors every execution
// touches. A child is looked up in its vector on first use only: a lookup
// hashes the label values under the vector's lock, and doing that three or
// four times per task was a measurable share of the worker's CPU. Children
// still appear in the exposition only once used, as before.
type queueMetrics struct {
	inFlight lazy[prometheus.Gauge]
	attempts map[rdq.Outcome]*lazy[prometheus.Counter]
	duration map[string]*lazy[prometheus.Observer] // by registered handler
}

// executionOutcomes are the outcomes an execution's result can have.
var executionOutcomes = []rdq.Outcome{rdq.OutcomeSuccess, rdq.OutcomeRetryableFailure, rdq.OutcomePermanentFailure}

// lazy is a metric child resolved on first use.
type lazy[M any] struct {
	once sync.Once
	m    M
}

func (l *lazy[M]) get(resolve func() M) M {
	l.once.Do(func() { l.m = resolve() })
	return l.m
}

// newQueueMetrics prepares the children of queue for handlers (the names
// registered when the worker starts).
func newQueueMetrics(handlers []string) *queueMetrics {
	qm := &queueMetrics{
		attempts: make(map[rdq.Outcome]*lazy[prometheus.Counter], len(executionOutcomes)),
		duration: make(map[string]*lazy[prometheus.Observer], len(handlers)),
	}
	for _, o := range executionOutcomes {
		qm.attempts[o] = new(lazy[prometheus.Counter])
	}
	for _, h := range handlers {
		qm.duration[h] = new(lazy[prometheus.Observer])
	}
	return qm
}

func (m *metrics) inFlight(q *queue) prometheus.Gauge {
	return q.metrics.inFlight.get(func() prometheus.Gauge { return m.inFlightVec.WithLabelValues(q.name) })
}

func (m *metrics) attempt(q *queue, o rdq.Outcome) prometheus.Counter {
	l, ok := q.metrics.attempts[o]
	if !ok {
		return m.attempts.WithLabelValues(q.name, string(o))
	}
	return l.get(func() prometheus.Counter { return m.attempts.WithLabelValues(q.name, string(o)) })
}

func (m *metrics) handlerDurationOf(q *queue, handler string) prometheus.Observer {
	l, ok := q.metrics.duration[handler]
	if !ok { // a task naming no registered handler
		return m.handlerDuration.WithLabelValues(q.name, handler)
	}
	return l.get(func() prometheus.Observer { return m.handlerDuration.WithLabelValues(q.name, handler) })
}
