// Package client submits tasks to rdq.
//
// A producer needs only this package and a store: it pulls in nothing of the
// worker, Prometheus or OpenTelemetry's SDK. Submitting is one round trip to
// the store, for one task or a batch.
//
//	c, err := client.New(client.Config{Store: st})
//	...
//	res, err := c.Submit(ctx, client.Task{
//		Queue:          "emails",
//		Handler:        "send-welcome",
//		Payload:        []byte(`{"user":42}`),
//		ContentType:    "application/json",
//		IdempotencyKey: "welcome-42",
//		FirstFailure:   sendErr, // the failure that made us submit, if any
//	})
//
// The trace context of the submitting context is written into the task's
// headers (W3C traceparent) through the OpenTelemetry propagation API, so
// the worker's execution joins the submitter's trace.
package client

import (
	"context"
	"fmt"
	"maps"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// DefaultID is the worker ID recorded on a first failure when Config.ID is
// empty.
const DefaultID = "client"

// Store is what a Client needs of a store: every store.Store implements it.
// It is defined here, where it is consumed, so that a producer can hand the
// client a narrower value (a wrapper, a test double) than a whole store.
type Store interface {
	// Enqueue inserts tasks; see store.Store.Enqueue.
	Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error)
	// Get returns a task and its history; see store.Store.Get.
	Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error)
}

var _ Store = store.Store(nil)

// Config configures a Client.
type Config struct {
	// Store receives the tasks. Required. Any store.Store will do (it
	// needs only Enqueue and Get); see Store.
	Store Store
	// ID names the submitter in attempt history: a Task's FirstFailure is
	// recorded as attempt 1 run by this ID. Empty means DefaultID.
	ID string
	// Propagator writes the trace context of the submitting context into
	// task headers. Nil means the global otel.GetTextMapPropagator() at
	// the time of each submit (which propagates nothing until the
	// application installs one, e.g. propagation.TraceContext{}).
	Propagator propagation.TextMapPropagator
	// Policies maps queue names to their retry policies, the same values
	// the workers are configured with. The client uses a queue's policy
	// to describe a Task's FirstFailure (its Fingerprint function, so a
	// first failure groups with the worker's failures of the same cause)
	// and to check a Task's own MaxAttempts and Timeout against the
	// queue's bounds (TaskMaxAttempts, TaskMaxTimeout); a queue without an
	// entry uses the zero Policy, whose bounds are the defaults. Optional.
	Policies map[string]rdq.Policy
}

// Client submits tasks to a store. It is safe for concurrent use.
type Client struct {
	store      Store
	id         string
	propagator propagation.TextMapPropagator
	policies   map[string]rdq.Policy
}

// New returns a Client for cfg. It returns an error wrapping rdq.ErrInvalid
// if cfg.Store is nil.
func New(cfg Config) (*Client, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: client: Config.Store is nil", rdq.ErrInvalid)
	}
	id := cfg.ID
	if id == "" {
		id = DefaultID
	}
	return &Client{store: cfg.Store, id: id, propagator: cfg.Propagator, policies: maps.Clone(cfg.Policies)}, nil
}

// Task is a task to submit.
type Task struct {
	// ID, if not zero, is the task's ID, chosen by the caller: a UUID of
	// the RFC 9562 variant and a version from 1 to 8 (rdq.NewID makes
	// one; a version 5 or 8 UUID derived from the work, such as a message
	// offset, works too). Submitting an ID that already exists inserts
	// nothing and returns that task with Result.Duplicate set, exactly as
	// an idempotency key does; so a caller that chose the ID can repeat a
	// Submit whose outcome it did not learn (a connection lost around the
	// commit) without creating the task twice. Unlike an idempotency key,
	// an ID is unique across queues and is free again once its task is
	// purged. Zero means a new rdq.NewID.
	ID rdq.ID
	// Queue and Handler are required; see rdq.ValidateName for the
	// accepted names.
	Queue   string
	Handler string
	// Payload is opaque to rdq, at most rdq.MaxPayloadBytes. It is never
	// logged.
	Payload []byte
	// ContentType describes Payload, e.g. "application/json". Optional.
	ContentType string
	// Headers are stored with the task and given to its handler. The
	// trace context of the submitting context is added to them (a key the
	// caller already set is kept as given). The caller's map is not
	// modified.
	Headers map[string]string
	// IdempotencyKey, if not empty, makes the submission idempotent within
	// Queue: while a task with this key exists in the queue, and for the
	// store's key retention after retention purges it, submitting again
	// returns that task (after a purge, Result.Purged and the task's ID)
	// with Result.Duplicate set and inserts nothing. Within one SubmitMany
	// batch, later repeats of a key report the first one's task as a
	// duplicate.
	IdempotencyKey string
	// Delay postpones the first attempt; zero makes the task due now.
	// Negative is invalid.
	Delay time.Duration
	// RunAt, if not zero, is when the first attempt becomes due; set
	// Delay or RunAt, not both. The store owns the clock, so RunAt is
	// turned into a delay at submission: time.Until(RunAt) on this
	// process's clock, zero (due now) when RunAt has passed. The task is
	// due at RunAt as this process reads the time, give or take the
	// offset between its clock and the store's.
	RunAt time.Time
	// FirstFailure, if not nil, is the failure that made the caller
	// submit. It is recorded as attempt 1 (error type, message and
	// fingerprint from the queue's policy's Describe, see
	// Config.Policies) and counts against the queue's
	// MaxAttempts. A failure marked with rdq.Permanent puts the task
	// straight into the dead-letter queue (outcome PERMANENT_FAILURE),
	// where it can be inspected and redriven; any other is
	// RETRYABLE_FAILURE.
	FirstFailure error
	// MaxAttempts, if not zero, is this task's attempt budget per life,
	// used by the worker in place of the queue policy's MaxAttempts (a
	// first failure counts against it). It must be from 1 to the queue
	// policy's TaskMaxAttempts (rdq.DefaultTaskMaxAttempts unless the
	// policy in Config.Policies says otherwise), or rdq.Unlimited if that
	// is rdq.Unlimited; any other value is an error wrapping
	// rdq.ErrInvalid that names the limit.
	MaxAttempts int
	// Timeout, if not zero, is how long one execution of this task may
	// run, in place of the queue's timeout (worker.QueueConfig.Timeout).
	// It must be positive and at most the queue policy's TaskMaxTimeout
	// (rdq.DefaultTaskMaxTimeout unless the policy in Config.Policies
	// says otherwise). The store keeps it to the microsecond.
	Timeout time.Duration
}

// Result is the outcome of one submitted task.
type Result struct {
	// Task is the stored task: the new one, or the existing one when
	// Duplicate is true. It is a snapshot.
	Task *rdq.Task
	// Duplicate reports that a task with the same idempotency key (or ID)
	// already existed and nothing was inserted.
	Duplicate bool
	// Purged reports a duplicate whose task no longer exists: retention
	// purged it, but its idempotency key is kept for the store's key
	// retention (7 days by default), so the work is not run again. Task
	// then holds only the original task's ID, Queue, IdempotencyKey and
	// CreatedAt.
	Purged bool
}

// Submit stores one task. Invalid input is reported as an error wrapping
// rdq.ErrInvalid that says what is wrong; store failures are wrapped as
// returned by the store.
func (c *Client) Submit(ctx context.Context, t Task) (Result, error) {
	nt, err := c.prepare(ctx, t)
	if err != nil {
		return Result{}, fmt.Errorf("client: submit: %w", err)
	}
	res, err := c.store.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{nt}})
	if err != nil {
		return Result{}, fmt.Errorf("client: submit: %w", err)
	}
	if len(res) != 1 {
		return Result{}, fmt.Errorf("client: submit: store returned %d results for 1 task", len(res))
	}
	return Result{Task: res[0].Task, Duplicate: res[0].Duplicate, Purged: res[0].Purged}, nil
}

// SubmitMany stores tasks in one call to the store (one round trip for
// stores that batch) and returns their results in input order. It is all or
// nothing: if any task is invalid, the error wraps rdq.ErrInvalid and names
// the task's index ("task 3: ..."), and nothing is stored; if the store
// fails, nothing is stored. An empty batch does nothing.
func (c *Client) SubmitMany(ctx context.Context, tasks []Task) ([]Result, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	type dedupKey struct{ queue, key string }
	firstOf := make(map[dedupKey]int)  // idempotency key -> index in batch
	sendIdx := make([]int, len(tasks)) // input index -> index in batch, or -1 - index of first occurrence
	batch := make([]store.NewTask, 0, len(tasks))
	for i, t := range tasks {
		nt, err := c.prepare(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("client: task %d: %w", i, err)
		}
		if nt.IdempotencyKey != "" {
			k := dedupKey{nt.Queue, nt.IdempotencyKey}
			if j, ok := firstOf[k]; ok {
				sendIdx[i] = -1 - j
				continue
			}
			firstOf[k] = len(batch)
		}
		sendIdx[i] = len(batch)
		batch = append(batch, nt)
	}
	res, err := c.store.Enqueue(ctx, store.EnqueueParams{Tasks: batch})
	if err != nil {
		return nil, fmt.Errorf("client: submit %d tasks: %w", len(tasks), err)
	}
	if len(res) != len(batch) {
		return nil, fmt.Errorf("client: store returned %d results for %d tasks", len(res), len(batch))
	}
	out := make([]Result, len(tasks))
	for i, j := range sendIdx {
		if j >= 0 {
			out[i] = Result{Task: res[j].Task, Duplicate: res[j].Duplicate, Purged: res[j].Purged}
			continue
		}
		first := res[-1-j]
		var snapshot *rdq.Task
		if first.Task != nil {
			cp := *first.Task
			snapshot = &cp
		}
		out[i] = Result{Task: snapshot, Duplicate: true, Purged: first.Purged}
	}
	return out, nil
}

// Get returns a task and its full attempt history across lives, in
// attempt-number order. It returns an error wrapping store.ErrNotFound if
// there is no such task.
func (c *Client) Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	t, attempts, err := c.store.Get(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("client: get %s: %w", id, err)
	}
	return t, attempts, nil
}

// prepare validates t and turns it into a store.NewTask with its ID,
// trace context in its headers and its first failure described.
func (c *Client) prepare(ctx context.Context, t Task) (store.NewTask, error) {
	if t.Delay < 0 {
		return store.NewTask{}, fmt.Errorf("%w: delay %s is negative", rdq.ErrInvalid, t.Delay)
	}
	delay := t.Delay
	if !t.RunAt.IsZero() {
		if t.Delay != 0 {
			return store.NewTask{}, fmt.Errorf("%w: both Delay (%s) and RunAt (%s) are set; set one", rdq.ErrInvalid, t.Delay, t.RunAt.Format(time.RFC3339Nano))
		}
		delay = max(time.Until(t.RunAt), 0)
	}
	if err := c.policies[t.Queue].CheckTask(t.MaxAttempts, t.Timeout); err != nil {
		return store.NewTask{}, err
	}
	id := t.ID
	if id.IsZero() {
		id = rdq.NewID()
	} else if err := validateID(id); err != nil {
		return store.NewTask{}, err
	}
	headers := c.headers(ctx, t.Headers)
	check := rdq.Task{
		Queue:          t.Queue,
		Handler:        t.Handler,
		Payload:        t.Payload,
		ContentType:    t.ContentType,
		Headers:        headers,
		IdempotencyKey: t.IdempotencyKey,
	}
	if err := check.Validate(); err != nil {
		return store.NewTask{}, err
	}
	nt := store.NewTask{
		ID:             id,
		Queue:          t.Queue,
		Handler:        t.Handler,
		Payload:        t.Payload,
		ContentType:    t.ContentType,
		Headers:        headers,
		IdempotencyKey: t.IdempotencyKey,
		Delay:          delay,
		MaxAttempts:    t.MaxAttempts,
		Timeout:        t.Timeout,
	}
	if t.FirstFailure != nil {
		outcome := rdq.OutcomeRetryableFailure
		if rdq.IsPermanent(t.FirstFailure) {
			outcome = rdq.OutcomePermanentFailure
		}
		nt.FirstFailure = &store.AttemptRecord{
			Outcome:  outcome,
			Failure:  c.policies[t.Queue].Describe(t.FirstFailure),
			WorkerID: c.id,
		}
	}
	return nt, nil
}

// validateID checks that a caller-chosen ID is a UUID of the RFC 9562
// variant with a defined version (1 to 8).
func validateID(id rdq.ID) error {
	if id[8]&0xc0 != 0x80 {
		return fmt.Errorf("%w: task ID %s is not an RFC 9562 UUID (variant bits %02b); make one with rdq.NewID", rdq.ErrInvalid, id, id[8]>>6)
	}
	if v := id[6] >> 4; v < 1 || v > 8 {
		return fmt.Errorf("%w: task ID %s has UUID version %d, want 1 to 8; make one with rdq.NewID", rdq.ErrInvalid, id, v)
	}
	return nil
}

// headers returns a copy of h with the trace context of ctx added, or nil
// if there is nothing to store.
func (c *Client) headers(ctx context.Context, h map[string]string) map[string]string {
	prop := c.propagator
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	carrier := propagation.MapCarrier{}
	prop.Inject(ctx, carrier)
	if len(h) == 0 && len(carrier) == 0 {
		return nil
	}
	out := make(map[string]string, len(h)+len(carrier))
	for k, v := range carrier {
		out[k] = v
	}
	for k, v := range h {
		out[k] = v // the caller's headers win
	}
	return out
}
