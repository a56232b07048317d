package rdq

import (
	"fmt"
	"math"
	"time"
)

// Unlimited, as Policy.MaxAttempts, retries a task until it succeeds or fails
// permanently.
const Unlimited = -1

// Policy defaults, used for zero fields of a Policy.
const (
	DefaultMaxAttempts    = 20
	DefaultInitialBackoff = time.Second
	DefaultMultiplier     = 2.0
	DefaultMaxBackoff     = time.Hour
	DefaultJitter         = 0.2
	// DefaultTaskMaxAttempts bounds a task's own MaxAttempts when the
	// policy's TaskMaxAttempts is zero.
	DefaultTaskMaxAttempts = 100
	// DefaultTaskMaxTimeout bounds a task's own Timeout when the policy's
	// TaskMaxTimeout is zero.
	DefaultTaskMaxTimeout = time.Hour
	// DefaultMaxSnoozes is how many times a task may snooze in one life
	// when the policy's MaxSnoozes is zero.
	DefaultMaxSnoozes = 50
)

// Class is a classifier's verdict on an error.
type Class int

// The classes a Policy.Classify function may return.
const (
	// ClassDefault leaves the decision to the rest of the policy.
	ClassDefault Class = iota
	// ClassRetryable retries the task per the backoff schedule.
	ClassRetryable
	// ClassPermanent dead-letters the task at once.
	ClassPermanent
)

// Policy decides what happens to a task after a failed attempt: retry after
// a backoff, or the dead-letter queue. The zero Policy is valid and uses the
// defaults above.
//
// The backoff for attempt n (1-based, counted in the task's current life) is
//
//	Delay(n) = min(InitialBackoff × Multiplier^(n-1), MaxBackoff)
//
// (a MaxBackoff below InitialBackoff is raised to InitialBackoff, so the
// first delay is always InitialBackoff), and the delay actually applied is
// spread downwards by Jitter, uniformly in [Delay(n)×(1-Jitter), Delay(n)],
// so that tasks failed together do not retry together.
type Policy struct {
	// MaxAttempts is how many attempts one life of a task gets, the first
	// included; Unlimited for no limit; 0 for DefaultMaxAttempts.
	MaxAttempts int
	// InitialBackoff is the delay after the first failed attempt.
	InitialBackoff time.Duration
	// Multiplier grows the delay from one attempt to the next; must be >= 1.
	Multiplier float64
	// MaxBackoff caps the delay.
	MaxBackoff time.Duration
	// Jitter in [0, 1] is the fraction by which a delay may be shortened
	// at random. 0 means DefaultJitter; use NoJitter for none.
	Jitter float64
	// Classify, if set, is asked about every failure before the defaults:
	// ClassPermanent dead-letters the task even without Permanent,
	// ClassRetryable retries even a Permanent error.
	Classify func(error) Class
	// Fingerprint, if set, decides which failures of the queue group
	// together in the dead-letter queue, in place of rdq.Fingerprint. It
	// is given a failure's error type and its capped message (see
	// Failure) and returns the text that identifies the cause: failures
	// for which it returns equal text share a fingerprint, which is the
	// first 16 lower-case hexadecimal digits of the SHA-256 of that text.
	// An empty result, or a panic, falls back to rdq.Fingerprint. The
	// default is equivalent to returning
	// errorType + "\x00" + rdq.NormalizeMessage(message).
	//
	// Workers use it for every failure of the queue; give the same policy
	// to client.Config.Policies so that first failures recorded at
	// submission group the same way. Failures that stores record on their
	// own (an expired lease) always use rdq.Fingerprint.
	Fingerprint func(errorType, message string) string

	// TaskMaxAttempts bounds the attempt budget a single task may ask for
	// at submission (client.Task.MaxAttempts): 0 means
	// DefaultTaskMaxAttempts, Unlimited allows any budget, Unlimited
	// included. The client refuses a task that asks for more (given the
	// policy in client.Config.Policies); a worker lowers a stored budget
	// above it to it.
	TaskMaxAttempts int
	// TaskMaxTimeout bounds the execution timeout a single task may ask
	// for (client.Task.Timeout): 0 means DefaultTaskMaxTimeout. The
	// client refuses a longer one; a worker lowers a stored one to it.
	TaskMaxTimeout time.Duration
	// MaxSnoozes is how many times a task may snooze (Snooze) in one life
	// without spending an attempt: 0 means DefaultMaxSnoozes. Beyond it a
	// snooze is a failed attempt.
	MaxSnoozes int
}

// NoJitter, as Policy.Jitter, disables jitter (a zero Jitter means the
// default).
const NoJitter = -1.0

// Validate reports a policy whose fields are out of range, with an error
// wrapping ErrInvalid.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < Unlimited:
		return fmt.Errorf("%w: policy MaxAttempts %d: use a positive number, 0 for the default or rdq.Unlimited", ErrInvalid, p.MaxAttempts)
	case p.InitialBackoff < 0:
		return fmt.Errorf("%w: policy InitialBackoff %s is negative", ErrInvalid, p.InitialBackoff)
	case p.MaxBackoff < 0:
		return fmt.Errorf("%w: policy MaxBackoff %s is negative", ErrInvalid, p.MaxBackoff)
	case p.Multiplier != 0 && (p.Multiplier < 1 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0)):
		return fmt.Errorf("%w: policy Multiplier %v: use a finite number >= 1", ErrInvalid, p.Multiplier)
	case p.Jitter != NoJitter && (p.Jitter < 0 || p.Jitter > 1 || math.IsNaN(p.Jitter)):
		return fmt.Errorf("%w: policy Jitter %v: use a fraction in [0, 1] or rdq.NoJitter", ErrInvalid, p.Jitter)
	case p.TaskMaxAttempts < Unlimited:
		return fmt.Errorf("%w: policy TaskMaxAttempts %d: use a positive number, 0 for the default (%d) or rdq.Unlimited", ErrInvalid, p.TaskMaxAttempts, DefaultTaskMaxAttempts)
	case p.TaskMaxTimeout < 0:
		return fmt.Errorf("%w: policy TaskMaxTimeout %s is negative; use 0 for the default (%s)", ErrInvalid, p.TaskMaxTimeout, DefaultTaskMaxTimeout)
	case p.MaxSnoozes < 0:
		return fmt.Errorf("%w: policy MaxSnoozes %d is negative; use 0 for the default (%d)", ErrInvalid, p.MaxSnoozes, DefaultMaxSnoozes)
	}
	return nil
}

func (p Policy) taskMaxAttempts() int {
	if p.TaskMaxAttempts == 0 {
		return DefaultTaskMaxAttempts
	}
	return p.TaskMaxAttempts
}

func (p Policy) taskMaxTimeout() time.Duration {
	if p.TaskMaxTimeout == 0 {
		return DefaultTaskMaxTimeout
	}
	return p.TaskMaxTimeout
}

// CheckTask reports, with an error wrapping ErrInvalid, a task's own
// attempt budget or timeout (zero meaning the queue's) outside p's bounds:
// maxAttempts from 1 to TaskMaxAttempts (or Unlimited if that is
// Unlimited), timeout positive and at most TaskMaxTimeout.
func (p Policy) CheckTask(maxAttempts int, timeout time.Duration) error {
	switch limit := p.taskMaxAttempts(); {
	case maxAttempts == 0 || limit == Unlimited && maxAttempts >= Unlimited:
	case maxAttempts == Unlimited:
		return fmt.Errorf("%w: task MaxAttempts is rdq.Unlimited, but the queue allows a task at most %d attempts (Policy.TaskMaxAttempts); ask for at most %d, or 0 for the queue's budget", ErrInvalid, limit, limit)
	case maxAttempts < 1:
		return fmt.Errorf("%w: task MaxAttempts %d: use 1 to %d, or 0 for the queue's budget", ErrInvalid, maxAttempts, limit)
	case maxAttempts > limit:
		return fmt.Errorf("%w: task MaxAttempts %d is over the queue's limit of %d (Policy.TaskMaxAttempts); ask for at most %d, or raise the limit in the queue's policy", ErrInvalid, maxAttempts, limit, limit)
	}
	switch limit := p.taskMaxTimeout(); {
	case timeout < 0:
		return fmt.Errorf("%w: task Timeout %s is negative; use a positive duration up to %s, or 0 for the queue's timeout", ErrInvalid, timeout, limit)
	case timeout > limit:
		return fmt.Errorf("%w: task Timeout %s is over the queue's limit of %s (Policy.TaskMaxTimeout); ask for at most %s, or raise the limit in the queue's policy", ErrInvalid, timeout, limit, limit)
	}
	return nil
}

// ForTask is p with t's own attempt budget, if it has one, in place of
// MaxAttempts, lowered to TaskMaxAttempts.
func (p Policy) ForTask(t *Task) Policy {
	if t.MaxAttempts == 0 {
		return p
	}
	n, limit := t.MaxAttempts, p.taskMaxAttempts()
	if limit != Unlimited && (n == Unlimited || n > limit) {
		n = limit
	}
	p.MaxAttempts = n
	return p
}

// TaskTimeout is the timeout of one execution of t: t's own Timeout,
// lowered to TaskMaxTimeout, if it has one; else queueTimeout.
func (p Policy) TaskTimeout(t *Task, queueTimeout time.Duration) time.Duration {
	if t.Timeout <= 0 {
		return queueTimeout
	}
	return min(t.Timeout, p.taskMaxTimeout())
}

// CanSnooze reports whether a task that snoozed n times in its current
// life may snooze again without spending an attempt.
func (p Policy) CanSnooze(n int) bool {
	limit := p.MaxSnoozes
	if limit == 0 {
		limit = DefaultMaxSnoozes
	}
	return n < limit
}

func (p Policy) maxAttempts() int {
	if p.MaxAttempts == 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

func (p Policy) jitter() float64 {
	switch {
	case p.Jitter == NoJitter:
		return 0
	case p.Jitter == 0:
		return DefaultJitter
	}
	return p.Jitter
}

// Delay is the backoff after failed attempt n of a life, before jitter:
// min(InitialBackoff × Multiplier^(n-1), max(MaxBackoff, InitialBackoff)),
// zero fields taking their defaults. It is pure and monotonically
// non-decreasing in n; n < 1 is treated as 1.
func (p Policy) Delay(n int) time.Duration {
	initial, mult, ceiling := p.InitialBackoff, p.Multiplier, p.MaxBackoff
	if initial == 0 {
		initial = DefaultInitialBackoff
	}
	if mult == 0 {
		mult = DefaultMultiplier
	}
	if ceiling == 0 {
		ceiling = DefaultMaxBackoff
	}
	if n < 1 {
		n = 1
	}
	d := float64(initial) * math.Pow(mult, float64(n-1))
	if d >= float64(ceiling) || math.IsInf(d, 0) || math.IsNaN(d) {
		return max(ceiling, initial)
	}
	return time.Duration(d)
}

// JitteredDelay is Delay(n) shortened by the fraction Jitter×u, for u in
// [0, 1) drawn uniformly at random by the caller. It is pure: the same n and
// u always give the same delay, within [Delay(n)×(1-Jitter), Delay(n)].
func (p Policy) JitteredDelay(n int, u float64) time.Duration {
	d := p.Delay(n)
	if u < 0 || math.IsNaN(u) {
		u = 0
	}
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	return d - time.Duration(float64(d)*p.jitter()*u)
}

// Decision is what the policy says to do with a task after an attempt.
type Decision struct {
	// Outcome is recorded on the attempt.
	Outcome Outcome
	// Dead is true when the task goes to the dead-letter queue.
	Dead bool
	// RetryIn is the delay before the next attempt when the task is
	// retried (neither succeeded nor dead).
	RetryIn time.Duration
}

// Decide applies the policy to the result err of attempt n (1-based, in the
// task's current life; n counts this attempt). u in [0, 1) is the random
// draw for jitter. In order:
//
//   - nil: success;
//   - Classify's verdict, if any, else Permanent: dead at once;
//   - n >= MaxAttempts (unless Unlimited): dead, attempts exhausted;
//   - RetryAfter(d): retry in d;
//   - otherwise: retry in JitteredDelay(n, u).
func (p Policy) Decide(n int, err error, u float64) Decision {
	if err == nil {
		return Decision{Outcome: OutcomeSuccess}
	}
	class := ClassDefault
	if p.Classify != nil {
		class = p.Classify(err)
	}
	if class == ClassDefault && IsPermanent(err) {
		class = ClassPermanent
	}
	if class == ClassPermanent {
		return Decision{Outcome: OutcomePermanentFailure, Dead: true}
	}
	return p.retryOrDie(n, err, u, OutcomeRetryableFailure)
}

// DecideLeaseExpired applies the policy after attempt n was lost to an
// expired lease: retry per the backoff schedule, or dead when attempts are
// exhausted.
func (p Policy) DecideLeaseExpired(n int, u float64) Decision {
	return p.retryOrDie(n, nil, u, OutcomeLeaseExpired)
}

func (p Policy) retryOrDie(n int, err error, u float64, outcome Outcome) Decision {
	if limit := p.maxAttempts(); limit != Unlimited && n >= limit {
		return Decision{Outcome: outcome, Dead: true}
	}
	if d, ok := RetryAfterOf(err); ok {
		return Decision{Outcome: outcome, RetryIn: d}
	}
	return Decision{Outcome: outcome, RetryIn: p.JitteredDelay(n, u)}
}

// Exhausted reports whether a task that has made n attempts in its current
// life may not be attempted again.
func (p Policy) Exhausted(n int) bool {
	limit := p.maxAttempts()
	return limit != Unlimited && n >= limit
}
