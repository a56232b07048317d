// Package tasks is the operator's API for tasks that are not dead: list the
// tasks waiting, retrying, running and recently succeeded, find a task by
// its idempotency key, make waiting tasks due at once, and cancel them into
// the dead-letter queue. Package dlq is its counterpart for dead tasks.
//
// It runs over a store that implements store.LiveTasks (pgstore and
// sqlitestore do), found with store.LiveTasksOf:
//
//	lt, err := tasks.New(st, tasks.Config{})
//	page, err := lt.List(ctx, store.StateRetrying, tasks.Filter{Queue: "emails"}, tasks.ListOptions{})
//	errs, err := lt.Cancel(ctx, []rdq.ID{id}, tasks.Change{Actor: "alice", Reason: "customer withdrew"})
//
// Inputs are validated at the edge with errors wrapping rdq.ErrInvalid.
// Every change names an actor and a reason, which the store writes to the
// audit log in the same transaction. Cancelling deletes nothing: the task
// goes to the dead-letter queue with a CANCELLED attempt, where dlq shows,
// counts, redrives or purges it like any other dead task.
package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/store"
)

// ErrUnsupported is returned by New for a store without the live-task
// capability (store.LiveTasks).
var ErrUnsupported = errors.New("tasks: the store cannot list or change live tasks (it does not implement store.LiveTasks)")

// Limits of the API.
const (
	// DefaultPageSize is the page size of List when none is given.
	DefaultPageSize = 50
	// MaxPageSize bounds a List page.
	MaxPageSize = 1000
	// MaxIDs bounds the tasks one RetryNow or Cancel names.
	MaxIDs = 1000
)

// Backend is what Tasks runs on: a store with the live-task capability.
type Backend interface {
	store.Store
	store.LiveTasks
}

// liveStore is a store with its live-task interface found.
type liveStore struct {
	store.Store
	store.LiveTasks
}

// Config configures Tasks. The zero Config is valid.
type Config struct {
	// Logger receives one record per change; nil discards them. Payloads
	// are never logged.
	Logger *slog.Logger
}

// Tasks is the live-task API of one store. It is safe for concurrent use.
type Tasks struct {
	b   Backend
	log *slog.Logger
}

// New returns Tasks over st. It fails with an error wrapping ErrUnsupported
// if st does not implement store.LiveTasks, and with rdq.ErrInvalid if st
// is nil.
func New(st store.Store, cfg Config) (*Tasks, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: tasks: nil store", rdq.ErrInvalid)
	}
	lt, ok := store.LiveTasksOf(st)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", ErrUnsupported, st)
	}
	b := liveStore{Store: st, LiveTasks: lt}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tasks{b: b, log: log}, nil
}

// Filter selects live tasks. Zero fields match everything; set fields
// combine with AND. They mean, and are validated, as in dlq.Filter.
type Filter struct {
	IDs             []rdq.ID
	Queue           string
	Handler         string
	ErrorType       string
	Fingerprint     string
	MessageContains string
}

// Validate checks f as dlq.Filter.Validate does; every error wraps
// rdq.ErrInvalid and names the field.
func (f Filter) Validate() error {
	return f.dlq().Validate()
}

func (f Filter) dlq() dlq.Filter {
	return dlq.Filter{IDs: f.IDs, Queue: f.Queue, Handler: f.Handler, ErrorType: f.ErrorType,
		Fingerprint: f.Fingerprint, MessageContains: f.MessageContains}
}

func (f Filter) toStore() store.TaskFilter {
	return store.TaskFilter{IDs: slices.Clone(f.IDs), Queue: f.Queue, Handler: f.Handler, ErrorType: f.ErrorType,
		Fingerprint: strings.ToLower(f.Fingerprint), MessageContains: f.MessageContains}
}

// ListOptions pages a listing.
type ListOptions struct {
	// PageSize is the number of tasks per page, 1 to MaxPageSize; zero
	// means DefaultPageSize.
	PageSize int
	// PageToken continues a listing: the NextPageToken of the previous
	// page, issued for the same state and filter.
	PageToken string
	// DueAfter, if set, starts a listing of pending or retrying tasks
	// after the tasks due at or before it: only tasks due strictly later
	// (scheduled, or waiting out a backoff) are listed. It is refused for
	// the other states and ignored with a PageToken, which continues
	// past it.
	DueAfter time.Time
}

// Page is one page of tasks.
type Page struct {
	// Tasks are in the state's order (see store.TaskState).
	Tasks []*rdq.Task
	// NextPageToken continues the listing; empty on the last page. It is
	// URL-safe and valid only with the same state and filter.
	NextPageToken string
}

// lastID sorts after every task ID.
var lastID = rdq.ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// List returns one page of the tasks in state matching f. Following
// NextPageToken visits every task that stays in the state, at the same
// position, exactly once; a task that moves (claimed, retried, made due)
// may be seen twice or not at all, as it would in any live view.
func (t *Tasks) List(ctx context.Context, state store.TaskState, f Filter, opts ListOptions) (Page, error) {
	if !state.Valid() {
		return Page{}, fmt.Errorf("%w: state %q: use %s, %s, %s or %s", rdq.ErrInvalid, clip(string(state)),
			store.StatePending, store.StateRetrying, store.StateInFlight, store.StateSucceeded)
	}
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
	p := store.ListTasksParams{State: state, Filter: f.toStore(), Limit: size + 1}
	if !opts.DueAfter.IsZero() && state != store.StatePending && state != store.StateRetrying {
		return Page{}, fmt.Errorf("%w: due-after lists waiting tasks: use it with state %s or %s, not %s", rdq.ErrInvalid,
			store.StatePending, store.StateRetrying, state)
	}
	switch {
	case opts.PageToken != "":
		c, err := decodeToken(opts.PageToken, state, f)
		if err != nil {
			return Page{}, err
		}
		p.After = &c
	case !opts.DueAfter.IsZero():
		// Past every ID due at DueAfter: the listing is in (due, ID) order.
		p.After = &store.TaskCursor{At: opts.DueAfter, ID: lastID}
	}
	ts, err := t.b.ListTasks(ctx, p)
	if err != nil {
		return Page{}, fmt.Errorf("tasks: listing %s tasks: %w", state, err)
	}
	var page Page
	if len(ts) > size {
		ts = ts[:size]
		page.NextPageToken = encodeToken(store.TaskCursorOf(state, ts[size-1]), state, f)
	}
	page.Tasks = ts
	return page, nil
}

// Show returns a task, in any state, with every attempt across its lives.
// It fails with an error wrapping store.ErrNotFound if there is no such
// task.
func (t *Tasks) Show(ctx context.Context, id rdq.ID) (dlq.Detail, error) {
	if id.IsZero() {
		return dlq.Detail{}, fmt.Errorf("%w: the zero task id is not a task", rdq.ErrInvalid)
	}
	task, attempts, err := t.b.Get(ctx, id)
	if err != nil {
		return dlq.Detail{}, fmt.Errorf("tasks: task %s: %w", id, err)
	}
	return dlq.Detail{Task: task, Attempts: attempts}, nil
}

// ByKey returns the task holding idempotency key key in queue. It fails
// with an error wrapping store.ErrNotFound if no task holds it (a task
// purged by retention no longer does, although its key may still block
// resubmissions for the store's key retention).
func (t *Tasks) ByKey(ctx context.Context, queue, key string) (*rdq.Task, error) {
	if err := rdq.ValidateName("queue", queue); err != nil {
		return nil, err
	}
	if key == "" || len(key) > rdq.MaxIdempotencyKeyLength {
		return nil, fmt.Errorf("%w: idempotency key of %d bytes: use 1 to %d", rdq.ErrInvalid, len(key), rdq.MaxIdempotencyKeyLength)
	}
	task, err := t.b.TaskByKey(ctx, queue, key)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	return task, nil
}

// Change names who makes a change and why; both are required and written
// to the audit log.
type Change struct {
	Actor  string
	Reason string
}

func (c Change) validate() error {
	if c.Actor == "" {
		return dlq.ErrActorRequired
	}
	if c.Reason == "" {
		return dlq.ErrReasonRequired
	}
	if err := validateText("actor", c.Actor, dlq.MaxActorLength); err != nil {
		return err
	}
	return validateText("reason", c.Reason, dlq.MaxReasonLength)
}

// RetryNow makes the PENDING tasks ids (waiting for their first attempt or
// for a retry) due at once, keeping their attempts and history. errs[i] is
// nil, or wraps store.ErrNotFound or store.ErrNotPending, for ids[i]; err
// is set when nothing could be done (invalid input, store failure).
func (t *Tasks) RetryNow(ctx context.Context, ids []rdq.ID, c Change) (errs []error, err error) {
	if err := validateIDs(ids, c); err != nil {
		return nil, err
	}
	errs, err = t.b.RetryNow(ctx, store.RetryNowParams{IDs: ids, Actor: c.Actor, Reason: c.Reason})
	if err != nil {
		return nil, fmt.Errorf("tasks: retry now: %w", err)
	}
	t.log.InfoContext(ctx, "rdq: tasks made due now", "actor", c.Actor, "requested", len(ids), "changed", countNil(errs))
	return errs, nil
}

// Cancel moves the PENDING tasks ids to the dead-letter queue, each with a
// CANCELLED attempt naming c.Actor and c.Reason. errs[i] is nil, or wraps
// store.ErrNotFound or store.ErrNotPending (the task is running, finished
// or dead), for ids[i]; err is set when nothing could be done.
func (t *Tasks) Cancel(ctx context.Context, ids []rdq.ID, c Change) (errs []error, err error) {
	if err := validateIDs(ids, c); err != nil {
		return nil, err
	}
	errs, err = t.b.Cancel(ctx, store.CancelParams{IDs: ids, Actor: c.Actor, Reason: c.Reason})
	if err != nil {
		return nil, fmt.Errorf("tasks: cancel: %w", err)
	}
	t.log.InfoContext(ctx, "rdq: tasks cancelled", "actor", c.Actor, "requested", len(ids), "changed", countNil(errs))
	return errs, nil
}

func validateIDs(ids []rdq.ID, c Change) error {
	if len(ids) == 0 {
		return fmt.Errorf("%w: no task ids given", rdq.ErrInvalid)
	}
	if len(ids) > MaxIDs {
		return fmt.Errorf("%w: %d task ids; the limit is %d (split the list)", rdq.ErrInvalid, len(ids), MaxIDs)
	}
	for _, id := range ids {
		if id.IsZero() {
			return fmt.Errorf("%w: the zero task id is not a task", rdq.ErrInvalid)
		}
	}
	return c.validate()
}

func countNil(errs []error) int {
	n := 0
	for _, e := range errs {
		if e == nil {
			n++
		}
	}
	return n
}

func validateText(what, s string, limit int) error {
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

// A page token is the keyset cursor of the last task on a page, bound to
// the state and filter it was issued for, as unpadded base64url:
//
//	version (1) | time, Unix nanoseconds (8) | task id (16) | state and filter digest (8)
const (
	tokenVersion = 1
	tokenLen     = 1 + 8 + 16 + 8
)

func encodeToken(c store.TaskCursor, state store.TaskState, f Filter) string {
	var b [tokenLen]byte
	b[0] = tokenVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.At.UnixNano()))
	copy(b[9:25], c.ID[:])
	binary.BigEndian.PutUint64(b[25:33], digest(state, f))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeToken(s string, state store.TaskState, f Filter) (store.TaskCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != tokenLen || b[0] != tokenVersion {
		return store.TaskCursor{}, fmt.Errorf("%w: page token %q is not one this version issued: pass the next-page token of a listing unchanged, or start again without one", rdq.ErrInvalid, clip(s))
	}
	if binary.BigEndian.Uint64(b[25:33]) != digest(state, f) {
		return store.TaskCursor{}, fmt.Errorf("%w: page token was issued for another state or filter: repeat the listing's state and filter, or start again without a token", rdq.ErrInvalid)
	}
	var c store.TaskCursor
	c.At = time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))).UTC()
	copy(c.ID[:], b[9:25])
	if c.ID.IsZero() {
		return store.TaskCursor{}, fmt.Errorf("%w: page token holds no task id: start again without a token", rdq.ErrInvalid)
	}
	return c, nil
}

// digest identifies a state and filter; IDs count as a set.
func digest(state store.TaskState, f Filter) uint64 {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(string(state))
	ids := slices.Clone(f.IDs)
	slices.SortFunc(ids, func(a, b rdq.ID) int { return strings.Compare(string(a[:]), string(b[:])) })
	for _, id := range slices.Compact(ids) {
		field(string(id[:]))
	}
	field(f.Queue)
	field(f.Handler)
	field(f.ErrorType)
	field(strings.ToLower(f.Fingerprint))
	field(f.MessageContains)
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

func clip(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
