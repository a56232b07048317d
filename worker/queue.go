package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// queue is one configured queue's runtime state.
type queue struct {
	name        string
	policy      rdq.Policy
	concurrency int
	lease       time.Duration
	heartbeat   time.Duration
	timeout     time.Duration // 0: none
	// leaseMargin is how long before a lease that could not be renewed
	// expires the handler is cancelled.
	leaseMargin time.Duration
	breaker     *breakerState // nil: no breaker
	// deadLetterUnserved is QueueConfig.DeadLetterUnserved; 0: off.
	deadLetterUnserved time.Duration
	metrics            *queueMetrics // set by Start

	running   atomic.Int64  // executions holding a slot (until their result is handed off)
	wake      chan struct{} // a notification: tasks may be due
	slotFreed chan struct{} // a handler returned
}

func newQueue(name string, qc QueueConfig) (*queue, error) {
	if err := rdq.ValidateName("queue", name); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := qc.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("worker: queue %s: %w", name, err)
	}
	q := &queue{
		name:        name,
		policy:      qc.Policy,
		concurrency: qc.Concurrency,
		lease:       qc.Lease,
		heartbeat:   qc.HeartbeatInterval,
		timeout:     qc.Timeout,
		wake:        make(chan struct{}, 1),
		slotFreed:   make(chan struct{}, 1),
	}
	switch {
	case q.concurrency < 0:
		return nil, fmt.Errorf("%w: worker: queue %s: Concurrency %d is negative", rdq.ErrInvalid, name, q.concurrency)
	case q.concurrency == 0:
		q.concurrency = DefaultConcurrency
	}
	switch {
	case q.lease < 0:
		return nil, fmt.Errorf("%w: worker: queue %s: Lease %s is negative", rdq.ErrInvalid, name, q.lease)
	case q.lease == 0:
		q.lease = DefaultLease
	}
	switch {
	case q.heartbeat < 0:
		return nil, fmt.Errorf("%w: worker: queue %s: HeartbeatInterval %s is negative", rdq.ErrInvalid, name, q.heartbeat)
	case q.heartbeat == 0:
		q.heartbeat = q.lease / 3
	case q.heartbeat >= q.lease:
		return nil, fmt.Errorf("%w: worker: queue %s: HeartbeatInterval %s must be shorter than Lease %s", rdq.ErrInvalid, name, q.heartbeat, q.lease)
	}
	if qc.DeadLetterUnserved < 0 {
		return nil, fmt.Errorf("%w: worker: queue %s: DeadLetterUnserved %s is negative (zero turns it off)", rdq.ErrInvalid, name, qc.DeadLetterUnserved)
	}
	q.deadLetterUnserved = qc.DeadLetterUnserved
	if qc.Breaker != nil {
		b, err := qc.Breaker.withDefaults(name)
		if err != nil {
			return nil, err
		}
		q.breaker = newBreakerState(b)
	}
	if q.heartbeat <= 0 {
		return nil, fmt.Errorf("%w: worker: queue %s: Lease %s is too short to heartbeat", rdq.ErrInvalid, name, q.lease)
	}
	q.leaseMargin = leaseMargin(q.lease, q.heartbeat)
	switch {
	case q.timeout == NoTimeout:
		q.timeout = 0
	case q.timeout < 0:
		return nil, fmt.Errorf("%w: worker: queue %s: Timeout %s is negative (use NoTimeout for none)", rdq.ErrInvalid, name, q.timeout)
	case q.timeout == 0:
		q.timeout = DefaultTimeout
	}
	return q, nil
}

// leaseMargin is how long before the expiry of a lease that could not be
// renewed the handler is cancelled: a tenth of the lease, at least 100ms (a
// handler needs a moment to notice), but no more than half the time between
// the last scheduled renewal and the expiry, so a renewal that succeeds late
// still counts.
func leaseMargin(lease, heartbeat time.Duration) time.Duration {
	return min(max(lease/10, 100*time.Millisecond), (lease-heartbeat)/2)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// claimsAtOnce is how many claims of one queue may be in flight at once.
// A claim of hundreds of tasks takes the store a while; a second one, sent
// when enough slots have freed meanwhile, keeps a busy worker's slots full
// instead of waiting for the first. Claims skip each other's rows.
const claimsAtOnce = 2

// claimed is the answer to one claim of up to limit tasks, sent at sent.
type claimed struct {
	tasks []*rdq.Task
	err   error
	limit int
	sent  time.Time
}

// fetchLoop claims tasks of q up to its free slots and starts executions,
// whenever it is woken by a notification, a freed slot (if the queue may hold
// more due tasks), a claim's answer or its poll timer, until the worker stops
// claiming. While one claim is in flight, a second is sent once a quarter of
// the queue's slots (at least one) is free again and the first claim's
// predecessor found the queue full; the slots a claim asks for are reserved
// until it answers.
func (w *Worker) fetchLoop(q *queue) {
	defer w.loops.Done()
	poll := time.NewTimer(0)
	defer poll.Stop()
	answers := make(chan claimed, claimsAtOnce)
	inFlight, reserved := 0, 0
	// stop releases what the claims in flight claim, once they answer.
	stop := func() {
		for ; inFlight > 0; inFlight-- {
			a := <-answers
			w.releaseUnstarted(q, a.tasks, "releasing tasks claimed while stopping")
		}
	}
	second := max(1, q.concurrency/4)
	// ready: woken since the last claim answered, or that claim filled
	// every slot it asked for.
	ready, mayHaveMore := false, false
	for {
		if w.stopped() {
			stop()
			return
		}
		free := q.concurrency - int(q.running.Load()) - reserved
		if inFlight == 0 {
			free -= w.probe(q, free)
		}
		if ready && free > 0 && (inFlight == 0 || (inFlight < claimsAtOnce && mayHaveMore && free >= second)) {
			inFlight++
			reserved += free
			go func(limit int) {
				sent := time.Now()
				tasks, err := w.claim(q, limit)
				answers <- claimed{tasks: tasks, err: err, limit: limit, sent: sent}
			}(free)
			continue
		}

		var slotFreed chan struct{}
		if mayHaveMore || free <= 0 {
			slotFreed = q.slotFreed
		}
		select {
		case <-w.stopClaiming:
			stop()
			return
		case a := <-answers:
			inFlight--
			reserved -= a.limit
			if a.err != nil {
				w.log.Error("claim failed", slog.String("queue", q.name), slog.Any("error", a.err))
				ready, mayHaveMore = false, false
				continue
			}
			if w.stopped() {
				w.releaseUnstarted(q, a.tasks, "releasing tasks claimed while stopping")
				stop()
				return
			}
			run, held := q.breaker.holdBack(a.tasks)
			w.releaseUnstarted(q, held, "releasing tasks claimed while their handler's breaker tripped")
			for _, t := range run {
				w.startExecution(q, t, a.sent)
			}
			// Tasks held back are due again at once; claim them after
			// the next wake-up, not in a loop while the pause is written.
			mayHaveMore = len(a.tasks) == a.limit && len(held) == 0
			ready = mayHaveMore
			continue
		case <-q.wake:
		case <-slotFreed:
		case <-poll.C:
		}
		ready = true
		poll.Reset(w.pollInterval)
	}
}

// stopped reports whether the worker has stopped claiming.
func (w *Worker) stopped() bool {
	select {
	case <-w.stopClaiming:
		return true
	default:
		return false
	}
}

func (w *Worker) claim(q *queue, limit int) ([]*rdq.Task, error) {
	ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
	defer cancel()
	start := time.Now()
	tasks, err := w.store.Claim(ctx, store.ClaimParams{
		Queues:   []string{q.name},
		Handlers: w.handlerNames,
		Limit:    limit,
		Lease:    q.lease,
		WorkerID: w.id,
	})
	w.metrics.claimLatency.WithLabelValues(q.name).Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, fmt.Errorf("worker: claim from %s: %w", q.name, err)
	}
	if len(tasks) > limit {
		return nil, fmt.Errorf("worker: claim from %s returned %d tasks for a limit of %d", q.name, len(tasks), limit)
	}
	return tasks, nil
}

// releaseUnstarted gives back claimed tasks it will not run, without
// counting an attempt; what describes the release in an error log.
func (w *Worker) releaseUnstarted(q *queue, tasks []*rdq.Task, what string) {
	if len(tasks) == 0 {
		return
	}
	execs := make([]*execution, len(tasks))
	for i, t := range tasks {
		execs[i] = &execution{q: q, lease: store.Lease{ID: t.ID, Token: t.LeaseToken}, handler: t.Handler, attempt: t.NextAttempt()}
	}
	if err := w.release(execs); err != nil {
		w.log.Error(what, slog.String("queue", q.name), slog.Any("error", err))
	}
}

// subscribe subscribes to n's notifications until the worker stops: the
// subscription lives as long as the loops, and ctx bounds only the wait.
func (w *Worker) subscribe(ctx context.Context, n store.Notifier) (<-chan string, error) {
	subCtx, cancel := context.WithCancel(w.loopCtx)
	stop := context.AfterFunc(ctx, cancel)
	ch, err := n.Notifications(subCtx)
	if !stop() || err != nil {
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	// subCtx ends with loopCtx; cancel is kept only to satisfy vet.
	context.AfterFunc(w.loopCtx, cancel)
	return ch, nil
}

// notificationLoop forwards the store's notifications to the fetch loops of
// the named queues, resubscribing with backoff when the subscription fails
// or ends. ch is the subscription Start made, or nil if it failed.
func (w *Worker) notificationLoop(n store.Notifier, ch <-chan string) {
	defer w.loops.Done()
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 100 * time.Millisecond
	bo.MaxInterval = 30 * time.Second
	bo.MaxElapsedTime = 0
	for {
		if ch == nil {
			var err error
			ch, err = n.Notifications(w.loopCtx)
			if err != nil {
				if w.loopCtx.Err() != nil {
					return
				}
				w.log.Warn("subscribing to notifications failed; polling meanwhile", slog.Any("error", err))
			}
		}
		if ch != nil {
			received := false
			for name := range ch {
				if !received {
					bo.Reset()
					received = true
				}
				if q, ok := w.byName[name]; ok {
					signal(q.wake)
				}
			}
			ch = nil
			if w.loopCtx.Err() != nil {
				return
			}
			w.log.Warn("notifications ended; resubscribing, polling meanwhile")
		}
		t := time.NewTimer(bo.NextBackOff())
		select {
		case <-w.loopCtx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
