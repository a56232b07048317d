package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/srjn45/rdq/store"
)

// heartbeatLoop extends the leases of all live executions, in one batched
// Heartbeat call per lease duration, until Stop ends it. It looks for due
// leases every quarter of the shortest heartbeat interval, so no lease is
// extended much later than its interval.
func (w *Worker) heartbeatLoop() {
	w.every(w.quarterOfShortest(func(q *queue) time.Duration { return q.heartbeat }), w.beat)
}

// quarterOfShortest is a quarter of the shortest of the queues' durations d,
// at least a millisecond: how often a loop looks for what is due by them.
func (w *Worker) quarterOfShortest(d func(*queue) time.Duration) time.Duration {
	shortest := d(w.queues[0])
	for _, q := range w.queues[1:] {
		shortest = min(shortest, d(q))
	}
	return max(shortest/4, time.Millisecond)
}

// every calls f every tick until Stop ends the heartbeat and expiry loops;
// it is one of the worker's background goroutines.
func (w *Worker) every(tick time.Duration, f func()) {
	defer w.bg.Done()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-w.hbStop:
			return
		case <-ticker.C:
			f()
		}
	}
}

func (w *Worker) beat() {
	now := time.Now()
	groups := w.leases.due(now)
	if len(groups) == 0 {
		return
	}
	extends := make([]time.Duration, 0, len(groups))
	for d := range groups {
		extends = append(extends, d)
	}
	sort.Slice(extends, func(i, j int) bool { return extends[i] < extends[j] })
	for _, extend := range extends {
		beats := groups[extend]
		leases := make([]store.Lease, len(beats))
		for i, b := range beats {
			leases[i] = b.lease
		}
		ctx, cancel := context.WithTimeout(w.baseCtx, extend)
		errs, err := w.store.Heartbeat(ctx, store.HeartbeatParams{Leases: leases, Extend: extend})
		cancel()
		if err == nil && len(errs) != len(leases) {
			err = fmt.Errorf("worker: store returned %d results for %d heartbeats", len(errs), len(leases))
		}
		if err != nil {
			w.log.Warn("heartbeat failed; retrying", slog.Int("leases", len(leases)), slog.Any("error", err))
			continue
		}
		for i, b := range beats {
			if errs[i] != nil && !isLeaseLost(errs[i]) {
				w.logTask(slog.LevelWarn, "heartbeat failed for task", b.e, slog.Any("error", errs[i]))
			}
		}
		for _, e := range w.leases.afterBeat(beats, errs, now) {
			w.metrics.leaseLost.WithLabelValues(e.q.name).Inc()
			w.logTask(slog.LevelWarn, "lease lost; cancelling the handler", e)
			e.cancel(store.ErrLeaseLost)
		}
	}
}
