package dlq

import (
	"context"
	"fmt"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// PurgeOptions shape a purge. Actor and Reason are required unless DryRun
// is set.
type PurgeOptions struct {
	// Actor names who is purging; Reason says why. Both go to the audit
	// log.
	Actor  string
	Reason string
	// DryRun counts what would be deleted and changes nothing.
	DryRun bool
	// All allows an empty filter, meaning the whole dead-letter queue.
	All bool
	// Max, if positive, deletes at most this many tasks.
	Max int64
	// Progress, if set, is called with the number of tasks deleted so far
	// and the expected total: once before the first chunk and after every
	// chunk. Calls never overlap and done only grows, but with
	// Config.Parallelism above one they may come from other goroutines.
	Progress func(done, total int64)
}

// PurgeResult reports a purge. When a purge fails part way, the result
// returned with the error says what was deleted before the failure.
type PurgeResult struct {
	// DryRun is true when nothing was changed.
	DryRun bool
	// Matched is how many dead tasks matched when the purge started.
	Matched int64
	// Purged is how many tasks (with their attempts) were deleted; for a
	// dry run, how many would be.
	Purged int64
}

// Purge deletes the dead tasks matching f, with their attempt history, in
// chunks (of Config.ChunkSize, or the backend's BulkChunkSize: see Config),
// up to Config.Parallelism at once, each one transaction with its own
// "purge" audit entry. It stops when every task that matched at the start
// is gone or opts.Max is reached. Only DEAD tasks are ever deleted: IDs of
// tasks in another state are left alone and not counted.
//
// An empty filter is refused with ErrAllRequired unless opts.All is set.
func (d *DLQ) Purge(ctx context.Context, f Filter, opts PurgeOptions) (PurgeResult, error) {
	if err := f.Validate(); err != nil {
		return PurgeResult{}, err
	}
	if !opts.DryRun {
		if err := validateAudit(opts.Actor, opts.Reason); err != nil {
			return PurgeResult{}, err
		}
	}
	if opts.Max < 0 {
		return PurgeResult{}, fmt.Errorf("%w: purge max %d is negative: use 0 for no limit", rdq.ErrInvalid, opts.Max)
	}
	if f.IsEmpty() && !opts.All {
		return PurgeResult{}, ErrAllRequired
	}
	return d.purge(ctx, f, ActionPurge, opts)
}

// RetentionOptions shape a DLQ retention run.
type RetentionOptions struct {
	// OlderThan is the retention: dead tasks that went dead longer ago
	// than this are deleted. It must be positive.
	OlderThan time.Duration
	// Filter narrows the retention (to one queue, say). Its DeadBefore
	// must be zero: OlderThan sets it.
	Filter Filter
	// Actor names who or what applies the retention (a service name, say);
	// required unless DryRun is set.
	Actor string
	// Reason goes to the audit log; empty means "dead for longer than
	// OlderThan".
	Reason string
	// DryRun counts what would be deleted and changes nothing.
	DryRun bool
	// Progress is as in PurgeOptions.
	Progress func(done, total int64)
}

// Retention deletes dead tasks that went dead more than opts.OlderThan ago
// (measured on this process's clock), with audit action "retention" and the
// rdq_dlq_retention_purged_total counter. rdq never expires dead tasks on
// its own: calling Retention is the explicit opt-in.
func (d *DLQ) Retention(ctx context.Context, opts RetentionOptions) (PurgeResult, error) {
	if opts.OlderThan <= 0 {
		return PurgeResult{}, fmt.Errorf("%w: retention %s: use a positive age such as 720h", rdq.ErrInvalid, opts.OlderThan)
	}
	if !opts.Filter.DeadBefore.IsZero() {
		return PurgeResult{}, fmt.Errorf("%w: retention: leave the filter's dead-before time unset; OlderThan sets it", rdq.ErrInvalid)
	}
	f := opts.Filter
	f.DeadBefore = time.Now().Add(-opts.OlderThan)
	if err := f.Validate(); err != nil {
		return PurgeResult{}, err
	}
	reason := opts.Reason
	if reason == "" {
		reason = fmt.Sprintf("dead for longer than %s", opts.OlderThan)
	}
	if !opts.DryRun {
		if err := validateAudit(opts.Actor, reason); err != nil {
			return PurgeResult{}, err
		}
	}
	return d.purge(ctx, f, ActionRetention, PurgeOptions{
		Actor: opts.Actor, Reason: reason, DryRun: opts.DryRun, All: true, Progress: opts.Progress,
	})
}

func (d *DLQ) purge(ctx context.Context, f Filter, action string, opts PurgeOptions) (PurgeResult, error) {
	sf := f.toStore()
	res := PurgeResult{DryRun: opts.DryRun}
	matched, err := d.b.CountDead(ctx, sf)
	if err != nil {
		return res, fmt.Errorf("dlq: %s: counting dead tasks: %w", action, err)
	}
	res.Matched = matched
	total := capMax(matched, opts.Max)
	if opts.DryRun {
		res.Purged = total
		progress(opts.Progress, 0, total)
		return res, nil
	}
	counter := d.m.Purged
	if action == ActionRetention {
		counter = d.m.RetentionPurged
	}
	progress(opts.Progress, 0, total)
	n, err := d.runChunks(ctx, total, func(ctx context.Context, limit int) (int64, error) {
		return d.b.PurgeDead(ctx, store.PurgeDeadParams{
			Filter: sf, Limit: limit, Action: action, Actor: opts.Actor, Reason: opts.Reason,
		})
	}, func(n int64) {
		res.Purged += n
		add(counter, n)
		progress(opts.Progress, res.Purged, max(total, res.Purged))
	})
	res.Purged = n
	if err != nil {
		d.logMutation(ctx, action, opts.Actor, f, res.Purged, err)
		return res, fmt.Errorf("dlq: %s of %s stopped after %d tasks: %w", action, f, res.Purged, err)
	}
	d.logMutation(ctx, action, opts.Actor, f, res.Purged, nil)
	return res, nil
}
