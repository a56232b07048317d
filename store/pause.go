package store

import "context"

// Pauser is implemented by stores that can pause queues. It is optional:
// callers find it with PauserOf and report the capability as unsupported
// when it is missing.
//
// A paused queue keeps accepting tasks, and executions already claimed run
// to completion, but Claim returns none of its tasks until it is resumed.
// The paused state is persisted in the store, so it holds for every worker
// and survives restarts.
type Pauser interface {
	// PauseQueue pauses p.Queue and writes a "pause" audit entry in the
	// same transaction. Pausing a paused queue changes nothing and writes
	// no entry. The queue need not have tasks yet.
	PauseQueue(ctx context.Context, p PauseParams) error

	// ResumeQueue resumes p.Queue and writes a "resume" audit entry in
	// the same transaction. Resuming a queue that is not paused changes
	// nothing and writes no entry.
	ResumeQueue(ctx context.Context, p PauseParams) error

	// PausedQueues returns the names of the paused queues, sorted.
	PausedQueues(ctx context.Context) ([]string, error)
}

// PauseParams is the input of Pauser.PauseQueue and Pauser.ResumeQueue.
type PauseParams struct {
	// Queue is the queue to pause or resume.
	Queue string
	// Actor and Reason are written to the audit log.
	Actor  string
	Reason string
}
