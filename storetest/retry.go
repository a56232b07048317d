package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// runRetryInPlace checks store.InPlaceRetrier: a retry in place records and
// counts the failed attempt as Finish records a retry (numbered from the
// history across lives, with the old token) and keeps the task in flight
// under a new lease owned by the attempt's worker, with a greater token and
// an expiry p.Lease from now, returned as Get returns it; the old token is
// stale and the new one works, up to a reclaim when it expires; a task of
// a paused queue or handler is left waiting as Finish leaves it; stale,
// repeated and invalid items fail alone.
func runRetryInPlace(t *testing.T, h Harness) {
	tests := []contractTest{
		{"KeepsTask", testRetryInPlaceKeeps},
		{"LeaseExpires", testRetryInPlaceLeaseExpires},
		{"History", testRetryInPlaceHistory},
		{"StaleLease", testRetryInPlaceStale},
		{"SameLeaseTwiceInBatch", testRetryInPlaceSameLeaseTwice},
		{"InvalidItems", testRetryInPlaceInvalid},
		{"EmptyBatchAndLease", testRetryInPlaceEmptyAndLease},
	}
	if h.Capabilities.Admin {
		tests = append(tests, contractTest{"AcrossLives", testRetryInPlaceAcrossLives})
	}
	if h.Capabilities.Pause {
		tests = append(tests, contractTest{"PausedQueue", testRetryInPlacePausedQueue})
	}
	if h.Capabilities.PauseHandlers {
		tests = append(tests, contractTest{"PausedHandler", testRetryInPlacePausedHandler})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t, h))
		})
	}
}

// retryInPlace calls RetryInPlace at the virtual now and checks the shape
// of its answer: one result per item, a task only without an error, and
// every task returned exactly as Get returns it.
func (e *env) retryInPlace(leaseFor time.Duration, cs ...store.Completion) []store.RetryInPlaceResult {
	e.t.Helper()
	r, ok := store.InPlaceRetrierOf(e.s)
	if !ok {
		e.t.Fatalf("store %T does not implement store.InPlaceRetrier", e.s)
	}
	res, err := r.RetryInPlace(e.ctx, store.RetryInPlaceParams{Retries: cs, Lease: leaseFor, Now: e.at()})
	if err != nil {
		e.t.Fatalf("RetryInPlace: %v", err)
	}
	if len(res) != len(cs) {
		e.t.Fatalf("RetryInPlace of %d items returned %d results", len(cs), len(res))
	}
	for i, r := range res {
		if r.Err != nil && r.Task != nil {
			e.t.Errorf("RetryInPlace item %d: both an error (%v) and a task", i, r.Err)
		}
		if r.Task != nil {
			if r.Task.ID != cs[i].ID {
				e.t.Fatalf("RetryInPlace item %d (task %s) returned task %s", i, cs[i].ID, r.Task.ID)
			}
			eqTask(e.t, "task returned by RetryInPlace, against Get,", r.Task, e.load(cs[i].ID))
		}
	}
	return res
}

// kept returns the task of a result that must have kept its task.
func kept(t tb, what string, r store.RetryInPlaceResult) *rdq.Task {
	t.Helper()
	if r.Err != nil || r.Task == nil {
		t.Fatalf("%s: error %v, task %v; want the task kept in flight", what, r.Err, r.Task)
	}
	return r.Task
}

// resultErrs returns the per-item errors of results, for wantErrs.
func resultErrs(res []store.RetryInPlaceResult) []error {
	errs := make([]error, len(res))
	for i, r := range res {
		errs[i] = r.Err
	}
	return errs
}

// eqTask compares every field of two tasks.
func eqTask(t tb, what string, got, want *rdq.Task) {
	t.Helper()
	eq(t, what+" ID", got.ID, want.ID)
	eq(t, what+" Queue", got.Queue, want.Queue)
	eq(t, what+" Handler", got.Handler, want.Handler)
	eqBytes(t, what+" Payload", got.Payload, want.Payload)
	eq(t, what+" ContentType", got.ContentType, want.ContentType)
	eqHeaders(t, what+" Headers", got.Headers, want.Headers)
	eq(t, what+" IdempotencyKey", got.IdempotencyKey, want.IdempotencyKey)
	eq(t, what+" Status", got.Status, want.Status)
	eq(t, what+" Attempts", got.Attempts, want.Attempts)
	eq(t, what+" Life", got.Life, want.Life)
	eqTime(t, what+" NextAttemptAt", got.NextAttemptAt, want.NextAttemptAt)
	eq(t, what+" LeaseToken", got.LeaseToken, want.LeaseToken)
	eqTime(t, what+" LeaseExpiresAt", got.LeaseExpiresAt, want.LeaseExpiresAt)
	eq(t, what+" LeaseOwner", got.LeaseOwner, want.LeaseOwner)
	eqTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	eqTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	eqTime(t, what+" FinishedAt", got.FinishedAt, want.FinishedAt)
	eq(t, what+" LastError", got.LastError, want.LastError)
	eq(t, what+" MaxAttempts", got.MaxAttempts, want.MaxAttempts)
	eq(t, what+" Timeout", got.Timeout, want.Timeout)
	eq(t, what+" Snoozes", got.Snoozes, want.Snoozes)
}

// A retry in place records the attempt as Finish records a retry and
// leases the task again: a greater token, an expiry Lease from now, the
// attempt's worker as the owner. The old token is stale from then on and
// the new one works.
func testRetryInPlaceKeeps(t *testing.T, e *env) {
	nt := task("q")
	nt.Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	nt.IdempotencyKey = "in-place"
	e.enqueue(nt)
	tk := e.claimOne("q", time.Minute, "w-claim")
	e.advance(2 * time.Second)
	f := failure("connection reset by peer")
	// The attempt names another worker than the claim: the new lease is
	// the attempt's worker's.
	res := e.retryInPlace(30*time.Second, retry(tk, 5*time.Second, f, "w-run", 40*time.Millisecond))
	again := kept(t, "RetryInPlace", res[0])
	retriedAt := e.now
	got, atts := e.get(nt.ID)
	for what, g := range map[string]*rdq.Task{"returned": again, "Get after RetryInPlace": got} {
		eq(t, what+" Status", g.Status, rdq.StatusInFlight)
		eq(t, what+" Attempts", g.Attempts, 1)
		eq(t, what+" Life", g.Life, 0)
		eq(t, what+" LeaseOwner", g.LeaseOwner, "w-run")
		eqTime(t, what+" LeaseExpiresAt", g.LeaseExpiresAt, retriedAt.Add(30*time.Second))
		eqTime(t, what+" UpdatedAt", g.UpdatedAt, retriedAt)
		eq(t, what+" LastError", g.LastError, summaryOf(f))
		zeroTime(t, what+" FinishedAt", g.FinishedAt)
		if g.LeaseToken <= tk.LeaseToken {
			t.Errorf("%s LeaseToken = %d, want > %d (the claim's)", what, g.LeaseToken, tk.LeaseToken)
		}
	}
	eqBytes(t, "returned Payload", again.Payload, nt.Payload)
	eqHeaders(t, "returned Headers", again.Headers, nt.Headers)
	if len(atts) != 1 {
		t.Fatalf("%d attempts after a retry in place, want 1", len(atts))
	}
	checkAttempt(t, "attempt 1", atts[0], rdq.Attempt{
		TaskID: nt.ID, Number: 1, Life: 0, Outcome: rdq.OutcomeRetryableFailure, ErrorType: f.Type, Message: f.Message,
		Stack: f.Stack, WorkerID: "w-run", LeaseToken: tk.LeaseToken, StartedAt: retriedAt.Add(-40 * time.Millisecond), FinishedAt: retriedAt,
	})

	// The old lease is gone: nothing done with it changes anything.
	wantErrs(t, "Heartbeat with the old token", e.heartbeat(time.Hour, lease(tk)), store.ErrLeaseLost)
	wantErrs(t, "Finish with the old token", e.finish(succeed(tk, "w-claim", time.Millisecond)), store.ErrLeaseLost)
	wantErrs(t, "Release with the old token", e.release(lease(tk)), store.ErrLeaseLost)
	wantErrs(t, "RetryInPlace with the old token", resultErrs(e.retryInPlace(time.Hour, retry(tk, 0, failure("stale"), "w-claim", 0))), store.ErrLeaseLost)
	after, atts := e.get(nt.ID)
	eqTask(t, "task after stale calls", after, got)
	eq(t, "attempts after stale calls", len(atts), 1)

	// The task is in flight: no claim takes it, even once its retry is due.
	e.advance(5 * time.Second)
	if c := e.claim([]string{"q"}, 10, time.Minute, "w-other"); len(c) != 0 {
		t.Fatalf("Claim of a task kept in flight returned %v", taskIDs(c))
	}
	// The new lease works: a heartbeat extends it, and a finish ends it.
	wantErrs(t, "Heartbeat with the new token", e.heartbeat(time.Minute, lease(again)), nil)
	eqTime(t, "LeaseExpiresAt after a heartbeat", e.load(nt.ID).LeaseExpiresAt, e.now.Add(time.Minute))
	e.advance(time.Second)
	e.mustFinish(retry(again, 0, failure("again"), "w-run", time.Millisecond))
	next := e.claimOne("q", time.Minute, "w-other")
	if next.LeaseToken <= again.LeaseToken {
		t.Errorf("claim after the in-place lease: token %d, want > %d", next.LeaseToken, again.LeaseToken)
	}
	e.mustFinish(succeed(next, "w-other", time.Millisecond))
	got, atts = e.get(nt.ID)
	eq(t, "Status at the end", got.Status, rdq.StatusSucceeded)
	eq(t, "Attempts at the end", got.Attempts, 3)
	checkNumbers(t, "attempts", atts)
	if len(atts) != 3 || atts[1].LeaseToken != again.LeaseToken || atts[2].LeaseToken != next.LeaseToken {
		t.Fatalf("attempts = %+v, want 3 with tokens %d, %d, %d", atts, tk.LeaseToken, again.LeaseToken, next.LeaseToken)
	}
}

// A lease kept in place that is left to expire is reclaimed like a
// claim's: a LEASE_EXPIRED attempt of the attempt's worker and the kept
// token, started when the task was kept, numbered after the failure.
func testRetryInPlaceLeaseExpires(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt)
	tk := e.claimOne("q", time.Minute, "w1")
	e.advance(time.Second)
	keptAt := e.now
	again := kept(t, "RetryInPlace", e.retryInPlace(10*time.Second, retry(tk, 0, failure("flaky"), "w1", time.Millisecond))[0])

	e.now = keptAt.Add(10*time.Second - time.Millisecond)
	if rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper"); len(rs) != 0 {
		t.Fatalf("ReclaimExpired before the kept lease expired returned %v", taskIDs(rs))
	}
	e.now = keptAt.Add(10 * time.Second)
	rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper")
	if len(rs) != 1 || rs[0].ID != nt.ID {
		t.Fatalf("ReclaimExpired at the kept lease's expiry returned %v, want %s", taskIDs(rs), nt.ID)
	}
	eq(t, "reclaimed Attempts", rs[0].Attempts, 2)
	if rs[0].LeaseToken <= again.LeaseToken {
		t.Errorf("reclaimed LeaseToken = %d, want > %d", rs[0].LeaseToken, again.LeaseToken)
	}
	_, atts := e.get(nt.ID)
	checkNumbers(t, "attempts", atts)
	if len(atts) != 2 {
		t.Fatalf("%d attempts after the reclaim, want 2", len(atts))
	}
	le := rdq.LeaseExpiredFailure()
	checkAttempt(t, "lease-expired attempt", atts[1], rdq.Attempt{
		TaskID: nt.ID, Number: 2, Outcome: rdq.OutcomeLeaseExpired, ErrorType: le.Type, Message: le.Message,
		WorkerID: "w1", LeaseToken: again.LeaseToken, StartedAt: keptAt, FinishedAt: e.now,
	})
	wantErrs(t, "Heartbeat with the expired in-place token", e.heartbeat(time.Minute, lease(again)), store.ErrLeaseLost)
}

// A success after two retries in place leaves a complete history: three
// attempts numbered 1..3, each with the token it ran under, increasing.
func testRetryInPlaceHistory(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt)
	t1 := e.claimOne("q", time.Minute, "w")
	e.advance(time.Second)
	f1, f2 := failure("first"), failure("second")
	t2 := kept(t, "first RetryInPlace", e.retryInPlace(time.Minute, retry(t1, 0, f1, "w", 10*time.Millisecond))[0])
	e.advance(time.Second)
	t3 := kept(t, "second RetryInPlace", e.retryInPlace(time.Minute, retry(t2, time.Second, f2, "w", 20*time.Millisecond))[0])
	eq(t, "Attempts after two retries in place", t3.Attempts, 2)
	eq(t, "LastError after two retries in place", t3.LastError, summaryOf(f2))
	e.advance(time.Second)
	e.mustFinish(succeed(t3, "w", 30*time.Millisecond))
	got, atts := e.get(nt.ID)
	eq(t, "Status", got.Status, rdq.StatusSucceeded)
	eq(t, "Attempts", got.Attempts, 3)
	eqTime(t, "FinishedAt", got.FinishedAt, e.now)
	if len(atts) != 3 {
		t.Fatalf("%d attempts, want 3", len(atts))
	}
	checkNumbers(t, "attempts", atts)
	want := []struct {
		outcome rdq.Outcome
		f       rdq.Failure
		token   int64
	}{{rdq.OutcomeRetryableFailure, f1, t1.LeaseToken}, {rdq.OutcomeRetryableFailure, f2, t2.LeaseToken}, {rdq.OutcomeSuccess, rdq.Failure{}, t3.LeaseToken}}
	for i, w := range want {
		eq(t, "attempt Outcome", atts[i].Outcome, w.outcome)
		eq(t, "attempt Message", atts[i].Message, w.f.Message)
		eq(t, "attempt LeaseToken", atts[i].LeaseToken, w.token)
		if i > 0 && atts[i].LeaseToken <= atts[i-1].LeaseToken {
			t.Errorf("attempt tokens %d then %d do not increase", atts[i-1].LeaseToken, atts[i].LeaseToken)
		}
	}
}

// Attempts are numbered from the history across lives: after a redrive, a
// retry in place takes the number after every earlier life's attempts, in
// the current life, and counts in the current life's attempts only.
func testRetryInPlaceAcrossLives(t *testing.T, e *env) {
	nt := task("q")
	nt.FirstFailure = &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: failure("first"), WorkerID: "producer"}
	e.enqueue(nt)
	tk := e.claimOne("q", time.Minute, "w")
	e.mustFinish(kill(tk, failure("fatal"), "w", time.Millisecond))
	wantErrs(t, "Redrive", e.redrive(store.RedriveParams{IDs: []rdq.ID{nt.ID}, Actor: "ops", Reason: "fixed"}), nil)
	tk = e.claimOne("q", time.Minute, "w")
	f := failure("after the redrive")
	again := kept(t, "RetryInPlace", e.retryInPlace(time.Minute, retry(tk, 0, f, "w", time.Millisecond))[0])
	eq(t, "Attempts in the new life", again.Attempts, 1)
	eq(t, "Life", again.Life, 1)
	again = kept(t, "second RetryInPlace", e.retryInPlace(time.Minute, retry(again, 0, f, "w", time.Millisecond))[0])
	eq(t, "Attempts in the new life after two", again.Attempts, 2)
	_, atts := e.get(nt.ID)
	checkNumbers(t, "attempts", atts)
	if len(atts) != 4 {
		t.Fatalf("%d attempts, want 4 (two per life)", len(atts))
	}
	for _, a := range atts[2:] {
		eq(t, "in-place attempt Life", a.Life, 1)
		eq(t, "in-place attempt Outcome", a.Outcome, rdq.OutcomeRetryableFailure)
	}
	eq(t, "token of attempt 3", atts[2].LeaseToken, tk.LeaseToken)
}

// A stale lease changes nothing and fails only its own item; a lease that
// expired but was not reclaimed is still current, as for Finish.
func testRetryInPlaceStale(t *testing.T, e *env) {
	e.enqueue(tasks("q", 4)...)
	claimed := e.claim([]string{"q"}, 4, 5*time.Second, "w")
	if len(claimed) != 4 {
		t.Fatalf("claimed %d tasks, want 4", len(claimed))
	}
	a, released, finished, expired := claimed[0], claimed[1], claimed[2], claimed[3]
	wantErrs(t, "Release", e.release(lease(released)), nil)
	e.mustFinish(succeed(finished, "w", time.Millisecond))
	e.advance(time.Minute) // every lease expired; none reclaimed yet
	f := failure("boom")
	older := retry(a, 0, f, "w", 0)
	older.Token = a.LeaseToken - 1
	newer := retry(a, 0, f, "w", 0)
	newer.Token = a.LeaseToken + 1
	unknown := retry(a, 0, f, "w", 0)
	unknown.ID = rdq.NewID()
	res := e.retryInPlace(time.Minute,
		older, newer,
		retry(released, 0, f, "w", 0),
		retry(finished, 0, f, "w", 0),
		unknown,
		retry(expired, 0, f, "w", 0),
	)
	wantErrs(t, "RetryInPlace", resultErrs(res), store.ErrLeaseLost, store.ErrLeaseLost, store.ErrLeaseLost, store.ErrLeaseLost, store.ErrLeaseLost, nil)
	kept(t, "RetryInPlace of an expired lease not yet reclaimed", res[5])

	ga, atts := e.get(a.ID)
	eq(t, "Status after stale retries", ga.Status, rdq.StatusInFlight)
	eq(t, "LeaseToken after stale retries", ga.LeaseToken, a.LeaseToken)
	eqTime(t, "LeaseExpiresAt after stale retries", ga.LeaseExpiresAt, a.LeaseExpiresAt)
	eq(t, "Attempts after stale retries", ga.Attempts, 0)
	eq(t, "attempt rows after stale retries", len(atts), 0)
	gr, atts := e.get(released.ID)
	eq(t, "released task Status", gr.Status, rdq.StatusPending)
	eq(t, "released task attempts", len(atts), 0)
	gf, atts := e.get(finished.ID)
	eq(t, "finished task Status", gf.Status, rdq.StatusSucceeded)
	eq(t, "finished task attempts", len(atts), 1)

	// A reclaim makes the lost execution's lease stale.
	rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper")
	if len(rs) != 1 || rs[0].ID != a.ID {
		t.Fatalf("ReclaimExpired returned %v, want %s", taskIDs(rs), a.ID)
	}
	wantErrs(t, "RetryInPlace of a reclaimed lease", resultErrs(e.retryInPlace(time.Minute, retry(a, 0, f, "w", 0))), store.ErrLeaseLost)
	ga, atts = e.get(a.ID)
	eq(t, "Attempts after a reclaim and a stale retry", ga.Attempts, 1)
	eq(t, "LeaseToken after a reclaim and a stale retry", ga.LeaseToken, rs[0].LeaseToken)
	if len(atts) != 1 || atts[0].Outcome != rdq.OutcomeLeaseExpired {
		t.Fatalf("attempts = %+v, want the lease-expired one only", atts)
	}
}

// The first occurrence of a lease in a batch counts; a later one is stale.
func testRetryInPlaceSameLeaseTwice(t *testing.T, e *env) {
	e.enqueue(task("q"))
	tk := e.claimOne("q", time.Minute, "w")
	f1, f2 := failure("first"), failure("second")
	res := e.retryInPlace(time.Minute,
		retry(tk, time.Second, f1, "w1", time.Millisecond),
		retry(tk, time.Hour, f2, "w2", time.Millisecond),
	)
	wantErrs(t, "RetryInPlace of one lease twice", resultErrs(res), nil, store.ErrLeaseLost)
	again := kept(t, "first occurrence", res[0])
	got, atts := e.get(tk.ID)
	eq(t, "Attempts", got.Attempts, 1)
	eq(t, "LeaseToken", got.LeaseToken, again.LeaseToken)
	eq(t, "LeaseOwner", got.LeaseOwner, "w1")
	eq(t, "LastError", got.LastError, summaryOf(f1))
	if len(atts) != 1 || atts[0].Message != f1.Message {
		t.Fatalf("attempts = %+v, want the first occurrence's only", atts)
	}
}

// An item that is not a retry is an error wrapping rdq.ErrInvalid of its
// own, and changes nothing; the others are applied.
func testRetryInPlaceInvalid(t *testing.T, e *env) {
	const n = 8
	e.enqueue(tasks("q", n)...)
	claimed := e.claim([]string{"q"}, n, time.Minute, "w")
	if len(claimed) != n {
		t.Fatalf("claimed %d tasks, want %d", len(claimed), n)
	}
	f := failure("boom")
	items := make([]store.Completion, n)
	for i, tk := range claimed {
		items[i] = retry(tk, time.Second, f, "w", time.Millisecond)
	}
	items[1].Status = rdq.StatusDead
	items[2].Status = rdq.StatusSucceeded
	items[3].Attempt = nil
	items[4].Attempt.Outcome = rdq.OutcomeSuccess
	items[5].Attempt.Outcome = rdq.OutcomePermanentFailure
	items[6].RetryIn = -time.Second
	res := e.retryInPlace(time.Minute, items...)
	for i, r := range res {
		switch i {
		case 0, n - 1:
			kept(t, "valid item beside invalid ones", r)
			eq(t, "Attempts of a valid item", e.load(claimed[i].ID).Attempts, 1)
		default:
			if !errors.Is(r.Err, rdq.ErrInvalid) {
				t.Errorf("invalid item %d (%+v): error %v, want one wrapping rdq.ErrInvalid", i, items[i], r.Err)
			}
			got, atts := e.get(claimed[i].ID)
			eq(t, "Status of an invalid item's task", got.Status, rdq.StatusInFlight)
			eq(t, "LeaseToken of an invalid item's task", got.LeaseToken, claimed[i].LeaseToken)
			eq(t, "Attempts of an invalid item's task", got.Attempts, 0)
			eq(t, "attempt rows of an invalid item's task", len(atts), 0)
		}
	}
}

// An empty batch returns no results; a lease that is not positive fails
// the whole call with an error wrapping rdq.ErrInvalid and changes
// nothing.
func testRetryInPlaceEmptyAndLease(t *testing.T, e *env) {
	if res := e.retryInPlace(time.Minute); len(res) != 0 {
		t.Fatalf("RetryInPlace of no items returned %d results", len(res))
	}
	r, _ := store.InPlaceRetrierOf(e.s)
	e.enqueue(task("q"))
	tk := e.claimOne("q", time.Minute, "w")
	for _, l := range []time.Duration{0, -time.Minute} {
		res, err := r.RetryInPlace(e.ctx, store.RetryInPlaceParams{Retries: []store.Completion{retry(tk, 0, failure("boom"), "w", 0)}, Lease: l, Now: e.at()})
		if !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("RetryInPlace with lease %s: results %v, error %v; want an error wrapping rdq.ErrInvalid", l, res, err)
		}
	}
	got, atts := e.get(tk.ID)
	eq(t, "LeaseToken after refused calls", got.LeaseToken, tk.LeaseToken)
	eq(t, "Attempts after refused calls", got.Attempts, 0)
	eq(t, "attempt rows after refused calls", len(atts), 0)
}

// A task of a paused queue is not kept: its attempt is recorded and it is
// left PENDING, due after RetryIn, exactly as Finish leaves a retry; the
// other items of the batch are kept.
func testRetryInPlacePausedQueue(t *testing.T, e *env) {
	p, ok := store.PauserOf(e.s)
	if !ok {
		t.Fatalf("store %T declares Pause but is no store.Pauser", e.s)
	}
	stopped, running := task("stopped"), task("running")
	e.enqueue(stopped, running)
	a := e.claimOne("stopped", time.Minute, "w")
	b := e.claimOne("running", time.Minute, "w")
	if err := p.PauseQueue(e.ctx, store.PauseParams{Queue: "stopped", Actor: "ops", Reason: "incident"}); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	e.advance(time.Second)
	f := failure("upstream down")
	res := e.retryInPlace(time.Minute, retry(a, 5*time.Second, f, "w", 10*time.Millisecond), retry(b, 0, f, "w", 10*time.Millisecond))
	if res[0].Err != nil || res[0].Task != nil {
		t.Fatalf("RetryInPlace of a paused queue's task: error %v, task %v; want neither", res[0].Err, res[0].Task)
	}
	kept(t, "RetryInPlace of a running queue's task beside it", res[1])
	retriedAt := e.now
	got, atts := e.get(a.ID)
	eq(t, "Status", got.Status, rdq.StatusPending)
	eq(t, "Attempts", got.Attempts, 1)
	eq(t, "LastError", got.LastError, summaryOf(f))
	eqTime(t, "NextAttemptAt", got.NextAttemptAt, retriedAt.Add(5*time.Second))
	zeroTime(t, "LeaseExpiresAt", got.LeaseExpiresAt)
	if len(atts) != 1 {
		t.Fatalf("%d attempts, want 1", len(atts))
	}
	checkAttempt(t, "attempt 1", atts[0], rdq.Attempt{
		TaskID: a.ID, Number: 1, Outcome: rdq.OutcomeRetryableFailure, ErrorType: f.Type, Message: f.Message,
		Stack: f.Stack, WorkerID: "w", LeaseToken: a.LeaseToken, StartedAt: retriedAt.Add(-10 * time.Millisecond), FinishedAt: retriedAt,
	})
	wantErrs(t, "Heartbeat of the task left waiting", e.heartbeat(time.Minute, lease(a)), store.ErrLeaseLost)

	// Resumed, it is due exactly RetryIn after the retry, with a new token.
	if err := p.ResumeQueue(e.ctx, store.PauseParams{Queue: "stopped", Actor: "ops", Reason: "over"}); err != nil {
		t.Fatalf("ResumeQueue: %v", err)
	}
	e.now = retriedAt.Add(5*time.Second - time.Millisecond)
	if c := e.claim([]string{"stopped"}, 10, time.Minute, "w"); len(c) != 0 {
		t.Fatalf("Claim before RetryIn elapsed returned %v", taskIDs(c))
	}
	e.now = retriedAt.Add(5 * time.Second)
	next := e.claimOne("stopped", time.Minute, "w")
	if next.ID != a.ID || next.LeaseToken <= a.LeaseToken || next.Attempts != 1 {
		t.Fatalf("claim after the retry: %+v; want task %s, token > %d, 1 attempt", next, a.ID, a.LeaseToken)
	}
}

// A task of a paused handler is not kept: its attempt is recorded and it
// is left PENDING and held, as Finish leaves a retry of a paused handler:
// not claimed once due, claimed once the handler resumes. The other
// handler's task in the batch is kept.
func testRetryInPlacePausedHandler(t *testing.T, e *env) {
	hp, ok := store.HandlerPauserOf(e.s)
	if !ok {
		t.Fatalf("store %T declares PauseHandlers but is no store.HandlerPauser", e.s)
	}
	const q = "storm"
	down, up := task(q), task(q)
	down.Handler, up.Handler = "down", "up"
	e.enqueue(down, up)
	claimed := e.claimIDs(q, time.Minute, "w", down.ID, up.ID)
	a, b := claimed[down.ID], claimed[up.ID]
	if changed, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: q, Handler: "down", CoolOff: time.Hour, Actor: "breaker", Now: e.at()}); err != nil || !changed {
		t.Fatalf("PauseHandler = %v, %v; want true, nil", changed, err)
	}
	e.advance(time.Second)
	f := failure("connection refused")
	res := e.retryInPlace(time.Minute, retry(a, 2*time.Second, f, "w", time.Millisecond), retry(b, 2*time.Second, f, "w", time.Millisecond))
	if res[0].Err != nil || res[0].Task != nil {
		t.Fatalf("RetryInPlace of a paused handler's task: error %v, task %v; want neither", res[0].Err, res[0].Task)
	}
	kept(t, "RetryInPlace of a running handler's task beside it", res[1])
	retriedAt := e.now
	got, atts := e.get(a.ID)
	eq(t, "Status", got.Status, rdq.StatusPending)
	eq(t, "Attempts", got.Attempts, 1)
	eqTime(t, "NextAttemptAt", got.NextAttemptAt, retriedAt.Add(2*time.Second))
	zeroTime(t, "LeaseExpiresAt", got.LeaseExpiresAt)
	if len(atts) != 1 || atts[0].LeaseToken != a.LeaseToken || atts[0].Outcome != rdq.OutcomeRetryableFailure {
		t.Fatalf("attempts = %+v, want the failure under token %d", atts, a.LeaseToken)
	}
	wantErrs(t, "Heartbeat of the task left waiting", e.heartbeat(time.Minute, lease(a)), store.ErrLeaseLost)

	// Held: not claimed once due, until the handler resumes.
	e.now = retriedAt.Add(time.Minute)
	if c := e.claim([]string{q}, 10, time.Minute, "w"); len(c) != 0 {
		t.Fatalf("Claim with the handler paused returned %v", taskIDs(c))
	}
	if _, err := hp.ResumeHandler(e.ctx, store.ResumeHandlerParams{Queue: q, Handler: "down", Actor: "ops", Now: e.at()}); err != nil {
		t.Fatalf("ResumeHandler: %v", err)
	}
	next := e.claimOne(q, time.Minute, "w")
	if next.ID != a.ID || next.LeaseToken <= a.LeaseToken || next.Attempts != 1 {
		t.Fatalf("claim after the handler resumed: %+v; want task %s, token > %d, 1 attempt", next, a.ID, a.LeaseToken)
	}
}
