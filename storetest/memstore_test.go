package storetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// memStore is a small, obviously correct in-memory store: the reference
// the kit is checked against, and (with bugs switched on) the proof that
// the kit catches broken stores.
type memStore struct {
	mu     sync.Mutex
	tasks  map[rdq.ID]*memTask
	audit  []store.AuditEntry
	subs   map[chan string]bool
	paused map[string]bool
	// purgedKeys remembers the keys of tasks purged by retention: queue,
	// then key, to the purged task's stub (purge time in UpdatedAt).
	purgedKeys map[[2]string]rdq.Task
	// failAudit makes every audit write fail (Harness.FailAudit).
	failAudit bool
	// locked are the tasks another transaction holds (Harness.LockTask).
	locked map[rdq.ID]bool
	bugs   memBugs
}

// memKeyRetention is how long the reference store keeps a purged task's key.
const memKeyRetention = 7 * 24 * time.Hour

// memBugs are deliberate defects, each of which the kit must detect.
type memBugs struct {
	acceptStaleFinish   bool // Finish ignores the token
	claimNotDue         bool // Claim ignores next_attempt_at
	reclaimKeepsToken   bool // ReclaimExpired does not issue a new token
	heartbeatNoExtend   bool // Heartbeat succeeds without extending
	redriveKeepsAttempt bool // Redrive does not reset attempts
	numberFromCount     bool // attempt number = attempts+1, not max+1
	releaseCounts       bool // Release counts an attempt
	ignorePause         bool // Claim takes tasks of paused queues
	auditAfterChange    bool // a mutation is kept when its audit write fails
	noNotify            bool // Enqueue sends no hint
	lockedBlocksClaim   bool // a claim whose oldest due task is locked comes back empty
	lastCompletionWins  bool // of two completions of one lease in a batch, the last is applied
	ignoreHandlers      bool // Claim takes tasks of handlers not in Handlers
}

var errAuditRefused = errors.New("memstore: audit write refused")

// refuseAudit fails a mutation that would write an audit entry before it
// changes anything, when audit writes fail.
func (m *memStore) refuseAudit() error {
	if m.failAudit && !m.bugs.auditAfterChange {
		return errAuditRefused
	}
	return nil
}

type memTask struct {
	t         rdq.Task
	atts      []rdq.Attempt
	claimedAt time.Time
}

func newMemStore() *memStore {
	return &memStore{tasks: map[rdq.ID]*memTask{}, locked: map[rdq.ID]bool{}, subs: map[chan string]bool{}, paused: map[string]bool{}, purgedKeys: map[[2]string]rdq.Task{}}
}

var (
	_ store.Store    = (*memStore)(nil)
	_ store.Admin    = (*memStore)(nil)
	_ store.Notifier = (*memStore)(nil)
	_ store.Pauser   = (*memStore)(nil)
)

func clock(p *time.Time) time.Time {
	if p != nil {
		return *p
	}
	return time.Now().UTC().Truncate(time.Microsecond)
}

func (m *memTask) snapshot() *rdq.Task {
	t := m.t
	t.Payload = slices.Clone(t.Payload)
	t.Headers = maps.Clone(t.Headers)
	return &t
}

func (m *memStore) record(mt *memTask, a store.AttemptRecord, token int64, now time.Time) {
	n := 1
	for _, old := range mt.atts {
		n = max(n, old.Number+1)
	}
	if m.bugs.numberFromCount {
		n = mt.t.Attempts + 1
	}
	mt.atts = append(mt.atts, rdq.Attempt{
		TaskID: mt.t.ID, Number: n, Life: mt.t.Life, Outcome: a.Outcome,
		ErrorType: a.Failure.Type, Message: a.Failure.Message, Stack: a.Failure.Stack,
		WorkerID: a.WorkerID, LeaseToken: token, StartedAt: now.Add(-a.Duration), FinishedAt: now,
	})
	mt.t.Attempts++
	if a.Outcome != rdq.OutcomeSuccess {
		mt.t.LastError = rdq.ErrorSummary{Type: a.Failure.Type, Message: a.Failure.Message, Fingerprint: a.Failure.Fingerprint}
	}
}

func (m *memStore) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock(p.Now)
	out := make([]store.EnqueueResult, len(p.Tasks))
	notify := map[string]bool{}
	for i, nt := range p.Tasks {
		if dup := m.tasks[nt.ID]; dup != nil {
			out[i] = store.EnqueueResult{Task: dup.snapshot(), Duplicate: true}
			continue
		}
		if nt.IdempotencyKey != "" {
			if dup := m.byKey(nt.Queue, nt.IdempotencyKey); dup != nil {
				out[i] = store.EnqueueResult{Task: dup.snapshot(), Duplicate: true}
				continue
			}
			k := [2]string{nt.Queue, nt.IdempotencyKey}
			if stub, ok := m.purgedKeys[k]; ok && now.Sub(stub.UpdatedAt) < memKeyRetention {
				stub.UpdatedAt = time.Time{}
				out[i] = store.EnqueueResult{Task: &stub, Duplicate: true, Purged: true}
				continue
			}
			delete(m.purgedKeys, k)
		}
		mt := &memTask{t: rdq.Task{
			ID: nt.ID, Queue: nt.Queue, Handler: nt.Handler, Payload: slices.Clone(nt.Payload),
			ContentType: nt.ContentType, Headers: maps.Clone(nt.Headers), IdempotencyKey: nt.IdempotencyKey,
			Status: rdq.StatusPending, NextAttemptAt: now.Add(nt.Delay), CreatedAt: now, UpdatedAt: now,
			MaxAttempts: nt.MaxAttempts, Timeout: nt.Timeout.Truncate(time.Microsecond),
		}}
		if nt.FirstFailure != nil {
			m.record(mt, *nt.FirstFailure, 0, now)
			if nt.FirstFailure.Outcome == rdq.OutcomePermanentFailure {
				mt.t.Status, mt.t.FinishedAt = rdq.StatusDead, now
			}
		}
		m.tasks[nt.ID] = mt
		out[i] = store.EnqueueResult{Task: mt.snapshot()}
		notify[nt.Queue] = true
	}
	for q := range notify {
		if m.bugs.noNotify {
			break
		}
		for ch := range m.subs {
			select {
			case ch <- q:
			default:
			}
		}
	}
	return out, nil
}

func (m *memStore) byKey(queue, key string) *memTask {
	for _, mt := range m.tasks {
		if mt.t.Queue == queue && mt.t.IdempotencyKey == key {
			return mt
		}
	}
	return nil
}

func (m *memStore) sorted(keep func(*memTask) bool, order func(a, b *memTask) int) []*memTask {
	var out []*memTask
	for _, mt := range m.tasks {
		if keep(mt) {
			out = append(out, mt)
		}
	}
	slices.SortFunc(out, order)
	return out
}

func (m *memStore) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock(p.Now)
	due := m.sorted(func(mt *memTask) bool {
		return mt.t.Status == rdq.StatusPending && slices.Contains(p.Queues, mt.t.Queue) && (m.bugs.ignorePause || !m.paused[mt.t.Queue]) && (m.bugs.claimNotDue || !mt.t.NextAttemptAt.After(now)) &&
			(m.bugs.ignoreHandlers || len(p.Handlers) == 0 || slices.Contains(p.Handlers, mt.t.Handler))
	}, func(a, b *memTask) int {
		return cmp.Or(a.t.NextAttemptAt.Compare(b.t.NextAttemptAt), compareIDs(a.t.ID, b.t.ID))
	})
	if m.bugs.lockedBlocksClaim && len(due) > 0 && m.locked[due[0].t.ID] {
		return nil, nil
	}
	due = slices.DeleteFunc(due, func(mt *memTask) bool { return m.locked[mt.t.ID] })
	var out []*rdq.Task
	for _, mt := range due[:min(p.Limit, len(due))] {
		mt.t.Status, mt.t.LeaseToken, mt.t.LeaseExpiresAt, mt.t.LeaseOwner = rdq.StatusInFlight, mt.t.LeaseToken+1, now.Add(p.Lease), p.WorkerID
		mt.claimedAt = now
		out = append(out, mt.snapshot())
	}
	return out, nil
}

func (m *memStore) current(l store.Lease) *memTask {
	mt := m.tasks[l.ID]
	if mt == nil || mt.t.Status != rdq.StatusInFlight || mt.t.LeaseToken != l.Token {
		return nil
	}
	return mt
}

func (m *memStore) Heartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := make([]error, len(p.Leases))
	for i, l := range p.Leases {
		mt := m.current(l)
		if mt == nil {
			errs[i] = store.ErrLeaseLost
			continue
		}
		if !m.bugs.heartbeatNoExtend {
			mt.t.LeaseExpiresAt = clock(p.Now).Add(p.Extend)
		}
	}
	return errs, nil
}

func (m *memStore) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock(p.Now)
	errs := make([]error, len(p.Completions))
	last := map[store.Lease]int{}
	for i, c := range p.Completions {
		last[c.Lease] = i
	}
	for i, c := range p.Completions {
		if m.bugs.lastCompletionWins && last[c.Lease] != i {
			errs[i] = store.ErrLeaseLost
			continue
		}
		switch c.Status {
		case rdq.StatusSucceeded, rdq.StatusPending, rdq.StatusDead:
		default:
			errs[i] = fmt.Errorf("memstore: %w: status %q", rdq.ErrInvalid, c.Status)
			continue
		}
		if c.Attempt != nil {
			a := *c.Attempt
			a.Failure.Type = rdq.Truncate(a.Failure.Type, rdq.MaxErrorTypeLength)
			a.Failure.Fingerprint = rdq.Truncate(a.Failure.Fingerprint, rdq.MaxErrorTypeLength)
			c.Attempt = &a
		}
		mt := m.current(c.Lease)
		if mt == nil && m.bugs.acceptStaleFinish {
			if cand := m.tasks[c.ID]; cand != nil && cand.t.Status == rdq.StatusInFlight {
				mt = cand
			}
		}
		if mt == nil {
			errs[i] = store.ErrLeaseLost
			continue
		}
		if c.Attempt != nil {
			m.record(mt, *c.Attempt, c.Token, now)
		}
		mt.t.Status, mt.t.LeaseExpiresAt, mt.t.UpdatedAt = c.Status, time.Time{}, now
		if c.Status == rdq.StatusPending {
			mt.t.NextAttemptAt = now.Add(c.RetryIn)
		} else {
			mt.t.FinishedAt = now
		}
	}
	return errs, nil
}

func (m *memStore) Release(ctx context.Context, p store.ReleaseParams) ([]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock(p.Now)
	errs := make([]error, len(p.Leases))
	for i, l := range p.Leases {
		mt := m.current(l)
		if mt == nil {
			errs[i] = store.ErrLeaseLost
			continue
		}
		mt.t.Status, mt.t.NextAttemptAt, mt.t.LeaseExpiresAt = rdq.StatusPending, now, time.Time{}
		if m.bugs.releaseCounts {
			mt.t.Attempts++
		}
	}
	return errs, nil
}

func (m *memStore) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]*rdq.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock(p.Now)
	expired := m.sorted(func(mt *memTask) bool {
		return mt.t.Status == rdq.StatusInFlight && !mt.t.LeaseExpiresAt.After(now) && (len(p.Queues) == 0 || slices.Contains(p.Queues, mt.t.Queue))
	}, func(a, b *memTask) int { return a.t.LeaseExpiresAt.Compare(b.t.LeaseExpiresAt) })
	expired = slices.DeleteFunc(expired, func(mt *memTask) bool { return m.locked[mt.t.ID] })
	var out []*rdq.Task
	le := rdq.LeaseExpiredFailure()
	for _, mt := range expired[:min(p.Limit, len(expired))] {
		m.record(mt, store.AttemptRecord{Outcome: rdq.OutcomeLeaseExpired, Failure: le, WorkerID: mt.t.LeaseOwner, Duration: now.Sub(mt.claimedAt)}, mt.t.LeaseToken, now)
		if !m.bugs.reclaimKeepsToken {
			mt.t.LeaseToken++
		}
		mt.t.LeaseExpiresAt, mt.t.LeaseOwner, mt.claimedAt = now.Add(p.Lease), p.WorkerID, now
		out = append(out, mt.snapshot())
	}
	return out, nil
}

func (m *memStore) Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt := m.tasks[id]
	if mt == nil {
		return nil, nil, store.ErrNotFound
	}
	atts := slices.Clone(mt.atts)
	slices.SortFunc(atts, func(a, b rdq.Attempt) int { return cmp.Compare(a.Number, b.Number) })
	return mt.snapshot(), atts, nil
}

func (m *memStore) redriveOne(mt *memTask, now time.Time, delay, spread time.Duration) {
	mt.t.Status, mt.t.Life, mt.t.FinishedAt = rdq.StatusPending, mt.t.Life+1, time.Time{}
	if !m.bugs.redriveKeepsAttempt {
		mt.t.Attempts = 0
	}
	mt.t.NextAttemptAt = now.Add(delay)
	if spread > 0 {
		mt.t.NextAttemptAt = mt.t.NextAttemptAt.Add(time.Duration(rand.Int64N(int64(spread))))
	}
}

func (m *memStore) addAudit(now time.Time, e store.AuditEntry) error {
	if m.failAudit {
		return errAuditRefused
	}
	e.ID = int64(len(m.audit) + 1)
	e.At = now
	m.audit = append(m.audit, e)
	return nil
}

func (m *memStore) Redrive(ctx context.Context, p store.RedriveParams) ([]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuseAudit(); err != nil {
		return nil, err
	}
	if p.Payload != nil && len(p.IDs) != 1 {
		return nil, fmt.Errorf("%w: a payload edit redrives exactly one task", rdq.ErrInvalid)
	}
	now := clock(p.Now)
	errs := make([]error, len(p.IDs))
	var (
		done   []rdq.ID
		queues []string
	)
	details := map[string]string(nil)
	for i, id := range p.IDs {
		mt := m.tasks[id]
		switch {
		case mt == nil:
			errs[i] = store.ErrNotFound
		case mt.t.Status != rdq.StatusDead:
			errs[i] = store.ErrNotDead
		case p.MaxLife > 0 && mt.t.Life >= p.MaxLife:
			errs[i] = store.ErrRedriveLimit
		default:
			if p.Payload != nil {
				old, nw := sha256.Sum256(mt.t.Payload), sha256.Sum256(p.Payload)
				details = map[string]string{"old_sha256": hex.EncodeToString(old[:]), "new_sha256": hex.EncodeToString(nw[:])}
				mt.t.Payload = slices.Clone(p.Payload)
			}
			m.redriveOne(mt, now, p.Delay, p.Spread)
			done = append(done, id)
			queues = append(queues, mt.t.Queue)
		}
	}
	if len(done) > 0 {
		action := "redrive"
		if details != nil {
			action = "edit_payload"
		}
		if err := m.addAudit(now, store.AuditEntry{Actor: p.Actor, Action: action, IDs: done, Count: int64(len(done)), Reason: p.Reason, Details: details, Queues: store.AuditQueues(queues...)}); err != nil {
			return nil, err
		}
	}
	return errs, nil
}

func (m *memStore) PurgeSucceeded(ctx context.Context, p store.PurgeSucceededParams) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuseAudit(); err != nil {
		return 0, err
	}
	now := clock(p.Now)
	old := m.sorted(func(mt *memTask) bool {
		return mt.t.Status == rdq.StatusSucceeded && mt.t.FinishedAt.Before(now.Add(-p.OlderThan))
	}, func(a, b *memTask) int { return a.t.FinishedAt.Compare(b.t.FinishedAt) })
	old = old[:min(p.Limit, len(old))]
	var queues []string
	for _, mt := range old {
		queues = append(queues, mt.t.Queue)
		m.retireKey(mt, now)
		delete(m.tasks, mt.t.ID)
	}
	for k, stub := range m.purgedKeys {
		if now.Sub(stub.UpdatedAt) >= memKeyRetention {
			delete(m.purgedKeys, k)
		}
	}
	if len(old) > 0 {
		if err := m.addAudit(now, store.AuditEntry{Actor: p.Actor, Action: "retention", Count: int64(len(old)), Queues: store.AuditQueues(queues...)}); err != nil {
			return 0, err
		}
	}
	return int64(len(old)), nil
}

// retireKey remembers the key of mt, purged by retention at now.
func (m *memStore) retireKey(mt *memTask, now time.Time) {
	if mt.t.IdempotencyKey == "" {
		return
	}
	m.purgedKeys[[2]string{mt.t.Queue, mt.t.IdempotencyKey}] = rdq.Task{
		ID: mt.t.ID, Queue: mt.t.Queue, IdempotencyKey: mt.t.IdempotencyKey, CreatedAt: mt.t.CreatedAt, UpdatedAt: now,
	}
}

func (m *memStore) dead(f store.DeadFilter) []*memTask {
	return m.sorted(func(mt *memTask) bool {
		t := mt.snapshot()
		return matches(t, f)
	}, func(a, b *memTask) int { return newestFirst(&a.t, &b.t) })
}

func (m *memStore) ListDead(ctx context.Context, p store.ListDeadParams) ([]*rdq.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*rdq.Task
	for _, mt := range m.dead(p.Filter) {
		if p.After != nil {
			c := cmp.Or(mt.t.FinishedAt.Compare(p.After.FinishedAt), compareIDs(mt.t.ID, p.After.ID))
			if c >= 0 {
				continue
			}
		}
		if len(out) == p.Limit {
			break
		}
		out = append(out, mt.snapshot())
	}
	return out, nil
}

func (m *memStore) DeadGroups(ctx context.Context, f store.DeadFilter) ([]store.Group, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byFP := map[string]*store.Group{}
	var order []string
	for _, mt := range m.dead(f) { // newest first
		g := byFP[mt.t.LastError.Fingerprint]
		if g == nil {
			g = &store.Group{Fingerprint: mt.t.LastError.Fingerprint, ErrorType: mt.t.LastError.Type, Message: mt.t.LastError.Message,
				LastSeen: mt.t.FinishedAt, ExampleID: mt.t.ID}
			byFP[g.Fingerprint] = g
			order = append(order, g.Fingerprint)
		}
		g.Count++
		g.FirstSeen = mt.t.FinishedAt
	}
	out := make([]store.Group, 0, len(order))
	for _, fp := range order {
		out = append(out, *byFP[fp])
	}
	slices.SortStableFunc(out, func(a, b store.Group) int { return cmp.Compare(b.Count, a.Count) })
	return out, nil
}

func (m *memStore) CountDead(ctx context.Context, f store.DeadFilter) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.dead(f))), nil
}

func filterJSON(f store.DeadFilter) string {
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (m *memStore) RedriveDead(ctx context.Context, p store.RedriveDeadParams) (store.RedriveDeadResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuseAudit(); err != nil {
		return store.RedriveDeadResult{}, err
	}
	now := clock(p.Now)
	var (
		res    store.RedriveDeadResult
		queues []string
	)
	for _, mt := range m.dead(p.Filter) {
		if p.MaxLife > 0 && mt.t.Life >= p.MaxLife {
			res.AtLimit++
			continue
		}
		if res.Redriven < int64(p.Limit) {
			m.redriveOne(mt, now, p.Delay, p.Spread)
			res.Redriven++
			queues = append(queues, mt.t.Queue)
		}
	}
	if res.Redriven > 0 {
		if err := m.addAudit(now, store.AuditEntry{Actor: p.Actor, Action: "redrive", Filter: filterJSON(p.Filter), Count: res.Redriven, Reason: p.Reason, Details: store.RedriveDetails(p), Queues: store.AuditQueues(queues...)}); err != nil {
			return store.RedriveDeadResult{}, err
		}
	}
	return res, nil
}

func (m *memStore) PurgeDead(ctx context.Context, p store.PurgeDeadParams) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuseAudit(); err != nil {
		return 0, err
	}
	victims := m.dead(p.Filter)
	victims = victims[:min(p.Limit, len(victims))]
	var queues []string
	for _, mt := range victims {
		queues = append(queues, mt.t.Queue)
		if p.Action == "retention" {
			m.retireKey(mt, clock(nil))
		}
		delete(m.tasks, mt.t.ID)
	}
	if len(victims) > 0 {
		if err := m.addAudit(clock(nil), store.AuditEntry{Actor: p.Actor, Action: p.Action, Filter: filterJSON(p.Filter), Count: int64(len(victims)), Reason: p.Reason, Queues: store.AuditQueues(queues...)}); err != nil {
			return 0, err
		}
	}
	return int64(len(victims)), nil
}

func (m *memStore) ListAudit(ctx context.Context, p store.ListAuditParams) ([]store.AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.AuditEntry
	for i := len(m.audit) - 1; i >= 0 && len(out) < p.Limit; i-- {
		e := m.audit[i]
		if (p.Actor == "" || e.Actor == p.Actor) && (p.Action == "" || e.Action == p.Action) &&
			(p.Since.IsZero() || !e.At.Before(p.Since)) && (p.Until.IsZero() || e.At.Before(p.Until)) &&
			(p.BeforeID == 0 || e.ID < p.BeforeID) {
			e.IDs = slices.Clone(e.IDs)
			e.Details = maps.Clone(e.Details)
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memStore) Stats(ctx context.Context, p store.StatsParams) ([]store.QueueStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock(p.Now)
	byQueue := map[string]*store.QueueStats{}
	for _, mt := range m.tasks {
		q := byQueue[mt.t.Queue]
		if q == nil {
			q = &store.QueueStats{Queue: mt.t.Queue}
			byQueue[mt.t.Queue] = q
		}
		switch mt.t.Status {
		case rdq.StatusPending:
			q.Pending++
			if !mt.t.NextAttemptAt.After(now) {
				q.OldestDueAge = max(q.OldestDueAge, now.Sub(mt.t.NextAttemptAt))
			}
		case rdq.StatusInFlight:
			q.InFlight++
		case rdq.StatusDead:
			q.Dead++
		case rdq.StatusSucceeded:
			if !mt.t.FinishedAt.Before(now.Add(-p.SucceededWindow)) {
				q.Succeeded++
			}
		}
	}
	var out []store.QueueStats
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		out = append(out, *byQueue[q])
	}
	return out, nil
}

func (m *memStore) Notifications(ctx context.Context) (<-chan string, error) {
	ch := make(chan string, 16)
	m.mu.Lock()
	m.subs[ch] = true
	m.mu.Unlock()
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		delete(m.subs, ch)
		m.mu.Unlock()
		close(ch)
	}()
	return ch, nil
}

func (m *memStore) PauseQueue(ctx context.Context, p store.PauseParams) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuseAudit(); err != nil {
		return err
	}
	if !m.paused[p.Queue] {
		m.paused[p.Queue] = true
		if err := m.addAudit(clock(nil), store.AuditEntry{Actor: p.Actor, Action: "pause", Reason: p.Reason, Filter: filterJSON(store.DeadFilter{Queue: p.Queue}), Queues: []string{p.Queue}}); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) ResumeQueue(ctx context.Context, p store.PauseParams) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuseAudit(); err != nil {
		return err
	}
	if m.paused[p.Queue] {
		delete(m.paused, p.Queue)
		if err := m.addAudit(clock(nil), store.AuditEntry{Actor: p.Actor, Action: "resume", Reason: p.Reason, Filter: filterJSON(store.DeadFilter{Queue: p.Queue}), Queues: []string{p.Queue}}); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) PausedQueues(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.paused)), nil
}
