package store

import (
	"context"
	"time"
)

// MaxHistogramBuckets bounds the buckets of one DeadHistogrammer.DeadHistogram
// call.
const MaxHistogramBuckets = 10000

// NotDueCounter is implemented by stores that count, per queue, the waiting
// tasks that are not due yet: an operator's overview shows them apart from
// the due backlog. It is optional: find it with NotDueCounterOf.
type NotDueCounter interface {
	// NotDueCounts returns, per queue, how many PENDING tasks have a due
	// time after now (nil: the store's clock): retries waiting out their
	// backoff, delayed and snoozed tasks. Tasks held by a pause count by
	// their due time like any other. Queues with none are absent.
	NotDueCounts(ctx context.Context, now *time.Time) (map[string]int64, error)
}

// WaitingCounter is implemented by stores that split, per queue, the
// waiting (PENDING) tasks by why they wait, so an operator tells a backoff
// from a delay from a paused handler. It is optional: find it with
// WaitingCounterOf.
type WaitingCounter interface {
	// WaitingCounts returns, per queue, the PENDING tasks that are held
	// or not due yet at now (nil: the store's clock), split as
	// WaitingCounts says. Queues with none are absent.
	WaitingCounts(ctx context.Context, now *time.Time) (map[string]WaitingCounts, error)
}

// WaitingCounts splits one queue's waiting tasks. The three are disjoint;
// a queue's due tasks that are not held are its PENDING count less all
// three.
type WaitingCounts struct {
	// Retrying: not held, due after now, with at least one attempt in the
	// current life (waiting out a backoff after a failure).
	Retrying int64
	// Scheduled: not held, due after now, with no attempt in the current
	// life (submitted with a delay, redriven with a spread, or snoozed
	// before a first attempt).
	Scheduled int64
	// Held: tasks of a paused handler, due or not.
	Held int64
}

// GroupOriginReader is implemented by stores that tell when a failure
// group's failure first happened, which its tasks' dead times stop telling
// once the group was redriven and died again (Group.FirstSeen is then the
// second death, after the redrive). It is optional: find it with
// GroupOriginReaderOf.
type GroupOriginReader interface {
	// GroupOrigins returns, per given fingerprint (lower-case
	// hexadecimal, as Group reports them), when the failure first
	// happened to the group's earliest dead task: the end of that task's
	// earliest failed attempt, in any life, with the error type of its
	// last failure (its dead time if it has none). Fingerprints without
	// a dead task are absent.
	GroupOrigins(ctx context.Context, fingerprints []string) (map[string]time.Time, error)
}

// DeadHistogrammer is implemented by stores that count dead tasks by when
// they went dead, in all or per failure fingerprint: the failure charts of
// an operator's console. It is optional: find it with DeadHistogrammerOf.
type DeadHistogrammer interface {
	// DeadHistogram counts the DEAD tasks by their FinishedAt in buckets
	// consecutive intervals of width from since: element i counts those
	// dead at or after since + i·width and before since + (i+1)·width.
	// With no fingerprints the result has one entry, keyed "", over every
	// dead task; otherwise one entry per given fingerprint (lower-case
	// hexadecimal, as Group reports them), over the dead tasks whose last
	// error has it. Every slice has buckets elements. Tasks no longer dead
	// (redriven or purged) are not counted. A width below one microsecond
	// or buckets outside 1 to MaxHistogramBuckets fail with an error
	// wrapping rdq.ErrInvalid.
	DeadHistogram(ctx context.Context, since time.Time, width time.Duration, buckets int, fingerprints []string) (map[string][]int64, error)
}

// DeadGroupKeyer is implemented by stores that tell which queues and
// handlers the dead tasks of a failure group belong to. It is optional:
// find it with DeadGroupKeyerOf.
type DeadGroupKeyer interface {
	// DeadGroupKeys returns, for each given fingerprint, the distinct
	// (queue, handler) pairs of the DEAD tasks whose last error has it,
	// each as [2]string{queue, handler}, sorted by queue then handler.
	// Fingerprints without dead tasks are absent; no fingerprints yield
	// an empty map.
	DeadGroupKeys(ctx context.Context, fingerprints []string) (map[string][][2]string, error)
}
