package store

import (
	"context"
	"time"

	"github.com/srjn45/rdq"
)

// HandlerPauser is implemented by stores that can pause one handler of a
// queue: the storage half of the worker's circuit breaker, and an
// operator's way to stop one handler without stopping its queue. It is
// optional: callers find it with HandlerPauserOf.
//
// While (queue, handler) is paused, Claim returns none of its tasks (it
// skips them through an index, without reading them), tasks keep arriving
// and waiting with their attempt budgets untouched, and executions already
// claimed run to completion. The state lives in the store, so a pause holds
// for every worker in every process at once and survives restarts.
//
// A pause with a cool-off is a tripped breaker: once the cool-off has
// passed, ClaimProbe leases exactly one waiting task of the handler (the
// probe) to one caller, whichever of all the workers asks first. The probe's
// outcome then either resumes the handler (ResumeHandler with the probe's
// lease) or pauses it again with a longer cool-off (PauseHandler with the
// probe's lease). A pause without a cool-off holds until ResumeHandler.
//
// Every change writes an audit entry ("pause_handler", "resume_handler")
// in the same transaction; calls that change nothing write none.
type HandlerPauser interface {
	// PauseHandler pauses (p.Queue, p.Handler). Without p.Probe it pauses
	// a handler that is not paused and changes nothing for one that is.
	// With p.Probe (the lease of a failed probe) it re-pauses the handler
	// only if that probe is its current one, counting one more trip. It
	// reports whether anything changed.
	PauseHandler(ctx context.Context, p PauseHandlerParams) (bool, error)
	// ResumeHandler resumes (p.Queue, p.Handler): its waiting tasks become
	// claimable at once. With p.Probe it resumes only if that probe is the
	// handler's current one. It reports whether anything changed.
	ResumeHandler(ctx context.Context, p ResumeHandlerParams) (bool, error)
	// ClaimProbe leases, for each paused handler of p.Queues whose
	// cool-off has passed and that has no live probe, the waiting task
	// with the fewest attempts of its current life (oldest due first
	// among those), marks the handler half-open with that task as its
	// probe, and returns the probes. Concurrent callers never receive
	// two probes for one handler; a probe whose lease is lost (its worker
	// died) lets a new probe through once it has expired. A paused queue
	// (store.Pauser) yields no probe.
	ClaimProbe(ctx context.Context, p ProbeParams) ([]Probe, error)
	// PausedHandlers returns the paused handlers of queue (every queue
	// when empty), ordered by queue then handler.
	PausedHandlers(ctx context.Context, queue string) ([]HandlerPause, error)
}

// HandlerState is the state of a paused handler's breaker.
type HandlerState string

const (
	// HandlerOpen: claims skip the handler; a probe is claimable once
	// ProbeAt has passed (never, when ProbeAt is zero).
	HandlerOpen HandlerState = "open"
	// HandlerHalfOpen: one probe task is running; claims still skip the
	// handler.
	HandlerHalfOpen HandlerState = "half_open"
)

// HandlerPause describes one paused handler.
type HandlerPause struct {
	Queue   string
	Handler string
	State   HandlerState
	// Since is when the handler was paused (the first trip of a series).
	Since time.Time
	// ProbeAt is when the cool-off ends and a probe may run; zero for a
	// pause held until resumed.
	ProbeAt time.Time
	// Trips counts the pauses of this series: 1 after the first, +1 for
	// every failed probe.
	Trips int
	// Probe is the current probe's lease while half-open.
	Probe Lease
	// Actor, Reason and Fingerprint are those of the latest pause.
	Actor       string
	Reason      string
	Fingerprint string
	// Ratio is the failure ratio that tripped the breaker, or zero.
	Ratio float64
}

// PauseHandlerParams is the input of HandlerPauser.PauseHandler.
type PauseHandlerParams struct {
	Queue   string
	Handler string
	// CoolOff is how long until a probe may run; zero or negative holds
	// the handler paused until ResumeHandler (an operator's pause).
	CoolOff time.Duration
	// Probe, if set, is the lease of the failed probe this pause answers.
	Probe *Lease
	// Actor, Reason, Fingerprint and Ratio describe the pause; they are
	// kept with it and written to the audit log.
	Actor       string
	Reason      string
	Fingerprint string
	Ratio       float64
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// ResumeHandlerParams is the input of HandlerPauser.ResumeHandler.
type ResumeHandlerParams struct {
	Queue   string
	Handler string
	// Probe, if set, is the lease of the successful probe this resume
	// answers.
	Probe *Lease
	// Actor and Reason are written to the audit log.
	Actor  string
	Reason string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// ProbeParams is the input of HandlerPauser.ClaimProbe.
type ProbeParams struct {
	// Queues to probe in; at least one.
	Queues []string
	// Handlers, if not empty, limits the probes to paused handlers of
	// these names, as ClaimParams.Handlers limits a claim: a worker leases
	// a probe only of a handler it can run.
	Handlers []string
	// Lease, WorkerID and Now are as in ClaimParams.
	Lease    time.Duration
	WorkerID string
	Now      *time.Time
}

// Probe is a probe task leased by ClaimProbe and the pause it probes
// (half-open, with the task's lease as its Probe).
type Probe struct {
	Task  *rdq.Task
	Pause HandlerPause
}
