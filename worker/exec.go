package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// UnknownHandlerError is the failure of a task whose handler name is not
// registered on the worker that claimed it. It is permanent (the task goes
// to the dead-letter queue at once) unless the queue policy's Classify says
// otherwise; once the handler is deployed, redrive the task.
type UnknownHandlerError struct {
	// Handler is the task's handler name.
	Handler string
	// Queue is the task's queue.
	Queue string
}

// Error implements error. The message names the handler and queue only, so
// every task of one missing handler shares a failure fingerprint.
func (e *UnknownHandlerError) Error() string {
	return fmt.Sprintf("no handler named %q is registered on the worker running queue %q", e.Handler, e.Queue)
}

// ErrorType implements the error-type contract: "unknown_handler".
func (e *UnknownHandlerError) ErrorType() string { return "unknown_handler" }

// execution is one running (or finishing) execution of a claimed task.
type execution struct {
	q       *queue
	lease   store.Lease
	handler string
	attempt int // the number of this attempt in the task's current life
	cancel  context.CancelCauseFunc

	// Guarded by leaseSet.mu.
	nextBeat  time.Time
	returned  bool // the handler returned
	lost      bool // a heartbeat found the lease lost
	abandoned bool // released at shutdown while still running
}

// leaseSet holds the executions whose leases the worker keeps alive: from
// claim until their finish is written (or the lease is lost or released).
type leaseSet struct {
	mu          sync.Mutex
	m           map[store.Lease]*execution
	interrupted []*execution // returned after the grace period; to release
	completing  sync.WaitGroup
}

func newLeaseSet() *leaseSet {
	return &leaseSet{m: make(map[store.Lease]*execution)}
}

func (s *leaseSet) add(e *execution) {
	s.mu.Lock()
	s.m[e.lease] = e
	s.mu.Unlock()
}

func (s *leaseSet) remove(e *execution) {
	s.mu.Lock()
	if s.m[e.lease] == e {
		delete(s.m, e.lease)
	}
	s.mu.Unlock()
}

// returnVerdict is what an execution does with its handler's result.
type returnVerdict int

const (
	verdictFinish      returnVerdict = iota // record the attempt
	verdictLost                             // lease lost: discard
	verdictAbandoned                        // released at shutdown: discard
	verdictInterrupted                      // cancelled at shutdown: release
)

// afterReturn records that e's handler returned and decides what happens to
// its result. interrupted is true when the handler failed after the grace
// period ended.
func (s *leaseSet) afterReturn(e *execution, interrupted bool) returnVerdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.returned = true
	switch {
	case e.abandoned:
		return verdictAbandoned
	case e.lost:
		return verdictLost
	case interrupted:
		delete(s.m, e.lease)
		s.interrupted = append(s.interrupted, e)
		return verdictInterrupted
	}
	s.completing.Add(1)
	return verdictFinish
}

// takeForRelease removes, for release at shutdown, the executions
// interrupted by the end of the grace period and those still running, which
// are abandoned. Executions whose handler returned a result keep their
// lease until the completer writes it.
func (s *leaseSet) takeForRelease() []*execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.interrupted
	s.interrupted = nil
	for l, e := range s.m {
		if !e.returned {
			e.abandoned = true
			delete(s.m, l)
			out = append(out, e)
		}
	}
	return out
}

// due returns the executions whose heartbeat is due at now, grouped by the
// lease duration to extend them by.
func (s *leaseSet) due(now time.Time) map[time.Duration][]*execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	var groups map[time.Duration][]*execution
	for _, e := range s.m {
		if e.nextBeat.After(now) {
			continue
		}
		if groups == nil {
			groups = make(map[time.Duration][]*execution)
		}
		groups[e.q.lease] = append(groups[e.q.lease], e)
	}
	return groups
}

// afterBeat applies the results of a heartbeat sent at now. It returns the
// executions whose lease was found lost while their handler was running;
// their context must be cancelled.
func (s *leaseSet) afterBeat(execs []*execution, errs []error, now time.Time) (lost []*execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range execs {
		if s.m[e.lease] != e {
			continue // finished, released or abandoned meanwhile
		}
		if errs[i] == nil {
			e.nextBeat = now.Add(e.q.heartbeat)
			continue
		}
		if errors.Is(errs[i], store.ErrLeaseLost) {
			e.lost = true
			delete(s.m, e.lease)
			if !e.returned {
				lost = append(lost, e)
			}
		}
		// Other per-item errors: try again on the next tick.
	}
	return lost
}

// startExecution runs t under a new execution of q.
func (w *Worker) startExecution(q *queue, t *rdq.Task) {
	e := &execution{
		q:        q,
		lease:    store.Lease{ID: t.ID, Token: t.LeaseToken},
		handler:  t.Handler,
		attempt:  t.NextAttempt(),
		nextBeat: time.Now().Add(q.heartbeat),
	}
	ctx, cancel := context.WithCancelCause(w.handlerCtx)
	e.cancel = cancel
	w.leases.add(e)
	q.running.Add(1)
	w.metrics.inFlight.WithLabelValues(q.name).Inc()
	w.execs.Add(1)
	w.logTask(slog.LevelDebug, "task claimed", e, slog.Int("life", t.Life))
	go w.execute(ctx, e, t)
}

// execute runs the handler of e and hands its result to the completer.
func (w *Worker) execute(ctx context.Context, e *execution, t *rdq.Task) {
	defer w.execs.Done()
	q := e.q
	// The slot is freed once the result is handed off, so that a slow
	// store holds back claiming instead of piling up results.
	defer func() {
		q.running.Add(-1)
		signal(q.slotFreed)
	}()
	defer e.cancel(nil)

	ctx = w.propagator.Extract(ctx, propagation.MapCarrier(t.Headers))
	ctx, span := w.tracer.Start(ctx, "rdq.execute "+t.Handler,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("rdq.task_id", t.ID.String()),
			attribute.String("rdq.queue", q.name),
			attribute.String("rdq.handler", t.Handler),
			attribute.Int("rdq.attempt", e.attempt),
			attribute.Int("rdq.life", t.Life),
			attribute.String("rdq.worker_id", w.id),
		))
	defer span.End()

	hctx := ctx
	if q.timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(ctx, q.timeout, &rdq.TimeoutError{After: q.timeout})
		defer cancel()
	}
	start := time.Now()
	err := w.run(hctx, q, t)
	dur := time.Since(start)
	cause := context.Cause(hctx)

	w.metrics.inFlight.WithLabelValues(q.name).Dec()
	w.metrics.handlerDuration.WithLabelValues(q.name, e.handler).Observe(dur.Seconds())

	var te *rdq.TimeoutError
	if err != nil && errors.As(cause, &te) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		err = te
	}
	interrupted := err != nil && errors.Is(cause, ErrStopping)

	switch w.leases.afterReturn(e, interrupted) {
	case verdictAbandoned:
		span.SetStatus(codes.Error, "abandoned at shutdown; task released")
		w.logTask(slog.LevelWarn, "handler returned after its task was released at shutdown; result discarded", e)
		return
	case verdictLost:
		span.SetStatus(codes.Error, "lease lost")
		w.logTask(slog.LevelDebug, "handler returned after its lease was lost; result discarded", e)
		return
	case verdictInterrupted:
		span.SetStatus(codes.Error, "interrupted at shutdown; task released")
		w.logTask(slog.LevelDebug, "handler interrupted at shutdown; the task will be released", e)
		return
	}
	defer w.leases.completing.Done()

	d := q.policy.Decide(e.attempt, err, rand.Float64())
	c := store.Completion{
		Lease: e.lease,
		Attempt: &store.AttemptRecord{
			Outcome:  d.Outcome,
			WorkerID: w.id,
			Duration: dur,
		},
	}
	var failure rdq.Failure
	switch {
	case err == nil:
		c.Status = rdq.StatusSucceeded
	case d.Dead:
		c.Status = rdq.StatusDead
	default:
		c.Status = rdq.StatusPending
		c.RetryIn = d.RetryIn
	}
	if err != nil {
		failure = q.policy.Describe(err)
		c.Attempt.Failure = failure
		span.RecordError(err)
		span.SetStatus(codes.Error, failure.Message)
	}
	span.SetAttributes(attribute.String("rdq.outcome", string(d.Outcome)))
	if !w.completer.add(finishItem{e: e, c: c, d: d, failure: failure, dur: dur}) {
		w.leases.remove(e)
		w.logTask(slog.LevelError, "worker stopped before the result could be written; the lease will expire and the task be reclaimed", e)
	}
}

// run calls the handler registered for t, turning a panic into
// rdq.PanicError and an unregistered name into UnknownHandlerError.
func (w *Worker) run(ctx context.Context, q *queue, t *rdq.Task) (err error) {
	h, ok := w.handler(t.Handler)
	if !ok {
		return rdq.Permanent(&UnknownHandlerError{Handler: t.Handler, Queue: q.name})
	}
	defer func() {
		if v := recover(); v != nil {
			err = &rdq.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h(ctx, t)
}
