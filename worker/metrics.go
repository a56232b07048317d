package worker

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	resultsDropped  *prometheus.CounterVec   // queue
	inFlight        *prometheus.GaugeVec     // queue
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
			Help: "Tasks released unfinished at shutdown, without counting an attempt, by queue.",
		}, []string{"queue"}),
		resultsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdq", Subsystem: "worker", Name: "results_dropped_total",
			Help: "Results this worker gave up writing because the task's lease expired first (the task is reclaimed and retried), by queue.",
		}, []string{"queue"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
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
	if m.inFlight, err = register(reg, m.inFlight); err != nil {
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
