package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// runProperty drives random sequences of store operations against a simple
// in-memory model and compares the two after every step. All checks share
// one store; each uses a queue of its own and its own virtual clock, so
// checks cannot see each other's tasks.
func runProperty(t *testing.T, h Harness) {
	s, _ := h.NewStore(t)
	ctx := t.Context()
	var seq atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		m := &model{
			e:     &env{t: rt, ctx: ctx, s: s, now: virtualEpoch()},
			queue: fmt.Sprintf("prop-%d", seq.Add(1)),
			byID:  map[rdq.ID]*mTask{},
			keys:  map[string]rdq.ID{},
			dirty: map[rdq.ID]bool{},
		}
		actions := map[string]func(*rapid.T){
			"enqueue":   m.enqueue,
			"claim":     m.claim,
			"heartbeat": m.heartbeat,
			"finish":    m.finish,
			"release":   m.release,
			"reclaim":   m.reclaim,
			"redrive":   m.redrive,
			"advance":   m.advance,
			"":          m.check,
		}
		if h.Capabilities.RetryInPlace {
			actions["retryInPlace"] = m.retryInPlace
		}
		rt.Repeat(actions)
		for _, mt := range m.tasks {
			m.dirty[mt.id] = true
		}
		m.check(rt)
	})
}

// mTask is the model of one task.
type mTask struct {
	id         rdq.ID
	handler    string
	status     rdq.Status
	attempts   int
	life       int
	token      int64   // latest token issued; 0 if never claimed
	tokens     []int64 // every token issued, in order
	nextAt     time.Time
	leaseExp   time.Time
	owner      string
	claimedAt  time.Time
	finishedAt time.Time
	lastErr    rdq.ErrorSummary
	rows       int         // attempt rows
	lastRow    rdq.Attempt // expected fields of the newest row
}

type model struct {
	e     *env
	queue string
	tasks []*mTask
	byID  map[rdq.ID]*mTask
	keys  map[string]rdq.ID
	dirty map[rdq.ID]bool
}

func (m *model) now() time.Time { return m.e.now }

// propertyHandlers are the handlers of the model's tasks.
var propertyHandlers = []string{"a", "b"}

func (m *model) enqueue(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "n")
	var in []store.NewTask
	for range n {
		nt := task(m.queue)
		nt.Handler = rapid.SampledFrom(propertyHandlers).Draw(t, "handler")
		nt.Delay = rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second}).Draw(t, "delay")
		nt.IdempotencyKey = rapid.SampledFrom([]string{"", "", "a", "b", "c"}).Draw(t, "key")
		if rapid.Bool().Draw(t, "firstFailure") {
			nt.FirstFailure = &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: failure("first failure"), WorkerID: "producer", Duration: 10 * time.Millisecond}
		}
		in = append(in, nt)
	}
	res, err := m.e.s.Enqueue(m.e.ctx, store.EnqueueParams{Tasks: in, Now: m.e.at()})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if len(res) != len(in) {
		t.Fatalf("Enqueue of %d returned %d results", len(in), len(res))
	}
	for i, nt := range in {
		r := res[i]
		if existing, ok := m.keys[nt.IdempotencyKey]; ok && nt.IdempotencyKey != "" {
			if !r.Duplicate || r.Task == nil || r.Task.ID != existing {
				t.Fatalf("Enqueue item %d with key %q: Duplicate=%v, task %v; want a duplicate of %s", i, nt.IdempotencyKey, r.Duplicate, r.Task, existing)
			}
			m.dirty[existing] = true
			continue
		}
		if r.Duplicate || r.Task == nil || r.Task.ID != nt.ID {
			t.Fatalf("Enqueue item %d: Duplicate=%v, task %v; want new task %s", i, r.Duplicate, r.Task, nt.ID)
		}
		mt := &mTask{id: nt.ID, handler: nt.Handler, status: rdq.StatusPending, nextAt: m.now().Add(nt.Delay)}
		if nt.FirstFailure != nil {
			f := nt.FirstFailure
			mt.attempts, mt.rows = 1, 1
			mt.lastErr = summaryOf(f.Failure)
			mt.lastRow = rdq.Attempt{Number: 1, Outcome: f.Outcome, WorkerID: f.WorkerID, ErrorType: f.Failure.Type}
		}
		m.tasks = append(m.tasks, mt)
		m.byID[mt.id] = mt
		if nt.IdempotencyKey != "" {
			m.keys[nt.IdempotencyKey] = mt.id
		}
		m.dirty[mt.id] = true
	}
}

func (m *model) claim(t *rapid.T) {
	limit := rapid.IntRange(1, 3).Draw(t, "limit")
	lease := rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, 10 * time.Second}).Draw(t, "lease")
	worker := rapid.SampledFrom([]string{"w1", "w2"}).Draw(t, "worker")
	// A claimant runs some handlers (none named: every handler); the
	// tasks of the others are neither claimed nor changed.
	handlers := rapid.SampledFrom([][]string{nil, {"a"}, {"b"}, {"a", "b"}, {"c"}}).Draw(t, "handlers")
	got, err := m.e.s.Claim(m.e.ctx, store.ClaimParams{Queues: []string{m.queue}, Handlers: handlers, Limit: limit, Lease: lease, WorkerID: worker, Now: m.e.at()})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	var due []*mTask
	for _, mt := range m.tasks {
		if mt.status == rdq.StatusPending && !mt.nextAt.After(m.now()) && (len(handlers) == 0 || slices.Contains(handlers, mt.handler)) {
			due = append(due, mt)
		}
	}
	if want := min(limit, len(due)); len(got) != want {
		t.Fatalf("Claim(limit %d) returned %d tasks with %d due, want %d", limit, len(got), len(due), want)
	}
	taken := map[rdq.ID]bool{}
	var latest time.Time
	for _, tk := range got {
		mt := m.byID[tk.ID]
		if mt == nil || taken[tk.ID] || !slices.Contains(due, mt) {
			t.Fatalf("Claim(handlers %v) returned task %s, which is not a due pending task of the queue and of those handlers (or returned it twice)", handlers, tk.ID)
		}
		taken[tk.ID] = true
		if mt.nextAt.After(latest) {
			latest = mt.nextAt
		}
	}
	for _, mt := range due {
		if !taken[mt.id] && mt.nextAt.Before(latest) {
			t.Fatalf("Claim skipped task %s due at %s for one due later at %s: oldest due first", mt.id, fmtTime(mt.nextAt), fmtTime(latest))
		}
	}
	for _, tk := range got {
		mt := m.byID[tk.ID]
		if tk.LeaseToken <= mt.token {
			t.Fatalf("Claim of %s: token %d, want > %d", tk.ID, tk.LeaseToken, mt.token)
		}
		eq(t, "claimed Status", tk.Status, rdq.StatusInFlight)
		eq(t, "claimed Attempts", tk.Attempts, mt.attempts)
		eq(t, "claimed Life", tk.Life, mt.life)
		eqTime(t, "claimed LeaseExpiresAt", tk.LeaseExpiresAt, m.now().Add(lease))
		mt.status = rdq.StatusInFlight
		mt.token = tk.LeaseToken
		mt.tokens = append(mt.tokens, tk.LeaseToken)
		mt.leaseExp = m.now().Add(lease)
		mt.owner = worker
		mt.claimedAt = m.now()
		m.dirty[mt.id] = true
	}
}

// pickLeases draws up to max leases of distinct tasks that have been
// claimed: the current token, an older one or one not yet issued.
func (m *model) pickLeases(t *rapid.T, most int) []store.Lease {
	var claimed []*mTask
	for _, mt := range m.tasks {
		if len(mt.tokens) > 0 {
			claimed = append(claimed, mt)
		}
	}
	if len(claimed) == 0 {
		t.Skip("no claimed task")
	}
	n := rapid.IntRange(1, min(most, len(claimed))).Draw(t, "leases")
	picked := rapid.SliceOfNDistinct(rapid.IntRange(0, len(claimed)-1), n, n, rapid.ID[int]).Draw(t, "tasks")
	out := make([]store.Lease, n)
	for i, idx := range picked {
		mt := claimed[idx]
		tok := mt.token
		switch rapid.IntRange(0, 5).Draw(t, "token") {
		case 0:
			tok = rapid.SampledFrom(mt.tokens).Draw(t, "older")
		case 1:
			tok = mt.token + 1
		}
		out[i] = store.Lease{ID: mt.id, Token: tok}
		m.dirty[mt.id] = true
	}
	return out
}

// current reports whether l is the task's live lease in the model.
func (m *model) current(l store.Lease) bool {
	mt := m.byID[l.ID]
	return mt != nil && mt.status == rdq.StatusInFlight && mt.token == l.Token
}

func (m *model) checkItemErrs(t *rapid.T, what string, leases []store.Lease, errs []error) {
	if len(errs) != len(leases) {
		t.Fatalf("%s of %d leases returned %d errors", what, len(leases), len(errs))
	}
	for i, l := range leases {
		if m.current(l) {
			if errs[i] != nil {
				t.Fatalf("%s of current lease %s/%d: %v", what, l.ID, l.Token, errs[i])
			}
		} else if !errors.Is(errs[i], store.ErrLeaseLost) {
			t.Fatalf("%s of stale lease %s/%d (current %d): error %v, want ErrLeaseLost", what, l.ID, l.Token, m.byID[l.ID].token, errs[i])
		}
	}
}

func (m *model) heartbeat(t *rapid.T) {
	leases := m.pickLeases(t, 3)
	extend := rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second}).Draw(t, "extend")
	errs, err := m.e.s.Heartbeat(m.e.ctx, store.HeartbeatParams{Leases: leases, Extend: extend, Now: m.e.at()})
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	m.checkItemErrs(t, "Heartbeat", leases, errs)
	for _, l := range leases {
		if m.current(l) {
			m.byID[l.ID].leaseExp = m.now().Add(extend)
		}
	}
}

func (m *model) finish(t *rapid.T) {
	leases := m.pickLeases(t, 2)
	cs := make([]store.Completion, len(leases))
	for i, l := range leases {
		c := store.Completion{Lease: l}
		c.Status = rapid.SampledFrom([]rdq.Status{rdq.StatusSucceeded, rdq.StatusPending, rdq.StatusDead}).Draw(t, "status")
		if c.Status == rdq.StatusPending {
			c.RetryIn = rapid.SampledFrom([]time.Duration{0, time.Second, 4 * time.Second}).Draw(t, "retryIn")
		}
		if rapid.IntRange(0, 4).Draw(t, "withAttempt") > 0 {
			a := &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "finisher", Duration: 3 * time.Millisecond}
			switch c.Status {
			case rdq.StatusPending:
				a.Outcome, a.Failure = rdq.OutcomeRetryableFailure, failure(fmt.Sprintf("retryable %d", i))
			case rdq.StatusDead:
				a.Outcome, a.Failure = rdq.OutcomePermanentFailure, failure(fmt.Sprintf("permanent %d", i))
			}
			c.Attempt = a
		}
		cs[i] = c
	}
	errs, err := m.e.s.Finish(m.e.ctx, store.FinishParams{Completions: cs, Now: m.e.at()})
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	m.checkItemErrs(t, "Finish", leases, errs)
	for _, c := range cs {
		if !m.current(c.Lease) {
			continue
		}
		mt := m.byID[c.ID]
		if a := c.Attempt; a != nil {
			mt.attempts++
			mt.rows++
			mt.lastRow = rdq.Attempt{Number: mt.rows, Life: mt.life, Outcome: a.Outcome, WorkerID: a.WorkerID, LeaseToken: c.Token, ErrorType: a.Failure.Type}
			if a.Outcome != rdq.OutcomeSuccess {
				mt.lastErr = summaryOf(a.Failure)
			}
		}
		mt.status = c.Status
		mt.leaseExp = time.Time{}
		if c.Status == rdq.StatusPending {
			mt.nextAt = m.now().Add(c.RetryIn)
		} else {
			mt.finishedAt = m.now()
		}
	}
}

// retryInPlace retries up to two leases in place (the first sometimes
// twice in the batch, the repeat stale): a current one records the
// failure and keeps its task in flight under a new lease.
func (m *model) retryInPlace(t *rapid.T) {
	r, ok := store.InPlaceRetrierOf(m.e.s)
	if !ok {
		t.Fatalf("store %T declares RetryInPlace but is no store.InPlaceRetrier", m.e.s)
	}
	leases := m.pickLeases(t, 2)
	if rapid.IntRange(0, 3).Draw(t, "repeat") == 0 {
		leases = append(leases, leases[0])
	}
	leaseFor := rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, 10 * time.Second}).Draw(t, "lease")
	cs := make([]store.Completion, len(leases))
	for i, l := range leases {
		cs[i] = store.Completion{
			Lease:   l,
			Status:  rdq.StatusPending,
			RetryIn: rapid.SampledFrom([]time.Duration{0, time.Second, 4 * time.Second}).Draw(t, "retryIn"),
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: failure(fmt.Sprintf("in place %d", i)), WorkerID: "in-place", Duration: 2 * time.Millisecond},
		}
	}
	res, err := r.RetryInPlace(m.e.ctx, store.RetryInPlaceParams{Retries: cs, Lease: leaseFor, Now: m.e.at()})
	if err != nil {
		t.Fatalf("RetryInPlace: %v", err)
	}
	if len(res) != len(cs) {
		t.Fatalf("RetryInPlace of %d items returned %d results", len(cs), len(res))
	}
	for i, c := range cs {
		if !m.current(c.Lease) {
			if !errors.Is(res[i].Err, store.ErrLeaseLost) || res[i].Task != nil {
				t.Fatalf("RetryInPlace of stale lease %s/%d (current %d): error %v, task %v; want ErrLeaseLost", c.ID, c.Token, m.byID[c.ID].token, res[i].Err, res[i].Task)
			}
			continue
		}
		tk := res[i].Task
		if res[i].Err != nil || tk == nil {
			t.Fatalf("RetryInPlace of current lease %s/%d: error %v, task %v; want the task kept", c.ID, c.Token, res[i].Err, tk)
		}
		mt := m.byID[c.ID]
		if tk.LeaseToken <= mt.token {
			t.Fatalf("RetryInPlace of %s: token %d, want > %d", c.ID, tk.LeaseToken, mt.token)
		}
		a := c.Attempt
		mt.attempts++
		mt.rows++
		mt.lastRow = rdq.Attempt{Number: mt.rows, Life: mt.life, Outcome: a.Outcome, WorkerID: a.WorkerID, LeaseToken: c.Token, ErrorType: a.Failure.Type}
		mt.lastErr = summaryOf(a.Failure)
		mt.nextAt = m.now().Add(c.RetryIn)
		mt.token = tk.LeaseToken
		mt.tokens = append(mt.tokens, tk.LeaseToken)
		mt.leaseExp = m.now().Add(leaseFor)
		mt.owner = a.WorkerID
		mt.claimedAt = m.now()
		eq(t, "kept Status", tk.Status, rdq.StatusInFlight)
		eq(t, "kept Attempts", tk.Attempts, mt.attempts)
		eqTime(t, "kept LeaseExpiresAt", tk.LeaseExpiresAt, mt.leaseExp)
		eq(t, "kept LeaseOwner", tk.LeaseOwner, mt.owner)
	}
}

func (m *model) release(t *rapid.T) {
	leases := m.pickLeases(t, 2)
	errs, err := m.e.s.Release(m.e.ctx, store.ReleaseParams{Leases: leases, Now: m.e.at()})
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	m.checkItemErrs(t, "Release", leases, errs)
	for _, l := range leases {
		if m.current(l) {
			mt := m.byID[l.ID]
			mt.status, mt.nextAt, mt.leaseExp = rdq.StatusPending, m.now(), time.Time{}
		}
	}
}

func (m *model) reclaim(t *rapid.T) {
	limit := rapid.IntRange(1, 3).Draw(t, "limit")
	lease := rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second}).Draw(t, "lease")
	got, err := m.e.s.ReclaimExpired(m.e.ctx, store.ReclaimParams{Queues: []string{m.queue}, Limit: limit, Lease: lease, WorkerID: "reaper", Now: m.e.at()})
	if err != nil {
		t.Fatalf("ReclaimExpired: %v", err)
	}
	var expired []*mTask
	for _, mt := range m.tasks {
		if mt.status == rdq.StatusInFlight && !mt.leaseExp.After(m.now()) {
			expired = append(expired, mt)
		}
	}
	if want := min(limit, len(expired)); len(got) != want {
		t.Fatalf("ReclaimExpired(limit %d) returned %d tasks with %d expired, want %d", limit, len(got), len(expired), want)
	}
	le := rdq.LeaseExpiredFailure()
	seen := map[rdq.ID]bool{}
	for _, tk := range got {
		mt := m.byID[tk.ID]
		if mt == nil || seen[tk.ID] || !slices.Contains(expired, mt) {
			t.Fatalf("ReclaimExpired returned task %s, which has no expired lease (or returned it twice)", tk.ID)
		}
		seen[tk.ID] = true
		if tk.LeaseToken <= mt.token {
			t.Fatalf("ReclaimExpired of %s: token %d, want > %d", tk.ID, tk.LeaseToken, mt.token)
		}
		mt.attempts++
		mt.rows++
		mt.lastRow = rdq.Attempt{Number: mt.rows, Life: mt.life, Outcome: rdq.OutcomeLeaseExpired, WorkerID: mt.owner, LeaseToken: mt.token, ErrorType: le.Type, StartedAt: mt.claimedAt, FinishedAt: m.now()}
		mt.lastErr = summaryOf(le)
		mt.token = tk.LeaseToken
		mt.tokens = append(mt.tokens, tk.LeaseToken)
		mt.leaseExp = m.now().Add(lease)
		mt.owner = "reaper"
		mt.claimedAt = m.now()
		eq(t, "reclaimed Attempts", tk.Attempts, mt.attempts)
		eq(t, "reclaimed Status", tk.Status, rdq.StatusInFlight)
		m.dirty[mt.id] = true
	}
}

func (m *model) redrive(t *rapid.T) {
	admin, ok := store.AdminOf(m.e.s)
	if !ok {
		t.Skip("the store does not implement store.Admin, which holds Redrive")
	}
	if len(m.tasks) == 0 {
		t.Skip("no task")
	}
	// Most redrives pick from the dead tasks, so that a redriven task's
	// next attempts (numbered after its history) are reached often; the
	// rest pick from every task, which exercises ErrNotDead.
	pool := m.tasks
	var dead []*mTask
	for _, mt := range m.tasks {
		if mt.status == rdq.StatusDead {
			dead = append(dead, mt)
		}
	}
	if len(dead) > 0 && rapid.IntRange(0, 3).Draw(t, "fromAll") > 0 {
		pool = dead
	}
	n := rapid.IntRange(1, min(3, len(pool))).Draw(t, "n")
	picked := rapid.SliceOfNDistinct(rapid.IntRange(0, len(pool)-1), n, n, rapid.ID[int]).Draw(t, "tasks")
	ids := make([]rdq.ID, 0, n+1)
	for _, i := range picked {
		ids = append(ids, pool[i].id)
		m.dirty[pool[i].id] = true
	}
	if rapid.IntRange(0, 4).Draw(t, "unknown") == 0 {
		ids = append(ids, rdq.NewID())
	}
	maxLife := rapid.SampledFrom([]int{0, 1, 2}).Draw(t, "maxLife")
	delay := rapid.SampledFrom([]time.Duration{0, 2 * time.Second}).Draw(t, "delay")
	errs, err := admin.Redrive(m.e.ctx, store.RedriveParams{IDs: ids, Delay: delay, MaxLife: maxLife, Actor: "prop", Now: m.e.at()})
	if err != nil {
		t.Fatalf("Redrive: %v", err)
	}
	if len(errs) != len(ids) {
		t.Fatalf("Redrive of %d IDs returned %d errors", len(ids), len(errs))
	}
	for i, id := range ids {
		mt := m.byID[id]
		var want error
		switch {
		case mt == nil:
			want = store.ErrNotFound
		case mt.status != rdq.StatusDead:
			want = store.ErrNotDead
		case maxLife > 0 && mt.life >= maxLife:
			want = store.ErrRedriveLimit
		}
		if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
			t.Fatalf("Redrive of %s: error %v, want %v", id, errs[i], want)
		}
		if want == nil {
			mt.status, mt.attempts, mt.nextAt, mt.finishedAt = rdq.StatusPending, 0, m.now().Add(delay), time.Time{}
			mt.life++
		}
	}
}

func (m *model) advance(t *rapid.T) {
	m.e.advance(rapid.SampledFrom([]time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second}).Draw(t, "by"))
}

// check compares every task touched since the last check with the model.
func (m *model) check(t *rapid.T) {
	for id := range m.dirty {
		mt := m.byID[id]
		got, atts := m.e.get(id)
		what := fmt.Sprintf("task %s", id)
		eq(t, what+" Status", got.Status, mt.status)
		eq(t, what+" Attempts", got.Attempts, mt.attempts)
		eq(t, what+" Life", got.Life, mt.life)
		eq(t, what+" LeaseToken", got.LeaseToken, mt.token)
		eq(t, what+" LastError", got.LastError, mt.lastErr)
		switch mt.status {
		case rdq.StatusPending:
			eqTime(t, what+" NextAttemptAt", got.NextAttemptAt, mt.nextAt)
		case rdq.StatusInFlight:
			eqTime(t, what+" LeaseExpiresAt", got.LeaseExpiresAt, mt.leaseExp)
			eq(t, what+" LeaseOwner", got.LeaseOwner, mt.owner)
		case rdq.StatusSucceeded, rdq.StatusDead:
			eqTime(t, what+" FinishedAt", got.FinishedAt, mt.finishedAt)
		}
		if mt.status != rdq.StatusInFlight {
			zeroTime(t, what+" LeaseExpiresAt", got.LeaseExpiresAt)
		}
		if mt.status != rdq.StatusSucceeded && mt.status != rdq.StatusDead {
			zeroTime(t, what+" FinishedAt", got.FinishedAt)
		}
		if len(atts) != mt.rows {
			t.Fatalf("%s has %d attempt rows, want %d", what, len(atts), mt.rows)
		}
		checkNumbers(t, what, atts)
		var lastToken int64
		for _, a := range atts {
			if a.LeaseToken != 0 && a.LeaseToken <= lastToken {
				t.Fatalf("%s: attempt %d has token %d after token %d", what, a.Number, a.LeaseToken, lastToken)
			}
			lastToken = max(lastToken, a.LeaseToken)
		}
		if mt.rows > 0 {
			a, w := atts[len(atts)-1], mt.lastRow
			eq(t, what+" last attempt Number", a.Number, w.Number)
			eq(t, what+" last attempt Life", a.Life, w.Life)
			eq(t, what+" last attempt Outcome", a.Outcome, w.Outcome)
			eq(t, what+" last attempt WorkerID", a.WorkerID, w.WorkerID)
			eq(t, what+" last attempt LeaseToken", a.LeaseToken, w.LeaseToken)
			eq(t, what+" last attempt ErrorType", a.ErrorType, w.ErrorType)
			if w.Outcome == rdq.OutcomeLeaseExpired {
				eqTime(t, what+" lease-expired attempt StartedAt", a.StartedAt, w.StartedAt)
				eqTime(t, what+" lease-expired attempt FinishedAt", a.FinishedAt, w.FinishedAt)
			}
		}
	}
	clear(m.dirty)
}
