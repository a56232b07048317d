package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// maxEnqueueRounds bounds the insert-then-look-up rounds of one Enqueue. A
// task needs another round only when the task it conflicted with was
// deleted before it could be read, which takes a purge racing the enqueue.
const maxEnqueueRounds = 5

// Enqueue inserts p.Tasks as PENDING in one statement and returns their
// results in input order.
//
// A task whose ID or (queue, idempotency key) already exists is not
// inserted: its result is the existing task with Duplicate set. That holds
// within a batch too: a later task repeating an earlier one's key (or ID)
// is a duplicate of the earlier one. Retrying a batch with the same IDs is
// therefore safe. A FirstFailure is recorded as attempt 1 of life 0 and
// counted, and becomes the task's last error. Queues receiving a task that
// is due at once are notified (see Notifications).
//
// Invalid input (names, limits, a FirstFailure with outcome SUCCESS) fails
// the whole batch with an error wrapping rdq.ErrInvalid before anything is
// written. The inserts are one statement, so they all happen or none do.
// Only when tasks conflict does a second statement read the existing tasks;
// if that read fails, the error is returned although the batch's new tasks
// were stored, and retrying the same batch (same IDs) reports them as
// duplicates.
func (s *Store) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	if err := validateNewTasks(p.Tasks); err != nil {
		return nil, err
	}
	results := make([]store.EnqueueResult, len(p.Tasks))
	if len(p.Tasks) == 0 {
		return results, nil
	}
	p.Tasks = cleanNewTasks(p.Tasks)

	// firstOf[i] is the earlier task that task i repeats (same ID, or same
	// queue and key), or i itself.
	firstOf := make([]int, len(p.Tasks))
	byID := make(map[rdq.ID]int, len(p.Tasks))
	type qk struct{ queue, key string }
	byKey := map[qk]int{}
	var candidates []int
	for i, t := range p.Tasks {
		firstOf[i] = i
		if j, ok := byID[t.ID]; ok {
			firstOf[i] = j
			continue
		}
		if t.IdempotencyKey != "" {
			if j, ok := byKey[qk{t.Queue, t.IdempotencyKey}]; ok {
				firstOf[i] = j
				continue
			}
			byKey[qk{t.Queue, t.IdempotencyKey}] = i
		}
		byID[t.ID] = i
		candidates = append(candidates, i)
	}

	pending := candidates
	for round := 0; len(pending) > 0; round++ {
		if round == maxEnqueueRounds {
			return nil, fmt.Errorf("pgstore: enqueue: %d tasks conflicted with tasks that vanished before they could be read, %d times in a row", len(pending), round)
		}
		inserted, err := s.insertTasks(ctx, p, pending)
		if err != nil {
			return nil, err
		}
		var conflicted []int
		for _, i := range pending {
			if t, ok := inserted[p.Tasks[i].ID]; ok {
				results[i] = store.EnqueueResult{Task: t}
			} else {
				conflicted = append(conflicted, i)
			}
		}
		if len(conflicted) == 0 {
			break
		}
		found, err := s.lookupExisting(ctx, p, conflicted)
		if err != nil {
			return nil, err
		}
		pending = pending[:0:0]
		var unseen []int
		for _, i := range conflicted {
			if t := found(p.Tasks[i]); t != nil {
				results[i] = store.EnqueueResult{Task: t, Duplicate: true}
			} else if p.Tasks[i].IdempotencyKey != "" {
				unseen = append(unseen, i)
			} else {
				pending = append(pending, i)
			}
		}
		// A key without its task: the task was purged, the key kept.
		purged, err := s.lookupKeys(ctx, p, unseen)
		if err != nil {
			return nil, err
		}
		for _, i := range unseen {
			if t := purged(p.Tasks[i]); t != nil {
				results[i] = store.EnqueueResult{Task: t, Duplicate: true, Purged: true}
			} else {
				pending = append(pending, i)
			}
		}
	}
	for i, j := range firstOf {
		if j != i {
			results[i] = store.EnqueueResult{Task: cloneTask(results[j].Task), Duplicate: true}
		}
	}
	return results, nil
}

func validateNewTasks(tasks []store.NewTask) error {
	for i := range tasks {
		nt := &tasks[i]
		if nt.ID.IsZero() {
			return errInvalid("task %d: zero ID", i)
		}
		t := rdq.Task{
			Queue: nt.Queue, Handler: nt.Handler, Payload: nt.Payload,
			ContentType: nt.ContentType, Headers: nt.Headers, IdempotencyKey: nt.IdempotencyKey,
		}
		if err := t.Validate(); err != nil {
			return fmt.Errorf("task %d: %w", i, err)
		}
		if ff := nt.FirstFailure; ff != nil {
			if !ff.Outcome.Valid() || ff.Outcome == rdq.OutcomeSuccess {
				return errInvalid("task %d: first failure outcome %q is not a failure", i, ff.Outcome)
			}
		}
		if nt.MaxAttempts < rdq.Unlimited || nt.MaxAttempts > math.MaxInt32 {
			return errInvalid("task %d: max attempts %d: use a positive number, 0 for the queue's or rdq.Unlimited", i, nt.MaxAttempts)
		}
		if nt.Timeout < 0 {
			return errInvalid("task %d: timeout %s is negative; use 0 for the queue's", i, nt.Timeout)
		}
	}
	return nil
}

// cleanNewTasks returns a copy of tasks whose free text (content type,
// idempotency key, headers, first failure) is storable; see clean.
func cleanNewTasks(tasks []store.NewTask) []store.NewTask {
	out := make([]store.NewTask, len(tasks))
	for i, t := range tasks {
		t.ContentType = clean(t.ContentType)
		t.IdempotencyKey = clean(t.IdempotencyKey)
		if len(t.Headers) > 0 {
			h := make(map[string]string, len(t.Headers))
			for k, v := range t.Headers {
				h[clean(k)] = clean(v)
			}
			t.Headers = h
		}
		if ff := t.FirstFailure; ff != nil {
			c := *ff
			c.Failure = cleanFailure(ff.Failure)
			c.WorkerID = clean(ff.WorkerID)
			t.FirstFailure = &c
		}
		out[i] = t
	}
	return out
}

// insertTasks runs sqlEnqueue for p.Tasks[idx] and returns the inserted
// tasks by ID.
func (s *Store) insertTasks(ctx context.Context, p store.EnqueueParams, idx []int) (map[rdq.ID]*rdq.Task, error) {
	n := len(idx)
	var (
		ids          = make([][16]byte, n)
		queues       = make([]string, n)
		handlers     = make([]string, n)
		payloads     = make([][]byte, n)
		contentTypes = make([]string, n)
		headers      = make([]string, n)
		keys         = make([]*string, n)
		delays       = make([]int64, n)
		outcomes     = make([]*string, n)
		errTypes     = make([]*string, n)
		messages     = make([]*string, n)
		stacks       = make([]*string, n)
		fingerprints = make([]*string, n)
		workers      = make([]*string, n)
		durations    = make([]int64, n)
		maxAttempts  = make([]int32, n)
		timeouts     = make([]int64, n)
	)
	for k, i := range idx {
		t := &p.Tasks[i]
		ids[k] = t.ID
		queues[k] = t.Queue
		handlers[k] = t.Handler
		payloads[k] = t.Payload
		if payloads[k] == nil {
			payloads[k] = []byte{}
		}
		contentTypes[k] = t.ContentType
		h := []byte("{}")
		if len(t.Headers) > 0 {
			var err error
			if h, err = json.Marshal(t.Headers); err != nil {
				return nil, fmt.Errorf("pgstore: enqueue: encoding headers of task %s: %w", t.ID, err)
			}
		}
		headers[k] = string(h)
		if t.IdempotencyKey != "" {
			keys[k] = &t.IdempotencyKey
		}
		delays[k] = micros(t.Delay)
		maxAttempts[k], timeouts[k] = int32(t.MaxAttempts), micros(t.Timeout)
		if ff := t.FirstFailure; ff != nil {
			outcome := string(ff.Outcome)
			f := ff.Failure
			outcomes[k], errTypes[k], messages[k], stacks[k], fingerprints[k], workers[k] =
				&outcome, &f.Type, &f.Message, &f.Stack, &f.Fingerprint, &ff.WorkerID
			durations[k] = micros(ff.Duration)
		}
	}
	rows, err := s.pool.Query(ctx, s.q.enqueue, ids, queues, handlers, payloads, contentTypes, headers,
		keys, delays, outcomes, errTypes, messages, stacks, fingerprints, workers, durations,
		p.Now, s.channel, micros(s.keyRetention), maxAttempts, timeouts)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue: %w", err)
	}
	tasks, err := collectTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue: %w", err)
	}
	inserted := make(map[rdq.ID]*rdq.Task, len(tasks))
	for _, t := range tasks {
		inserted[t.ID] = t
	}
	return inserted, nil
}

// lookupExisting reads the tasks p.Tasks[idx] conflicted with and returns a
// function finding the one a given task duplicates (by ID first, then by
// queue and idempotency key), or nil if it no longer exists.
func (s *Store) lookupExisting(ctx context.Context, p store.EnqueueParams, idx []int) (func(store.NewTask) *rdq.Task, error) {
	ids := make([][16]byte, 0, len(idx))
	var queues, keys []string
	for _, i := range idx {
		t := &p.Tasks[i]
		ids = append(ids, t.ID)
		if t.IdempotencyKey != "" {
			queues = append(queues, t.Queue)
			keys = append(keys, t.IdempotencyKey)
		}
	}
	rows, err := s.pool.Query(ctx, s.q.enqueueLookup, ids, queues, keys)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue: reading existing tasks: %w", err)
	}
	tasks, err := collectTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue: reading existing tasks: %w", err)
	}
	type qk struct{ queue, key string }
	byID := make(map[rdq.ID]*rdq.Task, len(tasks))
	byKey := make(map[qk]*rdq.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
		if t.IdempotencyKey != "" {
			byKey[qk{t.Queue, t.IdempotencyKey}] = t
		}
	}
	return func(nt store.NewTask) *rdq.Task {
		if t, ok := byID[nt.ID]; ok {
			return t
		}
		if nt.IdempotencyKey != "" {
			return byKey[qk{nt.Queue, nt.IdempotencyKey}]
		}
		return nil
	}, nil
}

// lookupKeys reads the idempotency keys of p.Tasks[idx] and returns a
// function giving, for a task, the stub of the purged task holding its key
// (ID, Queue, IdempotencyKey, CreatedAt), or nil.
func (s *Store) lookupKeys(ctx context.Context, p store.EnqueueParams, idx []int) (func(store.NewTask) *rdq.Task, error) {
	type qk struct{ queue, key string }
	byKey := map[qk]*rdq.Task{}
	find := func(nt store.NewTask) *rdq.Task {
		if t := byKey[qk{nt.Queue, nt.IdempotencyKey}]; t != nil {
			return cloneTask(t)
		}
		return nil
	}
	if len(idx) == 0 {
		return find, nil
	}
	queues := make([]string, len(idx))
	keys := make([]string, len(idx))
	for k, i := range idx {
		queues[k], keys[k] = p.Tasks[i].Queue, p.Tasks[i].IdempotencyKey
	}
	rows, err := s.pool.Query(ctx, s.q.keyLookup, queues, keys)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue: reading idempotency keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t rdq.Task
		var id [16]byte
		if err := rows.Scan(&t.Queue, &t.IdempotencyKey, &id, &t.CreatedAt); err != nil {
			return nil, fmt.Errorf("pgstore: enqueue: reading idempotency keys: %w", err)
		}
		t.ID = id
		t.CreatedAt = t.CreatedAt.UTC()
		byKey[qk{t.Queue, t.IdempotencyKey}] = &t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: enqueue: reading idempotency keys: %w", err)
	}
	return find, nil
}

// collectTasks scans every row of rows as a task and closes rows.
func collectTasks(rows pgx.Rows) ([]*rdq.Task, error) {
	defer rows.Close()
	var tasks []*rdq.Task
	var ts taskScanner
	for rows.Next() {
		t, err := ts.scan(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return tasks, nil
}

// collectOrds reads a single 1-based batch position per row and returns the
// set of 0-based positions, closing rows.
func collectOrds(rows pgx.Rows, n int) ([]bool, error) {
	defer rows.Close()
	ok := make([]bool, n)
	for rows.Next() {
		var ord int64
		if err := rows.Scan(&ord); err != nil {
			return nil, err
		}
		if ord < 1 || ord > int64(n) {
			return nil, fmt.Errorf("batch position %d out of range", ord)
		}
		ok[ord-1] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ok, nil
}

// leaseErrors turns the applied positions into per-item results.
func leaseErrors(applied []bool) []error {
	errs := make([]error, len(applied))
	for i, ok := range applied {
		if !ok {
			errs[i] = store.ErrLeaseLost
		}
	}
	return errs
}

// Claim leases up to p.Limit due PENDING tasks of p.Queues, oldest due first,
// in one statement (UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)),
// so concurrent claimers never receive the same task. Each claimed task is
// IN_FLIGHT, owned by p.WorkerID, with a lease of p.Lease from the store's
// clock and a token one greater than its previous one. The result is sorted
// by due time. A claim of one queue with a backlog starts where the last
// claims took their tasks, so for up to a second it may pass over a task
// that became due behind them (see claimFloors); when it finds fewer tasks
// than its limit there, it takes the rest from the front in a second
// statement.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	if len(p.Queues) == 0 {
		return nil, errInvalid("claim: no queues")
	}
	if p.Limit < 1 {
		return nil, errInvalid("claim: limit %d, want at least 1", p.Limit)
	}
	if p.Lease <= 0 {
		return nil, errInvalid("claim: lease %s, want a positive duration", p.Lease)
	}
	queues := distinct(p.Queues)
	var handlers []string
	if len(p.Handlers) > 0 {
		handlers = distinct(p.Handlers)
	}
	if len(queues) > 1 {
		stmt, args := s.q.claim, []any{queues, p.Limit, micros(p.Lease), p.Now, clean(p.WorkerID)}
		if handlers != nil {
			stmt, args = s.q.claimHandlers, append(args, handlers)
		}
		return s.claim(ctx, stmt, args)
	}
	// A worker's claim of one queue: the statement planned once (see
	// sqlClaimQueue), starting at the queue's floor (see claimFloors).
	key := floorKey(queues[0], handlers)
	from := s.floors.start(key)
	stmt, args := s.q.claimQueue, []any{queues[0], p.Limit, micros(p.Lease), p.Now, clean(p.WorkerID), from}
	if handlers != nil {
		stmt, args = s.q.claimQueueHandlers, []any{queues[0], p.Limit, micros(p.Lease), p.Now, clean(p.WorkerID), handlers, from}
	}
	tasks, err := s.claim(ctx, stmt, args)
	if err != nil {
		return nil, err
	}
	if from != nil && len(tasks) < p.Limit {
		// Fewer than the limit from the floor on (the backlog is gone, or
		// the rest is locked): what is due behind the floor is taken now.
		from = nil
		if ctx.Err() == nil {
			args[1], args[len(args)-1] = p.Limit-len(tasks), nil
			more, err := s.claim(ctx, stmt, args)
			if err != nil {
				// The tasks of the first statement are leased, so they
				// are returned; the floor is dropped, so the next claim
				// reads from the front.
				s.log.WarnContext(ctx, "rdq: claim from the front of the queue failed", "queue", queues[0], "error", err)
			}
			tasks = append(tasks, more...)
			sortByDue(tasks)
		}
	}
	s.floors.record(key, from, p.Limit, tasks)
	return tasks, nil
}

// claim runs the claim statement stmt and returns the tasks it leased,
// sorted by due time.
func (s *Store) claim(ctx context.Context, stmt string, args []any) ([]*rdq.Task, error) {
	rows, err := s.pool.Query(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	tasks, err := collectTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	sortByDue(tasks)
	return tasks, nil
}

// distinct returns names without repeats, in first-seen order.
func distinct(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func sortByDue(tasks []*rdq.Task) {
	sort.Slice(tasks, func(i, j int) bool {
		a, b := tasks[i], tasks[j]
		if !a.NextAttemptAt.Equal(b.NextAttemptAt) {
			return a.NextAttemptAt.Before(b.NextAttemptAt)
		}
		return string(a.ID[:]) < string(b.ID[:])
	})
}

// Heartbeat extends every current lease in p.Leases to p.Extend from the
// store's clock, in one statement. errs[i] is store.ErrLeaseLost when
// p.Leases[i] is not the task's current lease (or the task does not exist);
// a lease listed twice is extended once and reported current both times.
func (s *Store) Heartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	if p.Extend <= 0 {
		return nil, errInvalid("heartbeat: extend %s, want a positive duration", p.Extend)
	}
	if len(p.Leases) == 0 {
		return []error{}, nil
	}
	ids, tokens := leaseArrays(p.Leases)
	rows, err := s.pool.Query(ctx, s.q.heartbeat, ids, tokens, micros(p.Extend), p.Now)
	if err != nil {
		return nil, fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	defer rows.Close()
	live := map[store.Lease]bool{}
	for rows.Next() {
		var id [16]byte
		var token int64
		if err := rows.Scan(&id, &token); err != nil {
			return nil, fmt.Errorf("pgstore: heartbeat: %w", err)
		}
		live[store.Lease{ID: id, Token: token}] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	errs := make([]error, len(p.Leases))
	for i, l := range p.Leases {
		if !live[l] {
			errs[i] = store.ErrLeaseLost
		}
	}
	return errs, nil
}

func leaseArrays(leases []store.Lease) ([][16]byte, []int64) {
	ids := make([][16]byte, len(leases))
	tokens := make([]int64, len(leases))
	for i, l := range leases {
		ids[i] = l.ID
		tokens[i] = l.Token
	}
	return ids, tokens
}

// Finish applies p.Completions in one statement. For each completion whose
// lease is current it records the attempt, if any (numbered one past the
// task's highest attempt number in any life, stamped with the task's life
// and the lease token, finished now and started Duration earlier), counts
// it, keeps a failure as the task's last error, and moves the task to its
// new status: SUCCEEDED or DEAD (finished now) or PENDING (due RetryIn from
// now). The lease is cleared either way.
//
// errs[i] is store.ErrLeaseLost when completion i's lease is not current;
// such a completion changes nothing. When one lease appears more than once
// in a batch, the first occurrence is applied and the others get
// ErrLeaseLost, as if they had come after it.
//
// One bad completion cannot fail the others: an invalid status or outcome
// is errs[i] wrapping rdq.ErrInvalid, and if the database refuses the batch
// for its data (a value it cannot store or index), each completion is
// applied on its own and the ones it refuses get that error. Error types and
// fingerprints longer than rdq.MaxErrorTypeLength are cut to it. err is set
// only when the call failed as a whole (the database unreachable, ctx done).
func (s *Store) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	errs := make([]error, len(p.Completions))
	valid := make([]int, 0, len(p.Completions))
	for i := range p.Completions {
		if err := validCompletion(&p.Completions[i]); err != nil {
			errs[i] = fmt.Errorf("pgstore: finish: completion %d: %w", i, err)
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return errs, nil
	}
	applied, err := s.finish(ctx, p, valid)
	if isDataError(err) && len(valid) > 1 {
		// Find the completions the database refuses; apply the rest.
		applied = make([]bool, len(valid))
		for k, i := range valid {
			one, err := s.finish(ctx, p, []int{i})
			switch {
			case isDataError(err):
				errs[i] = fmt.Errorf("pgstore: finish: completion %d (task %s): %w", i, p.Completions[i].ID, err)
				applied[k] = true // not ErrLeaseLost
			case err != nil:
				return nil, fmt.Errorf("pgstore: finish: %w", err)
			default:
				applied[k] = one[0]
			}
		}
		err = nil
	}
	if err != nil {
		if isDataError(err) {
			errs[valid[0]] = fmt.Errorf("pgstore: finish: completion %d (task %s): %w", valid[0], p.Completions[valid[0]].ID, err)
			return errs, nil
		}
		return nil, fmt.Errorf("pgstore: finish: %w", err)
	}
	for k, i := range valid {
		if !applied[k] {
			errs[i] = store.ErrLeaseLost
		}
	}
	return errs, nil
}

// validCompletion checks a completion's status and outcome.
func validCompletion(c *store.Completion) error {
	switch c.Status {
	case rdq.StatusSucceeded, rdq.StatusPending, rdq.StatusDead:
	default:
		return errInvalid("status %q, want SUCCEEDED, PENDING or DEAD", c.Status)
	}
	if a := c.Attempt; a != nil && !a.Outcome.Valid() {
		return errInvalid("attempt outcome %q", a.Outcome)
	}
	return nil
}

// isDataError reports whether err is the database refusing the values of
// a statement (data exception, integrity constraint, program limit such as
// an index row too large), rather than failing to run it.
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

// finish runs sqlFinish for p.Completions[idx] and returns which were
// applied, by position in idx.
func (s *Store) finish(ctx context.Context, p store.FinishParams, idx []int) ([]bool, error) {
	n := len(idx)
	var (
		ids          = make([][16]byte, n)
		tokens       = make([]int64, n)
		statuses     = make([]string, n)
		retries      = make([]int64, n)
		outcomes     = make([]*string, n)
		errTypes     = make([]*string, n)
		messages     = make([]*string, n)
		stacks       = make([]*string, n)
		fingerprints = make([]*string, n)
		workers      = make([]*string, n)
		durations    = make([]int64, n)
	)
	for k, i := range idx {
		c := &p.Completions[i]
		ids[k], tokens[k], statuses[k], retries[k] = c.ID, c.Token, string(c.Status), micros(c.RetryIn)
		if a := c.Attempt; a != nil {
			outcome := string(a.Outcome)
			f := cleanFailure(a.Failure)
			worker := clean(a.WorkerID)
			outcomes[k], errTypes[k], messages[k], stacks[k], fingerprints[k], workers[k] =
				&outcome, &f.Type, &f.Message, &f.Stack, &f.Fingerprint, &worker
			durations[k] = micros(a.Duration)
		}
	}
	rows, err := s.pool.Query(ctx, s.q.finish, ids, tokens, statuses, retries, outcomes, errTypes,
		messages, stacks, fingerprints, workers, durations, p.Now, s.channel)
	if err != nil {
		return nil, err
	}
	return collectOrds(rows, n)
}

// Release returns the tasks of the current leases in p.Leases to PENDING,
// due now, without recording or counting an attempt, in one statement, and
// notifies their queues. errs[i] is store.ErrLeaseLost when p.Leases[i] is
// not current; a lease listed twice is released by its first occurrence.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return []error{}, nil
	}
	ids, tokens := leaseArrays(p.Leases)
	rows, err := s.pool.Query(ctx, s.q.release, ids, tokens, p.Now, s.channel)
	if err != nil {
		return nil, fmt.Errorf("pgstore: release: %w", err)
	}
	applied, err := collectOrds(rows, len(p.Leases))
	if err != nil {
		return nil, fmt.Errorf("pgstore: release: %w", err)
	}
	return leaseErrors(applied), nil
}

// Snooze returns leased tasks to PENDING, each due after its delay, without
// recording or counting an attempt, and counts a snooze on each; see
// store.Snoozer.
func (s *Store) Snooze(ctx context.Context, p store.SnoozeParams) ([]error, error) {
	if len(p.Snoozes) == 0 {
		return []error{}, nil
	}
	ids := make([][16]byte, len(p.Snoozes))
	tokens := make([]int64, len(p.Snoozes))
	delays := make([]int64, len(p.Snoozes))
	for i, sn := range p.Snoozes {
		ids[i], tokens[i], delays[i] = sn.ID, sn.Token, micros(max(sn.Delay, 0))
	}
	rows, err := s.pool.Query(ctx, s.q.snooze, ids, tokens, delays, p.Now, s.channel)
	if err != nil {
		return nil, fmt.Errorf("pgstore: snooze: %w", err)
	}
	applied, err := collectOrds(rows, len(p.Snoozes))
	if err != nil {
		return nil, fmt.Errorf("pgstore: snooze: %w", err)
	}
	return leaseErrors(applied), nil
}

// RetryInPlace records failed attempts and keeps their tasks leased to the
// same worker, in one statement; see store.InPlaceRetrier. An item the
// database refuses is retried alone, as Finish does, so it fails only
// itself.
func (s *Store) RetryInPlace(ctx context.Context, p store.RetryInPlaceParams) ([]store.RetryInPlaceResult, error) {
	if p.Lease <= 0 {
		return nil, errInvalid("retry in place: lease %s, want a positive duration", p.Lease)
	}
	results := make([]store.RetryInPlaceResult, len(p.Retries))
	valid := make([]int, 0, len(p.Retries))
	for i := range p.Retries {
		if err := validRetry(&p.Retries[i]); err != nil {
			results[i].Err = fmt.Errorf("pgstore: retry in place: item %d: %w", i, err)
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return results, nil
	}
	err := s.retryInPlace(ctx, p, valid, results)
	if isDataError(err) && len(valid) > 1 {
		// Find the items the database refuses; apply the rest.
		for _, i := range valid {
			results[i] = store.RetryInPlaceResult{}
		}
		for _, i := range valid {
			switch err := s.retryInPlace(ctx, p, []int{i}, results); {
			case isDataError(err):
				results[i] = store.RetryInPlaceResult{Err: fmt.Errorf("pgstore: retry in place: item %d (task %s): %w", i, p.Retries[i].ID, err)}
			case err != nil:
				return nil, fmt.Errorf("pgstore: retry in place: %w", err)
			}
		}
		return results, nil
	}
	if err != nil {
		if isDataError(err) {
			results[valid[0]] = store.RetryInPlaceResult{Err: fmt.Errorf("pgstore: retry in place: item %d (task %s): %w", valid[0], p.Retries[valid[0]].ID, err)}
			return results, nil
		}
		return nil, fmt.Errorf("pgstore: retry in place: %w", err)
	}
	return results, nil
}

// validRetry checks that c is a retry: StatusPending, not due in the past,
// with a retryable failed attempt.
func validRetry(c *store.Completion) error {
	switch {
	case c.Status != rdq.StatusPending:
		return errInvalid("status %q, want PENDING: only a retry is kept in place", c.Status)
	case c.Attempt == nil || c.Attempt.Outcome != rdq.OutcomeRetryableFailure:
		return errInvalid("a retry in place needs an attempt with outcome %s", rdq.OutcomeRetryableFailure)
	case c.RetryIn < 0:
		return errInvalid("retry in %s, want zero or more", c.RetryIn)
	}
	return nil
}

// retryInPlace runs sqlRetryInPlace for p.Retries[idx] and sets the
// results of those items: the kept task, nil, or ErrLeaseLost.
func (s *Store) retryInPlace(ctx context.Context, p store.RetryInPlaceParams, idx []int, results []store.RetryInPlaceResult) error {
	n := len(idx)
	var (
		ids          = make([][16]byte, n)
		tokens       = make([]int64, n)
		retries      = make([]int64, n)
		errTypes     = make([]string, n)
		messages     = make([]string, n)
		stacks       = make([]string, n)
		fingerprints = make([]string, n)
		workers      = make([]string, n)
		durations    = make([]int64, n)
	)
	for k, i := range idx {
		c := &p.Retries[i]
		f := cleanFailure(c.Attempt.Failure)
		ids[k], tokens[k], retries[k] = c.ID, c.Token, micros(c.RetryIn)
		errTypes[k], messages[k], stacks[k], fingerprints[k] = f.Type, f.Message, f.Stack, f.Fingerprint
		workers[k], durations[k] = clean(c.Attempt.WorkerID), micros(c.Attempt.Duration)
	}
	rows, err := s.pool.Query(ctx, s.q.retryInPlace, ids, tokens, retries, errTypes, messages, stacks,
		fingerprints, workers, durations, p.Now, micros(p.Lease), s.channel)
	if err != nil {
		return err
	}
	defer rows.Close()
	applied := make([]bool, n)
	var (
		ts   taskScanner
		ord  int64
		kept bool
	)
	for rows.Next() {
		t, err := ts.scan(rows, &ord, &kept)
		if err != nil {
			return err
		}
		if ord < 1 || ord > int64(n) {
			return fmt.Errorf("batch position %d out of range", ord)
		}
		applied[ord-1] = true
		if kept {
			results[idx[ord-1]].Task = t
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k, ok := range applied {
		if !ok {
			results[idx[k]].Err = store.ErrLeaseLost
		}
	}
	return nil
}

// ReclaimExpired takes over up to p.Limit IN_FLIGHT tasks of p.Queues (every
// queue when empty) whose lease expired by the store's clock, oldest expiry
// first, in one statement that skips rows other reclaimers hold. For each it
// records a LEASE_EXPIRED attempt (rdq.LeaseExpiredFailure; the lost
// execution's worker, token and claim time; numbered one past the task's
// highest attempt number), counts it, makes it the last error, and leases
// the task to p.WorkerID for p.Lease with a new token. The caller decides
// retry or dead with Finish (without an attempt).
func (s *Store) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, errInvalid("reclaim: limit %d, want at least 1", p.Limit)
	}
	if p.Lease <= 0 {
		return nil, errInvalid("reclaim: lease %s, want a positive duration", p.Lease)
	}
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	f := rdq.LeaseExpiredFailure()
	rows, err := s.pool.Query(ctx, s.q.reclaimExpired, queues, p.Limit, micros(p.Lease), clean(p.WorkerID),
		p.Now, f.Type, f.Message, f.Fingerprint)
	if err != nil {
		return nil, fmt.Errorf("pgstore: reclaim expired leases: %w", err)
	}
	tasks, err := collectTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: reclaim expired leases: %w", err)
	}
	for _, t := range tasks {
		s.log.DebugContext(ctx, "rdq: reclaimed a task whose lease expired",
			"task_id", t.ID.String(), "queue", t.Queue, "handler", t.Handler,
			"attempt", t.Attempts, "worker_id", p.WorkerID)
	}
	return tasks, nil
}

// Get returns the task id and its attempts across lives in number order,
// read in one round trip. It returns store.ErrNotFound if there is no such
// task.
func (s *Store) Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	b := &pgx.Batch{}
	b.Queue(s.q.getTask, [16]byte(id))
	b.Queue(s.q.getAttempts, [16]byte(id))
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	t, err := scanTask(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("pgstore: get %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: get %s: %w", id, err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: get %s: history: %w", id, err)
	}
	defer rows.Close()
	var history []rdq.Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("pgstore: get %s: history: %w", id, err)
		}
		history = append(history, a)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pgstore: get %s: history: %w", id, err)
	}
	return t, history, nil
}

// Redrive moves the DEAD tasks p.IDs back to PENDING in a new life (attempts
// 0, life + 1, history and last error kept), due after p.Delay plus a
// random share of p.Spread, in one transaction that also writes the audit
// entry: action "redrive" with the redriven IDs, or "edit_payload" with the
// old and new payload SHA-256 (details old_sha256, new_sha256) when
// p.Payload replaces the payload of the single task named.
//
// errs[i] is nil, store.ErrNotFound, store.ErrNotDead or
// store.ErrRedriveLimit (life already p.MaxLife or more) for p.IDs[i]. An
// ID listed twice is redriven once; its later occurrences get ErrNotDead.
func (s *Store) Redrive(ctx context.Context, p store.RedriveParams) ([]error, error) {
	if p.Payload != nil && len(p.IDs) != 1 {
		return nil, errInvalid("redrive: a payload edit names exactly one task, got %d", len(p.IDs))
	}
	if len(p.Payload) > rdq.MaxPayloadBytes {
		return nil, errInvalid("redrive: payload is %d bytes; the limit is %d", len(p.Payload), rdq.MaxPayloadBytes)
	}
	if p.Delay < 0 || p.Spread < 0 {
		return nil, errInvalid("redrive: negative delay or spread")
	}
	errs := make([]error, len(p.IDs))
	if len(p.IDs) == 0 {
		return errs, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.q.redriveLock, uuids(p.IDs))
		if err != nil {
			return err
		}
		type state struct {
			status string
			life   int32
		}
		found := map[rdq.ID]state{}
		for rows.Next() {
			var id [16]byte
			var st state
			if err := rows.Scan(&id, &st.status, &st.life); err != nil {
				rows.Close()
				return err
			}
			found[id] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var eligible []rdq.ID
		seen := map[rdq.ID]bool{}
		for i, id := range p.IDs {
			st, ok := found[id]
			switch {
			case !ok:
				errs[i] = fmt.Errorf("pgstore: redrive %s: %w", id, store.ErrNotFound)
			case st.status != string(rdq.StatusDead) || seen[id]:
				errs[i] = fmt.Errorf("pgstore: redrive %s (%s): %w", id, st.status, store.ErrNotDead)
			case p.MaxLife > 0 && int(st.life) >= p.MaxLife:
				errs[i] = fmt.Errorf("pgstore: redrive %s (life %d, limit %d): %w", id, st.life, p.MaxLife, store.ErrRedriveLimit)
			default:
				seen[id] = true
				eligible = append(eligible, id)
			}
		}
		if len(eligible) == 0 {
			return nil
		}
		action := "redrive"
		details := map[string]string{}
		var payload []byte
		if p.Payload != nil {
			var old []byte
			if err := tx.QueryRow(ctx, s.q.redrivePayload, [16]byte(eligible[0])).Scan(&old); err != nil {
				return err
			}
			action = "edit_payload"
			details["old_sha256"] = sha256Hex(old)
			details["new_sha256"] = sha256Hex(p.Payload)
			payload = p.Payload
		}
		var moved int64
		if err := tx.QueryRow(ctx, s.q.redriveIDs, uuids(eligible), micros(p.Delay), micros(p.Spread),
			payload, p.Now, s.channel).Scan(&moved); err != nil {
			return err
		}
		if moved != int64(len(eligible)) {
			return fmt.Errorf("redrove %d of %d locked dead tasks", moved, len(eligible))
		}
		detailJSON, err := json.Marshal(details)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.q.insertAudit, p.Now, clean(p.Actor), action, "", uuids(eligible), moved, clean(p.Reason), string(detailJSON))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: redrive: %w", err)
	}
	return errs, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// PurgeSucceeded deletes up to p.Limit SUCCEEDED tasks that finished more
// than p.OlderThan ago, oldest first, with their attempts, in one statement
// that skips rows others hold (so every worker may run it at once), and
// writes a "retention" audit entry in the same statement when it deleted
// any. It returns how many it deleted. The deleted tasks' idempotency keys
// are kept for Config.KeyRetention; a second statement then deletes up to
// p.Limit keys whose retention has passed.
func (s *Store) PurgeSucceeded(ctx context.Context, p store.PurgeSucceededParams) (int64, error) {
	if p.Limit < 1 {
		return 0, errInvalid("purge succeeded: limit %d, want at least 1", p.Limit)
	}
	if p.OlderThan < 0 {
		return 0, errInvalid("purge succeeded: negative retention %s", p.OlderThan)
	}
	filter, err := json.Marshal(map[string]string{"status": string(rdq.StatusSucceeded), "older_than": p.OlderThan.String()})
	if err != nil {
		return 0, fmt.Errorf("pgstore: purge succeeded: %w", err)
	}
	var n int64
	err = s.pool.QueryRow(ctx, s.q.purgeSucceeded, micros(p.OlderThan), p.Limit, p.Now, clean(p.Actor), string(filter)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgstore: purge succeeded: %w", err)
	}
	if _, err := s.pool.Exec(ctx, s.q.pruneKeys, micros(s.keyRetention), p.Limit, p.Now); err != nil {
		return n, fmt.Errorf("pgstore: purge succeeded: pruning idempotency keys past their retention: %w", err)
	}
	return n, nil
}

// cloneTask returns a copy of t that shares nothing mutable with it.
func cloneTask(t *rdq.Task) *rdq.Task {
	if t == nil {
		return nil
	}
	c := *t
	if t.Payload != nil {
		c.Payload = append([]byte(nil), t.Payload...)
	}
	if t.Headers != nil {
		c.Headers = make(map[string]string, len(t.Headers))
		for k, v := range t.Headers {
			c.Headers[k] = v
		}
	}
	return &c
}
