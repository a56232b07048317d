package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// finishRetryFor bounds how long the completer retries a Finish call that
// failed as a whole (the store unreachable, say) before giving up on the
// batch; the leases then expire and the tasks are reclaimed.
const finishRetryFor = 15 * time.Second

// finishItem is one execution's result on its way to the store.
type finishItem struct {
	e       *execution
	c       store.Completion
	d       rdq.Decision
	failure rdq.Failure
	dur     time.Duration
}

// completer batches the results of executions into Finish calls: it writes
// when batch results are waiting or the oldest has waited interval.
type completer struct {
	w        *Worker
	batch    int
	interval time.Duration

	mu     sync.RWMutex
	closed bool
	ch     chan finishItem
}

func newCompleter(w *Worker, batch int, interval time.Duration) *completer {
	return &completer{w: w, batch: batch, interval: interval, ch: make(chan finishItem, 2*batch)}
}

// add queues a result, blocking while the queue is full. It returns false,
// dropping the result, once the completer is closed.
func (c *completer) add(it finishItem) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.ch <- it
	return true
}

// close stops accepting results; run writes those queued and returns.
func (c *completer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.ch)
	}
}

func (c *completer) run() {
	defer c.w.bg.Done()
	timer := time.NewTimer(c.interval)
	timer.Stop()
	buf := make([]finishItem, 0, c.batch)
	for {
		it, ok := <-c.ch
		if !ok {
			return
		}
		buf = append(buf[:0], it)
		timer.Reset(c.interval)
		open := true
	collect:
		for len(buf) < c.batch {
			select {
			case it, ok := <-c.ch:
				if !ok {
					open = false
					break collect
				}
				buf = append(buf, it)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		c.flush(buf)
		if !open {
			return
		}
	}
}

// flush writes items in one Finish call, retrying a call that fails as a
// whole, and logs each task's transition. A result whose lease was lost is
// logged and dropped: the task belongs to a newer execution.
func (c *completer) flush(items []finishItem) {
	w := c.w
	comps := make([]store.Completion, len(items))
	for i, it := range items {
		comps[i] = it.c
	}
	var errs []error
	op := func() error {
		ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
		defer cancel()
		var err error
		errs, err = w.store.Finish(ctx, store.FinishParams{Completions: comps})
		if err == nil && len(errs) != len(comps) {
			return backoff.Permanent(fmt.Errorf("worker: store returned %d results finishing %d tasks", len(errs), len(comps)))
		}
		return err
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 50 * time.Millisecond
	bo.MaxElapsedTime = finishRetryFor
	err := backoff.RetryNotify(op, backoff.WithContext(bo, w.baseCtx), func(err error, next time.Duration) {
		w.log.Warn("finish failed; retrying", slog.Int("tasks", len(comps)), slog.Duration("retry_in", next), slog.Any("error", err))
	})
	for i, it := range items {
		w.leases.remove(it.e)
		var itemErr error
		if err != nil {
			itemErr = err
		} else {
			itemErr = errs[i]
		}
		switch {
		case itemErr == nil:
			w.recordFinish(it)
		case errors.Is(itemErr, store.ErrLeaseLost):
			w.metrics.leaseLost.WithLabelValues(it.e.q.name).Inc()
			w.logTask(slog.LevelWarn, "lease lost before the result was written; result discarded", it.e,
				slog.String("outcome", string(it.d.Outcome)))
		default:
			w.logTask(slog.LevelError, "writing the result failed; the lease will expire and the task be reclaimed", it.e,
				slog.String("outcome", string(it.d.Outcome)), slog.Any("error", itemErr))
		}
	}
}

// recordFinish logs and counts a result the store accepted.
func (w *Worker) recordFinish(it finishItem) {
	q := it.e.q.name
	w.metrics.attempts.WithLabelValues(q, string(it.d.Outcome)).Inc()
	switch it.c.Status {
	case rdq.StatusSucceeded:
		w.logTask(slog.LevelInfo, "task succeeded", it.e, slog.Duration("duration", it.dur))
	case rdq.StatusPending:
		w.logTask(slog.LevelWarn, "attempt failed; retry scheduled", it.e,
			slog.String("outcome", string(it.d.Outcome)),
			slog.Duration("retry_in", it.c.RetryIn),
			slog.String("error_type", it.failure.Type),
			slog.String("error", it.failure.Message))
	case rdq.StatusDead:
		w.metrics.deadLettered.WithLabelValues(q).Inc()
		reason := "attempts exhausted"
		if it.d.Outcome == rdq.OutcomePermanentFailure {
			reason = "permanent failure"
		}
		w.logTask(slog.LevelError, "task dead-lettered", it.e,
			slog.String("reason", reason),
			slog.String("outcome", string(it.d.Outcome)),
			slog.String("error_type", it.failure.Type),
			slog.String("error", it.failure.Message))
	}
}
