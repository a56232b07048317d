package server

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq/dlq"
)

// dlqMetrics registers the DLQ's counters with reg, or finds them there
// when another server on reg registered them first; no counters without a
// registerer.
func dlqMetrics(reg prometheus.Registerer) (dlq.Metrics, error) {
	if reg == nil {
		return dlq.Metrics{}, nil
	}
	var m dlq.Metrics
	for _, c := range []struct {
		dst        *dlq.Counter
		name, help string
	}{
		{&m.Redriven, "rdq_dlq_redriven_total", "Dead tasks redriven back to pending."},
		{&m.Purged, "rdq_dlq_purged_total", "Dead tasks deleted by purge."},
		{&m.RetentionPurged, "rdq_dlq_retention_purged_total", "Dead tasks deleted by DLQ retention."},
	} {
		counter := prometheus.NewCounter(prometheus.CounterOpts{Name: c.name, Help: c.help})
		if err := reg.Register(counter); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return dlq.Metrics{}, fmt.Errorf("registering %s: %w", c.name, err)
			}
			existing, ok := are.ExistingCollector.(prometheus.Counter)
			if !ok {
				return dlq.Metrics{}, fmt.Errorf("registering %s: a collector of another kind has that name: %w", c.name, err)
			}
			counter = existing
		}
		*c.dst = counter
	}
	return m, nil
}
