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

// GoexitError is the failure of a handler that called runtime.Goexit (as
// testing.T.FailNow and log.Fatal-style helpers built on it do) instead of
// returning. Its type is "handler_goexit"; it is retryable.
type GoexitError struct {
	// Stack is the handler goroutine's stack as it exited.
	Stack []byte
}

// Error implements error.
func (e *GoexitError) Error() string {
	return "the handler called runtime.Goexit instead of returning (t.FailNow or similar outside a test?)"
}

// ErrorType implements the error-type contract: "handler_goexit".
func (e *GoexitError) ErrorType() string { return "handler_goexit" }

// LeaseExpiringError is the context.Cause of a handler's context when the
// worker could not renew the task's lease and cancelled the handler shortly
// before the lease, as last renewed, would expire (after which another
// execution may take the task): when less than Margin of it remained, and
// never less than three quarters of Margin. If the handler then fails, the attempt is
// recorded with this error, of type "lease_unrenewable"; a handler that
// returns nil anyway has done its work, and its success is recorded if the
// lease is still current.
type LeaseExpiringError struct {
	// Margin is the queue's lease margin: the handler is cancelled once
	// less than this remains of the lease.
	Margin time.Duration
}

// Error implements error.
func (e *LeaseExpiringError) Error() string {
	return fmt.Sprintf("the worker could not renew the task's lease and cancelled the handler %s before it would expire", e.Margin)
}

// ErrorType implements the error-type contract: "lease_unrenewable".
func (e *LeaseExpiringError) ErrorType() string { return "lease_unrenewable" }

// execution is one running (or finishing) execution of a claimed task.
type execution struct {
	q       *queue
	lease   store.Lease
	handler string
	attempt int // the number of this attempt in the task's current life
	// policy is the queue's policy with the task's own attempt budget.
	policy  rdq.Policy
	snoozes int // the task's snoozes in its current life
	cancel  context.CancelCauseFunc
	// probe is set for a circuit breaker's probe.
	probe *store.HandlerPause
	// started is when the claim was sent.
	started time.Time

	// Guarded by leaseSet.mu.
	//
	// watched: the expiry sweep cancels the handler shortly before
	// leaseUntil, unless a heartbeat pushes leaseUntil back first; false
	// once the handler returned or the sweep cancelled it.
	watched  bool
	nextBeat time.Time
	// leaseUntil is a lower bound, on this process's monotonic clock, of
	// when the lease last granted or renewed expires in the store: the
	// time the claim or heartbeat was sent plus the lease duration.
	leaseUntil time.Time
	returned   bool // the handler returned
	lost       bool // a heartbeat found the lease lost
	abandoned  bool // released at shutdown while still running
}

// leaseSet holds the executions whose leases the worker keeps alive: from
// claim until their finish is written (or the lease is lost or released).
type leaseSet struct {
	mu          sync.Mutex
	m           map[store.Lease]*execution
	interrupted []*execution // returned after the grace period; to release
	completing  sync.WaitGroup
	// stopping, once set by cancelAll, is the cause every execution added
	// since is cancelled with as it is added.
	stopping error
}

func newLeaseSet() *leaseSet {
	return &leaseSet{m: make(map[store.Lease]*execution)}
}

// add registers e, whose context is cancelled at once if cancelAll was
// called.
func (s *leaseSet) add(e *execution) {
	s.mu.Lock()
	s.m[e.lease] = e
	cause := s.stopping
	s.mu.Unlock()
	if cause != nil {
		e.cancel(cause)
	}
}

// cancelAll cancels, with cause, the context of every registered execution
// and of every execution added from now on. Execution contexts are not
// children of a context the worker cancels (registering thousands of
// children in one parent costs a busy worker a shared lock and map update
// per execution); this is how they all end at once.
func (s *leaseSet) cancelAll(cause error) {
	s.mu.Lock()
	if s.stopping == nil {
		s.stopping = cause
	}
	execs := make([]*execution, 0, len(s.m))
	for _, e := range s.m {
		execs = append(execs, e)
	}
	s.mu.Unlock()
	for _, e := range execs {
		e.cancel(cause)
	}
}

func (s *leaseSet) remove(e *execution) {
	s.mu.Lock()
	if s.m[e.lease] == e {
		delete(s.m, e.lease)
	}
	s.mu.Unlock()
}

// take removes e, if it is still registered under its lease and was not
// taken for release at shutdown, and reports whether it did.
func (s *leaseSet) take(e *execution) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[e.lease] != e || e.abandoned {
		return false
	}
	delete(s.m, e.lease)
	return true
}

// leaseValid reports whether e's lease is still certainly current in the
// store at now (as far as this worker knows: it may have been taken over
// if it was lost).
func (s *leaseSet) leaseValid(e *execution, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !e.lost && now.Before(e.leaseUntil)
}

// stopExpiry takes e out of the expiry sweep once its handler has
// returned.
func (s *leaseSet) stopExpiry(e *execution) {
	s.mu.Lock()
	e.watched = false
	s.mu.Unlock()
}

// expiring returns the executions whose handlers are still running with
// less than their queue's margin left of a lease that could not be renewed,
// and takes them out of the sweep.
func (s *leaseSet) expiring(now time.Time) []*execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*execution
	for _, e := range s.m {
		if e.watched && !e.returned && !e.lost && e.leaseUntil.Sub(now) <= e.q.leaseMargin {
			e.watched = false
			out = append(out, e)
		}
	}
	return out
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
			e.watched = false // its lease is released, not expiring
			delete(s.m, l)
			out = append(out, e)
		}
	}
	return out
}

// beating is an execution whose lease a heartbeat extends, with the lease
// as it was when the heartbeat was sent.
type beating struct {
	e     *execution
	lease store.Lease
}

// due returns the executions whose heartbeat is due at now, grouped by the
// lease duration to extend them by.
func (s *leaseSet) due(now time.Time) map[time.Duration][]beating {
	s.mu.Lock()
	defer s.mu.Unlock()
	var groups map[time.Duration][]beating
	for l, e := range s.m {
		if e.nextBeat.After(now) {
			continue
		}
		if groups == nil {
			groups = make(map[time.Duration][]beating)
		}
		groups[e.q.lease] = append(groups[e.q.lease], beating{e: e, lease: l})
	}
	return groups
}

// afterBeat applies the results of a heartbeat sent at now. It returns the
// executions whose lease was found lost while their handler was running;
// their context must be cancelled.
func (s *leaseSet) afterBeat(beats []beating, errs []error, now time.Time) (lost []*execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range beats {
		e := b.e
		if s.m[b.lease] != e {
			continue // finished, released or abandoned meanwhile
		}
		if errs[i] == nil {
			e.nextBeat = now.Add(e.q.heartbeat)
			e.leaseUntil = now.Add(e.q.lease)
			continue
		}
		if errors.Is(errs[i], store.ErrLeaseLost) {
			e.lost = true
			delete(s.m, b.lease)
			if !e.returned {
				lost = append(lost, e)
			}
		}
		// Other per-item errors: try again on the next tick.
	}
	return lost
}

// startExecution runs t under a new execution of q; claimed is when the
// claim was sent, the earliest moment the store can have started its lease.
func (w *Worker) startExecution(q *queue, t *rdq.Task, claimed time.Time) {
	w.startExecutionProbe(q, t, claimed, nil)
}

// startExecutionProbe is startExecution; probe is set when t is a circuit
// breaker's probe.
func (w *Worker) startExecutionProbe(q *queue, t *rdq.Task, claimed time.Time, probe *store.HandlerPause) {
	ctx, e := w.newExecution(q, t, claimed, probe)
	q.running.Add(1)
	w.execs.Add(1)
	w.executors.run(&w.execs, func() { w.execute(ctx, e, t) })
}

// newExecution registers an execution of t under the lease its claim (or
// retry in place) returned; leased is when that call was sent, the earliest
// moment the store can have started the lease. It returns the execution's
// context.
func (w *Worker) newExecution(q *queue, t *rdq.Task, leased time.Time, probe *store.HandlerPause) (context.Context, *execution) {
	e := &execution{
		probe:      probe,
		started:    leased,
		q:          q,
		lease:      store.Lease{ID: t.ID, Token: t.LeaseToken},
		handler:    t.Handler,
		attempt:    t.NextAttempt(),
		policy:     q.policy.ForTask(t),
		snoozes:    t.Snoozes,
		watched:    true,
		nextBeat:   time.Now().Add(q.heartbeat),
		leaseUntil: leased.Add(q.lease),
	}
	ctx, cancel := context.WithCancelCause(w.handlerCtx)
	e.cancel = cancel
	w.leases.add(e)
	w.metrics.inFlight(q).Inc()
	w.logTask(slog.LevelDebug, "task claimed", e, slog.Int("life", t.Life))
	return ctx, e
}

// expiryLoop cancels the handlers whose leases, not renewed, are about to
// expire, so that they stop before another execution can take their tasks,
// until Stop ends it. It runs apart from the heartbeat loop, which a stalled
// store can hold up for as long as a lease. It looks every quarter of the
// shortest lease margin, so a handler is cancelled with at least three
// quarters of its margin left.
func (w *Worker) expiryLoop() {
	w.every(w.quarterOfShortest(func(q *queue) time.Duration { return q.leaseMargin }), func() {
		for _, e := range w.leases.expiring(time.Now()) {
			w.metrics.leaseLost.WithLabelValues(e.q.name).Inc()
			w.logTask(slog.LevelWarn, "lease could not be renewed and is about to expire; cancelling the handler", e,
				slog.Duration("margin", e.q.leaseMargin))
			e.cancel(&LeaseExpiringError{Margin: e.q.leaseMargin})
		}
	})
}

// execute runs the handler of e and hands its result to the completer; when
// the result is a retry kept in place (see finishExecution), it runs the
// task's next attempt in the same slot, under the new lease, once the store
// has kept it.
//
// The caller (executors.run) marks the execution done in w.execs once it
// returns.
func (w *Worker) execute(ctx context.Context, e *execution, t *rdq.Task) {
	q := e.q
	// The slot is freed once the result is handed off, so that a slow
	// store holds back claiming instead of piling up results.
	defer func() {
		q.running.Add(-1)
		signal(q.slotFreed)
	}()
	for {
		kept := w.executeOnce(ctx, e, t)
		if kept == nil {
			return
		}
		r := <-kept
		if r.task == nil {
			return
		}
		t = r.task
		ctx, e = w.newExecution(q, t, r.sent, nil)
		if !w.awaitRetry(ctx, e, r.retryIn-time.Since(r.sent)) {
			return
		}
	}
}

// awaitRetry waits out what remains, d, of the delay of a retry kept in
// place under e (counted from when the write that kept it was sent), and
// reports whether to run it. A worker that begins to stop meanwhile (or an
// execution whose lease is being lost) runs nothing more: the task is given
// back, due at once, with no attempt counted.
func (w *Worker) awaitRetry(ctx context.Context, e *execution, d time.Duration) bool {
	if d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-w.stopClaiming:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	if !w.stopped() && ctx.Err() == nil {
		return true
	}
	w.leases.stopExpiry(e)
	w.metrics.inFlight(e.q).Dec()
	e.cancel(nil)
	if w.leases.take(e) {
		if err := w.release([]*execution{e}); err != nil {
			w.logTask(slog.LevelError, "releasing a task kept for its retry failed", e, slog.Any("error", err))
		}
	}
	return false
}

// executeOnce runs one attempt of e and hands its result to the completer.
// The handler runs on this goroutine; whatever way it ends (return, panic or
// runtime.Goexit), the deferred finish records it. It returns the channel
// of the store's answer when the result is a retry kept in place, else nil.
func (w *Worker) executeOnce(ctx context.Context, e *execution, t *rdq.Task) (kept <-chan inPlaceReply) {
	q := e.q
	defer e.cancel(nil)

	ctx = w.propagator.Extract(ctx, propagation.MapCarrier(t.Headers))
	ctx, span := w.tracer.Start(ctx, w.spanName(t.Handler), consumerSpan...)
	defer span.End()
	if span.IsRecording() {
		w.describeSpan(span, e, t)
	}
	if e.policy.Exhausted(t.Attempts) {
		w.finishExhausted(span, e, t)
		return nil
	}

	// start is taken before the deadline is set, so a handler stopped by
	// its timeout has always run at least the timeout.
	start := time.Now()
	hctx := ctx
	if timeout := q.policy.TaskTimeout(t, q.timeout); timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(ctx, timeout, &rdq.TimeoutError{After: timeout})
		defer cancel()
	}
	var err error
	returned := false
	defer func() {
		// Runs when the handler returned, panicked or called Goexit.
		if v := recover(); v != nil {
			err = &rdq.PanicError{Value: v, Stack: debug.Stack()}
		} else if !returned {
			err = &GoexitError{Stack: debug.Stack()}
		}
		kept = w.finishExecution(ctx, hctx, span, e, err, time.Since(start))
	}()
	err = w.run(hctx, q, t)
	returned = true
	return nil
}

// describeSpan sets the attributes of the span of e, an execution of t.
// Kept out of executeOnce, as are other steps off the common path, so that
// the stack an execution needs stays small: executions run on reused
// goroutines, whose stacks the garbage collector shrinks while they wait.
func (w *Worker) describeSpan(span trace.Span, e *execution, t *rdq.Task) {
	span.SetAttributes(
		attribute.String("rdq.task_id", t.ID.String()),
		attribute.String("rdq.queue", e.q.name),
		attribute.String("rdq.handler", t.Handler),
		attribute.Int("rdq.attempt", e.attempt),
		attribute.Int("rdq.life", t.Life),
		attribute.String("rdq.worker_id", w.id),
	)
}

// finishExhausted dead-letters t, whose attempts were spent before it was
// ever run (a first failure submitted with MaxAttempts 1, a policy lowered
// since), without running the handler or counting an attempt; its last
// recorded failure stays its cause.
func (w *Worker) finishExhausted(span trace.Span, e *execution, t *rdq.Task) {
	w.leases.stopExpiry(e)
	w.metrics.inFlight(e.q).Dec()
	if w.leases.afterReturn(e, false) != verdictFinish {
		return
	}
	defer w.leases.completing.Done()
	span.SetStatus(codes.Error, "attempts exhausted before this execution")
	w.handOff(e, finishItem{
		e:       e,
		c:       store.Completion{Lease: e.lease, Status: rdq.StatusDead},
		d:       rdq.Decision{Outcome: rdq.OutcomeRetryableFailure, Dead: true},
		failure: rdq.Failure{Type: t.LastError.Type, Message: t.LastError.Message},
	})
}

// finishExecution records the result err of e's handler, which ran for dur
// in hctx, a context of the execution's ctx. A retry due before the next
// poll is kept in place when it may be (see mayRetryInPlace): the channel
// returned then receives the store's answer.
func (w *Worker) finishExecution(ctx, hctx context.Context, span trace.Span, e *execution, err error, dur time.Duration) <-chan inPlaceReply {
	q := e.q
	w.leases.stopExpiry(e)
	cause := context.Cause(hctx) // the worker's own errors, never the handler's

	w.metrics.inFlight(q).Dec()
	w.metrics.handlerDurationOf(q, e.handler).Observe(dur.Seconds())

	if cause != nil {
		err = byCause(err, cause, dur)
	}
	interrupted := err != nil && errors.Is(cause, ErrStopping)

	switch w.leases.afterReturn(e, interrupted) {
	case verdictAbandoned:
		span.SetStatus(codes.Error, "abandoned at shutdown; task released")
		w.logTask(slog.LevelWarn, "handler returned after its task was released at shutdown; result discarded", e)
		return nil
	case verdictLost:
		span.SetStatus(codes.Error, "lease lost")
		w.logTask(slog.LevelWarn, "handler returned after its lease was lost; result discarded (the task belongs to a newer execution)", e)
		return nil
	case verdictInterrupted:
		span.SetStatus(codes.Error, "interrupted at shutdown; task released")
		w.logTask(slog.LevelDebug, "handler interrupted at shutdown; the task will be released", e)
		return nil
	}
	defer w.leases.completing.Done()

	if delay, ok := snoozeOf(err); ok {
		if w.snoozer != nil && e.probe == nil && e.policy.CanSnooze(e.snoozes) {
			// Not yet: back to waiting, no attempt spent. (A breaker's
			// probe must be answered, so it never snoozes.)
			w.snooze(span, e, delay, dur)
			return nil
		}
		err = rdq.RetryAfter(delay, &snoozeSpentError{after: delay, snoozes: e.snoozes, store: w.snoozer != nil})
	}

	d, failure := judge(e.policy, e.attempt, err, rand.Float64())
	if ge, ok := err.(*GoexitError); ok {
		failure.Stack = rdq.Describe(&rdq.PanicError{Stack: ge.Stack}).Stack
	}
	it := finishItem{
		e: e,
		c: store.Completion{
			Lease: e.lease,
			Attempt: &store.AttemptRecord{
				Outcome:  d.Outcome,
				WorkerID: w.id,
				Duration: dur,
			},
		},
		d:       d,
		failure: failure,
		dur:     dur,
	}
	switch {
	case err == nil:
		it.c.Status = rdq.StatusSucceeded
	case d.Dead:
		it.c.Status = rdq.StatusDead
	default:
		it.c.Status = rdq.StatusPending
		it.c.RetryIn = d.RetryIn
	}
	if err != nil {
		it.c.Attempt.Failure = failure
	}
	w.breakerAfter(e, err, d, failure)
	inPlace := it.c.Status == rdq.StatusPending && w.mayRetryInPlace(ctx, e, err, it.c.RetryIn)
	if span.IsRecording() {
		describeOutcome(span, err != nil, d, failure, inPlace)
	}
	var kept chan inPlaceReply
	if inPlace {
		kept = make(chan inPlaceReply, 1)
		it.inPlace = kept
	}
	w.handOff(e, it)
	if kept == nil {
		return nil
	}
	return kept
}

// snooze hands off e's snooze for delay: back to waiting, no attempt spent.
func (w *Worker) snooze(span trace.Span, e *execution, delay, dur time.Duration) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("rdq.outcome", "SNOOZED"))
	}
	c := store.Completion{Lease: e.lease, Status: rdq.StatusPending, RetryIn: delay}
	w.handOff(e, finishItem{e: e, c: c, snooze: true, dur: dur})
}

// describeOutcome records on a span the outcome d of its execution, which
// failed with failure if failed, and whether its retry is kept in place.
func describeOutcome(span trace.Span, failed bool, d rdq.Decision, failure rdq.Failure, inPlace bool) {
	if failed {
		// Not span.RecordError(err): that calls the handler's error's
		// methods, which judge has already found safe or replaced.
		span.AddEvent("exception", trace.WithAttributes(
			attribute.String("exception.type", failure.Type),
			attribute.String("exception.message", failure.Message)))
		span.SetStatus(codes.Error, failure.Message)
	}
	span.SetAttributes(attribute.String("rdq.outcome", string(d.Outcome)))
	if inPlace {
		span.SetAttributes(attribute.Bool("rdq.retry_in_place", true))
	}
}

// byCause is the result of an execution that ran for dur, whose handler
// returned err after the worker cancelled its context with cause: a timeout
// overrun fails the attempt whatever the handler returned; a failure after
// the lease could not be renewed is recorded as that.
func byCause(err, cause error, dur time.Duration) error {
	var te *rdq.TimeoutError
	var le *LeaseExpiringError
	switch {
	case errors.As(cause, &te) && dur >= te.After:
		timeout := &rdq.TimeoutError{After: te.After}
		if dur-te.After > max(te.After/10, 100*time.Millisecond) {
			timeout.Ran = dur // it did not stop when told to
		}
		return timeout
	case err != nil && errors.As(cause, &le):
		return le
	}
	return err
}

// mayRetryInPlace reports whether the retry of e's failed attempt (err),
// due in retryIn, runs again at once in this worker under a lease kept from
// this one (store.InPlaceRetrier) rather than going back to the queue: the
// store can keep it, the retry is due before the next poll would find it,
// the execution was not cancelled (lease lost or expiring, the worker's
// grace period over) and its goroutine lives on (not runtime.Goexit), the
// worker is not stopping, the task is no breaker's probe (a probe's answer
// decides the pause), and this worker's breaker is not tripping its
// handler. The store checks the queue's and the handler's pauses.
func (w *Worker) mayRetryInPlace(ctx context.Context, e *execution, err error, retryIn time.Duration) bool {
	if w.retrier == nil || e.probe != nil || retryIn >= w.pollInterval || ctx.Err() != nil || w.stopped() {
		return false
	}
	if _, goexit := err.(*GoexitError); goexit {
		return false
	}
	return !e.q.breaker.isTripping(e.handler)
}

// snoozeOf is rdq.SnoozeOf, with a panic in one of err's methods taken for
// no snooze (judge then records the panic).
func snoozeOf(err error) (d time.Duration, ok bool) {
	if err == nil {
		return 0, false
	}
	defer func() {
		if recover() != nil {
			d, ok = 0, false
		}
	}()
	return rdq.SnoozeOf(err)
}

// snoozeSpentError is a snooze recorded as a failed attempt: the task
// snoozed as often as its policy allows in this life, or the store cannot
// snooze. Its type is "snoozed", as rdq.SnoozeError's.
type snoozeSpentError struct {
	after   time.Duration
	snoozes int
	store   bool // the store can snooze; the limit was reached
}

func (e *snoozeSpentError) Error() string {
	if !e.store {
		return fmt.Sprintf("snoozed for %s, counted as an attempt: the store cannot snooze (store.Snoozer)", e.after)
	}
	return fmt.Sprintf("snoozed for %s, counted as an attempt: the task already snoozed %d times in this life (Policy.MaxSnoozes)", e.after, e.snoozes)
}

// ErrorType implements the error-type contract: "snoozed".
func (e *snoozeSpentError) ErrorType() string { return "snoozed" }

// handOff queues it for the completer.
func (w *Worker) handOff(e *execution, it finishItem) {
	if !w.completer.add(it) {
		w.leases.remove(e)
		w.logTask(slog.LevelError, "worker stopped before the result could be written; the lease will expire and the task be reclaimed", e)
		if it.inPlace != nil {
			it.inPlace <- inPlaceReply{}
		}
	}
}

// judge classifies the result err of attempt n under p, guarding every call
// into user code: a panic in a method of err (Error, ErrorType, Unwrap, Is,
// As) or in p.Classify makes the attempt a failure of type
// "error_method_panicked" or "classify_panicked" (rdq.MethodPanicError)
// with the panic's stack, decided by p's defaults.
func judge(p rdq.Policy, n int, err error, u float64) (rdq.Decision, rdq.Failure) {
	if err == nil {
		return rdq.Decision{Outcome: rdq.OutcomeSuccess}, rdq.Failure{}
	}
	if perr := probe(err); perr != nil {
		err = perr
	}
	d, perr := decide(p, n, err, u)
	if perr != nil {
		err = perr
		p.Classify = nil
		d = p.Decide(n, err, u)
	}
	return d, p.Describe(err)
}

// probe calls err's methods the way classification will, and returns a
// *rdq.MethodPanicError if one panics.
func probe(err error) (perr error) {
	defer func() {
		if v := recover(); v != nil {
			perr = rdq.NewMethodPanicError("error_method_panicked", err, v)
		}
	}()
	_ = err.Error()
	_ = rdq.ErrorTypeOf(err)
	_ = rdq.IsPermanent(err)
	_, _ = rdq.RetryAfterOf(err)
	return nil
}

// decide is p.Decide, turning a panic (in p.Classify, or in err's methods
// if they panic only sometimes) into a *rdq.MethodPanicError.
func decide(p rdq.Policy, n int, err error, u float64) (d rdq.Decision, perr error) {
	defer func() {
		if v := recover(); v != nil {
			perr = rdq.NewMethodPanicError("classify_panicked", err, v)
		}
	}()
	return p.Decide(n, err, u), nil
}

// consumerSpan starts an execution's span. The span's attributes are set
// only on a span that records: building them costs a busy worker a
// measurable share of its CPU, for nothing when tracing is off.
var consumerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// spanName is the name of the span of an execution of handler.
func (w *Worker) spanName(handler string) string {
	if name, ok := w.spanNames[handler]; ok {
		return name
	}
	return "rdq.execute " + handler
}

// run calls the handler registered for t, wrapped in the worker's
// middleware; an unregistered name is an UnknownHandlerError.
func (w *Worker) run(ctx context.Context, q *queue, t *rdq.Task) error {
	h, ok := w.handler(t.Handler)
	if !ok {
		return rdq.Permanent(&UnknownHandlerError{Handler: t.Handler, Queue: q.name})
	}
	return h(ctx, t)
}
