package worker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Breaker defaults: the values a zero field of Breaker takes.
const (
	DefaultBreakerWindow         = time.Minute
	DefaultBreakerMinFailedTasks = 10
	DefaultBreakerFailureRatio   = 0.5
	DefaultBreakerCoolOff        = 30 * time.Second
	DefaultBreakerMaxCoolOff     = 10 * time.Minute
)

// BreakerActor is the actor named in the audit entries of the pauses and
// resumes the circuit breaker makes.
const BreakerActor = "breaker"

// Breaker is a queue's circuit breaker policy (QueueConfig.Breaker; nil
// turns the breaker off, and &Breaker{} turns it on with the defaults).
//
// The worker watches, per handler, the attempts it ran over the last
// Window. When at least MinFailedTasks distinct tasks failed with one cause
// (the same failure fingerprint; retryable failures only: a permanent
// failure is the task's fault, not its dependency's) and failed attempts
// are at least FailureRatio of all attempts, the breaker trips: it pauses
// (queue, handler) in the store (store.HandlerPauser), so every worker in
// every process stops claiming its tasks at once. Waiting tasks keep their
// attempt budgets. After CoolOff, exactly one worker claims one probe task
// (the waiting task with the most attempts left); if it succeeds the
// handler resumes, if it fails with the cause that tripped the breaker the
// pause starts again with the cool-off doubled, up to MaxCoolOff (a probe
// failing with another cause is an ordinary failure of that task, and the
// handler resumes). One task failing again and again counts as one task,
// so a poison task never trips the breaker, and only a failure with the
// window's dominant cause trips it.
//
// Every worker forgets the attempts it saw before a pause or resume of the
// handler it takes part in or notices in the store (its own trip, a probe's
// answer, another worker's trip, an operator), including attempts that
// started before and end after it: evidence from before a resume never
// trips the breaker again.
type Breaker struct {
	// Window is how far back attempts count. Zero means
	// DefaultBreakerWindow.
	Window time.Duration
	// MinFailedTasks is how many distinct tasks must have failed with the
	// dominant cause within Window. Zero means
	// DefaultBreakerMinFailedTasks.
	MinFailedTasks int
	// FailureRatio is the share of failed attempts within Window, in
	// (0, 1], that trips the breaker. Zero means
	// DefaultBreakerFailureRatio.
	FailureRatio float64
	// CoolOff is how long the first pause lasts before a probe. Zero
	// means DefaultBreakerCoolOff.
	CoolOff time.Duration
	// MaxCoolOff caps the cool-off as failed probes double it. Zero means
	// DefaultBreakerMaxCoolOff.
	MaxCoolOff time.Duration
}

// withDefaults validates b and fills its zero fields.
func (b Breaker) withDefaults(queue string) (Breaker, error) {
	switch {
	case b.Window < 0, b.CoolOff < 0, b.MaxCoolOff < 0:
		return b, fmt.Errorf("%w: worker: queue %s: Breaker durations must not be negative", rdq.ErrInvalid, queue)
	case b.MinFailedTasks < 0:
		return b, fmt.Errorf("%w: worker: queue %s: Breaker.MinFailedTasks %d is negative", rdq.ErrInvalid, queue, b.MinFailedTasks)
	case b.FailureRatio < 0 || b.FailureRatio > 1:
		return b, fmt.Errorf("%w: worker: queue %s: Breaker.FailureRatio %g is outside (0, 1]", rdq.ErrInvalid, queue, b.FailureRatio)
	}
	b.Window = cmp.Or(b.Window, DefaultBreakerWindow)
	b.MinFailedTasks = cmp.Or(b.MinFailedTasks, DefaultBreakerMinFailedTasks)
	b.FailureRatio = cmp.Or(b.FailureRatio, DefaultBreakerFailureRatio)
	b.CoolOff = cmp.Or(b.CoolOff, DefaultBreakerCoolOff)
	b.MaxCoolOff = cmp.Or(b.MaxCoolOff, DefaultBreakerMaxCoolOff)
	if b.MaxCoolOff < b.CoolOff {
		return b, fmt.Errorf("%w: worker: queue %s: Breaker.MaxCoolOff %s is shorter than CoolOff %s", rdq.ErrInvalid, queue, b.MaxCoolOff, b.CoolOff)
	}
	return b, nil
}

// coolOff is the cool-off after the given number of trips: CoolOff
// doubled per trip after the first, capped at MaxCoolOff.
func (b Breaker) coolOff(trips int) time.Duration {
	d := b.CoolOff
	for i := 1; i < trips && d < b.MaxCoolOff; i++ {
		d *= 2
	}
	return min(d, b.MaxCoolOff)
}

// maxWindowEvents bounds the attempts a breaker remembers per handler.
const maxWindowEvents = 4096

// attemptEvent is one attempt a breaker saw.
type attemptEvent struct {
	at          time.Time
	task        rdq.ID
	failed      bool
	fingerprint string
}

// breakerState is one queue's breaker on this worker.
type breakerState struct {
	policy Breaker

	mu       sync.Mutex
	windows  map[string]*window // by handler
	tripping map[string]bool
	// since is, per handler, when the evidence was last cleared: attempts
	// that started before it are not counted.
	since     map[string]time.Time
	lastProbe time.Time       // when this worker last asked for probes
	known     map[string]bool // handlers last seen paused by the breaker
}

func newBreakerState(p Breaker) *breakerState {
	return &breakerState{policy: p, windows: map[string]*window{}, tripping: map[string]bool{},
		since: map[string]time.Time{}, known: map[string]bool{}}
}

// window is one handler's recent attempts, oldest first, how many of them
// failed, and the failed attempts per fingerprint and task.
type window struct {
	events []attemptEvent
	failed int
	byFP   map[string]map[rdq.ID]int
}

func (w *window) count(ev attemptEvent, delta int) {
	if !ev.failed {
		return
	}
	w.failed += delta
	tasks := w.byFP[ev.fingerprint]
	if tasks == nil {
		tasks = map[rdq.ID]int{}
		w.byFP[ev.fingerprint] = tasks
	}
	tasks[ev.task] += delta
	if tasks[ev.task] <= 0 {
		delete(tasks, ev.task)
		if len(tasks) == 0 {
			delete(w.byFP, ev.fingerprint)
		}
	}
}

// trip describes a decision to trip.
type trip struct {
	handler     string
	fingerprint string
	ratio       float64
	failed      int
	total       int
	tasks       int
}

// observe records an attempt of handler that started at started and
// ended at now, and reports whether it trips the breaker. An attempt that
// started before the handler's evidence was last cleared is not counted.
// Only a failure whose fingerprint has at least MinFailedTasks distinct
// tasks, no fewer than any other fingerprint of the window, trips it.
func (b *breakerState) observe(now, started time.Time, handler string, task rdq.ID, failed bool, fingerprint string) (trip, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if started.Before(b.since[handler]) {
		return trip{}, false
	}
	win := b.windows[handler]
	if win == nil {
		win = &window{byFP: map[string]map[rdq.ID]int{}}
		b.windows[handler] = win
	}
	cut := 0
	for cut < len(win.events) && (now.Sub(win.events[cut].at) > b.policy.Window || len(win.events)-cut >= maxWindowEvents) {
		win.count(win.events[cut], -1)
		cut++
	}
	ev := attemptEvent{at: now, task: task, failed: failed, fingerprint: fingerprint}
	win.events = append(win.events[cut:], ev)
	win.count(ev, +1)
	if !failed || b.tripping[handler] {
		return trip{}, false
	}
	ratio := float64(win.failed) / float64(len(win.events))
	if ratio < b.policy.FailureRatio {
		return trip{}, false
	}
	distinct := len(win.byFP[fingerprint])
	if distinct < b.policy.MinFailedTasks {
		return trip{}, false
	}
	for _, ts := range win.byFP {
		if len(ts) > distinct {
			return trip{}, false // another cause dominates; this failure is not its evidence
		}
	}
	b.tripping[handler] = true
	return trip{handler: handler, fingerprint: fingerprint, ratio: ratio, failed: win.failed, total: len(win.events), tasks: distinct}, true
}

// holdBack splits claimed tasks into those to run and those whose handler
// this worker's breaker is tripping right now: the pause is being written
// to the store, and until it commits the store still hands out the
// handler's tasks. Running them would spend attempts against the failure
// that tripped the breaker; the worker gives them back instead, with no
// attempt counted. A nil b runs every task.
func (b *breakerState) holdBack(tasks []*rdq.Task) (run, held []*rdq.Task) {
	if b == nil {
		return tasks, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.tripping) == 0 {
		return tasks, nil
	}
	run = tasks[:0:0]
	for _, t := range tasks {
		if b.tripping[t.Handler] {
			held = append(held, t)
		} else {
			run = append(run, t)
		}
	}
	return run, held
}

// isTripping reports whether b is tripping handler's breaker right now:
// its pause is being written. A nil b trips nothing.
func (b *breakerState) isTripping(handler string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripping[handler]
}

// tripped ends a trip: the evidence is cleared as of at.
func (b *breakerState) tripped(handler string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear(handler, at)
	delete(b.tripping, handler)
}

// resumed clears handler's evidence as of at, when it was resumed.
func (b *breakerState) resumed(handler string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear(handler, at)
}

// clear forgets handler's attempts, and those that started before at and
// are still to end. b.mu is held.
func (b *breakerState) clear(handler string, at time.Time) {
	delete(b.windows, handler)
	if at.After(b.since[handler]) {
		b.since[handler] = at
	}
}

// breakerAfter is what an execution hands the breaker once its result is
// known: it records the attempt, and trips the breaker or answers a probe.
func (w *Worker) breakerAfter(e *execution, err error, d rdq.Decision, failure rdq.Failure) {
	b := e.q.breaker
	if b == nil || w.handlerPauser == nil {
		return
	}
	if _, registered := w.handler(e.handler); !registered {
		return // a handler this worker does not run is not its to judge
	}
	failed := err != nil && d.Outcome == rdq.OutcomeRetryableFailure
	if e.probe != nil {
		w.answerProbe(e, failed, failure)
		return
	}
	tr, ok := b.observe(time.Now(), e.started, e.handler, e.lease.ID, failed, failure.Fingerprint)
	if !ok {
		return
	}
	defer func() { b.tripped(e.handler, time.Now()) }()
	reason := fmt.Sprintf("%d of %d attempts failed within %s, %d distinct tasks with one cause", tr.failed, tr.total, b.policy.Window, tr.tasks)
	ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
	defer cancel()
	changed, perr := w.handlerPauser.PauseHandler(ctx, store.PauseHandlerParams{
		Queue: e.q.name, Handler: e.handler, CoolOff: b.policy.CoolOff,
		Actor: BreakerActor, Reason: reason, Fingerprint: tr.fingerprint, Ratio: tr.ratio,
	})
	attrs := []any{slog.String("queue", e.q.name), slog.String("handler", e.handler),
		slog.String("fingerprint", tr.fingerprint), slog.Float64("ratio", tr.ratio),
		slog.Int("failed_tasks", tr.tasks), slog.Duration("cool_off", b.policy.CoolOff)}
	switch {
	case perr != nil:
		w.log.Error("circuit breaker could not pause the handler", append(attrs, slog.Any("error", perr))...)
	case changed:
		w.metrics.breakerTransitions.WithLabelValues(e.q.name, e.handler, string(store.HandlerOpen)).Inc()
		w.metrics.breakerState.WithLabelValues(e.q.name, e.handler).Set(breakerGauge(store.HandlerOpen))
		w.log.Warn("circuit breaker opened: handler paused on every worker", attrs...)
	default:
		w.log.Info("circuit breaker tripped, but the handler was already paused", attrs...)
	}
}

// answerProbe resumes the handler after a successful probe, or after a
// probe that failed with another cause than the one that tripped the
// breaker (an ordinary failure of that task); it pauses the handler again
// with a longer cool-off after a probe that failed with the tripping cause.
// The new pause keeps the original cause as its reason.
func (w *Worker) answerProbe(e *execution, failed bool, failure rdq.Failure) {
	b := e.q.breaker
	p := e.probe
	ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
	defer cancel()
	attrs := []any{slog.String("queue", e.q.name), slog.String("handler", e.handler),
		slog.String("task_id", e.lease.ID.String()), slog.Int("attempt", e.attempt), slog.Int("trips", p.Trips)}
	if !probeFailed(p, failed, failure.Fingerprint) {
		reason, msg := "probe succeeded", "circuit breaker closed: probe succeeded, handler resumed"
		if failed {
			reason = fmt.Sprintf("probe failed with another cause (fingerprint %s), not the one that tripped the breaker (%s)", failure.Fingerprint, p.Fingerprint)
			msg = "circuit breaker closed: probe failed with another cause, handler resumed"
			attrs = append(attrs, slog.String("fingerprint", failure.Fingerprint), slog.String("tripping_fingerprint", p.Fingerprint))
		}
		changed, err := w.handlerPauser.ResumeHandler(ctx, store.ResumeHandlerParams{
			Queue: e.q.name, Handler: e.handler, Probe: &e.lease, Actor: BreakerActor, Reason: reason,
		})
		b.resumed(e.handler, time.Now())
		switch {
		case err != nil:
			w.log.Error("circuit breaker could not resume the handler after its probe", append(attrs, slog.Any("error", err))...)
		case changed:
			w.metrics.breakerTransitions.WithLabelValues(e.q.name, e.handler, "closed").Inc()
			w.metrics.breakerState.WithLabelValues(e.q.name, e.handler).Set(0)
			w.log.Info(msg, attrs...)
		default:
			w.log.Info("probe answered, but the handler was no longer waiting for it", attrs...)
		}
		return
	}
	next := b.policy.coolOff(p.Trips + 1)
	changed, err := w.handlerPauser.PauseHandler(ctx, store.PauseHandlerParams{
		Queue: e.q.name, Handler: e.handler, CoolOff: next, Probe: &e.lease,
		Actor: BreakerActor, Reason: reopenReason(p.Reason), Fingerprint: cmp.Or(p.Fingerprint, failure.Fingerprint),
		Ratio: cmp.Or(p.Ratio, 1),
	})
	attrs = append(attrs, slog.String("fingerprint", failure.Fingerprint), slog.Duration("cool_off", next))
	switch {
	case err != nil:
		w.log.Error("circuit breaker could not reopen after a failed probe", append(attrs, slog.Any("error", err))...)
	case changed:
		w.metrics.breakerTransitions.WithLabelValues(e.q.name, e.handler, string(store.HandlerOpen)).Inc()
		w.metrics.breakerState.WithLabelValues(e.q.name, e.handler).Set(breakerGauge(store.HandlerOpen))
		w.log.Warn("circuit breaker reopened: probe failed", attrs...)
	default:
		w.log.Info("probe failed, but the handler was no longer waiting for it", attrs...)
	}
}

// probeFailed reports whether a probe of pause p failed: with a retryable
// failure (failed) whose fingerprint is the one that tripped the breaker,
// or any retryable failure when the pause names no fingerprint.
func probeFailed(p *store.HandlerPause, failed bool, fingerprint string) bool {
	return failed && (p.Fingerprint == "" || fingerprint == p.Fingerprint)
}

// reopenPrefix starts the reason of a pause after a failed probe.
const reopenPrefix = "probe failed with the same cause; tripped because "

// reopenReason is the reason of the pause after a failed probe of a pause
// with the given reason: the original cause, kept across re-trips.
func reopenReason(reason string) string {
	return reopenPrefix + strings.TrimPrefix(reason, reopenPrefix)
}

// breakerGauge is the value of rdq_worker_breaker_state for a state.
func breakerGauge(s store.HandlerState) float64 {
	switch s {
	case store.HandlerOpen:
		return 1
	case store.HandlerHalfOpen:
		return 2
	}
	return 0
}

// probe asks the store, at most once per poll interval, for probes of q's
// paused handlers and starts them; it refreshes the state gauge from the
// store on the way. It returns how many probes it started.
func (w *Worker) probe(q *queue, free int) int {
	b := q.breaker
	if b == nil || w.handlerPauser == nil || free < 1 {
		return 0
	}
	now := time.Now()
	b.mu.Lock()
	if now.Sub(b.lastProbe) < w.pollInterval {
		b.mu.Unlock()
		return 0
	}
	b.lastProbe = now
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
	defer cancel()
	paused, err := w.handlerPauser.PausedHandlers(ctx, q.name)
	if err != nil {
		w.log.Error("reading paused handlers failed", slog.String("queue", q.name), slog.Any("error", err))
		return 0
	}
	w.observePauses(q, paused)
	due := false
	for _, p := range paused {
		if _, ok := w.handler(p.Handler); ok && !p.ProbeAt.IsZero() {
			due = true
		}
	}
	if !due {
		return 0
	}
	claimed := time.Now()
	probes, err := w.handlerPauser.ClaimProbe(ctx, store.ProbeParams{Queues: []string{q.name}, Handlers: w.handlerNames, Lease: q.lease, WorkerID: w.id})
	if err != nil {
		w.log.Error("claiming a probe failed", slog.String("queue", q.name), slog.Any("error", err))
		return 0
	}
	for _, p := range probes {
		pause := p.Pause
		w.metrics.breakerTransitions.WithLabelValues(q.name, p.Task.Handler, string(store.HandlerHalfOpen)).Inc()
		w.metrics.breakerState.WithLabelValues(q.name, p.Task.Handler).Set(breakerGauge(store.HandlerHalfOpen))
		w.logTaskFields(slog.LevelInfo, "circuit breaker half-open: probing with one task", p.Task.ID, q.name, p.Task.Handler,
			p.Task.NextAttempt(), slog.Int("trips", pause.Trips))
		w.startExecutionProbe(q, p.Task, claimed, &pause)
	}
	return len(probes)
}

// observePauses sets the state gauge of q's handlers from the store's view,
// clears the evidence of the handlers paused or resumed since the last
// look, and logs the changes other workers made.
func (w *Worker) observePauses(q *queue, paused []store.HandlerPause) {
	added, gone := q.breaker.notice(paused, time.Now())
	for _, p := range paused {
		w.metrics.breakerState.WithLabelValues(q.name, p.Handler).Set(breakerGauge(p.State))
	}
	for _, p := range added {
		w.log.Info("handler paused", slog.String("queue", q.name), slog.String("handler", p.Handler),
			slog.String("state", string(p.State)), slog.String("actor", p.Actor), slog.String("trips", strconv.Itoa(p.Trips)))
	}
	for _, h := range gone {
		w.metrics.breakerState.WithLabelValues(q.name, h).Set(0)
		w.log.Info("handler resumed", slog.String("queue", q.name), slog.String("handler", h))
	}
}

// notice takes the store's list of paused handlers, read at at, and
// returns the pauses that are new since the last call and the handlers no
// longer paused. It clears the evidence of both as of at: what tripped a
// new pause was judged, and what came before a resume is stale.
func (b *breakerState) notice(paused []store.HandlerPause, at time.Time) (added []store.HandlerPause, gone []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := make(map[string]bool, len(paused))
	for _, p := range paused {
		now[p.Handler] = true
		if !b.known[p.Handler] {
			b.clear(p.Handler, at)
			added = append(added, p)
		}
	}
	for h := range b.known {
		if !now[h] {
			b.clear(h, at)
			gone = append(gone, h)
		}
	}
	b.known = now
	return added, gone
}
