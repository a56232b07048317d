package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// MaxSpread bounds RedriveOptions.Delay and Spread.
const MaxSpread = 30 * 24 * time.Hour

// RedriveOptions shape a redrive. Actor and Reason are required unless
// DryRun is set.
type RedriveOptions struct {
	// Actor names who is redriving (a user or service); Reason says why.
	// Both go to the audit log.
	Actor  string
	Reason string
	// DryRun counts what would be redriven and changes nothing.
	DryRun bool
	// All allows an empty filter, meaning the whole dead-letter queue.
	All bool
	// Max, if positive, redrives at most this many tasks (the newest
	// dead first is not guaranteed; which ones is up to the store).
	Max int64
	// Delay postpones the first attempt of the new life.
	Delay time.Duration
	// Spread, if positive, adds a random extra delay in [0, Spread) to
	// each task, so a bulk redrive does not become a thundering herd.
	Spread time.Duration
	// MaxLife, if positive, leaves dead the tasks already redriven MaxLife
	// times (life >= MaxLife); they are counted in the result's AtLimit.
	// Zero uses Config.MaxLife; negative means no cap for this call.
	MaxLife int
	// Progress, if set, is called with the number of tasks redriven so
	// far and the expected total: once before the first chunk and after
	// every chunk. Calls never overlap and done only grows, but with
	// Config.Parallelism above one they may come from other goroutines.
	Progress func(done, total int64)
}

// RedriveResult reports a redrive. When a bulk redrive fails part way, the
// result returned with the error says what was done before the failure.
type RedriveResult struct {
	// DryRun is true when nothing was changed.
	DryRun bool
	// Matched is how many dead tasks matched when the redrive started.
	Matched int64
	// Redriven is how many tasks went back to PENDING (for a dry run,
	// how many would).
	Redriven int64
	// AtLimit is how many matching tasks stayed dead because they reached
	// the MaxLife cap.
	AtLimit int64
	// MaxLife is the cap that applied; zero for none.
	MaxLife int
	// Failed lists the tasks named by ID that were not redriven, with why:
	// errors wrapping store.ErrNotFound, store.ErrNotDead or
	// store.ErrRedriveLimit. Redrive by filter leaves it empty.
	Failed []TaskError
}

// TaskError is why one task named by ID was not changed.
type TaskError struct {
	// ID is the task that was named.
	ID rdq.ID
	// Err is the cause, e.g. store.ErrNotFound or store.ErrNotDead.
	Err error
}

// Error names the task and its cause.
func (e TaskError) Error() string { return fmt.Sprintf("task %s: %v", e.ID, e.Err) }

// Unwrap returns the cause, for errors.Is.
func (e TaskError) Unwrap() error { return e.Err }

func (d *DLQ) redriveCap(opts RedriveOptions) int {
	switch {
	case opts.MaxLife < 0:
		return 0
	case opts.MaxLife > 0:
		return opts.MaxLife
	}
	return d.maxLife
}

func validateRedrive(opts RedriveOptions) error {
	if !opts.DryRun {
		if err := validateAudit(opts.Actor, opts.Reason); err != nil {
			return err
		}
	}
	if opts.Max < 0 {
		return fmt.Errorf("%w: redrive max %d is negative: use 0 for no limit", rdq.ErrInvalid, opts.Max)
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"delay", opts.Delay}, {"spread", opts.Spread}} {
		if v.d < 0 || v.d > MaxSpread {
			return fmt.Errorf("%w: redrive %s %s: use 0 to %s", rdq.ErrInvalid, v.name, v.d, MaxSpread)
		}
	}
	return nil
}

// Redrive moves the dead tasks matching f back to PENDING with the retry
// policy reset (attempts 0, life + 1), keeping their history. It works in
// chunks (of Config.ChunkSize, or the backend's BulkChunkSize: see Config),
// up to Config.Parallelism at once, each one transaction with its own audit
// entry naming the filter, until every task that matched at the start is
// done, opts.Max is reached, or only tasks at the MaxLife cap are left.
//
// An empty filter is refused with ErrAllRequired unless opts.All is set.
// A dry run returns Matched and the number that would be redriven; with a
// MaxLife cap it reads the matching tasks to count those at the cap, which
// costs a scan of the selection.
func (d *DLQ) Redrive(ctx context.Context, f Filter, opts RedriveOptions) (RedriveResult, error) {
	if err := f.Validate(); err != nil {
		return RedriveResult{}, err
	}
	if err := validateRedrive(opts); err != nil {
		return RedriveResult{}, err
	}
	if f.IsEmpty() && !opts.All {
		return RedriveResult{}, ErrAllRequired
	}
	sf := f.toStore()
	res := RedriveResult{DryRun: opts.DryRun, MaxLife: d.redriveCap(opts)}
	var atLimit atomic.Int64
	matched, err := d.b.CountDead(ctx, sf)
	if err != nil {
		return res, fmt.Errorf("dlq: redrive: counting dead tasks: %w", err)
	}
	res.Matched = matched

	if opts.DryRun {
		if res.MaxLife > 0 && matched > 0 {
			n, err := d.countAtLimit(ctx, sf, res.MaxLife)
			if err != nil {
				return res, err
			}
			res.AtLimit = n
		}
		res.Redriven = capMax(matched-res.AtLimit, opts.Max)
		progress(opts.Progress, 0, res.Redriven)
		return res, nil
	}

	total := capMax(matched, opts.Max)
	shown := total
	progress(opts.Progress, 0, shown)
	var adjusted bool
	n, err := d.runChunks(ctx, total, func(ctx context.Context, limit int) (int64, error) {
		r, err := d.b.RedriveDead(ctx, store.RedriveDeadParams{
			Filter: sf, Limit: limit, Delay: opts.Delay, Spread: opts.Spread, MaxLife: res.MaxLife,
			Actor: opts.Actor, Reason: opts.Reason,
		})
		if err == nil {
			atLimit.Store(r.AtLimit)
		}
		return r.Redriven, err
	}, func(n int64) {
		res.Redriven += n
		add(d.m.Redriven, n)
		if a := atLimit.Load(); !adjusted && a > 0 {
			// The tasks at the cap will never be redriven by this call.
			adjusted = true
			shown = min(shown, capMax(matched-a, opts.Max))
		}
		progress(opts.Progress, res.Redriven, max(shown, res.Redriven))
	})
	res.Redriven = n
	res.AtLimit = atLimit.Load()
	if err != nil {
		d.logMutation(ctx, ActionRedrive, opts.Actor, f, res.Redriven, err)
		return res, fmt.Errorf("dlq: redrive of %s stopped after %d tasks: %w", f, res.Redriven, err)
	}
	d.logMutation(ctx, ActionRedrive, opts.Actor, f, res.Redriven, nil)
	return res, nil
}

// countAtLimit counts the dead tasks matching sf in life maxLife or later,
// reading them page by page.
func (d *DLQ) countAtLimit(ctx context.Context, sf store.DeadFilter, maxLife int) (int64, error) {
	var n int64
	p := store.ListDeadParams{Filter: sf, Limit: d.chunk}
	for {
		tasks, err := d.b.ListDead(ctx, p)
		if err != nil {
			return 0, fmt.Errorf("dlq: redrive dry run: reading dead tasks: %w", err)
		}
		for _, t := range tasks {
			if t.Life >= maxLife {
				n++
			}
		}
		if len(tasks) < p.Limit {
			return n, nil
		}
		c := store.CursorOf(tasks[len(tasks)-1])
		p.After = &c
	}
}

// RedriveTasks redrives the named dead tasks, as Redrive does for a filter.
// Duplicate IDs count once. Tasks that cannot be redriven (missing, not
// dead, at the MaxLife cap) are reported in the result's Failed, and those
// at the cap also in AtLimit; they do not fail the call. The opts fields
// All and Max do not apply.
func (d *DLQ) RedriveTasks(ctx context.Context, ids []rdq.ID, opts RedriveOptions) (RedriveResult, error) {
	ids, err := uniqueIDs(ids)
	if err != nil {
		return RedriveResult{}, err
	}
	if err := validateRedrive(opts); err != nil {
		return RedriveResult{}, err
	}
	return d.redriveIDs(ctx, ids, nil, opts)
}

// RedriveTask redrives one dead task. It fails with an error wrapping
// store.ErrNotFound, store.ErrNotDead or store.ErrRedriveLimit when the
// task cannot be redriven. With opts.DryRun it only checks that it could.
func (d *DLQ) RedriveTask(ctx context.Context, id rdq.ID, opts RedriveOptions) error {
	return d.redriveOne(ctx, id, nil, opts)
}

// EditAndRedrive replaces a dead task's payload and redrives it, in one
// transaction. The audit entry's action is "edit_payload" and its details
// hold the SHA-256 of the old and the new payload (old_sha256,
// new_sha256), never the payloads. A nil payload is the empty payload. It
// fails like RedriveTask, and with an error wrapping rdq.ErrInvalid for a
// payload over rdq.MaxPayloadBytes.
func (d *DLQ) EditAndRedrive(ctx context.Context, id rdq.ID, payload []byte, opts RedriveOptions) error {
	if len(payload) > rdq.MaxPayloadBytes {
		return fmt.Errorf("%w: payload is %d bytes; the limit is %d", rdq.ErrInvalid, len(payload), rdq.MaxPayloadBytes)
	}
	if payload == nil {
		payload = []byte{}
	}
	return d.redriveOne(ctx, id, payload, opts)
}

func (d *DLQ) redriveOne(ctx context.Context, id rdq.ID, payload []byte, opts RedriveOptions) error {
	ids, err := uniqueIDs([]rdq.ID{id})
	if err != nil {
		return err
	}
	if err := validateRedrive(opts); err != nil {
		return err
	}
	res, err := d.redriveIDs(ctx, ids, payload, opts)
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("dlq: redrive: %w", res.Failed[0])
	}
	return nil
}

func (d *DLQ) redriveIDs(ctx context.Context, ids []rdq.ID, payload []byte, opts RedriveOptions) (RedriveResult, error) {
	res := RedriveResult{DryRun: opts.DryRun, MaxLife: d.redriveCap(opts)}
	if opts.DryRun {
		return d.dryRunIDs(ctx, ids, res)
	}
	action := ActionRedrive
	if payload != nil {
		action = ActionEditPayload
	}
	progress(opts.Progress, 0, int64(len(ids)))
	for chunk := range slices.Chunk(ids, d.chunk) {
		errs, err := d.b.Redrive(ctx, store.RedriveParams{
			IDs: chunk, Payload: payload, Delay: opts.Delay, Spread: opts.Spread, MaxLife: res.MaxLife,
			Actor: opts.Actor, Reason: opts.Reason,
		})
		if err != nil {
			d.logIDs(ctx, action, opts.Actor, ids, res.Redriven, err)
			return res, fmt.Errorf("dlq: redrive stopped after %d tasks: %w", res.Redriven, err)
		}
		if len(errs) != len(chunk) {
			return res, fmt.Errorf("dlq: redrive: the store returned %d results for %d tasks", len(errs), len(chunk))
		}
		var n int64
		for i, e := range errs {
			switch {
			case e == nil:
				n++
			default:
				if errors.Is(e, store.ErrRedriveLimit) {
					res.AtLimit++
				}
				res.Failed = append(res.Failed, TaskError{ID: chunk[i], Err: e})
			}
		}
		res.Matched += n + countMatchedFailures(errs)
		res.Redriven += n
		add(d.m.Redriven, n)
		progress(opts.Progress, res.Redriven, int64(len(ids)))
	}
	d.logIDs(ctx, action, opts.Actor, ids, res.Redriven, nil)
	return res, nil
}

// countMatchedFailures counts the dead tasks among failures: those refused
// only because of the redrive cap.
func countMatchedFailures(errs []error) int64 {
	var n int64
	for _, e := range errs {
		if e != nil && errors.Is(e, store.ErrRedriveLimit) {
			n++
		}
	}
	return n
}

// dryRunIDs reports what redriving ids would do, without changing anything.
func (d *DLQ) dryRunIDs(ctx context.Context, ids []rdq.ID, res RedriveResult) (RedriveResult, error) {
	for _, id := range ids {
		t, _, err := d.b.Get(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			res.Failed = append(res.Failed, TaskError{ID: id, Err: store.ErrNotFound})
		case err != nil:
			return res, fmt.Errorf("dlq: redrive dry run: task %s: %w", id, err)
		case t.Status != rdq.StatusDead:
			res.Failed = append(res.Failed, TaskError{ID: id, Err: fmt.Errorf("%w (it is %s)", store.ErrNotDead, t.Status)})
		case res.MaxLife > 0 && t.Life >= res.MaxLife:
			res.Matched++
			res.AtLimit++
			res.Failed = append(res.Failed, TaskError{ID: id, Err: fmt.Errorf("%w (life %d, cap %d)", store.ErrRedriveLimit, t.Life, res.MaxLife)})
		default:
			res.Matched++
			res.Redriven++
		}
	}
	return res, nil
}

func uniqueIDs(ids []rdq.ID) ([]rdq.ID, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no task ids given", rdq.ErrInvalid)
	}
	seen := make(map[rdq.ID]bool, len(ids))
	out := make([]rdq.ID, 0, len(ids))
	for _, id := range ids {
		if id.IsZero() {
			return nil, fmt.Errorf("%w: the zero task id is not a task", rdq.ErrInvalid)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// capMax limits n to limit when limit is positive.
func capMax(n, limit int64) int64 {
	if limit > 0 && n > limit {
		return limit
	}
	return max(n, 0)
}

func progress(fn func(done, total int64), done, total int64) {
	if fn != nil {
		fn(done, total)
	}
}

func (d *DLQ) logMutation(ctx context.Context, action, actor string, f Filter, n int64, err error) {
	if err != nil {
		d.log.ErrorContext(ctx, "dlq mutation failed", "action", action, "actor", actor, "filter", f.String(), "count", n, "error", err)
		return
	}
	d.log.InfoContext(ctx, "dlq mutation", "action", action, "actor", actor, "filter", f.String(), "count", n)
}

func (d *DLQ) logIDs(ctx context.Context, action, actor string, ids []rdq.ID, n int64, err error) {
	attrs := []any{"action", action, "actor", actor, "count", n}
	if len(ids) == 1 {
		attrs = append(attrs, "task_id", ids[0].String())
	} else {
		attrs = append(attrs, "ids", len(ids))
	}
	if err != nil {
		d.log.ErrorContext(ctx, "dlq mutation failed", append(attrs, "error", err)...)
		return
	}
	d.log.InfoContext(ctx, "dlq mutation", attrs...)
}
