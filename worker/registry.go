package worker

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// DefaultRegistryInterval is Config.RegistryInterval's default.
const DefaultRegistryInterval = 10 * time.Second

// The registry entry of a worker is stale after registryStaleRefreshes
// missed refreshes and removed registryExpireAfter later; the waiting tasks
// no live worker serves are looked for every unservedCheckRefreshes
// refreshes, and each (queue, handler) found is logged again at most every
// unservedLogChecks checks.
const (
	registryStaleRefreshes = 3
	registryExpireAfter    = time.Hour
	unservedCheckRefreshes = 6
	unservedLogChecks      = 10
	unservedBatch          = 100
)

// registry is the worker's side of store.WorkerRegistry.
type registry struct {
	w        *Worker
	reg      store.WorkerRegistry
	interval time.Duration
	info     store.WorkerInfo
	gauge    *prometheus.GaugeVec // queue, handler

	mu       sync.Mutex
	logged   map[[2]string]int // (queue, handler) -> check that last logged it
	gaugeSet map[[2]string]bool
	checks   int
}

func newUnservedGauge(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "rdq", Subsystem: "worker", Name: "unserved_tasks",
		Help: "Waiting tasks of this worker's queues whose handler no live registered worker has, by queue and handler, as of this worker's last check.",
	}, []string{"queue", "handler"})
	if reg == nil {
		return g, nil
	}
	return register(reg, g)
}

// rdqVersion is the version of the rdq module in this binary.
func rdqVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if bi.Main.Path == "github.com/srjn45/rdq" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/srjn45/rdq" {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// newRegistry prepares the registration of w, at Start.
func (w *Worker) newRegistry(reg store.WorkerRegistry) *registry {
	host, _ := os.Hostname()
	slots := 0
	for _, q := range w.queues {
		slots += q.concurrency
	}
	handlers := slices.Sorted(maps.Keys(w.handlers))
	return &registry{
		w: w, reg: reg, interval: w.registryInterval, gauge: w.unservedGauge,
		info: store.WorkerInfo{
			ID: w.id, Host: host, PID: os.Getpid(), Version: rdqVersion(),
			Queues: w.queueNames, Handlers: handlers, Slots: slots,
		},
		logged:   map[[2]string]int{},
		gaugeSet: map[[2]string]bool{},
	}
}

// refresh registers the worker again, with its executions in flight now.
func (r *registry) refresh() {
	info := r.info
	for _, q := range r.w.queues {
		info.InFlight += int(q.running.Load())
	}
	ctx, cancel := context.WithTimeout(r.w.baseCtx, min(storeCallTimeout, r.interval*registryStaleRefreshes))
	defer cancel()
	err := r.reg.RegisterWorker(ctx, store.RegisterWorkerParams{
		Worker:      info,
		StaleAfter:  r.interval * registryStaleRefreshes,
		ExpireAfter: r.interval*registryStaleRefreshes + registryExpireAfter,
	})
	if err != nil {
		r.w.log.Warn("registering the worker failed; operators may see it as stale until the next refresh", slog.Any("error", err))
	}
}

// loop refreshes the registration every interval, and looks for unserved
// tasks every unservedCheckRefreshes refreshes, until Stop ends it.
func (r *registry) loop() {
	defer r.w.bg.Done()
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for n := 1; ; n++ {
		select {
		case <-r.w.hbStop:
			return
		case <-ticker.C:
			r.refresh()
			if n%unservedCheckRefreshes == 0 {
				r.checkUnserved()
			}
		}
	}
}

// deregister removes the worker's entry, when it stops gracefully.
func (r *registry) deregister() {
	ctx, cancel := context.WithTimeout(r.w.baseCtx, storeCallTimeout)
	defer cancel()
	if err := r.reg.DeregisterWorker(ctx, r.w.id); err != nil {
		r.w.log.Warn("deregistering the worker failed; its entry turns stale and is removed later", slog.Any("error", err))
	}
}

// checkUnserved looks for waiting tasks of the worker's queues that no
// live worker can execute: it logs them (each (queue, handler) at most once
// every unservedLogChecks checks), exports the gauge, and dead-letters them
// in queues whose DeadLetterUnserved grace has passed.
func (r *registry) checkUnserved() {
	ctx, cancel := context.WithTimeout(r.w.loopCtx, storeCallTimeout)
	defer cancel()
	us, err := r.reg.UnservedHandlers(ctx, store.UnservedParams{Queues: r.w.queueNames, DueOnly: true})
	if err != nil {
		if r.w.loopCtx.Err() == nil {
			r.w.log.Warn("looking for tasks no worker can execute failed", slog.Any("error", err))
		}
		return
	}
	// This worker serves its own handlers in its own queues, whatever the
	// registry says of its entry (stale after a slow refresh, say).
	us = slices.DeleteFunc(us, func(u store.UnservedHandler) bool {
		_, mine := r.w.handlers[u.Handler]
		return mine
	})
	r.w.log.Debug("looked for tasks no running worker can execute", slog.Int("handlers", len(us)))
	r.mu.Lock()
	r.checks++
	seen := map[[2]string]bool{}
	var toLog []store.UnservedHandler
	for _, u := range us {
		k := [2]string{u.Queue, u.Handler}
		seen[k] = true
		r.gauge.WithLabelValues(u.Queue, u.Handler).Set(float64(u.Tasks))
		r.gaugeSet[k] = true
		if last, ok := r.logged[k]; !ok || r.checks-last >= unservedLogChecks {
			r.logged[k] = r.checks
			toLog = append(toLog, u)
		}
	}
	for k := range r.gaugeSet {
		if !seen[k] {
			r.gauge.DeleteLabelValues(k[0], k[1])
			delete(r.gaugeSet, k)
			delete(r.logged, k)
		}
	}
	r.mu.Unlock()
	for _, u := range toLog {
		r.w.log.Warn("tasks wait for a handler no running worker has registered",
			slog.String("queue", u.Queue), slog.String("handler", u.Handler),
			slog.Int64("tasks", u.Tasks), slog.Duration("oldest_waiting", u.Waiting.Round(time.Second)))
	}
	for _, u := range us {
		q := r.w.byName[u.Queue]
		if q == nil || q.deadLetterUnserved <= 0 || u.Waiting < q.deadLetterUnserved {
			continue
		}
		r.deadLetter(ctx, q, u.Handler)
	}
}

// deadLetter moves the tasks of handler in q that waited past the queue's
// grace to the dead-letter queue, in batches.
func (r *registry) deadLetter(ctx context.Context, q *queue, handler string) {
	f := rdq.UnservedHandlerFailure(q.name, handler, q.deadLetterUnserved)
	for round := 0; round < maintenanceRounds && ctx.Err() == nil; round++ {
		n, err := r.reg.DeadLetterUnserved(ctx, store.DeadLetterUnservedParams{
			Queue: q.name, Handler: handler, Grace: q.deadLetterUnserved, Limit: unservedBatch,
			Failure: f, Actor: r.w.id,
		})
		if err != nil {
			r.w.log.Error("dead-lettering tasks of an unserved handler failed", slog.String("queue", q.name),
				slog.String("handler", handler), slog.Any("error", err))
			return
		}
		if n > 0 {
			r.w.metrics.deadLettered.WithLabelValues(q.name).Add(float64(n))
			r.w.log.Warn("dead-lettered tasks of a handler no running worker has registered",
				slog.String("queue", q.name), slog.String("handler", handler), slog.Int64("tasks", n),
				slog.Duration("grace", q.deadLetterUnserved))
		}
		if n < unservedBatch {
			return
		}
	}
}
