package store

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/srjn45/rdq"
)

// Admin is the dead-letter queue and operations interface: browse, group,
// redrive and purge dead tasks, read the audit log and queue statistics.
// Package dlq builds the operator-facing product on it. A backend that
// implements Store should implement Admin on the same type; callers find
// it with AdminOf.
//
// Every mutation is set-based (one statement, or one bounded chunk) and
// writes its audit entry in the same transaction as the change.
type Admin interface {
	// Redrive moves DEAD tasks back to PENDING with the policy reset
	// (attempts 0, life+1), keeping their history, due after p.Delay
	// (spread by p.Spread). errs[i] is nil, ErrNotFound, ErrNotDead or
	// ErrRedriveLimit for p.IDs[i]. When anything was redriven, one audit
	// entry is written in the same transaction. (Until rdq 0.x it was a
	// method of Store; only the dead-letter queue uses it.)
	Redrive(ctx context.Context, p RedriveParams) (errs []error, err error)

	// ListDead returns up to p.Limit DEAD tasks matching p.Filter, newest
	// dead first (FinishedAt then ID, descending), strictly after p.After
	// when set. Paging with the last task's cursor neither skips nor
	// repeats a task.
	ListDead(ctx context.Context, p ListDeadParams) ([]*rdq.Task, error)

	// DeadGroups groups the DEAD tasks matching filter by failure
	// fingerprint, largest group first.
	DeadGroups(ctx context.Context, filter DeadFilter) ([]Group, error)

	// CountDead counts the DEAD tasks matching filter.
	CountDead(ctx context.Context, filter DeadFilter) (int64, error)

	// RedriveDead redrives up to p.Limit DEAD tasks matching p.Filter, as
	// Store.Redrive does for IDs, and reports how many it redrove and how
	// many matching tasks it left dead because of p.MaxLife. Callers
	// redrive everything by calling again until Redriven is zero.
	RedriveDead(ctx context.Context, p RedriveDeadParams) (RedriveDeadResult, error)

	// PurgeDead deletes up to p.Limit DEAD tasks (and their attempts)
	// matching p.Filter and returns how many it deleted.
	PurgeDead(ctx context.Context, p PurgeDeadParams) (int64, error)

	// ListAudit returns audit entries matching p, newest first.
	ListAudit(ctx context.Context, p ListAuditParams) ([]AuditEntry, error)

	// Stats returns per-queue counts, one entry per queue that has tasks,
	// ordered by queue name.
	Stats(ctx context.Context, p StatsParams) ([]QueueStats, error)
}

// BulkChunker is implemented by stores whose bulk mutations by filter
// (Admin.RedriveDead and Admin.PurgeDead) run best in chunks of a size of
// their own. It is optional (find it with BulkChunkerOf) and only a hint:
// package dlq uses it for those chunks when its Config sets no ChunkSize,
// and its own default otherwise.
// A store where each call holds a lock on the whole database (SQLite)
// prefers fewer, larger chunks; a store with row locks needs no hint.
type BulkChunker interface {
	// BulkChunkSize is the Limit a caller should pass to each
	// RedriveDead and PurgeDead call of a bulk mutation; at least 1.
	BulkChunkSize() int
}

// DeadFilter selects dead tasks. Zero fields match everything; set fields
// combine with AND.
type DeadFilter struct {
	// IDs, if not empty, limits the selection to these tasks.
	IDs []rdq.ID
	// Queue, Handler, ErrorType and Fingerprint match exactly against the
	// task and its last error.
	Queue       string
	Handler     string
	ErrorType   string
	Fingerprint string
	// DeadAfter and DeadBefore bound when the task went dead: at or after
	// DeadAfter, strictly before DeadBefore.
	DeadAfter  time.Time
	DeadBefore time.Time
	// MessageContains matches a case-insensitive substring of the last
	// error message.
	MessageContains string
	// LifeMin and LifeBelow bound the task's life (rdq.Task.Life, the
	// number of times it was redriven): at least LifeMin, strictly below
	// LifeBelow. Zero means unbounded, so LifeMin 1 selects tasks that died
	// again after a redrive, LifeBelow 1 tasks never redriven, and
	// LifeMin n with LifeBelow n+1 one exact life. Stores check them on the
	// rows their dead-task indexes yield (no index has the life).
	LifeMin   int
	LifeBelow int
}

// MarshalJSON renders f as the audit log records it (AuditEntry.Filter):
// an object with the set fields only, in snake_case (ids, queue, handler,
// error_type, fingerprint, dead_after, dead_before, message_contains,
// life_min, life_below), times in UTC RFC 3339. The empty filter is "{}". Every store writes this form.
func (f DeadFilter) MarshalJSON() ([]byte, error) {
	j := struct {
		IDs             []rdq.ID   `json:"ids,omitempty"`
		Queue           string     `json:"queue,omitempty"`
		Handler         string     `json:"handler,omitempty"`
		ErrorType       string     `json:"error_type,omitempty"`
		Fingerprint     string     `json:"fingerprint,omitempty"`
		DeadAfter       *time.Time `json:"dead_after,omitempty"`
		DeadBefore      *time.Time `json:"dead_before,omitempty"`
		MessageContains string     `json:"message_contains,omitempty"`
		LifeMin         int        `json:"life_min,omitempty"`
		LifeBelow       int        `json:"life_below,omitempty"`
	}{
		IDs: f.IDs, Queue: f.Queue, Handler: f.Handler, ErrorType: f.ErrorType,
		Fingerprint: f.Fingerprint, MessageContains: f.MessageContains,
		LifeMin: f.LifeMin, LifeBelow: f.LifeBelow,
	}
	if !f.DeadAfter.IsZero() {
		t := f.DeadAfter.UTC()
		j.DeadAfter = &t
	}
	if !f.DeadBefore.IsZero() {
		t := f.DeadBefore.UTC()
		j.DeadBefore = &t
	}
	return json.Marshal(j)
}

// Cursor is a position in the newest-first listing of dead tasks.
type Cursor struct {
	FinishedAt time.Time
	ID         rdq.ID
}

// CursorOf returns the cursor just past t in a listing.
func CursorOf(t *rdq.Task) Cursor { return Cursor{FinishedAt: t.FinishedAt, ID: t.ID} }

// ListDeadParams is the input of Admin.ListDead.
type ListDeadParams struct {
	Filter DeadFilter
	// After, if set, continues a listing after this position.
	After *Cursor
	// Limit is the page size; at least one.
	Limit int
}

// Group is one failure fingerprint among dead tasks.
type Group struct {
	Fingerprint string
	ErrorType   string
	// Message is the last error message of ExampleID.
	Message string
	// Count is how many dead tasks share the fingerprint.
	Count int64
	// FirstSeen and LastSeen are the earliest and latest times a task of
	// the group went dead.
	FirstSeen time.Time
	LastSeen  time.Time
	// ExampleID is the most recently dead task of the group.
	ExampleID rdq.ID
}

// RedriveDeadParams is the input of Admin.RedriveDead.
type RedriveDeadParams struct {
	Filter DeadFilter
	// Limit bounds one call (one chunk); at least one.
	Limit int
	// Delay, Spread, MaxLife, Actor and Reason are as in RedriveParams.
	Delay   time.Duration
	Spread  time.Duration
	MaxLife int
	Actor   string
	Reason  string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// RedriveDetails returns the audit details of a bulk redrive (the Details
// of the "redrive" entry RedriveDead writes): "delay" and "spread" as Go
// durations ("1m30s"), "max_life" as a decimal number, "0" for no cap. Every
// store records them alike, so an operator can see how a redrive was paced.
func RedriveDetails(p RedriveDeadParams) map[string]string {
	return map[string]string{
		"delay":    p.Delay.String(),
		"spread":   p.Spread.String(),
		"max_life": strconv.Itoa(max(p.MaxLife, 0)),
	}
}

// RedriveDeadResult reports one RedriveDead call.
type RedriveDeadResult struct {
	// Redriven is how many tasks went back to PENDING.
	Redriven int64
	// AtLimit is how many matching tasks stayed dead because they reached
	// MaxLife (counted over the whole filter, not only this chunk).
	AtLimit int64
}

// PurgeDeadParams is the input of Admin.PurgeDead.
type PurgeDeadParams struct {
	Filter DeadFilter
	// Limit bounds one call (one chunk); at least one.
	Limit int
	// Action is the audit action: "purge" or "retention".
	Action string
	// Actor and Reason are written to the audit log.
	Actor  string
	Reason string
}

// AuditEntry is one mutation of the dead-letter queue or of retention.
type AuditEntry struct {
	// ID increases with every entry.
	ID int64
	// At is on the store's clock.
	At time.Time
	// Actor is who did it, as the caller named them.
	Actor string
	// Action is "redrive", "purge", "edit_payload", "retention", or
	// "pause" and "resume" for stores that implement Pauser, or
	// "pause_handler" and "resume_handler" for stores that implement
	// HandlerPauser (Filter then names the queue and handler; Details hold
	// the trips and, for a tripped breaker, the fingerprint and ratio).
	Action string
	// Filter is the selection as JSON, when the mutation was by filter.
	Filter string
	// IDs are the tasks affected, when the mutation was by ID.
	IDs []rdq.ID
	// Queues are the queues the mutation touched (of the tasks it changed,
	// or the queue it paused or resumed), sorted and without repeats. It is
	// written with the entry, whatever the selection (IDs, a group, a
	// filter); entries written before stores recorded it have none (see
	// TouchesQueue).
	Queues []string
	// Count is how many tasks were affected.
	Count int64
	// Reason is the caller's explanation.
	Reason string
	// Details holds action-specific facts, e.g. the old and new payload
	// hashes of a payload edit.
	Details map[string]string
}

// TouchesQueue reports whether the entry's mutation touched queue: Queues
// holds it, or, for an entry without Queues, its Filter selects that queue.
func (e AuditEntry) TouchesQueue(queue string) bool {
	if len(e.Queues) > 0 {
		return slices.Contains(e.Queues, queue)
	}
	if e.Filter == "" {
		return false
	}
	var f struct {
		Queue string `json:"queue"`
	}
	return json.Unmarshal([]byte(e.Filter), &f) == nil && f.Queue == queue
}

// AuditQueues returns names sorted, without repeats or empty names: the
// form of AuditEntry.Queues.
func AuditQueues(names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ListAuditParams is the input of Admin.ListAudit. Zero fields match
// everything.
type ListAuditParams struct {
	Actor  string
	Action string
	// Since and Until bound At: at or after Since, strictly before Until.
	Since time.Time
	Until time.Time
	// BeforeID continues a listing below this entry ID.
	BeforeID int64
	// Limit is the page size; at least one.
	Limit int
}

// StatsParams is the input of Admin.Stats.
type StatsParams struct {
	// SucceededWindow is how far back succeeded tasks are counted.
	SucceededWindow time.Duration
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// QueueStats describes one queue.
type QueueStats struct {
	Queue    string
	Pending  int64
	InFlight int64
	Dead     int64
	// Succeeded counts tasks that succeeded within StatsParams.SucceededWindow.
	Succeeded int64
	// OldestDueAge is how long the longest-waiting due PENDING task has
	// been due (from its due time, not its creation); zero if none is due.
	OldestDueAge time.Duration
}
