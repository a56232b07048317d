package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// tb is the part of testing.TB (and rapid.T) the checks use.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// env is one test's store and virtual clock. Every store call made through
// env passes the virtual now, so tests travel in time without sleeping.
type env struct {
	t   tb
	ctx context.Context
	s   store.Store
	now time.Time
	// locator reaches the store through Harness.Open.
	locator string
	h       Harness
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	s, locator := h.NewStore(t)
	if s == nil {
		t.Fatal("Harness.NewStore returned a nil store")
	}
	return &env{t: t, ctx: t.Context(), s: s, now: virtualEpoch(), locator: locator, h: h}
}

// virtualEpoch is the start of a virtual clock: the current time at
// millisecond precision, so every instant a test derives from it is exactly
// representable by a store with millisecond precision.
func virtualEpoch() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// at returns the virtual now to pass as a Now field.
func (e *env) at() *time.Time {
	n := e.now
	return &n
}

func (e *env) advance(d time.Duration) { e.now = e.now.Add(d) }

func (e *env) admin() store.Admin {
	e.t.Helper()
	a, ok := store.AdminOf(e.s)
	if !ok {
		e.t.Fatalf("store %T does not implement store.Admin", e.s)
	}
	return a
}

// redriver returns the store's Redrive, which belongs to store.Admin: a
// test of a store without Admin that needs it is skipped (Run checks that
// Capabilities.Admin matches the store, so this cannot hide a failure).
func (e *env) redriver() store.Admin {
	e.t.Helper()
	a, ok := store.AdminOf(e.s)
	if !ok {
		if s, ok := e.t.(interface{ Skipf(string, ...any) }); ok {
			s.Skipf("store %T does not implement store.Admin, which holds Redrive", e.s)
		}
		e.t.Fatalf("store %T does not implement store.Admin, which holds Redrive", e.s)
	}
	return a
}

var taskSeq atomic.Int64

// task returns a new task for queue with a fresh ID and a recognisable
// payload.
func task(queue string) store.NewTask {
	n := taskSeq.Add(1)
	return store.NewTask{
		ID:          rdq.NewID(),
		Queue:       queue,
		Handler:     "handler-" + queue,
		Payload:     fmt.Appendf(nil, `{"n":%d}`, n),
		ContentType: "application/json",
	}
}

func tasks(queue string, n int) []store.NewTask {
	out := make([]store.NewTask, n)
	for i := range out {
		out[i] = task(queue)
	}
	return out
}

func (e *env) enqueue(ts ...store.NewTask) []store.EnqueueResult {
	e.t.Helper()
	res, err := e.s.Enqueue(e.ctx, store.EnqueueParams{Tasks: ts, Now: e.at()})
	if err != nil {
		e.t.Fatalf("Enqueue: %v", err)
	}
	if len(res) != len(ts) {
		e.t.Fatalf("Enqueue of %d tasks returned %d results", len(ts), len(res))
	}
	for i, r := range res {
		if r.Task == nil {
			e.t.Fatalf("Enqueue result %d has a nil Task", i)
		}
	}
	return res
}

func (e *env) claim(queues []string, limit int, lease time.Duration, worker string) []*rdq.Task {
	e.t.Helper()
	got, err := e.s.Claim(e.ctx, store.ClaimParams{Queues: queues, Limit: limit, Lease: lease, WorkerID: worker, Now: e.at()})
	if err != nil {
		e.t.Fatalf("Claim(%v, limit %d): %v", queues, limit, err)
	}
	if len(got) > limit {
		e.t.Fatalf("Claim with limit %d returned %d tasks", limit, len(got))
	}
	return got
}

// claimOne claims exactly one task of queue, failing the test otherwise.
func (e *env) claimOne(queue string, lease time.Duration, worker string) *rdq.Task {
	e.t.Helper()
	got := e.claim([]string{queue}, 1, lease, worker)
	if len(got) != 1 {
		e.t.Fatalf("Claim(%s) returned %d tasks, want 1", queue, len(got))
	}
	return got[0]
}

// claimIDs claims the due tasks of queue, failing unless ids are among
// them, and returns what it claimed by ID.
func (e *env) claimIDs(queue string, lease time.Duration, worker string, ids ...rdq.ID) map[rdq.ID]*rdq.Task {
	e.t.Helper()
	got := e.claim([]string{queue}, len(ids)+100, lease, worker)
	byID := make(map[rdq.ID]*rdq.Task, len(got))
	for _, tk := range got {
		byID[tk.ID] = tk
	}
	for _, id := range ids {
		if byID[id] == nil {
			e.t.Fatalf("Claim(%s) did not return task %s; got %v", queue, id, taskIDs(got))
		}
	}
	return byID
}

func (e *env) reclaim(queues []string, limit int, lease time.Duration, worker string) []*rdq.Task {
	e.t.Helper()
	got, err := e.s.ReclaimExpired(e.ctx, store.ReclaimParams{Queues: queues, Limit: limit, Lease: lease, WorkerID: worker, Now: e.at()})
	if err != nil {
		e.t.Fatalf("ReclaimExpired: %v", err)
	}
	if len(got) > limit {
		e.t.Fatalf("ReclaimExpired with limit %d returned %d tasks", limit, len(got))
	}
	return got
}

func (e *env) heartbeat(extend time.Duration, leases ...store.Lease) []error {
	e.t.Helper()
	errs, err := e.s.Heartbeat(e.ctx, store.HeartbeatParams{Leases: leases, Extend: extend, Now: e.at()})
	if err != nil {
		e.t.Fatalf("Heartbeat: %v", err)
	}
	if len(errs) != len(leases) {
		e.t.Fatalf("Heartbeat of %d leases returned %d errors", len(leases), len(errs))
	}
	return errs
}

func (e *env) finish(cs ...store.Completion) []error {
	e.t.Helper()
	errs, err := e.s.Finish(e.ctx, store.FinishParams{Completions: cs, Now: e.at()})
	if err != nil {
		e.t.Fatalf("Finish: %v", err)
	}
	if len(errs) != len(cs) {
		e.t.Fatalf("Finish of %d completions returned %d errors", len(cs), len(errs))
	}
	return errs
}

func (e *env) mustFinish(cs ...store.Completion) {
	e.t.Helper()
	for i, err := range e.finish(cs...) {
		if err != nil {
			e.t.Fatalf("Finish completion %d (task %s): %v", i, cs[i].ID, err)
		}
	}
}

func (e *env) release(leases ...store.Lease) []error {
	e.t.Helper()
	errs, err := e.s.Release(e.ctx, store.ReleaseParams{Leases: leases, Now: e.at()})
	if err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	if len(errs) != len(leases) {
		e.t.Fatalf("Release of %d leases returned %d errors", len(leases), len(errs))
	}
	return errs
}

func (e *env) redrive(p store.RedriveParams) []error {
	e.t.Helper()
	if p.Now == nil {
		p.Now = e.at()
	}
	errs, err := e.redriver().Redrive(e.ctx, p)
	if err != nil {
		e.t.Fatalf("Redrive: %v", err)
	}
	if len(errs) != len(p.IDs) {
		e.t.Fatalf("Redrive of %d IDs returned %d errors", len(p.IDs), len(errs))
	}
	return errs
}

func (e *env) get(id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	e.t.Helper()
	tk, atts, err := e.s.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	if tk == nil {
		e.t.Fatalf("Get(%s) returned a nil task", id)
	}
	if tk.ID != id {
		e.t.Fatalf("Get(%s) returned task %s", id, tk.ID)
	}
	return tk, atts
}

// load returns the stored task, without its attempts.
func (e *env) load(id rdq.ID) *rdq.Task {
	e.t.Helper()
	tk, _ := e.get(id)
	return tk
}

func (e *env) status(id rdq.ID) rdq.Status {
	e.t.Helper()
	tk, _ := e.get(id)
	return tk.Status
}

func (e *env) wantNotFound(id rdq.ID) {
	e.t.Helper()
	_, _, err := e.s.Get(e.ctx, id)
	if !errors.Is(err, store.ErrNotFound) {
		e.t.Fatalf("Get(%s) error = %v, want ErrNotFound", id, err)
	}
}

// failure is a distinctive failure with a stack, for attempt records.
func failure(msg string) rdq.Failure {
	f := rdq.Describe(errors.New(msg))
	f.Stack = "goroutine 7 [running]:\nexample.com/app.handle()\n\t/app/handle.go:42 +0x1d"
	return f
}

func lease(tk *rdq.Task) store.Lease { return store.Lease{ID: tk.ID, Token: tk.LeaseToken} }

func succeed(tk *rdq.Task, worker string, d time.Duration) store.Completion {
	return store.Completion{
		Lease:   lease(tk),
		Status:  rdq.StatusSucceeded,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: worker, Duration: d},
	}
}

func retry(tk *rdq.Task, in time.Duration, f rdq.Failure, worker string, d time.Duration) store.Completion {
	return store.Completion{
		Lease:   lease(tk),
		Status:  rdq.StatusPending,
		RetryIn: in,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: f, WorkerID: worker, Duration: d},
	}
}

func kill(tk *rdq.Task, f rdq.Failure, worker string, d time.Duration) store.Completion {
	return store.Completion{
		Lease:   lease(tk),
		Status:  rdq.StatusDead,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: worker, Duration: d},
	}
}

// makeDead enqueues ts, claims them and finishes each as dead with the
// given failure at the current virtual time. It returns the IDs.
func (e *env) makeDead(f func(i int) rdq.Failure, ts ...store.NewTask) []rdq.ID {
	e.t.Helper()
	e.enqueue(ts...)
	ids := make([]rdq.ID, len(ts))
	byQueue := map[string][]rdq.ID{}
	for i, nt := range ts {
		ids[i] = nt.ID
		byQueue[nt.Queue] = append(byQueue[nt.Queue], nt.ID)
	}
	claimed := map[rdq.ID]*rdq.Task{}
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		maps.Copy(claimed, e.claimIDs(q, time.Minute, "w-dead", byQueue[q]...))
	}
	cs := make([]store.Completion, len(ts))
	for i, id := range ids {
		cs[i] = kill(claimed[id], f(i), "w-dead", 10*time.Millisecond)
	}
	e.mustFinish(cs...)
	return ids
}

// killAgain claims the pending (redriven, due) tasks ids and finishes each
// as dead with the given failure at the current virtual time.
func (e *env) killAgain(f func(i int) rdq.Failure, ids ...rdq.ID) {
	e.t.Helper()
	byQueue := map[string][]rdq.ID{}
	for _, id := range ids {
		q := e.load(id).Queue
		byQueue[q] = append(byQueue[q], id)
	}
	claimed := map[rdq.ID]*rdq.Task{}
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		maps.Copy(claimed, e.claimIDs(q, time.Minute, "w-dead", byQueue[q]...))
	}
	cs := make([]store.Completion, len(ids))
	for i, id := range ids {
		cs[i] = kill(claimed[id], f(i), "w-dead", 10*time.Millisecond)
	}
	e.mustFinish(cs...)
}

// makeSucceeded enqueues ts, claims them and finishes them successfully at
// the current virtual time.
func (e *env) makeSucceeded(ts ...store.NewTask) []rdq.ID {
	e.t.Helper()
	e.enqueue(ts...)
	ids := make([]rdq.ID, len(ts))
	byQueue := map[string][]rdq.ID{}
	for i, nt := range ts {
		ids[i] = nt.ID
		byQueue[nt.Queue] = append(byQueue[nt.Queue], nt.ID)
	}
	var cs []store.Completion
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		claimed := e.claimIDs(q, time.Minute, "w-ok", byQueue[q]...)
		for _, id := range byQueue[q] {
			cs = append(cs, succeed(claimed[id], "w-ok", time.Millisecond))
		}
	}
	e.mustFinish(cs...)
	return ids
}

func taskIDs(ts []*rdq.Task) []rdq.ID {
	out := make([]rdq.ID, len(ts))
	for i, tk := range ts {
		out[i] = tk.ID
	}
	return out
}

func idSet(ids ...rdq.ID) map[rdq.ID]bool {
	m := make(map[rdq.ID]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func sameIDSet(a, b []rdq.ID) bool {
	if len(a) != len(b) {
		return false
	}
	sa, sb := idSet(a...), idSet(b...)
	if len(sa) != len(a) || len(sb) != len(b) {
		return false
	}
	for id := range sa {
		if !sb[id] {
			return false
		}
	}
	return true
}

func compareIDs(a, b rdq.ID) int { return bytes.Compare(a[:], b[:]) }

// wantErrs checks per-item errors against the sentinels wanted (nil for
// success).
func wantErrs(t tb, what string, got []error, want ...error) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d per-item errors, want %d", what, len(got), len(want))
	}
	for i := range want {
		switch {
		case want[i] == nil && got[i] != nil:
			t.Errorf("%s: item %d: error %v, want nil", what, i, got[i])
		case want[i] != nil && !errors.Is(got[i], want[i]):
			t.Errorf("%s: item %d: error %v, want %v", what, i, got[i], want[i])
		}
	}
}

func eqTime(t tb, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %s, want %s (off by %s)", what, fmtTime(got), fmtTime(want), got.Sub(want))
	}
}

func zeroTime(t tb, what string, got time.Time) {
	t.Helper()
	if !got.IsZero() {
		t.Errorf("%s = %s, want zero", what, fmtTime(got))
	}
}

func fmtTime(tm time.Time) string {
	if tm.IsZero() {
		return "zero"
	}
	return tm.UTC().Format("15:04:05.000000")
}

func eq[T comparable](t tb, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func eqBytes(t tb, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, truncate(got), truncate(want))
	}
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:64:64], "..."...)
	}
	return b
}

func eqHeaders(t tb, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) || !maps.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// checkAttempt compares an attempt row with what it must be.
func checkAttempt(t tb, what string, got, want rdq.Attempt) {
	t.Helper()
	eq(t, what+" TaskID", got.TaskID, want.TaskID)
	eq(t, what+" Number", got.Number, want.Number)
	eq(t, what+" Life", got.Life, want.Life)
	eq(t, what+" Outcome", got.Outcome, want.Outcome)
	eq(t, what+" ErrorType", got.ErrorType, want.ErrorType)
	eq(t, what+" Message", got.Message, want.Message)
	eq(t, what+" Stack", got.Stack, want.Stack)
	eq(t, what+" WorkerID", got.WorkerID, want.WorkerID)
	eq(t, what+" LeaseToken", got.LeaseToken, want.LeaseToken)
	eqTime(t, what+" StartedAt", got.StartedAt, want.StartedAt)
	eqTime(t, what+" FinishedAt", got.FinishedAt, want.FinishedAt)
}

// checkNumbers checks that attempt numbers are 1..n in order and lives never
// decrease.
func checkNumbers(t tb, what string, atts []rdq.Attempt) {
	t.Helper()
	for i, a := range atts {
		if a.Number != i+1 {
			t.Errorf("%s: attempt %d has number %d; numbers must be 1..n in order, got %v", what, i, a.Number, numbers(atts))
			return
		}
		if i > 0 && a.Life < atts[i-1].Life {
			t.Errorf("%s: attempt %d has life %d after life %d", what, a.Number, a.Life, atts[i-1].Life)
		}
	}
}

func numbers(atts []rdq.Attempt) []int {
	out := make([]int, len(atts))
	for i, a := range atts {
		out[i] = a.Number
	}
	return out
}

func summaryOf(f rdq.Failure) rdq.ErrorSummary {
	return rdq.ErrorSummary{Type: f.Type, Message: f.Message, Fingerprint: f.Fingerprint}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
