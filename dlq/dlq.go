// Package dlq is rdq's dead-letter queue as a product: the operator's API
// for finding out why tasks died, grouping similar failures, fixing and
// replaying them safely, and seeing later who did what.
//
// A DLQ runs over a backend that implements both store.Store and
// store.Admin (pgstore and sqlitestore do). It validates every input at the edge, pages
// listings with opaque tokens, and runs bulk redrives and purges in bounded
// chunks, each chunk one transaction with its own audit entry, reporting
// progress as it goes:
//
//	q, err := dlq.New(pg, dlq.Config{})
//	groups, err := q.Groups(ctx, dlq.Filter{Queue: "emails"})
//	res, err := q.Redrive(ctx, dlq.Filter{Fingerprint: groups[0].Fingerprint},
//		dlq.RedriveOptions{Actor: "alice", Reason: "SMTP relay fixed", Spread: 10 * time.Minute})
//
// Every mutation names an actor and a reason, which the store writes to the
// audit log in the same transaction as the change. Nothing is removed
// without an explicit call: dead tasks stay until they are redriven, purged,
// or expired by an explicit Retention call.
package dlq

import (
	"context"
	"fmt"
	"log/slog"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Backend is what a DLQ runs on: a store with the admin interface, such as
// *pgstore.Store.
type Backend interface {
	store.Store
	store.Admin
}

// BackendOf returns s as a Backend, if s (or a store it wraps, see
// store.Wrapper) implements store.Admin. The Backend is a store.Wrapper of
// s, so the accessors of package store find s's other capabilities
// through it.
func BackendOf(s store.Store) (Backend, bool) {
	a, ok := store.AdminOf(s)
	if !ok {
		return nil, false
	}
	return adminStore{Store: s, Admin: a}, true
}

// adminStore is a store with its admin interface found.
type adminStore struct {
	store.Store
	store.Admin
}

// Unwrap returns the store BackendOf was given.
func (a adminStore) Unwrap() store.Store { return a.Store }

// Defaults and limits of a DLQ.
const (
	// DefaultChunkSize is how many tasks one chunk of a bulk redrive or
	// purge touches, in one transaction, when Config.ChunkSize is zero and
	// the backend names no chunk size of its own (store.BulkChunker).
	DefaultChunkSize = 5000
	// MaxChunkSize bounds Config.ChunkSize.
	MaxChunkSize = 100000
	// DefaultParallelism is how many chunks of a bulk mutation run at once
	// when Config.Parallelism is zero.
	DefaultParallelism = 2
	// MaxParallelism bounds Config.Parallelism.
	MaxParallelism = 16
	// DefaultPageSize is the page size of List when none is given.
	DefaultPageSize = 50
	// MaxPageSize bounds a List page and an audit listing.
	MaxPageSize = 1000
	// MaxActorLength and MaxReasonLength bound the audit fields a caller
	// names, in bytes.
	MaxActorLength  = 128
	MaxReasonLength = 1024
)

// Config configures a DLQ. The zero Config is valid.
type Config struct {
	// ChunkSize is how many tasks one chunk of a bulk mutation touches;
	// zero means DefaultChunkSize, except for the chunks of a redrive or
	// purge by filter on a backend that implements store.BulkChunker,
	// which take its BulkChunkSize (up to MaxChunkSize). Smaller chunks
	// hold locks for less time and report progress more often.
	ChunkSize int
	// Parallelism is how many chunks of a bulk mutation run at once, each
	// in its own transaction and on its own connection; zero means
	// DefaultParallelism. Chunks never overlap: each takes tasks the
	// others have not locked.
	Parallelism int
	// MaxLife, if positive, is the default redrive cap: a task already
	// redriven MaxLife times stays dead. RedriveOptions.MaxLife overrides
	// it per call.
	MaxLife int
	// Metrics receives how many tasks each mutation changed; its nil
	// counters count nothing. The server exports them as
	// rdq_dlq_redriven_total, rdq_dlq_purged_total and
	// rdq_dlq_retention_purged_total.
	Metrics Metrics
	// Logger receives one record per mutation; nil discards them. Payloads
	// are never logged.
	Logger *slog.Logger
}

// DLQ is the dead-letter queue of one backend. It is safe for concurrent
// use.
type DLQ struct {
	b        Backend
	chunk    int // tasks named by ID per store call, and page size of reads
	bulk     int // Limit of each RedriveDead and PurgeDead call
	parallel int
	maxLife  int
	log      *slog.Logger
	m        Metrics
}

// New returns a DLQ over b. It fails with an error wrapping rdq.ErrInvalid
// for an out-of-range Config, and with the registerer's error if the
// counters cannot be registered.
func New(b Backend, cfg Config) (*DLQ, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: dlq: nil backend", rdq.ErrInvalid)
	}
	if cfg.ChunkSize < 0 || cfg.ChunkSize > MaxChunkSize {
		return nil, fmt.Errorf("%w: dlq: chunk size %d: use 1 to %d, or 0 for %d", rdq.ErrInvalid, cfg.ChunkSize, MaxChunkSize, DefaultChunkSize)
	}
	if cfg.Parallelism < 0 || cfg.Parallelism > MaxParallelism {
		return nil, fmt.Errorf("%w: dlq: parallelism %d: use 1 to %d, or 0 for %d", rdq.ErrInvalid, cfg.Parallelism, MaxParallelism, DefaultParallelism)
	}
	if cfg.MaxLife < 0 {
		return nil, fmt.Errorf("%w: dlq: MaxLife %d is negative: use 0 for no cap", rdq.ErrInvalid, cfg.MaxLife)
	}
	d := &DLQ{b: b, chunk: cfg.ChunkSize, parallel: cfg.Parallelism, maxLife: cfg.MaxLife, log: cfg.Logger}
	d.bulk = d.chunk
	if d.chunk == 0 {
		d.chunk, d.bulk = DefaultChunkSize, DefaultChunkSize
		if bc, ok := store.BulkChunkerOf(b); ok {
			d.bulk = min(max(bc.BulkChunkSize(), 1), MaxChunkSize)
		}
	}
	if d.parallel == 0 {
		d.parallel = DefaultParallelism
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.m = cfg.Metrics
	return d, nil
}

// ListOptions pages a listing.
type ListOptions struct {
	// PageSize is the number of tasks per page, 1 to MaxPageSize; zero
	// means DefaultPageSize.
	PageSize int
	// PageToken continues a listing: the NextPageToken of the previous
	// page, issued for the same filter. Empty starts at the newest.
	PageToken string
}

// Page is one page of dead tasks.
type Page struct {
	// Tasks are newest dead first (dead time, then ID, descending).
	Tasks []*rdq.Task
	// NextPageToken continues the listing; empty on the last page. It is
	// URL-safe and valid only with the same filter.
	NextPageToken string
}

// List returns one page of the dead tasks matching f, newest dead first.
// Following NextPageToken visits every matching task exactly once, as long
// as no task matching f goes dead with an earlier dead time meanwhile.
// Invalid filters and tokens fail with errors wrapping rdq.ErrInvalid.
func (d *DLQ) List(ctx context.Context, f Filter, opts ListOptions) (Page, error) {
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	size := opts.PageSize
	if size == 0 {
		size = DefaultPageSize
	}
	if size < 0 || size > MaxPageSize {
		return Page{}, fmt.Errorf("%w: page size %d: use 1 to %d", rdq.ErrInvalid, size, MaxPageSize)
	}
	p := store.ListDeadParams{Filter: f.toStore(), Limit: size + 1}
	if opts.PageToken != "" {
		c, err := decodeToken(opts.PageToken, f)
		if err != nil {
			return Page{}, err
		}
		p.After = &c
	}
	tasks, err := d.b.ListDead(ctx, p)
	if err != nil {
		return Page{}, fmt.Errorf("dlq: listing dead tasks: %w", err)
	}
	var page Page
	if len(tasks) > size {
		tasks = tasks[:size]
		page.NextPageToken = encodeToken(store.CursorOf(tasks[size-1]), f)
	}
	page.Tasks = tasks
	return page, nil
}

// Detail is a task with its full attempt history.
type Detail struct {
	Task *rdq.Task
	// Attempts covers every life, in attempt-number order.
	Attempts []rdq.Attempt
}

// Show returns a task, dead or not, with every attempt across its lives. It
// fails with an error wrapping store.ErrNotFound if there is no such task.
func (d *DLQ) Show(ctx context.Context, id rdq.ID) (Detail, error) {
	if id.IsZero() {
		return Detail{}, fmt.Errorf("%w: the zero task id is not a task", rdq.ErrInvalid)
	}
	t, attempts, err := d.b.Get(ctx, id)
	if err != nil {
		return Detail{}, fmt.Errorf("dlq: task %s: %w", id, err)
	}
	return Detail{Task: t, Attempts: attempts}, nil
}

// Groups groups the dead tasks matching f by failure fingerprint, largest
// group first, so one bug's many victims show up as one line.
func (d *DLQ) Groups(ctx context.Context, f Filter) ([]store.Group, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	g, err := d.b.DeadGroups(ctx, f.toStore())
	if err != nil {
		return nil, fmt.Errorf("dlq: grouping dead tasks: %w", err)
	}
	return g, nil
}

// Count returns how many dead tasks match f.
func (d *DLQ) Count(ctx context.Context, f Filter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	n, err := d.b.CountDead(ctx, f.toStore())
	if err != nil {
		return 0, fmt.Errorf("dlq: counting dead tasks: %w", err)
	}
	return n, nil
}

// The audit actions a store writes.
const (
	ActionRedrive     = "redrive"
	ActionEditPayload = "edit_payload"
	ActionPurge       = "purge"
	ActionRetention   = "retention"
)

// validAction accepts the empty action and lowercase action names of up to
// 64 letters and underscores, so actions a store adds (pausing a queue, say)
// can be queried too.
func validAction(a string) bool {
	if len(a) > 64 {
		return false
	}
	for i := 0; i < len(a); i++ {
		if c := a[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// AuditQuery selects audit entries. Zero fields match everything.
type AuditQuery struct {
	// Actor and Action match exactly. Action is one of the Action
	// constants, or another action the store writes.
	Actor  string
	Action string
	// Since and Until bound the entry time: at or after Since, strictly
	// before Until.
	Since time.Time
	Until time.Time
	// BeforeID continues a listing below this entry ID (the ID of the last
	// entry of the previous page).
	BeforeID int64
	// Limit is the number of entries, 1 to MaxPageSize; zero means
	// DefaultPageSize.
	Limit int
}

// Audit returns audit entries matching q, newest first.
func (d *DLQ) Audit(ctx context.Context, q AuditQuery) ([]store.AuditEntry, error) {
	if !validAction(q.Action) {
		return nil, fmt.Errorf("%w: audit action %q: use %s, %s, %s or %s (or another lowercase action name a store writes)",
			rdq.ErrInvalid, clip(q.Action), ActionRedrive, ActionEditPayload, ActionPurge, ActionRetention)
	}
	if q.Actor != "" {
		if err := validateActor(q.Actor); err != nil {
			return nil, err
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return nil, fmt.Errorf("%w: audit: since %s is not before until %s", rdq.ErrInvalid, q.Since.UTC().Format(time.RFC3339), q.Until.UTC().Format(time.RFC3339))
	}
	if q.BeforeID < 0 {
		return nil, fmt.Errorf("%w: audit: before-id %d is negative", rdq.ErrInvalid, q.BeforeID)
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPageSize
	}
	if limit < 0 || limit > MaxPageSize {
		return nil, fmt.Errorf("%w: audit limit %d: use 1 to %d", rdq.ErrInvalid, limit, MaxPageSize)
	}
	entries, err := d.b.ListAudit(ctx, store.ListAuditParams{
		Actor: q.Actor, Action: q.Action, Since: q.Since, Until: q.Until, BeforeID: q.BeforeID, Limit: limit,
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: listing audit entries: %w", err)
	}
	return entries, nil
}

// DefaultSucceededWindow is the window Stats counts succeeded tasks in when
// none is given.
const DefaultSucceededWindow = 24 * time.Hour

// Stats returns per-queue counts (pending, in flight, dead, succeeded
// within window, oldest due age), ordered by queue name. A zero window means
// DefaultSucceededWindow.
func (d *DLQ) Stats(ctx context.Context, window time.Duration) ([]store.QueueStats, error) {
	if window < 0 {
		return nil, fmt.Errorf("%w: stats window %s is negative", rdq.ErrInvalid, window)
	}
	if window == 0 {
		window = DefaultSucceededWindow
	}
	s, err := d.b.Stats(ctx, store.StatsParams{SucceededWindow: window})
	if err != nil {
		return nil, fmt.Errorf("dlq: reading stats: %w", err)
	}
	return s, nil
}

// ErrActorRequired is wrapped by the error of a mutation whose actor is
// empty: every change to the dead-letter queue is attributed to someone.
var ErrActorRequired = fmt.Errorf("%w: an actor is required: name who is making the change (a user or service name)", rdq.ErrInvalid)

// ErrReasonRequired is wrapped by the error of a redrive or purge without a
// reason: the audit log says why, not only who.
var ErrReasonRequired = fmt.Errorf("%w: a reason is required: say why (a ticket, an incident, the fix that was deployed)", rdq.ErrInvalid)

// ErrAllRequired is wrapped by the error of a bulk redrive or purge with an
// empty filter and without All set: touching the whole dead-letter queue
// must be asked for explicitly.
var ErrAllRequired = fmt.Errorf("%w: the filter selects every dead task: narrow it, or set All to mean the whole dead-letter queue", rdq.ErrInvalid)

func validateActor(actor string) error {
	if actor == "" {
		return ErrActorRequired
	}
	return validateAuditText("actor", actor, MaxActorLength)
}

func validateAudit(actor, reason string) error {
	if err := validateActor(actor); err != nil {
		return err
	}
	if reason == "" {
		return ErrReasonRequired
	}
	return validateAuditText("reason", reason, MaxReasonLength)
}

// ValidateReason checks the reason of an audited operation by the rules
// Redrive and Purge apply: required (ErrReasonRequired), at most
// MaxReasonLength bytes of UTF-8 without control characters (a tab is
// allowed). Errors wrap rdq.ErrInvalid. Other audited operations, such as
// pausing a queue, use it to hold their reasons to the same rules.
func ValidateReason(reason string) error {
	if reason == "" {
		return ErrReasonRequired
	}
	return validateAuditText("reason", reason, MaxReasonLength)
}

func validateAuditText(what, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d", rdq.ErrInvalid, what, len(s), limit)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", rdq.ErrInvalid, what)
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' {
			return fmt.Errorf("%w: %s contains the control character %U", rdq.ErrInvalid, what, r)
		}
	}
	return nil
}

// Counter counts tasks. A prometheus.Counter is one; so is anything with
// its Add method.
type Counter interface {
	Add(float64)
}

// Metrics are the counters a DLQ adds to, one per kind of mutation; each
// may be nil.
type Metrics struct {
	// Redriven counts dead tasks redriven back to pending.
	Redriven Counter
	// Purged counts dead tasks deleted by a purge.
	Purged Counter
	// RetentionPurged counts dead tasks deleted by retention.
	RetentionPurged Counter
}

func add(c Counter, n int64) {
	if c != nil && n > 0 {
		c.Add(float64(n))
	}
}
