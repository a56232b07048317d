package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func isLeaseLost(err error) bool { return errors.Is(err, store.ErrLeaseLost) }

// maintenanceLoop runs the reclaim and purge jobs on their intervals, the
// first run of each at a random point within its first interval so that
// workers started together spread their maintenance.
func (w *Worker) maintenanceLoop() {
	defer w.loops.Done()
	var reclaimC, purgeC <-chan time.Time
	var reclaimT, purgeT *time.Timer
	if w.reclaimInterval != Disabled {
		reclaimT = time.NewTimer(randomWithin(w.reclaimInterval))
		defer reclaimT.Stop()
		reclaimC = reclaimT.C
	}
	if w.purgeInterval != Disabled {
		purgeT = time.NewTimer(randomWithin(w.purgeInterval))
		defer purgeT.Stop()
		purgeC = purgeT.C
	}
	for {
		select {
		case <-w.loopCtx.Done():
			return
		case <-reclaimC:
			w.reclaimExpired()
			reclaimT.Reset(w.reclaimInterval)
		case <-purgeC:
			w.purgeSucceeded()
			purgeT.Reset(w.purgeInterval)
		}
	}
}

// reclaimLease is how long a reclaiming worker holds a reclaimed task while
// it writes the policy's decision: the shortest lease among its queues, so a
// reclaimer that dies in between delays the task no longer than a crashed
// execution would.
func (w *Worker) reclaimLease() time.Duration {
	lease := DefaultLease
	for i, name := range w.queueNames {
		if l := w.byName[name].lease; i == 0 || l < lease {
			lease = l
		}
	}
	return lease
}

func randomWithin(d time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

// reclaimExpired takes over tasks of this worker's queues whose lease
// expired, and retries or dead-letters each per its queue's policy (the
// store has recorded the lost execution as a LEASE_EXPIRED attempt).
func (w *Worker) reclaimExpired() {
	for round := 0; round < maintenanceRounds && w.loopCtx.Err() == nil; round++ {
		// Not cancelled by Stop: a reclaim that committed must be
		// followed by its decision, or the task would expire again.
		ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
		tasks, err := w.store.ReclaimExpired(ctx, store.ReclaimParams{
			Queues:   w.queueNames,
			Limit:    reclaimBatch,
			Lease:    w.reclaimLease(),
			WorkerID: w.id,
		})
		if err != nil {
			cancel()
			w.log.Error("reclaiming expired leases failed", slog.Any("error", err))
			return
		}
		if len(tasks) == 0 {
			cancel()
			return
		}
		comps := make([]store.Completion, len(tasks))
		decisions := make([]rdq.Decision, len(tasks))
		for i, t := range tasks {
			var policy rdq.Policy
			if q, ok := w.byName[t.Queue]; ok {
				policy = q.policy
			}
			d := policy.ForTask(t).DecideLeaseExpired(t.Attempts, rand.Float64())
			decisions[i] = d
			comps[i] = store.Completion{Lease: store.Lease{ID: t.ID, Token: t.LeaseToken}, Status: rdq.StatusPending, RetryIn: d.RetryIn}
			if d.Dead {
				comps[i].Status = rdq.StatusDead
				comps[i].RetryIn = 0
			}
			w.metrics.reclaimed.WithLabelValues(t.Queue).Inc()
			w.metrics.attempts.WithLabelValues(t.Queue, string(rdq.OutcomeLeaseExpired)).Inc()
			w.logTaskFields(slog.LevelWarn, "lease expired; the execution was lost and the task reclaimed", t.ID, t.Queue, t.Handler, t.Attempts)
		}
		errs, err := w.store.Finish(ctx, store.FinishParams{Completions: comps})
		cancel()
		if err == nil && len(errs) != len(comps) {
			err = errors.New("worker: store returned a wrong number of results finishing reclaimed tasks")
		}
		if err != nil {
			w.log.Error("deciding reclaimed tasks failed; they will be reclaimed again", slog.Int("tasks", len(tasks)), slog.Any("error", err))
			return
		}
		for i, t := range tasks {
			switch {
			case errs[i] != nil:
				w.logTaskFields(slog.LevelWarn, "deciding a reclaimed task failed", t.ID, t.Queue, t.Handler, t.Attempts, slog.Any("error", errs[i]))
			case decisions[i].Dead:
				w.metrics.deadLettered.WithLabelValues(t.Queue).Inc()
				w.logTaskFields(slog.LevelError, "task dead-lettered", t.ID, t.Queue, t.Handler, t.Attempts,
					slog.String("reason", "attempts exhausted"), slog.String("outcome", string(rdq.OutcomeLeaseExpired)))
			default:
				w.logTaskFields(slog.LevelWarn, "retry scheduled after lost execution", t.ID, t.Queue, t.Handler, t.Attempts,
					slog.String("outcome", string(rdq.OutcomeLeaseExpired)), slog.Duration("retry_in", decisions[i].RetryIn))
			}
		}
		if len(tasks) < reclaimBatch {
			return
		}
	}
}

// purgeSucceeded deletes succeeded tasks older than the retention, in
// bounded batches.
func (w *Worker) purgeSucceeded() {
	for round := 0; round < maintenanceRounds; round++ {
		ctx, cancel := context.WithTimeout(w.loopCtx, storeCallTimeout)
		n, err := w.store.PurgeSucceeded(ctx, store.PurgeSucceededParams{
			OlderThan: w.succeededTTL,
			Limit:     purgeBatch,
			Actor:     PurgeActor,
		})
		cancel()
		if err != nil {
			if w.loopCtx.Err() == nil {
				w.log.Error("purging succeeded tasks failed", slog.Any("error", err))
			}
			return
		}
		if n > 0 {
			w.metrics.purged.Add(float64(n))
			w.log.Info("purged succeeded tasks", slog.Int64("count", n), slog.Duration("older_than", w.succeededTTL))
		}
		if n < purgeBatch {
			return
		}
	}
}
