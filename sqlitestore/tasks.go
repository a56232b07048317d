package sqlitestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Enqueue implements store.Store: the whole batch is one transaction. Tasks
// whose ID exists, or with an idempotency key already present in their
// queue (earlier in the same batch included), are not inserted and come
// back as the existing task with Duplicate set.
func (s *Store) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	for i := range p.Tasks {
		if err := validateNewTask(&p.Tasks[i]); err != nil {
			return nil, fmt.Errorf("sqlitestore: enqueue task %d: %w", i, err)
		}
	}
	if len(p.Tasks) == 0 {
		return []store.EnqueueResult{}, nil
	}
	var results []store.EnqueueResult
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		results = make([]store.EnqueueResult, len(p.Tasks))
		for i := range p.Tasks {
			nt := &p.Tasks[i]
			if nt.IdempotencyKey != "" {
				rows, err := s.query(ctx, tx, sqlFindByKey, nt.Queue, nt.IdempotencyKey)
				if err != nil {
					return fmt.Errorf("looking up idempotency key: %w", err)
				}
				existing, err := scanTasks(rows)
				if err != nil {
					return fmt.Errorf("looking up idempotency key: %w", err)
				}
				if len(existing) > 0 {
					results[i] = store.EnqueueResult{Task: existing[0], Duplicate: true}
					continue
				}
				stub, err := s.purgedKey(ctx, tx, nt.Queue, nt.IdempotencyKey, now)
				if err != nil {
					return err
				}
				if stub != nil {
					results[i] = store.EnqueueResult{Task: stub, Duplicate: true, Purged: true}
					continue
				}
			}
			t, err := s.insertTask(ctx, tx, nt, now)
			if err != nil {
				return fmt.Errorf("inserting task %s: %w", nt.ID, err)
			}
			if t == nil { // the ID exists
				rows, err := s.query(ctx, tx, sqlGetTask, idArg(nt.ID))
				if err != nil {
					return fmt.Errorf("looking up task %s: %w", nt.ID, err)
				}
				existing, err := scanTasks(rows)
				if err != nil || len(existing) != 1 {
					return fmt.Errorf("looking up task %s: %d found, %w", nt.ID, len(existing), err)
				}
				results[i] = store.EnqueueResult{Task: existing[0], Duplicate: true}
				continue
			}
			if nt.IdempotencyKey != "" {
				if _, err := s.exec(ctx, tx, sqlKeyPut, nt.Queue, nt.IdempotencyKey, idArg(nt.ID), now); err != nil {
					return fmt.Errorf("remembering the idempotency key of task %s: %w", nt.ID, err)
				}
			}
			results[i] = store.EnqueueResult{Task: t}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: enqueue: %w", err)
	}
	return results, nil
}

// purgedKey returns the stub (ID, Queue, IdempotencyKey, CreatedAt) of the
// task that held key in queue and was purged less than the key retention
// before now, or nil.
func (s *Store) purgedKey(ctx context.Context, tx *sql.Tx, queue, key string, now int64) (*rdq.Task, error) {
	var (
		id      []byte
		created int64
	)
	err := tx.QueryRowContext(ctx, sqlKeyFind, queue, key, now-micros(s.keyRetention)).Scan(&id, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up idempotency key: %w", err)
	}
	tid, err := scanID(id)
	if err != nil {
		return nil, fmt.Errorf("looking up idempotency key: %w", err)
	}
	return &rdq.Task{ID: tid, Queue: queue, IdempotencyKey: key, CreatedAt: fromMicros(created)}, nil
}

// forgetKeys applies what becomes of the idempotency keys of deleted tasks
// (the rows of a DELETE … RETURNING id, queue, idempotency_key, which it
// closes): kept, marked purged at now, when retire is set; deleted
// otherwise. It returns the deleted tasks' IDs.
func (s *Store) forgetKeys(ctx context.Context, tx *sql.Tx, rows *sql.Rows, retire bool, now int64) ([]rdq.ID, []string, error) {
	type gone struct {
		id         rdq.ID
		queue, key string
	}
	var all []gone
	for rows.Next() {
		var (
			b     []byte
			queue string
			key   sql.NullString
		)
		if err := rows.Scan(&b, &queue, &key); err != nil {
			return nil, nil, errors.Join(err, rows.Close())
		}
		id, err := scanID(b)
		if err != nil {
			return nil, nil, errors.Join(err, rows.Close())
		}
		all = append(all, gone{id, queue, key.String})
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, nil, err
	}
	ids := make([]rdq.ID, len(all))
	queues := make([]string, len(all))
	for i, g := range all {
		ids[i] = g.id
		queues[i] = g.queue
		if g.key == "" {
			continue
		}
		var err error
		if retire {
			_, err = s.exec(ctx, tx, sqlKeyRetire, now, idArg(g.id), g.queue, g.key)
		} else {
			_, err = s.exec(ctx, tx, sqlKeyDrop, g.queue, g.key)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("idempotency key of task %s: %w", g.id, err)
		}
	}
	return ids, store.AuditQueues(queues...), nil
}

func validateNewTask(nt *store.NewTask) error {
	if nt.ID.IsZero() {
		return fmt.Errorf("%w: task has no ID", rdq.ErrInvalid)
	}
	if err := rdq.ValidateName("queue", nt.Queue); err != nil {
		return err
	}
	if err := rdq.ValidateName("handler", nt.Handler); err != nil {
		return err
	}
	if nt.FirstFailure != nil && !nt.FirstFailure.Outcome.Valid() {
		return fmt.Errorf("%w: first failure has outcome %q", rdq.ErrInvalid, nt.FirstFailure.Outcome)
	}
	if nt.MaxAttempts < rdq.Unlimited || nt.MaxAttempts > math.MaxInt32 {
		return fmt.Errorf("%w: max attempts %d: use a positive number, 0 for the queue's or rdq.Unlimited", rdq.ErrInvalid, nt.MaxAttempts)
	}
	if nt.Timeout < 0 {
		return fmt.Errorf("%w: timeout %s is negative; use 0 for the queue's", rdq.ErrInvalid, nt.Timeout)
	}
	return nil
}

// insertTask inserts nt and returns it as stored, or nil if a task with its
// ID exists.
func (s *Store) insertTask(ctx context.Context, tx *sql.Tx, nt *store.NewTask, now int64) (*rdq.Task, error) {
	headers, err := headersArg(nt.Headers)
	if err != nil {
		return nil, err
	}
	attempts := 0
	status := rdq.StatusPending
	var finished any // NULL unless the task is created dead
	var failure rdq.Failure
	if ff := nt.FirstFailure; ff != nil {
		attempts = 1
		failure = ff.Failure
		if ff.Outcome == rdq.OutcomePermanentFailure {
			status, finished = rdq.StatusDead, now
		}
	}
	res, err := s.exec(ctx, tx, sqlInsertTask,
		idArg(nt.ID), nt.Queue, nt.Handler, nt.Payload, nt.ContentType, headers, nullString(nt.IdempotencyKey),
		string(status), attempts, now+micros(nt.Delay), now, now, finished,
		failure.Type, failure.Message, failure.Fingerprint,
		string(status), nt.Queue, nt.Handler, nt.MaxAttempts, micros(nt.Timeout))
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("reading rows affected: %w", err)
	} else if n == 0 {
		return nil, nil // the ID exists
	}
	if ff := nt.FirstFailure; ff != nil {
		if err := s.insertAttempt(ctx, tx, nt.ID, ff, 0, now); err != nil {
			return nil, err
		}
	}
	t := &rdq.Task{
		ID:             nt.ID,
		Queue:          nt.Queue,
		Handler:        nt.Handler,
		Payload:        bytes.Clone(nt.Payload),
		ContentType:    nt.ContentType,
		Headers:        maps.Clone(nt.Headers),
		IdempotencyKey: nt.IdempotencyKey,
		Status:         status,
		Attempts:       attempts,
		NextAttemptAt:  fromMicros(now + micros(nt.Delay)),
		CreatedAt:      fromMicros(now),
		UpdatedAt:      fromMicros(now),
		LastError:      rdq.ErrorSummary{Type: failure.Type, Message: failure.Message, Fingerprint: failure.Fingerprint},
		MaxAttempts:    nt.MaxAttempts,
		Timeout:        nt.Timeout.Truncate(time.Microsecond),
	}
	if status == rdq.StatusDead {
		t.FinishedAt = fromMicros(now)
	}
	if t.Payload == nil {
		t.Payload = []byte{}
	}
	if len(t.Headers) == 0 {
		t.Headers = nil
	}
	return t, nil
}

// insertAttempt records rec as the next attempt of task id (numbered
// max + 1 from its history, in the task's current life), finished now and
// started rec.Duration earlier.
func (s *Store) insertAttempt(ctx context.Context, tx *sql.Tx, id rdq.ID, rec *store.AttemptRecord, token int64, now int64) error {
	started := now - micros(rec.Duration)
	_, err := s.exec(ctx, tx, sqlInsertAttempt,
		idArg(id), string(rec.Outcome), rec.Failure.Type, rec.Failure.Message, rec.Failure.Stack,
		rec.WorkerID, token, started, now)
	if err != nil {
		return fmt.Errorf("recording attempt of task %s: %w", id, err)
	}
	return nil
}

// Claim implements store.Store. Under the write lock it takes the due
// PENDING tasks of each queue oldest due first (one index range scan per
// queue), merges them, and leases the first p.Limit.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	if len(p.Queues) == 0 {
		return nil, fmt.Errorf("sqlitestore: claim: %w: no queues", rdq.ErrInvalid)
	}
	if p.Limit < 1 {
		return nil, fmt.Errorf("sqlitestore: claim: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("sqlitestore: claim: %w: lease %s, want a positive duration", rdq.ErrInvalid, p.Lease)
	}
	queues := dedupe(p.Queues)
	var handlersJSON []byte // nil: every handler
	if len(p.Handlers) > 0 {
		var err error
		if handlersJSON, err = json.Marshal(dedupe(p.Handlers)); err != nil {
			return nil, fmt.Errorf("sqlitestore: claim: encoding handlers: %w", err)
		}
	}
	var claimed []*rdq.Task
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		claimed = nil
		type candidate struct {
			rowid int64
			id    []byte
			next  int64
		}
		var cands []candidate
		for _, q := range queues {
			stmt, args := sqlClaimCandidates, []any{q, now, p.Limit}
			if handlersJSON != nil {
				stmt, args = sqlClaimHandlerCandidates, append(args, string(handlersJSON))
			}
			rows, err := s.query(ctx, tx, stmt, args...)
			if err != nil {
				return fmt.Errorf("selecting due tasks: %w", err)
			}
			for rows.Next() {
				var c candidate
				if err := rows.Scan(&c.rowid, &c.id, &c.next); err != nil {
					return errors.Join(fmt.Errorf("selecting due tasks: %w", err), rows.Close())
				}
				cands = append(cands, c)
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return fmt.Errorf("selecting due tasks: %w", err)
			}
		}
		if len(queues) > 1 {
			sort.Slice(cands, func(i, j int) bool {
				if cands[i].next != cands[j].next {
					return cands[i].next < cands[j].next
				}
				return bytes.Compare(cands[i].id, cands[j].id) < 0
			})
		}
		if len(cands) > p.Limit {
			cands = cands[:p.Limit]
		}
		if len(cands) == 0 {
			return nil
		}
		rowids := make([]int64, len(cands))
		for i, c := range cands {
			rowids[i] = c.rowid
		}
		rowidsJSON, err := json.Marshal(rowids)
		if err != nil {
			return fmt.Errorf("encoding row ids: %w", err)
		}
		rows, err := s.query(ctx, tx, sqlClaimTasks, now+micros(p.Lease), p.WorkerID, now, now, string(rowidsJSON))
		if err != nil {
			return fmt.Errorf("leasing tasks: %w", err)
		}
		if claimed, err = scanTasks(rows); err != nil {
			return fmt.Errorf("leasing tasks: %w", err)
		}
		if len(claimed) != len(cands) {
			return fmt.Errorf("leasing tasks: leased %d of %d", len(claimed), len(cands))
		}
		// Oldest due first, as selected (RETURNING has no order).
		sort.Slice(claimed, func(i, j int) bool {
			a, b := claimed[i], claimed[j]
			if !a.NextAttemptAt.Equal(b.NextAttemptAt) {
				return a.NextAttemptAt.Before(b.NextAttemptAt)
			}
			return bytes.Compare(a.ID[:], b.ID[:]) < 0
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim: %w", err)
	}
	return claimed, nil
}

func dedupe(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	if p.Extend <= 0 {
		return nil, fmt.Errorf("sqlitestore: heartbeat: %w: extend %s, want a positive duration", rdq.ErrInvalid, p.Extend)
	}
	if len(p.Leases) == 0 {
		return []error{}, nil
	}
	var errs []error
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		errs = make([]error, len(p.Leases))
		expires := now + micros(p.Extend)
		for i, l := range p.Leases {
			res, err := s.exec(ctx, tx, sqlHeartbeat, expires, now, idArg(l.ID), l.Token)
			if err != nil {
				return fmt.Errorf("extending lease of task %s: %w", l.ID, err)
			}
			if errs[i], err = leaseResult(res); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: heartbeat: %w", err)
	}
	return errs, nil
}

// leaseResult turns the row count of a fenced update into nil (the lease
// was current) or ErrLeaseLost.
func leaseResult(res sql.Result) (error, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("reading rows affected: %w", err)
	}
	if n == 0 {
		return store.ErrLeaseLost, nil
	}
	return nil, nil
}

// Finish implements store.Store. One bad completion cannot fail the
// others: an invalid status or outcome is errs[i] wrapping rdq.ErrInvalid,
// and a completion the database refuses for its data is errs[i] while the
// rest are applied. Error types and fingerprints longer than
// rdq.MaxErrorTypeLength are cut to it.
func (s *Store) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	refused := make([]error, len(p.Completions))
	for i, c := range p.Completions {
		switch c.Status {
		case rdq.StatusSucceeded, rdq.StatusPending, rdq.StatusDead:
		default:
			refused[i] = fmt.Errorf("sqlitestore: finish completion %d: %w: status %q, want SUCCEEDED, PENDING or DEAD", i, rdq.ErrInvalid, c.Status)
		}
		if c.Attempt != nil && !c.Attempt.Outcome.Valid() {
			refused[i] = fmt.Errorf("sqlitestore: finish completion %d: %w: attempt outcome %q", i, rdq.ErrInvalid, c.Attempt.Outcome)
		}
	}
	if len(p.Completions) == 0 {
		return []error{}, nil
	}
	var errs []error
	err := s.writeItems(ctx, p.Now, refused, "finish completion", func(i int) string { return p.Completions[i].ID.String() },
		func() { errs = make([]error, len(p.Completions)) },
		func(i int, err error) { errs[i] = err },
		func(tx *sql.Tx, i int, now int64) error {
			return s.finishOne(ctx, tx, &p.Completions[i], now, &errs[i])
		})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: finish: %w", err)
	}
	return errs, nil
}

// writeItems applies len(refused) items in one write transaction at the
// store's clock (or nowOverride): reset prepares the results, apply writes
// item i, and setErr records an error of item i alone. An item in refused
// is not applied; its error is set. An item the database refuses for its
// data is added to refused with an error naming what (the item's kind) and
// id, and the transaction is run again without it, so one bad item never
// fails the others.
func (s *Store) writeItems(ctx context.Context, nowOverride *time.Time, refused []error, what string, id func(int) string,
	reset func(), setErr func(int, error), apply func(tx *sql.Tx, i int, now int64) error) error {
	for {
		var bad *itemError
		err := s.writeAt(ctx, nowOverride, func(tx *sql.Tx, now int64) error {
			reset()
			for i := range refused {
				if refused[i] != nil {
					setErr(i, refused[i])
					continue
				}
				if err := apply(tx, i, now); err != nil {
					if isDataError(err) {
						bad = &itemError{i: i, err: err}
						return bad
					}
					return err
				}
			}
			return nil
		})
		if bad != nil && errors.As(err, &bad) {
			// Leave the refused item out and apply the rest.
			refused[bad.i] = fmt.Errorf("sqlitestore: %s %d (task %s): %w", what, bad.i, id(bad.i), bad.err)
			continue
		}
		return err
	}
}

// finishOne applies one completion in tx, setting *leaseErr to
// store.ErrLeaseLost if its lease is not current.
func (s *Store) finishOne(ctx context.Context, tx *sql.Tx, c *store.Completion, now int64, leaseErr *error) error {
	var (
		inc      int
		failed   bool
		failure  rdq.Failure
		finished sql.NullInt64
	)
	rec := c.Attempt
	if rec != nil {
		inc = 1
		if rec.Outcome != rdq.OutcomeSuccess {
			rec = cutFailure(rec)
			failed, failure = true, rec.Failure
		}
	}
	if c.Status != rdq.StatusPending {
		finished = sql.NullInt64{Int64: now, Valid: true}
	}
	res, err := s.exec(ctx, tx, sqlFinish,
		string(c.Status), inc, now+micros(c.RetryIn), finished, now,
		failed, failure.Type, failure.Message, failure.Fingerprint,
		idArg(c.ID), c.Token)
	if err != nil {
		return fmt.Errorf("finishing task %s: %w", c.ID, err)
	}
	if *leaseErr, err = leaseResult(res); err != nil {
		return err
	}
	if *leaseErr == nil && rec != nil {
		return s.insertAttempt(ctx, tx, c.ID, rec, c.Token, now)
	}
	return nil
}

// cutFailure returns rec with its error type and fingerprint cut to
// rdq.MaxErrorTypeLength.
func cutFailure(rec *store.AttemptRecord) *store.AttemptRecord {
	r := *rec
	r.Failure.Type = rdq.Truncate(r.Failure.Type, rdq.MaxErrorTypeLength)
	r.Failure.Fingerprint = rdq.Truncate(r.Failure.Fingerprint, rdq.MaxErrorTypeLength)
	return &r
}

// itemError is one completion of a batch that the database refused.
type itemError struct {
	i   int
	err error
}

func (e *itemError) Error() string { return fmt.Sprintf("completion %d: %v", e.i, e.err) }
func (e *itemError) Unwrap() error { return e.err }

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return []error{}, nil
	}
	var errs []error
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		errs = make([]error, len(p.Leases))
		for i, l := range p.Leases {
			res, err := s.exec(ctx, tx, sqlRelease, now, now, idArg(l.ID), l.Token)
			if err != nil {
				return fmt.Errorf("releasing task %s: %w", l.ID, err)
			}
			if errs[i], err = leaseResult(res); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: release: %w", err)
	}
	return errs, nil
}

// Snooze implements store.Snoozer.
func (s *Store) Snooze(ctx context.Context, p store.SnoozeParams) ([]error, error) {
	if len(p.Snoozes) == 0 {
		return []error{}, nil
	}
	var errs []error
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		errs = make([]error, len(p.Snoozes))
		for i, sn := range p.Snoozes {
			res, err := s.exec(ctx, tx, sqlSnooze, now+micros(max(sn.Delay, 0)), now, idArg(sn.ID), sn.Token)
			if err != nil {
				return fmt.Errorf("snoozing task %s: %w", sn.ID, err)
			}
			if errs[i], err = leaseResult(res); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: snooze: %w", err)
	}
	return errs, nil
}

var _ store.InPlaceRetrier = (*Store)(nil)

// RetryInPlace implements store.InPlaceRetrier in one write transaction.
// A task whose queue and handler are not paused is leased again by one
// fenced update (sqlRetryInPlace) and its attempt recorded; an item that
// update does not match (a stale lease, a paused queue or handler) is
// finished as Finish finishes a retry, which reports the stale lease or
// leaves the task waiting. As in Finish, an invalid item, or one the
// database refuses for its data, is results[i].Err while the rest are
// applied.
func (s *Store) RetryInPlace(ctx context.Context, p store.RetryInPlaceParams) ([]store.RetryInPlaceResult, error) {
	if p.Lease <= 0 {
		return nil, fmt.Errorf("sqlitestore: retry in place: %w: lease %s, want a positive duration", rdq.ErrInvalid, p.Lease)
	}
	refused := make([]error, len(p.Retries))
	for i, c := range p.Retries {
		if err := validateRetry(c); err != nil {
			refused[i] = fmt.Errorf("sqlitestore: retry in place item %d: %w", i, err)
		}
	}
	if len(p.Retries) == 0 {
		return []store.RetryInPlaceResult{}, nil
	}
	var results []store.RetryInPlaceResult
	err := s.writeItems(ctx, p.Now, refused, "retry in place item", func(i int) string { return p.Retries[i].ID.String() },
		func() { results = make([]store.RetryInPlaceResult, len(p.Retries)) },
		func(i int, err error) { results[i].Err = err },
		func(tx *sql.Tx, i int, now int64) error {
			return s.retryOne(ctx, tx, &p.Retries[i], now+micros(p.Lease), now, &results[i])
		})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: retry in place: %w", err)
	}
	return results, nil
}

// validateRetry refuses an item of RetryInPlace that is not a retry.
func validateRetry(c store.Completion) error {
	switch {
	case c.Status != rdq.StatusPending:
		return fmt.Errorf("%w: status %q, want PENDING", rdq.ErrInvalid, c.Status)
	case c.Attempt == nil:
		return fmt.Errorf("%w: no attempt to record", rdq.ErrInvalid)
	case c.Attempt.Outcome != rdq.OutcomeRetryableFailure:
		return fmt.Errorf("%w: attempt outcome %q, want %s", rdq.ErrInvalid, c.Attempt.Outcome, rdq.OutcomeRetryableFailure)
	case c.RetryIn < 0:
		return fmt.Errorf("%w: negative retry delay %s", rdq.ErrInvalid, c.RetryIn)
	}
	return nil
}

// retryOne applies one valid item of RetryInPlace in tx: the task leased
// again until expires, or finished as a retry.
func (s *Store) retryOne(ctx context.Context, tx *sql.Tx, c *store.Completion, expires, now int64, r *store.RetryInPlaceResult) error {
	rec := cutFailure(c.Attempt)
	f := rec.Failure
	rows, err := s.query(ctx, tx, sqlRetryInPlace, now+micros(c.RetryIn), expires, rec.WorkerID, now,
		f.Type, f.Message, f.Fingerprint, idArg(c.ID), c.Token)
	if err != nil {
		return fmt.Errorf("retrying task %s in place: %w", c.ID, err)
	}
	ts, err := scanTasks(rows)
	if err != nil {
		return fmt.Errorf("retrying task %s in place: %w", c.ID, err)
	}
	if len(ts) == 0 {
		return s.finishOne(ctx, tx, c, now, &r.Err)
	}
	r.Task = ts[0]
	return s.insertAttempt(ctx, tx, c.ID, rec, c.Token, now)
}

// ReclaimExpired implements store.Store.
func (s *Store) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("sqlitestore: reclaim: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("sqlitestore: reclaim: %w: lease %s, want a positive duration", rdq.ErrInvalid, p.Lease)
	}
	queues := dedupe(p.Queues)
	queuesJSON, err := json.Marshal(queues)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: reclaim: encoding queues: %w", err)
	}
	lost := rdq.LeaseExpiredFailure()
	var reclaimed []*rdq.Task
	err = s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		reclaimed = nil
		type expired struct {
			id      []byte
			token   int64
			owner   string
			claimed int64
		}
		var exp []expired
		rows, err := s.query(ctx, tx, sqlReclaimCandidates, now, len(queues), string(queuesJSON), p.Limit)
		if err != nil {
			return fmt.Errorf("selecting expired leases: %w", err)
		}
		for rows.Next() {
			var e expired
			if err := rows.Scan(&e.id, &e.token, &e.owner, &e.claimed); err != nil {
				return errors.Join(fmt.Errorf("selecting expired leases: %w", err), rows.Close())
			}
			exp = append(exp, e)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("selecting expired leases: %w", err)
		}
		expires := now + micros(p.Lease)
		for _, e := range exp {
			rows, err := s.query(ctx, tx, sqlReclaimTask, expires, p.WorkerID, now,
				lost.Type, lost.Message, lost.Fingerprint, now, e.id, e.token)
			if err != nil {
				return fmt.Errorf("reclaiming a task: %w", err)
			}
			ts, err := scanTasks(rows)
			if err != nil {
				return fmt.Errorf("reclaiming a task: %w", err)
			}
			if len(ts) != 1 {
				return fmt.Errorf("reclaiming a task: updated %d rows, want 1", len(ts))
			}
			t := ts[0]
			rec := &store.AttemptRecord{
				Outcome:  rdq.OutcomeLeaseExpired,
				Failure:  lost,
				WorkerID: e.owner,
				Duration: time.Duration(now-min(e.claimed, now)) * time.Microsecond,
			}
			if err := s.insertAttempt(ctx, tx, t.ID, rec, e.token, now); err != nil {
				return err
			}
			reclaimed = append(reclaimed, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: reclaim: %w", err)
	}
	return reclaimed, nil
}

// Get implements store.Store. The task and its history are read from one
// snapshot.
func (s *Store) Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	var (
		task     *rdq.Task
		attempts []rdq.Attempt
	)
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlGetTask, idArg(id))
		if err != nil {
			return err
		}
		ts, err := scanTasks(rows)
		if err != nil {
			return err
		}
		if len(ts) == 0 {
			task = nil
			return nil
		}
		task = ts[0]
		rows, err = tx.QueryContext(ctx, sqlGetAttempts, idArg(id))
		if err != nil {
			return err
		}
		defer rows.Close()
		attempts = []rdq.Attempt{}
		for rows.Next() {
			a, err := scanAttempt(rows)
			if err != nil {
				return err
			}
			attempts = append(attempts, a)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: get task %s: %w", id, err)
	}
	if task == nil {
		return nil, nil, fmt.Errorf("sqlitestore: get task %s: %w", id, store.ErrNotFound)
	}
	return task, attempts, nil
}

// Redrive implements store.Store.
func (s *Store) Redrive(ctx context.Context, p store.RedriveParams) ([]error, error) {
	if p.Payload != nil && len(p.IDs) != 1 {
		return nil, fmt.Errorf("sqlitestore: redrive: %w: a payload edit names %d tasks; it applies to exactly one", rdq.ErrInvalid, len(p.IDs))
	}
	if len(p.IDs) == 0 {
		return []error{}, nil
	}
	spread := micros(p.Spread)
	var errs []error
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		errs = make([]error, len(p.IDs))
		var (
			done    []rdq.ID
			queues  []string
			details map[string]string
		)
		for i, id := range p.IDs {
			var (
				status, queue string
				life          int
				payload       []byte
			)
			rows, err := s.query(ctx, tx, sqlRedriveLookup, idArg(id))
			if err != nil {
				return fmt.Errorf("looking up task %s: %w", id, err)
			}
			found := false
			for rows.Next() {
				found = true
				if err := rows.Scan(&status, &life, &payload, &queue); err != nil {
					return errors.Join(fmt.Errorf("looking up task %s: %w", id, err), rows.Close())
				}
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return fmt.Errorf("looking up task %s: %w", id, err)
			}
			switch {
			case !found:
				errs[i] = store.ErrNotFound
				continue
			case rdq.Status(status) != rdq.StatusDead:
				// A repeated ID in one call was redriven by its first
				// occurrence and is no longer dead.
				errs[i] = store.ErrNotDead
				continue
			case p.MaxLife > 0 && life >= p.MaxLife:
				errs[i] = store.ErrRedriveLimit
				continue
			}
			next := now + micros(p.Delay)
			if spread > 0 {
				next += rand.Int64N(spread)
			}
			if _, err := s.exec(ctx, tx, sqlRedriveTask, next, now, p.Payload != nil, p.Payload, idArg(id)); err != nil {
				return fmt.Errorf("redriving task %s: %w", id, err)
			}
			if p.Payload != nil {
				details = map[string]string{"old_sha256": sha256Hex(payload), "new_sha256": sha256Hex(p.Payload)}
			}
			done = append(done, id)
			queues = append(queues, queue)
		}
		if len(done) == 0 {
			return nil
		}
		action := "redrive"
		if p.Payload != nil {
			action = "edit_payload"
		}
		return s.audit(ctx, tx, now, auditRecord{
			actor: p.Actor, action: action, ids: done, count: int64(len(done)), reason: p.Reason, details: details, queues: queues,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: redrive: %w", err)
	}
	return errs, nil
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// PurgeSucceeded implements store.Store.
func (s *Store) PurgeSucceeded(ctx context.Context, p store.PurgeSucceededParams) (int64, error) {
	if p.Limit < 1 {
		return 0, fmt.Errorf("sqlitestore: purge succeeded: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	if p.OlderThan < 0 {
		return 0, fmt.Errorf("sqlitestore: purge succeeded: %w: negative retention %s", rdq.ErrInvalid, p.OlderThan)
	}
	var n int64
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		rows, err := s.query(ctx, tx, sqlPurgeSucceeded, now-micros(p.OlderThan), p.Limit)
		if err != nil {
			return fmt.Errorf("deleting: %w", err)
		}
		ids, queues, err := s.forgetKeys(ctx, tx, rows, true, now)
		if err != nil {
			return fmt.Errorf("deleting: %w", err)
		}
		if _, err := s.exec(ctx, tx, sqlKeyPrune, now-micros(s.keyRetention), p.Limit); err != nil {
			return fmt.Errorf("pruning idempotency keys past their retention: %w", err)
		}
		if n = int64(len(ids)); n == 0 {
			return nil
		}
		filter, err := json.Marshal(map[string]string{"status": string(rdq.StatusSucceeded), "older_than": p.OlderThan.String()})
		if err != nil {
			return fmt.Errorf("encoding the audit filter: %w", err)
		}
		return s.audit(ctx, tx, now, auditRecord{actor: p.Actor, action: "retention", filter: string(filter), count: n, queues: queues})
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: purge succeeded: %w", err)
	}
	return n, nil
}

// auditRecord is one audit entry to write.
type auditRecord struct {
	actor, action, filter, reason string
	ids                           []rdq.ID
	count                         int64
	details                       map[string]string
	// queues are the queues the mutation touched, in any order, repeats
	// allowed.
	queues []string
}

// audit writes an audit entry in tx, the transaction of the mutation it
// records.
func (s *Store) audit(ctx context.Context, tx *sql.Tx, now int64, a auditRecord) error {
	ids := make([]string, len(a.ids))
	for i, id := range a.ids {
		ids[i] = id.String()
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("encoding audit ids: %w", err)
	}
	if a.details == nil {
		a.details = map[string]string{}
	}
	details, err := json.Marshal(a.details)
	if err != nil {
		return fmt.Errorf("encoding audit details: %w", err)
	}
	queues, err := json.Marshal(store.AuditQueues(a.queues...))
	if err != nil {
		return fmt.Errorf("encoding audit queues: %w", err)
	}
	if _, err := s.exec(ctx, tx, sqlInsertAudit, now, a.actor, a.action, a.filter, string(idsJSON), a.count, a.reason, string(details), string(queues)); err != nil {
		return fmt.Errorf("writing the audit entry: %w", err)
	}
	return nil
}
