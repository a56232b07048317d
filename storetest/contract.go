package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

type contractTest struct {
	name string
	fn   func(t *testing.T, e *env)
}

func contractTests() []contractTest {
	return []contractTest{
		{"Enqueue/StoresAsGiven", testEnqueueStoresAsGiven},
		{"Enqueue/EmptyBatch", testEnqueueEmptyBatch},
		{"Enqueue/Delay", testEnqueueDelay},
		{"Enqueue/RepeatedID", testEnqueueRepeatedID},
		{"Enqueue/RepeatedIDWithNewKey", testRepeatedIDWithNewKey},
		{"Enqueue/Idempotency", testEnqueueIdempotency},
		{"Enqueue/IdempotencyWithinBatch", testEnqueueIdempotencyWithinBatch},
		{"Enqueue/IdempotencyKeyOutlivesPurge", testIdempotencyKeyReusable},
		{"Enqueue/FirstFailure", testEnqueueFirstFailure},
		{"Enqueue/PermanentFirstFailure", testEnqueuePermanentFirstFailure},
		{"Claim/SetsLease", testClaimSetsLease},
		{"Claim/LimitAndOrder", testClaimLimitAndOrder},
		{"Claim/QueuesFilter", testClaimQueues},
		{"Claim/HandlersFilter", testClaimHandlers},
		{"Claim/NeverInFlight", testClaimNeverInFlight},
		{"Claim/Concurrent", testClaimConcurrent},
		{"Claim/ConcurrentNeverEmpty", testClaimConcurrentNeverEmpty},
		{"Claim/SkipsLockedTask", testClaimSkipsLocked},
		{"Claim/TokensStrictlyIncrease", testTokensIncrease},
		{"Heartbeat/Extends", testHeartbeatExtends},
		{"Heartbeat/AfterExpiryBeforeReclaim", testHeartbeatAfterExpiry},
		{"Heartbeat/StaleTokenPerItem", testHeartbeatStale},
		{"Finish/Success", testFinishSuccess},
		{"Finish/Retry", testFinishRetry},
		{"Finish/Dead", testFinishDead},
		{"Finish/StaleTokenPerItem", testFinishStale},
		{"Finish/AfterExpiryBeforeReclaim", testFinishAfterExpiry},
		{"Finish/ArbitraryFailureText", testFinishArbitraryText},
		{"Finish/OneBadItemFailsAlone", testFinishOneBadItem},
		{"Finish/SameLeaseTwiceInBatch", testFinishSameLeaseTwice},
		{"Release/ReturnsToPending", testRelease},
		{"Reclaim/RecordsLeaseExpired", testReclaim},
		{"Reclaim/QueuesAndLimit", testReclaimQueuesLimit},
		{"Reclaim/Concurrent", testReclaimConcurrent},
		{"Reclaim/SkipsLockedTask", testReclaimSkipsLocked},
		{"Reclaim/ThenDead", testReclaimThenDead},
		{"Redrive/DeadOnly", testRedriveDeadOnly},
		{"Redrive/MaxLife", testRedriveMaxLife},
		{"Redrive/PayloadEdit", testRedrivePayload},
		{"Redrive/Spread", testRedriveSpread},
		{"Redrive/LeaseExpiryAfterRedrive", testRedriveThenLeaseExpiry},
		{"Get/NotFound", testGetNotFound},
		{"PurgeSucceeded/RetentionAndLimit", testPurgeSucceeded},
	}
}

func runContract(t *testing.T, h Harness) {
	for _, tc := range contractTests() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t, h))
		})
	}
}

// checkFresh checks a just-enqueued task against the NewTask it came from.
func checkFresh(t *testing.T, what string, got *rdq.Task, nt store.NewTask, now time.Time) {
	t.Helper()
	eq(t, what+" ID", got.ID, nt.ID)
	eq(t, what+" Queue", got.Queue, nt.Queue)
	eq(t, what+" Handler", got.Handler, nt.Handler)
	eqBytes(t, what+" Payload", got.Payload, nt.Payload)
	eq(t, what+" ContentType", got.ContentType, nt.ContentType)
	eqHeaders(t, what+" Headers", got.Headers, nt.Headers)
	eq(t, what+" IdempotencyKey", got.IdempotencyKey, nt.IdempotencyKey)
	eq(t, what+" Status", got.Status, rdq.StatusPending)
	eq(t, what+" Attempts", got.Attempts, 0)
	eq(t, what+" Life", got.Life, 0)
	eq(t, what+" LeaseToken", got.LeaseToken, int64(0))
	eqTime(t, what+" NextAttemptAt", got.NextAttemptAt, now.Add(nt.Delay))
	eqTime(t, what+" CreatedAt", got.CreatedAt, now)
	zeroTime(t, what+" LeaseExpiresAt", got.LeaseExpiresAt)
	zeroTime(t, what+" FinishedAt", got.FinishedAt)
	if !got.LastError.IsZero() {
		t.Errorf("%s LastError = %+v, want none", what, got.LastError)
	}
	eq(t, what+" MaxAttempts", got.MaxAttempts, nt.MaxAttempts)
	eq(t, what+" Timeout", got.Timeout, nt.Timeout.Truncate(time.Microsecond))
	eq(t, what+" Snoozes", got.Snoozes, 0)
}

func testEnqueueStoresAsGiven(t *testing.T, e *env) {
	big := make([]byte, 256<<10)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	in := []store.NewTask{
		{
			ID: rdq.NewID(), Queue: "emails", Handler: "send-welcome",
			Payload:     []byte{0x00, 0x01, 0xff, 0xfe, '"', '\\', '\n', 'x'}, // not UTF-8, not JSON
			ContentType: "application/octet-stream",
			Headers: map[string]string{
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"ünï cødé":    "välue with \"quotes\", \\backslash\\, tab\t and newline\n",
				"empty":       "",
			},
			MaxAttempts: 7, Timeout: 90*time.Second + time.Microsecond,
		},
		{ID: rdq.NewID(), Queue: "emails", Handler: "h2", IdempotencyKey: "order-42/ünï", MaxAttempts: rdq.Unlimited, Timeout: time.Millisecond},
		{ID: rdq.NewID(), Queue: "other.queue:v2/x", Handler: "big", Payload: big, ContentType: "application/x-big", Headers: map[string]string{}},
	}
	res := e.enqueue(in...)
	for i, r := range res {
		what := fmt.Sprintf("Enqueue result %d", i)
		if r.Duplicate {
			t.Errorf("%s: Duplicate = true for a new task", what)
		}
		checkFresh(t, what, r.Task, in[i], e.now)
		got, atts := e.get(in[i].ID)
		checkFresh(t, fmt.Sprintf("Get(task %d)", i), got, in[i], e.now)
		if len(atts) != 0 {
			t.Errorf("Get(task %d): %d attempts, want none", i, len(atts))
		}
	}
	// A claim hands the worker the task's own budget and timeout.
	claimed := e.claimIDs("emails", time.Minute, "w", in[0].ID, in[1].ID)
	for _, nt := range in[:2] {
		c := claimed[nt.ID]
		if c == nil {
			t.Fatalf("task %s was not claimed", nt.ID)
		}
		eq(t, "claimed MaxAttempts", c.MaxAttempts, nt.MaxAttempts)
		eq(t, "claimed Timeout", c.Timeout, nt.Timeout.Truncate(time.Microsecond))
	}
}

func testEnqueueEmptyBatch(t *testing.T, e *env) {
	res, err := e.s.Enqueue(e.ctx, store.EnqueueParams{Now: e.at()})
	if err != nil {
		t.Fatalf("Enqueue of no tasks: %v", err)
	}
	if len(res) != 0 {
		t.Fatalf("Enqueue of no tasks returned %d results", len(res))
	}
}

// A delayed task is due exactly Delay after enqueue, not a millisecond
// sooner.
func testEnqueueDelay(t *testing.T, e *env) {
	nt := task("q")
	nt.Delay = 30 * time.Second
	now := task("q")
	e.enqueue(nt, now)
	start := e.now
	got := e.claim([]string{"q"}, 10, time.Minute, "w1")
	if len(got) != 1 || got[0].ID != now.ID {
		t.Fatalf("Claim at enqueue time returned %v, want only the undelayed task %s", taskIDs(got), now.ID)
	}
	e.advance(30*time.Second - time.Millisecond)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w1"); len(got) != 0 {
		t.Fatalf("Claim 1ms before the delay ends returned %v", taskIDs(got))
	}
	e.now = start.Add(30 * time.Second)
	got = e.claim([]string{"q"}, 10, time.Minute, "w1")
	if len(got) != 1 || got[0].ID != nt.ID {
		t.Fatalf("Claim when the delay ends returned %v, want %s", taskIDs(got), nt.ID)
	}
}

// A batch repeating a task ID that already exists (or repeating an ID
// within itself) either fails as a whole, inserting nothing, or treats the
// repeat as a duplicate of the existing task, as a resubmission. Nothing
// else is acceptable: the stored task is never replaced.
func testEnqueueRepeatedID(t *testing.T, e *env) {
	first := task("q")
	e.enqueue(first)
	other := task("q")
	again := task("q")
	again.ID = first.ID
	again.Payload = []byte("replacement")
	// A repeated ID is reported as a duplicate, like a repeated
	// idempotency key, so a caller that chose the ID can retry a submit
	// whose outcome it did not learn.
	res, err := e.s.Enqueue(e.ctx, store.EnqueueParams{Tasks: []store.NewTask{other, again}, Now: e.at()})
	if err != nil {
		t.Fatalf("Enqueue of a batch repeating an existing ID: %v; want the repeat reported as a duplicate", err)
	}
	if len(res) != 2 || res[0].Task == nil || res[1].Task == nil {
		t.Fatalf("Enqueue returned %d results (%+v), want 2", len(res), res)
	}
	if res[0].Duplicate || res[0].Task.ID != other.ID {
		t.Errorf("new task in the batch: Duplicate=%v ID=%s, want new %s", res[0].Duplicate, res[0].Task.ID, other.ID)
	}
	if !res[1].Duplicate || res[1].Task.ID != first.ID {
		t.Errorf("repeated ID: Duplicate=%v ID=%s, want a duplicate of %s", res[1].Duplicate, res[1].Task.ID, first.ID)
	}
	eqBytes(t, "payload returned for the repeated ID", res[1].Task.Payload, first.Payload)
	eq(t, "status of the new task", e.status(other.ID), rdq.StatusPending)
	got, _ := e.get(first.ID)
	eqBytes(t, "payload of the existing task", got.Payload, first.Payload)

	dupA, dupB := task("q"), task("q")
	dupB.ID = dupA.ID
	dupB.Payload = []byte("second")
	res, err = e.s.Enqueue(e.ctx, store.EnqueueParams{Tasks: []store.NewTask{dupA, dupB}, Now: e.at()})
	if err != nil {
		t.Fatalf("Enqueue of a batch repeating an ID: %v; want the repeat reported as a duplicate", err)
	}
	if len(res) != 2 || res[0].Task == nil || res[1].Task == nil || res[0].Duplicate || !res[1].Duplicate {
		t.Fatalf("the same ID twice in a batch: results %+v, want the first new and the second its duplicate", res)
	}
	got, _ = e.get(dupA.ID)
	eqBytes(t, "payload of a task whose ID was repeated in its batch", got.Payload, dupA.Payload)
	if n := len(e.claim([]string{"q"}, 100, time.Minute, "w")); n != 3 {
		t.Errorf("Claim returned %d tasks, want the 3 distinct ones", n)
	}
}

func testEnqueueIdempotency(t *testing.T, e *env) {
	a := task("q1")
	a.IdempotencyKey = "key-1"
	e.enqueue(a)

	dup := task("q1")
	dup.IdempotencyKey = "key-1"
	dup.Payload = []byte("different")
	otherQueue := task("q2")
	otherQueue.IdempotencyKey = "key-1"
	noKey1, noKey2 := task("q1"), task("q1")
	res := e.enqueue(dup, otherQueue, noKey1, noKey2)

	if !res[0].Duplicate {
		t.Errorf("same key, same queue: Duplicate = false")
	}
	eq(t, "duplicate's Task.ID", res[0].Task.ID, a.ID)
	eqBytes(t, "duplicate's Task.Payload (the existing task's)", res[0].Task.Payload, a.Payload)
	e.wantNotFound(dup.ID)
	for i, want := range []store.NewTask{otherQueue, noKey1, noKey2} {
		r := res[i+1]
		if r.Duplicate || r.Task.ID != want.ID {
			t.Errorf("result %d: Duplicate=%v ID=%s, want a new task %s", i+1, r.Duplicate, r.Task.ID, want.ID)
		}
	}

	// The existing task is returned in its current state.
	claimed := e.claimIDs("q1", time.Minute, "w1", a.ID)
	again := task("q1")
	again.IdempotencyKey = "key-1"
	res = e.enqueue(again)
	if !res[0].Duplicate || res[0].Task.ID != a.ID {
		t.Fatalf("key of an in-flight task: Duplicate=%v ID=%s, want the existing %s", res[0].Duplicate, res[0].Task.ID, a.ID)
	}
	eq(t, "duplicate of an in-flight task: Status", res[0].Task.Status, rdq.StatusInFlight)
	eq(t, "duplicate of an in-flight task: LeaseToken", res[0].Task.LeaseToken, claimed[a.ID].LeaseToken)
}

func testEnqueueIdempotencyWithinBatch(t *testing.T, e *env) {
	a, b, c := task("q"), task("q"), task("q")
	a.IdempotencyKey, b.IdempotencyKey, c.IdempotencyKey = "k", "k", "k"
	other := task("q")
	other.IdempotencyKey = "other"
	res := e.enqueue(a, other, b, c)
	if res[0].Duplicate || res[0].Task.ID != a.ID {
		t.Errorf("first of a key in a batch: Duplicate=%v ID=%s, want new %s", res[0].Duplicate, res[0].Task.ID, a.ID)
	}
	if res[1].Duplicate || res[1].Task.ID != other.ID {
		t.Errorf("other key: Duplicate=%v ID=%s, want new %s", res[1].Duplicate, res[1].Task.ID, other.ID)
	}
	for _, i := range []int{2, 3} {
		if !res[i].Duplicate || res[i].Task.ID != a.ID {
			t.Errorf("repeat %d of a key in one batch: Duplicate=%v ID=%s, want a duplicate of %s", i, res[i].Duplicate, res[i].Task.ID, a.ID)
		}
	}
	e.wantNotFound(b.ID)
	e.wantNotFound(c.ID)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w"); len(got) != 2 {
		t.Errorf("Claim after a batch with duplicates returned %d tasks, want 2", len(got))
	}
}

// A key blocks while its task exists, finished or not, and is free again
// once the task is purged.
func testIdempotencyKeyReusable(t *testing.T, e *env) {
	a := task("q")
	a.IdempotencyKey = "once"
	e.makeSucceeded(a)

	dup := task("q")
	dup.IdempotencyKey = "once"
	if res := e.enqueue(dup); !res[0].Duplicate || res[0].Task.ID != a.ID {
		t.Fatalf("key of a succeeded task: Duplicate=%v ID=%s, want the existing %s", res[0].Duplicate, res[0].Task.ID, a.ID)
	}
	e.advance(2 * time.Hour)
	n, err := e.s.PurgeSucceeded(e.ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 10, Actor: "retention", Now: e.at()})
	if err != nil {
		t.Fatalf("PurgeSucceeded: %v", err)
	}
	eq(t, "PurgeSucceeded count", n, int64(1))
	e.wantNotFound(a.ID)

	// The key outlives its task by the store's key retention (a day at
	// least): resubmitting returns the original ID, marked purged, and
	// runs nothing.
	e.advance(23 * time.Hour)
	replay := task("q")
	replay.IdempotencyKey = "once"
	res := e.enqueue(replay)
	if !res[0].Duplicate || !res[0].Purged || res[0].Task.ID != a.ID {
		t.Fatalf("key of a task purged a day ago: Duplicate=%v Purged=%v ID=%s, want a purged duplicate of %s", res[0].Duplicate, res[0].Purged, res[0].Task.ID, a.ID)
	}
	eq(t, "queue of the purged duplicate", res[0].Task.Queue, "q")
	eq(t, "key of the purged duplicate", res[0].Task.IdempotencyKey, "once")
	e.wantNotFound(replay.ID)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w"); len(got) != 0 {
		t.Fatalf("Claim after resubmitting a purged task's key returned %v", taskIDs(got))
	}

	// Past any retention, once the maintenance pruned it, the key is free.
	e.advance(100 * 365 * 24 * time.Hour)
	if _, err := e.s.PurgeSucceeded(e.ctx, store.PurgeSucceededParams{OlderThan: time.Hour, Limit: 10, Actor: "retention", Now: e.at()}); err != nil {
		t.Fatalf("PurgeSucceeded: %v", err)
	}
	fresh := task("q")
	fresh.IdempotencyKey = "once"
	if res := e.enqueue(fresh); res[0].Duplicate || res[0].Task.ID != fresh.ID {
		t.Fatalf("key of a task purged a century ago: Duplicate=%v ID=%s, want a new task %s", res[0].Duplicate, res[0].Task.ID, fresh.ID)
	}
	// And it is remembered again for the new task.
	dup = task("q")
	dup.IdempotencyKey = "once"
	if res := e.enqueue(dup); !res[0].Duplicate || res[0].Purged || res[0].Task.ID != fresh.ID {
		t.Fatalf("key of the new task: Duplicate=%v Purged=%v ID=%s, want a duplicate of %s", res[0].Duplicate, res[0].Purged, res[0].Task.ID, fresh.ID)
	}
}

// A first failure is attempt 1 of life 0, with token 0, counted in the
// task's attempts; the next execution is attempt 2.
func testEnqueueFirstFailure(t *testing.T, e *env) {
	f := failure("dial tcp 10.0.0.7:5432: connection refused")
	nt := task("q")
	nt.FirstFailure = &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: f, WorkerID: "producer-1", Duration: 1500 * time.Millisecond}
	res := e.enqueue(nt)
	for what, tk := range map[string]*rdq.Task{"Enqueue result": res[0].Task, "Get": e.load(nt.ID)} {
		eq(t, what+" Attempts", tk.Attempts, 1)
		eq(t, what+" Status", tk.Status, rdq.StatusPending)
		eq(t, what+" LastError", tk.LastError, summaryOf(f))
	}
	_, atts := e.get(nt.ID)
	if len(atts) != 1 {
		t.Fatalf("Get: %d attempts, want the first failure", len(atts))
	}
	checkAttempt(t, "first failure", atts[0], rdq.Attempt{
		TaskID: nt.ID, Number: 1, Life: 0, Outcome: rdq.OutcomeRetryableFailure,
		ErrorType: f.Type, Message: f.Message, Stack: f.Stack, WorkerID: "producer-1", LeaseToken: 0,
		StartedAt: e.now.Add(-1500 * time.Millisecond), FinishedAt: e.now,
	})

	e.advance(time.Second)
	tk := e.claimOne("q", time.Minute, "w1")
	eq(t, "claimed Attempts", tk.Attempts, 1)
	f2 := failure("still refused")
	e.mustFinish(retry(tk, time.Second, f2, "w1", 5*time.Millisecond))
	got, atts := e.get(nt.ID)
	eq(t, "Attempts after the second failure", got.Attempts, 2)
	eq(t, "LastError after the second failure", got.LastError, summaryOf(f2))
	if len(atts) != 2 {
		t.Fatalf("%d attempts, want 2", len(atts))
	}
	checkAttempt(t, "second attempt", atts[1], rdq.Attempt{
		TaskID: nt.ID, Number: 2, Life: 0, Outcome: rdq.OutcomeRetryableFailure,
		ErrorType: f2.Type, Message: f2.Message, Stack: f2.Stack, WorkerID: "w1", LeaseToken: tk.LeaseToken,
		StartedAt: e.now.Add(-5 * time.Millisecond), FinishedAt: e.now,
	})
}

// A permanent first failure puts the task straight into the dead-letter
// queue: DEAD, finished now, never claimed, and redrivable into life 1 with
// its next attempt numbered 2.
func testEnqueuePermanentFirstFailure(t *testing.T, e *env) {
	f := failure("payload is not valid JSON")
	nt := task("q")
	nt.FirstFailure = &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: "producer-1"}
	res := e.enqueue(nt)
	for what, tk := range map[string]*rdq.Task{"Enqueue result": res[0].Task, "Get": e.load(nt.ID)} {
		eq(t, what+" Status", tk.Status, rdq.StatusDead)
		eq(t, what+" Attempts", tk.Attempts, 1)
		eq(t, what+" FinishedAt", tk.FinishedAt.Equal(e.now), true)
		eq(t, what+" LastError", tk.LastError, summaryOf(f))
	}
	_, atts := e.get(nt.ID)
	if len(atts) != 1 || atts[0].Outcome != rdq.OutcomePermanentFailure || atts[0].Number != 1 {
		t.Fatalf("history = %+v, want the permanent first failure as attempt 1", atts)
	}
	e.advance(time.Second)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w1"); len(got) != 0 {
		t.Fatalf("claimed %d tasks; a dead task must not be claimed", len(got))
	}
	wantErrs(t, "Redrive of the dead task", e.redrive(store.RedriveParams{IDs: []rdq.ID{nt.ID}, Actor: "ops", Reason: "fixed"}), nil)
	tk := e.claimOne("q", time.Minute, "w1")
	e.mustFinish(succeed(tk, "w1", time.Millisecond))
	_, atts = e.get(nt.ID)
	if len(atts) != 2 || atts[1].Number != 2 || atts[1].Life != 1 || atts[1].Outcome != rdq.OutcomeSuccess {
		t.Fatalf("history after redrive = %+v, want attempt 2 of life 1 succeeding", atts)
	}
}

func testClaimSetsLease(t *testing.T, e *env) {
	nt := task("q")
	nt.Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	nt.IdempotencyKey = "claim-me"
	e.enqueue(nt)
	e.advance(time.Second)
	tk := e.claimOne("q", 30*time.Second, "worker-a")
	for what, got := range map[string]*rdq.Task{"claimed": tk, "Get after claim": e.load(nt.ID)} {
		eq(t, what+" ID", got.ID, nt.ID)
		eq(t, what+" Handler", got.Handler, nt.Handler)
		eqBytes(t, what+" Payload", got.Payload, nt.Payload)
		eq(t, what+" ContentType", got.ContentType, nt.ContentType)
		eqHeaders(t, what+" Headers", got.Headers, nt.Headers)
		eq(t, what+" IdempotencyKey", got.IdempotencyKey, nt.IdempotencyKey)
		eq(t, what+" Status", got.Status, rdq.StatusInFlight)
		eq(t, what+" LeaseOwner", got.LeaseOwner, "worker-a")
		eqTime(t, what+" LeaseExpiresAt", got.LeaseExpiresAt, e.now.Add(30*time.Second))
		eq(t, what+" Attempts", got.Attempts, 0)
		eq(t, what+" Life", got.Life, 0)
		if got.LeaseToken <= 0 {
			t.Errorf("%s LeaseToken = %d, want > 0", what, got.LeaseToken)
		}
	}
	if got := e.claim([]string{"q"}, 10, time.Minute, "worker-b"); len(got) != 0 {
		t.Errorf("second Claim returned %v; the task is leased", taskIDs(got))
	}
}

// Claim takes up to Limit due tasks, oldest due first.
func testClaimLimitAndOrder(t *testing.T, e *env) {
	delays := []time.Duration{40, 10, 30, 0, 20, 50} // seconds
	in := make([]store.NewTask, len(delays))
	for i, d := range delays {
		in[i] = task("q")
		in[i].Delay = d * time.Second
	}
	e.enqueue(in...)
	byDelay := func(d time.Duration) rdq.ID { return in[slices.Index(delays, d)].ID }

	e.advance(45 * time.Second) // all but the 50s one are due
	steps := []struct {
		limit int
		want  []rdq.ID
	}{
		{2, []rdq.ID{byDelay(0), byDelay(10)}},
		{1, []rdq.ID{byDelay(20)}},
		{5, []rdq.ID{byDelay(30), byDelay(40)}},
		{5, nil},
	}
	for i, s := range steps {
		got := e.claim([]string{"q"}, s.limit, time.Minute, "w")
		if !sameIDSet(taskIDs(got), s.want) {
			t.Fatalf("claim %d (limit %d) returned %v, want %v", i, s.limit, taskIDs(got), s.want)
		}
	}
	e.advance(5 * time.Second)
	if got := e.claim([]string{"q"}, 5, time.Minute, "w"); len(got) != 1 || got[0].ID != byDelay(50) {
		t.Fatalf("claim after the last delay returned %v, want %v", taskIDs(got), byDelay(50))
	}
}

func testClaimQueues(t *testing.T, e *env) {
	qa, qb, qc := tasks("qa", 3), tasks("qb", 2), tasks("qc", 2)
	e.enqueue(append(append(slices.Clone(qa), qb...), qc...)...)
	ids := func(ts ...[]store.NewTask) []rdq.ID {
		var out []rdq.ID
		for _, l := range ts {
			for _, nt := range l {
				out = append(out, nt.ID)
			}
		}
		return out
	}
	if got := e.claim([]string{"qa", "qc", "nope"}, 100, time.Minute, "w"); !sameIDSet(taskIDs(got), ids(qa, qc)) {
		t.Fatalf("Claim(qa, qc) returned %v, want %v", taskIDs(got), ids(qa, qc))
	}
	if got := e.claim([]string{"nope"}, 100, time.Minute, "w"); len(got) != 0 {
		t.Fatalf("Claim of an empty queue returned %v", taskIDs(got))
	}
	if got := e.claim([]string{"qb"}, 100, time.Minute, "w"); !sameIDSet(taskIDs(got), ids(qb)) {
		t.Fatalf("Claim(qb) returned %v, want %v", taskIDs(got), ids(qb))
	}
}

// Claim with Handlers takes only the tasks of those handlers, oldest due
// first within them; the tasks of other handlers stay PENDING as they
// were, whatever their due time, for a claimant that runs them.
func testClaimHandlers(t *testing.T, e *env) {
	mk := func(queue, handler string) store.NewTask {
		nt := task(queue)
		nt.Handler = handler
		return nt
	}
	// b's tasks are due first: a claim that skipped past them by reading
	// and leaving them would still pass the rest, not this order.
	var b, a, other []store.NewTask
	for range 3 {
		b = append(b, mk("q", "b"))
	}
	for range 3 {
		a = append(a, mk("q", "a"))
	}
	other = append(other, mk("q2", "a"), mk("q2", "c"))
	e.enqueue(b...)
	e.advance(time.Second)
	e.enqueue(a[0])
	e.advance(time.Second)
	e.enqueue(a[1], a[2])
	e.enqueue(other...)
	claim := func(queues, handlers []string, limit int) []*rdq.Task {
		t.Helper()
		got, err := e.s.Claim(e.ctx, store.ClaimParams{Queues: queues, Handlers: handlers, Limit: limit, Lease: time.Minute, WorkerID: "w", Now: e.at()})
		if err != nil {
			t.Fatalf("Claim(%v, handlers %v): %v", queues, handlers, err)
		}
		return got
	}
	if got := claim([]string{"q"}, []string{"a", "nope"}, 1); len(got) != 1 || got[0].ID != a[0].ID {
		t.Fatalf("Claim(q, handlers a, limit 1) returned %v, want the oldest task of a, %s", taskIDs(got), a[0].ID)
	}
	if got := claim([]string{"q"}, []string{"a"}, 10); !sameIDSet(taskIDs(got), []rdq.ID{a[1].ID, a[2].ID}) {
		t.Fatalf("Claim(q, handlers a) returned %v, want the other tasks of a, %v", taskIDs(got), []rdq.ID{a[1].ID, a[2].ID})
	}
	if got := claim([]string{"q"}, []string{"c"}, 10); len(got) != 0 {
		t.Fatalf("Claim(q, handlers c) returned %v, want none: q holds no task of c", taskIDs(got))
	}
	for _, nt := range b {
		got, _ := e.get(nt.ID)
		if got.Status != rdq.StatusPending || got.Attempts != 0 || got.LeaseToken != 0 {
			t.Fatalf("task %s of handler b after claims of handler a: %s, attempts %d, token %d; want PENDING, 0, 0 (untouched)", nt.ID, got.Status, got.Attempts, got.LeaseToken)
		}
	}
	if got := claim([]string{"q", "q2"}, []string{"b", "c"}, 10); !sameIDSet(taskIDs(got), []rdq.ID{b[0].ID, b[1].ID, b[2].ID, other[1].ID}) {
		t.Fatalf("Claim(q, q2, handlers b, c) returned %v, want the tasks of b and c", taskIDs(got))
	}
	if got := claim([]string{"q2"}, nil, 10); !sameIDSet(taskIDs(got), []rdq.ID{other[0].ID}) {
		t.Fatalf("Claim(q2, every handler) returned %v, want %s", taskIDs(got), other[0].ID)
	}
}

// Claim takes PENDING tasks only: an in-flight task whose lease expired
// belongs to ReclaimExpired, which records the lost execution.
func testClaimNeverInFlight(t *testing.T, e *env) {
	e.enqueue(task("q"))
	e.claimOne("q", time.Second, "w1")
	e.advance(time.Hour)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w2"); len(got) != 0 {
		t.Fatalf("Claim returned an in-flight task with an expired lease: %v", taskIDs(got))
	}
}

// Concurrent claimers never get the same task.
func testClaimConcurrent(t *testing.T, e *env) {
	const n, claimers = 200, 8
	e.enqueue(tasks("q", n)...)
	var (
		mu  sync.Mutex
		all []*rdq.Task
		wg  sync.WaitGroup
	)
	errs := make(chan error, claimers)
	for c := range claimers {
		wg.Go(func() {
			for {
				got, err := e.s.Claim(e.ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 7, Lease: time.Minute, WorkerID: fmt.Sprintf("w%d", c), Now: e.at()})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				all = append(all, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Claim: %v", err)
	}
	all = append(all, e.claim([]string{"q"}, n, time.Minute, "last")...)
	seen := map[rdq.ID]int{}
	for _, tk := range all {
		seen[tk.ID]++
		if seen[tk.ID] == 2 {
			t.Errorf("task %s claimed twice", tk.ID)
		}
	}
	eq(t, "distinct tasks claimed", len(seen), n)
}

// Every claim of a task gets a strictly greater token than any before:
// after a release, a retry, a reclaim.
func testTokensIncrease(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt)
	var tokens []int64
	note := func(tk *rdq.Task) *rdq.Task {
		t.Helper()
		if tk.ID != nt.ID {
			t.Fatalf("got task %s, want %s", tk.ID, nt.ID)
		}
		tokens = append(tokens, tk.LeaseToken)
		got, _ := e.get(nt.ID)
		eq(t, "Get LeaseToken after a claim", got.LeaseToken, tk.LeaseToken)
		return tk
	}
	tk := note(e.claimOne("q", time.Minute, "w"))
	wantErrs(t, "Release", e.release(lease(tk)), nil)
	tk = note(e.claimOne("q", time.Minute, "w"))
	e.mustFinish(retry(tk, 0, failure("boom"), "w", time.Millisecond))
	note(e.claimOne("q", 10*time.Second, "w"))
	e.advance(10 * time.Second)
	rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper")
	if len(rs) != 1 {
		t.Fatalf("ReclaimExpired returned %d tasks, want 1", len(rs))
	}
	tk = note(rs[0])
	e.mustFinish(store.Completion{Lease: lease(tk), Status: rdq.StatusPending})
	note(e.claimOne("q", time.Minute, "w"))
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("lease tokens %v do not strictly increase", tokens)
		}
	}
}

// A heartbeat moves the expiry to Extend from now: the task cannot be
// reclaimed at its old expiry, only at the new one.
func testHeartbeatExtends(t *testing.T, e *env) {
	e.enqueue(task("q"))
	t0 := e.now
	tk := e.claimOne("q", 10*time.Second, "w1")
	e.now = t0.Add(8 * time.Second)
	wantErrs(t, "Heartbeat", e.heartbeat(10*time.Second, lease(tk)), nil)
	got, _ := e.get(tk.ID)
	eqTime(t, "LeaseExpiresAt after heartbeat", got.LeaseExpiresAt, t0.Add(18*time.Second))
	eq(t, "LeaseToken after heartbeat", got.LeaseToken, tk.LeaseToken)
	eq(t, "Status after heartbeat", got.Status, rdq.StatusInFlight)

	for _, at := range []time.Duration{10 * time.Second, 18*time.Second - time.Millisecond} {
		e.now = t0.Add(at)
		if rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper"); len(rs) != 0 {
			t.Fatalf("ReclaimExpired at t0+%s took a task whose lease was extended to t0+18s", at)
		}
	}
	e.now = t0.Add(18 * time.Second)
	rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper")
	if len(rs) != 1 || rs[0].ID != tk.ID {
		t.Fatalf("ReclaimExpired at the extended expiry returned %v, want %s", taskIDs(rs), tk.ID)
	}
}

// Expiry alone does not invalidate a lease: until a reclaim takes the task,
// the holder's heartbeat renews it.
func testHeartbeatAfterExpiry(t *testing.T, e *env) {
	e.enqueue(task("q"))
	tk := e.claimOne("q", 5*time.Second, "w1")
	e.advance(time.Minute)
	wantErrs(t, "Heartbeat after expiry", e.heartbeat(5*time.Second, lease(tk)), nil)
	got, _ := e.get(tk.ID)
	eqTime(t, "LeaseExpiresAt", got.LeaseExpiresAt, e.now.Add(5*time.Second))
	if rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper"); len(rs) != 0 {
		t.Fatalf("ReclaimExpired took a task whose lease was just renewed")
	}
}

func testHeartbeatStale(t *testing.T, e *env) {
	e.enqueue(tasks("q", 4)...)
	claimed := e.claim([]string{"q"}, 4, 10*time.Second, "w1")
	if len(claimed) != 4 {
		t.Fatalf("claimed %d tasks, want 4", len(claimed))
	}
	a, b, c, d := claimed[0], claimed[1], claimed[2], claimed[3]
	wantErrs(t, "Release", e.release(lease(c)), nil)
	e.mustFinish(succeed(d, "w1", time.Millisecond))
	e.advance(5 * time.Second)
	errs := e.heartbeat(time.Minute,
		lease(a),
		store.Lease{ID: b.ID, Token: b.LeaseToken - 1}, // older token
		store.Lease{ID: b.ID, Token: b.LeaseToken + 1}, // not yet issued
		lease(c),                               // released
		lease(d),                               // finished
		store.Lease{ID: rdq.NewID(), Token: 1}, // no such task
	)
	wantErrs(t, "Heartbeat", errs, nil, store.ErrLeaseLost, store.ErrLeaseLost, store.ErrLeaseLost, store.ErrLeaseLost, store.ErrLeaseLost)
	ga, _ := e.get(a.ID)
	eqTime(t, "extended LeaseExpiresAt", ga.LeaseExpiresAt, e.now.Add(time.Minute))
	gb, _ := e.get(b.ID)
	eqTime(t, "LeaseExpiresAt after stale heartbeats", gb.LeaseExpiresAt, b.LeaseExpiresAt)
	eq(t, "LeaseToken after stale heartbeats", gb.LeaseToken, b.LeaseToken)
	gc, _ := e.get(c.ID)
	eq(t, "released task Status after a heartbeat", gc.Status, rdq.StatusPending)
	gd, _ := e.get(d.ID)
	eq(t, "finished task Status after a heartbeat", gd.Status, rdq.StatusSucceeded)
}

func testFinishSuccess(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt)
	e.advance(time.Second)
	tk := e.claimOne("q", time.Minute, "worker-a")
	e.advance(300 * time.Millisecond)
	e.mustFinish(succeed(tk, "worker-a", 250*time.Millisecond))
	got, atts := e.get(nt.ID)
	eq(t, "Status", got.Status, rdq.StatusSucceeded)
	eq(t, "Attempts", got.Attempts, 1)
	eq(t, "Life", got.Life, 0)
	eqTime(t, "FinishedAt", got.FinishedAt, e.now)
	zeroTime(t, "LeaseExpiresAt", got.LeaseExpiresAt)
	if !got.LastError.IsZero() {
		t.Errorf("LastError = %+v after a success without failures", got.LastError)
	}
	if len(atts) != 1 {
		t.Fatalf("%d attempts, want 1", len(atts))
	}
	checkAttempt(t, "attempt", atts[0], rdq.Attempt{
		TaskID: nt.ID, Number: 1, Life: 0, Outcome: rdq.OutcomeSuccess, WorkerID: "worker-a",
		LeaseToken: tk.LeaseToken, StartedAt: e.now.Add(-250 * time.Millisecond), FinishedAt: e.now,
	})
	if got := e.claim([]string{"q"}, 10, time.Minute, "w"); len(got) != 0 {
		t.Errorf("Claim returned a succeeded task")
	}
	e.advance(time.Hour)
	if got := e.reclaim([]string{"q"}, 10, time.Minute, "w"); len(got) != 0 {
		t.Errorf("ReclaimExpired returned a succeeded task")
	}
}

// A retry records the failure, returns the task to PENDING and makes it due
// exactly RetryIn later.
func testFinishRetry(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt)
	tk := e.claimOne("q", time.Minute, "w1")
	f1 := failure("timeout talking to 10.1.2.3 after 30s")
	e.mustFinish(retry(tk, 45*time.Second, f1, "w1", 20*time.Millisecond))
	retriedAt := e.now
	got, atts := e.get(nt.ID)
	eq(t, "Status", got.Status, rdq.StatusPending)
	eq(t, "Attempts", got.Attempts, 1)
	eqTime(t, "NextAttemptAt", got.NextAttemptAt, retriedAt.Add(45*time.Second))
	eq(t, "LastError", got.LastError, summaryOf(f1))
	zeroTime(t, "FinishedAt", got.FinishedAt)
	zeroTime(t, "LeaseExpiresAt", got.LeaseExpiresAt)
	if len(atts) != 1 {
		t.Fatalf("%d attempts, want 1", len(atts))
	}
	checkAttempt(t, "attempt 1", atts[0], rdq.Attempt{
		TaskID: nt.ID, Number: 1, Outcome: rdq.OutcomeRetryableFailure, ErrorType: f1.Type, Message: f1.Message,
		Stack: f1.Stack, WorkerID: "w1", LeaseToken: tk.LeaseToken, StartedAt: retriedAt.Add(-20 * time.Millisecond), FinishedAt: retriedAt,
	})

	e.now = retriedAt.Add(45*time.Second - time.Millisecond)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w2"); len(got) != 0 {
		t.Fatalf("Claim 1ms before RetryIn elapsed returned the task")
	}
	e.now = retriedAt.Add(45 * time.Second)
	tk2 := e.claimOne("q", time.Minute, "w2")
	eq(t, "Attempts when claimed again", tk2.Attempts, 1)
	f2 := failure("second failure")
	e.mustFinish(retry(tk2, 0, f2, "w2", time.Millisecond))
	got, atts = e.get(nt.ID)
	eq(t, "Attempts after two failures", got.Attempts, 2)
	eq(t, "LastError after two failures", got.LastError, summaryOf(f2))
	eqTime(t, "NextAttemptAt with RetryIn 0", got.NextAttemptAt, e.now)
	checkNumbers(t, "attempts", atts)
	if len(atts) != 2 || atts[1].LeaseToken != tk2.LeaseToken || atts[1].WorkerID != "w2" {
		t.Fatalf("attempts = %+v, want a second one by w2 with token %d", atts, tk2.LeaseToken)
	}
}

func testFinishDead(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt)
	tk := e.claimOne("q", time.Minute, "w1")
	f := failure("invalid account number 1234")
	e.advance(2 * time.Second)
	e.mustFinish(kill(tk, f, "w1", time.Second))
	got, atts := e.get(nt.ID)
	eq(t, "Status", got.Status, rdq.StatusDead)
	eq(t, "Attempts", got.Attempts, 1)
	eqTime(t, "FinishedAt", got.FinishedAt, e.now)
	zeroTime(t, "LeaseExpiresAt", got.LeaseExpiresAt)
	eq(t, "LastError", got.LastError, summaryOf(f))
	if len(atts) != 1 {
		t.Fatalf("%d attempts, want 1", len(atts))
	}
	checkAttempt(t, "attempt", atts[0], rdq.Attempt{
		TaskID: nt.ID, Number: 1, Outcome: rdq.OutcomePermanentFailure, ErrorType: f.Type, Message: f.Message,
		Stack: f.Stack, WorkerID: "w1", LeaseToken: tk.LeaseToken, StartedAt: e.now.Add(-time.Second), FinishedAt: e.now,
	})
	e.advance(time.Hour)
	if got := e.claim([]string{"q"}, 10, time.Minute, "w"); len(got) != 0 {
		t.Errorf("Claim returned a dead task")
	}
}

// A stale token changes nothing and fails only its own item.
func testFinishStale(t *testing.T, e *env) {
	e.enqueue(tasks("q", 3)...)
	claimed := e.claim([]string{"q"}, 3, time.Minute, "w1")
	if len(claimed) != 3 {
		t.Fatalf("claimed %d tasks, want 3", len(claimed))
	}
	a, b, c := claimed[0], claimed[1], claimed[2]
	f := failure("bad")
	errs := e.finish(
		succeed(a, "w1", time.Millisecond),
		store.Completion{Lease: store.Lease{ID: b.ID, Token: b.LeaseToken - 1}, Status: rdq.StatusSucceeded,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w1"}},
		kill(c, f, "w1", time.Millisecond),
		store.Completion{Lease: store.Lease{ID: b.ID, Token: b.LeaseToken + 1}, Status: rdq.StatusDead,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: "w1"}},
		store.Completion{Lease: store.Lease{ID: rdq.NewID(), Token: 1}, Status: rdq.StatusSucceeded,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w1"}},
	)
	wantErrs(t, "Finish", errs, nil, store.ErrLeaseLost, nil, store.ErrLeaseLost, store.ErrLeaseLost)
	eq(t, "a Status", e.status(a.ID), rdq.StatusSucceeded)
	eq(t, "c Status", e.status(c.ID), rdq.StatusDead)
	gb, atts := e.get(b.ID)
	eq(t, "b Status", gb.Status, rdq.StatusInFlight)
	eq(t, "b Attempts", gb.Attempts, 0)
	eq(t, "b attempt rows", len(atts), 0)
	eq(t, "b LeaseToken", gb.LeaseToken, b.LeaseToken)

	// Finishing twice: the second finish is stale and records nothing.
	wantErrs(t, "second Finish of a", e.finish(retry(a, 0, f, "w1", time.Millisecond)), store.ErrLeaseLost)
	ga, atts := e.get(a.ID)
	eq(t, "a Status after a second finish", ga.Status, rdq.StatusSucceeded)
	eq(t, "a attempts after a second finish", len(atts), 1)
	// Release with a stale token changes nothing either.
	wantErrs(t, "Release of a finished task", e.release(lease(c)), store.ErrLeaseLost)
	eq(t, "c Status after Release", e.status(c.ID), rdq.StatusDead)
}

// Failure text comes from arbitrary errors (a callback's binary response
// body, say): a NUL byte or bytes that are not UTF-8 in a message or stack
// must neither fail the batch nor lose the attempt. A store may replace
// what it cannot keep, but records the rest of the text.
func testFinishArbitraryText(t *testing.T, e *env) {
	weird := rdq.Failure{
		Type:    "*errors.errorString",
		Message: "before\x00middle\xff\xfe\xc3(after",
		Stack:   "goroutine 1 [running]:\x00\xffmain.main()",
	}
	weird.Fingerprint = rdq.Fingerprint(weird.Type, weird.Message)
	first := task("q")
	first.FirstFailure = &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: weird, WorkerID: "producer"}
	normal := task("q")
	e.enqueue(first, normal)
	claimed := e.claimIDs("q", time.Minute, "w", first.ID, normal.ID)
	e.mustFinish(
		retry(claimed[first.ID], time.Second, weird, "w", time.Millisecond),
		succeed(claimed[normal.ID], "w", time.Millisecond),
	)
	eq(t, "Status of the task finished beside it", e.status(normal.ID), rdq.StatusSucceeded)
	got, atts := e.get(first.ID)
	eq(t, "Status", got.Status, rdq.StatusPending)
	eq(t, "Attempts", got.Attempts, 2)
	if len(atts) != 2 {
		t.Fatalf("%d attempts, want 2", len(atts))
	}
	for _, text := range []struct{ what, got string }{
		{"LastError.Message", got.LastError.Message},
		{"first failure Message", atts[0].Message},
		{"attempt Message", atts[1].Message},
	} {
		if !strings.HasPrefix(text.got, "before") || !strings.Contains(text.got, "middle") || !strings.HasSuffix(text.got, "(after") {
			t.Errorf("%s = %q, want the text of %q (unstorable bytes may be replaced)", text.what, text.got, weird.Message)
		}
	}
	if !strings.Contains(atts[1].Stack, "main.main()") {
		t.Errorf("attempt Stack = %q, want the text of %q", atts[1].Stack, weird.Stack)
	}
	eq(t, "LastError.Fingerprint", got.LastError.Fingerprint, weird.Fingerprint)
}

// One bad completion in a batch gets its own error and the others are
// applied: an invalid status is an error wrapping rdq.ErrInvalid, and error
// types and fingerprints of any length are cut to rdq.MaxErrorTypeLength
// rather than refused (they are indexed for the DLQ's filters).
func testFinishOneBadItem(t *testing.T, e *env) {
	a, b, c, d := task("q"), task("q"), task("q"), task("q")
	e.enqueue(a, b, c, d)
	claimed := e.claimIDs("q", time.Minute, "w", a.ID, b.ID, c.ID, d.ID)
	huge := rdq.Failure{Type: strings.Repeat("t", 1<<20), Message: "a one-mebibyte error type", Fingerprint: strings.Repeat("f", 1<<20)}
	bad := succeed(claimed[b.ID], "w", time.Millisecond)
	bad.Status = "FINISHED"
	hugeDead := retry(claimed[c.ID], 0, huge, "w", time.Millisecond)
	hugeDead.Status, hugeDead.RetryIn = rdq.StatusDead, 0
	errs := e.finish(succeed(claimed[a.ID], "w", time.Millisecond), bad, hugeDead, succeed(claimed[d.ID], "w", time.Millisecond))
	for _, i := range []int{0, 2, 3} {
		if errs[i] != nil {
			t.Errorf("completion %d: %v, want nil beside a bad completion", i, errs[i])
		}
	}
	if !errors.Is(errs[1], rdq.ErrInvalid) {
		t.Errorf("completion with status FINISHED: %v, want an error wrapping rdq.ErrInvalid", errs[1])
	}
	eq(t, "Status of a", e.status(a.ID), rdq.StatusSucceeded)
	eq(t, "Status of the bad one", e.status(b.ID), rdq.StatusInFlight)
	eq(t, "Status of d", e.status(d.ID), rdq.StatusSucceeded)
	got, atts := e.get(c.ID)
	eq(t, "Status of the huge one", got.Status, rdq.StatusDead)
	for what, s := range map[string]string{"LastError.Type": got.LastError.Type, "LastError.Fingerprint": got.LastError.Fingerprint, "attempt ErrorType": atts[len(atts)-1].ErrorType} {
		if len(s) > rdq.MaxErrorTypeLength || len(s) < rdq.MaxErrorTypeLength/2 {
			t.Errorf("%s is %d bytes, want at most rdq.MaxErrorTypeLength (%d) and not emptied", what, len(s), rdq.MaxErrorTypeLength)
		}
	}
}

// Expiry alone does not invalidate a lease: the holder can still finish
// while no reclaim has taken the task.
func testFinishAfterExpiry(t *testing.T, e *env) {
	e.enqueue(task("q"))
	tk := e.claimOne("q", 5*time.Second, "w1")
	e.advance(time.Minute)
	e.mustFinish(succeed(tk, "w1", time.Minute))
	eq(t, "Status", e.status(tk.ID), rdq.StatusSucceeded)
}

// Release returns the task to PENDING, due now, without counting an
// attempt; the next claim gets a new token and the old one is stale.
func testRelease(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt, task("q"))
	claimed := e.claim([]string{"q"}, 2, 30*time.Second, "w1")
	if len(claimed) != 2 {
		t.Fatalf("claimed %d, want 2", len(claimed))
	}
	tk, other := claimed[0], claimed[1]
	if tk.ID != nt.ID {
		tk, other = other, tk
	}
	e.advance(5 * time.Second)
	errs := e.release(lease(tk), store.Lease{ID: other.ID, Token: other.LeaseToken - 1})
	wantErrs(t, "Release", errs, nil, store.ErrLeaseLost)
	got, atts := e.get(nt.ID)
	eq(t, "Status", got.Status, rdq.StatusPending)
	eq(t, "Attempts", got.Attempts, 0)
	eq(t, "attempt rows", len(atts), 0)
	eqTime(t, "NextAttemptAt", got.NextAttemptAt, e.now)
	zeroTime(t, "LeaseExpiresAt", got.LeaseExpiresAt)
	eq(t, "other Status after a stale release", e.status(other.ID), rdq.StatusInFlight)

	again := e.claimOne("q", 30*time.Second, "w2")
	eq(t, "claimed again", again.ID, nt.ID)
	if again.LeaseToken <= tk.LeaseToken {
		t.Errorf("token after release %d, want > %d", again.LeaseToken, tk.LeaseToken)
	}
	wantErrs(t, "Release with the old token", e.release(lease(tk)), store.ErrLeaseLost)
	wantErrs(t, "Heartbeat with the old token", e.heartbeat(time.Minute, lease(tk)), store.ErrLeaseLost)
	wantErrs(t, "Finish with the old token", e.finish(succeed(tk, "w1", 0)), store.ErrLeaseLost)
	eq(t, "Status after stale calls", e.status(nt.ID), rdq.StatusInFlight)
}

// ReclaimExpired records the lost execution as a LEASE_EXPIRED attempt of
// its worker and token, leases the task to the reclaimer with a new token,
// and the lost execution's token is stale from then on.
func testReclaim(t *testing.T, e *env) {
	lost := task("q")
	e.enqueue(lost)
	t0 := e.now
	tk := e.claimOne("q", 10*time.Second, "w-lost")
	live := task("q")
	e.enqueue(live)
	e.claimOne("q", time.Hour, "w-live")
	// A heartbeat does not move the start of the execution: the lost
	// attempt starts when the task was claimed.
	e.now = t0.Add(2 * time.Second)
	wantErrs(t, "Heartbeat", e.heartbeat(8*time.Second, lease(tk)), nil)

	e.now = t0.Add(10*time.Second - time.Millisecond)
	if rs := e.reclaim(nil, 10, time.Minute, "reaper"); len(rs) != 0 {
		t.Fatalf("ReclaimExpired before expiry returned %v", taskIDs(rs))
	}
	e.now = t0.Add(10 * time.Second)
	rs := e.reclaim(nil, 10, 20*time.Second, "reaper")
	if len(rs) != 1 || rs[0].ID != lost.ID {
		t.Fatalf("ReclaimExpired at expiry returned %v, want %s", taskIDs(rs), lost.ID)
	}
	le := rdq.LeaseExpiredFailure()
	r := rs[0]
	for what, got := range map[string]*rdq.Task{"reclaimed": r, "Get after reclaim": e.load(lost.ID)} {
		eq(t, what+" Status", got.Status, rdq.StatusInFlight)
		eq(t, what+" LeaseOwner", got.LeaseOwner, "reaper")
		eqTime(t, what+" LeaseExpiresAt", got.LeaseExpiresAt, e.now.Add(20*time.Second))
		eq(t, what+" Attempts", got.Attempts, 1)
		eq(t, what+" LastError", got.LastError, summaryOf(le))
		if got.LeaseToken <= tk.LeaseToken {
			t.Errorf("%s LeaseToken = %d, want > %d", what, got.LeaseToken, tk.LeaseToken)
		}
	}
	eqBytes(t, "reclaimed Payload", r.Payload, lost.Payload)
	_, atts := e.get(lost.ID)
	if len(atts) != 1 {
		t.Fatalf("%d attempts after reclaim, want 1", len(atts))
	}
	checkAttempt(t, "lease-expired attempt", atts[0], rdq.Attempt{
		TaskID: lost.ID, Number: 1, Outcome: rdq.OutcomeLeaseExpired, ErrorType: le.Type, Message: le.Message,
		WorkerID: "w-lost", LeaseToken: tk.LeaseToken, StartedAt: t0, FinishedAt: e.now,
	})
	eq(t, "live task Status", e.status(live.ID), rdq.StatusInFlight)

	// The lost execution comes back: its token is stale everywhere.
	wantErrs(t, "Heartbeat with the lost token", e.heartbeat(time.Minute, lease(tk)), store.ErrLeaseLost)
	wantErrs(t, "Finish with the lost token", e.finish(succeed(tk, "w-lost", time.Second)), store.ErrLeaseLost)
	wantErrs(t, "Release with the lost token", e.release(lease(tk)), store.ErrLeaseLost)
	got, atts := e.get(lost.ID)
	eq(t, "Status after stale calls", got.Status, rdq.StatusInFlight)
	eq(t, "LeaseToken after stale calls", got.LeaseToken, r.LeaseToken)
	eq(t, "attempts after stale calls", len(atts), 1)

	// The reclaimer decides: retry, with no attempt of its own.
	e.mustFinish(store.Completion{Lease: lease(r), Status: rdq.StatusPending, RetryIn: 3 * time.Second})
	got, atts = e.get(lost.ID)
	eq(t, "Status after the decision", got.Status, rdq.StatusPending)
	eq(t, "Attempts after the decision", got.Attempts, 1)
	eq(t, "attempts after the decision", len(atts), 1)
	eqTime(t, "NextAttemptAt after the decision", got.NextAttemptAt, e.now.Add(3*time.Second))
	e.advance(3 * time.Second)
	next := e.claimOne("q", time.Minute, "w2")
	e.mustFinish(succeed(next, "w2", time.Millisecond))
	_, atts = e.get(lost.ID)
	checkNumbers(t, "attempts", atts)
	if len(atts) != 2 || atts[1].Outcome != rdq.OutcomeSuccess || atts[1].LeaseToken != next.LeaseToken {
		t.Fatalf("attempts = %+v, want a success with token %d after the lease-expired one", atts, next.LeaseToken)
	}
}

func testReclaimQueuesLimit(t *testing.T, e *env) {
	e.enqueue(append(tasks("qa", 3), tasks("qb", 2)...)...)
	e.claim([]string{"qa", "qb"}, 10, time.Second, "w")
	e.enqueue(task("qc")) // pending, never reclaimed
	e.advance(2 * time.Second)
	got := e.reclaim([]string{"qb"}, 10, time.Minute, "r")
	if len(got) != 2 {
		t.Fatalf("ReclaimExpired(qb) returned %d tasks, want 2", len(got))
	}
	for _, tk := range got {
		eq(t, "reclaimed queue", tk.Queue, "qb")
	}
	if got := e.reclaim(nil, 2, time.Minute, "r"); len(got) != 2 {
		t.Fatalf("ReclaimExpired(all, limit 2) returned %d, want 2", len(got))
	}
	got = e.reclaim(nil, 10, time.Minute, "r")
	if len(got) != 1 || got[0].Queue != "qa" {
		t.Fatalf("ReclaimExpired(all) returned %v, want the last qa task", taskIDs(got))
	}
	if got := e.reclaim(nil, 10, time.Minute, "r"); len(got) != 0 {
		t.Fatalf("ReclaimExpired returned %d tasks, all are leased or pending", len(got))
	}
}

// Concurrent reclaimers never take the same lost execution twice, and each
// is recorded once.
func testReclaimConcurrent(t *testing.T, e *env) {
	const n, reclaimers = 60, 6
	e.enqueue(tasks("q", n)...)
	if got := e.claim([]string{"q"}, n, time.Second, "w"); len(got) != n {
		t.Fatalf("claimed %d, want %d", len(got), n)
	}
	e.advance(time.Second)
	var (
		mu  sync.Mutex
		all []*rdq.Task
		wg  sync.WaitGroup
	)
	errs := make(chan error, reclaimers)
	for r := range reclaimers {
		wg.Go(func() {
			for {
				got, err := e.s.ReclaimExpired(e.ctx, store.ReclaimParams{Queues: []string{"q"}, Limit: 4, Lease: time.Hour, WorkerID: fmt.Sprintf("r%d", r), Now: e.at()})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				all = append(all, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent ReclaimExpired: %v", err)
	}
	all = append(all, e.reclaim([]string{"q"}, n, time.Hour, "last")...)
	seen := map[rdq.ID]bool{}
	for _, tk := range all {
		if seen[tk.ID] {
			t.Errorf("task %s reclaimed twice", tk.ID)
		}
		seen[tk.ID] = true
	}
	eq(t, "distinct tasks reclaimed", len(seen), n)
	for id := range seen {
		got, atts := e.get(id)
		if len(atts) != 1 || got.Attempts != 1 {
			t.Fatalf("task %s: %d attempt rows, Attempts %d; want exactly one lost execution", id, len(atts), got.Attempts)
		}
	}
}

// After a reclaim the reclaimer may dead-letter the task without an attempt
// of its own; the lease-expired failure is its last error.
func testReclaimThenDead(t *testing.T, e *env) {
	e.enqueue(task("q"))
	tk := e.claimOne("q", time.Second, "w")
	e.advance(time.Second)
	r := e.reclaim([]string{"q"}, 1, time.Minute, "reaper")
	if len(r) != 1 {
		t.Fatalf("reclaimed %d, want 1", len(r))
	}
	e.mustFinish(store.Completion{Lease: lease(r[0]), Status: rdq.StatusDead})
	got, atts := e.get(tk.ID)
	eq(t, "Status", got.Status, rdq.StatusDead)
	eq(t, "Attempts", got.Attempts, 1)
	eqTime(t, "FinishedAt", got.FinishedAt, e.now)
	eq(t, "LastError", got.LastError, summaryOf(rdq.LeaseExpiredFailure()))
	if len(atts) != 1 || atts[0].Outcome != rdq.OutcomeLeaseExpired {
		t.Fatalf("attempts = %+v, want one LEASE_EXPIRED", atts)
	}
}

func testRedriveDeadOnly(t *testing.T, e *env) {
	// A task that failed twice, then died.
	nt := task("q")
	e.enqueue(nt)
	tk := e.claimOne("q", time.Minute, "w")
	e.mustFinish(retry(tk, 0, failure("first"), "w", time.Millisecond))
	tk = e.claimOne("q", time.Minute, "w")
	f := failure("fatal: schema mismatch")
	e.mustFinish(kill(tk, f, "w", time.Millisecond))
	dead, hist := e.get(nt.ID)

	pending := task("q")
	pending.Delay = time.Hour
	e.enqueue(pending)
	succeeded := e.makeSucceeded(task("q2"))[0]
	inflight := task("q3")
	e.enqueue(inflight)
	e.claimOne("q3", time.Minute, "w")

	e.advance(time.Minute)
	errs := e.redrive(store.RedriveParams{
		IDs:   []rdq.ID{nt.ID, pending.ID, rdq.NewID(), succeeded, inflight.ID},
		Delay: 30 * time.Second, Actor: "alice", Reason: "fixed the schema",
	})
	wantErrs(t, "Redrive", errs, nil, store.ErrNotDead, store.ErrNotFound, store.ErrNotDead, store.ErrNotDead)

	got, atts := e.get(nt.ID)
	eq(t, "Status", got.Status, rdq.StatusPending)
	eq(t, "Attempts", got.Attempts, 0)
	eq(t, "Life", got.Life, 1)
	eqTime(t, "NextAttemptAt", got.NextAttemptAt, e.now.Add(30*time.Second))
	zeroTime(t, "FinishedAt", got.FinishedAt)
	eq(t, "LastError (kept)", got.LastError, dead.LastError)
	eqBytes(t, "Payload", got.Payload, nt.Payload)
	if len(atts) != len(hist) {
		t.Fatalf("history has %d attempts after redrive, want the %d kept", len(atts), len(hist))
	}
	for i := range hist {
		checkAttempt(t, fmt.Sprintf("kept attempt %d", i+1), atts[i], hist[i])
	}
	eq(t, "pending Status", e.status(pending.ID), rdq.StatusPending)
	eq(t, "succeeded Status", e.status(succeeded), rdq.StatusSucceeded)
	eq(t, "in-flight Status", e.status(inflight.ID), rdq.StatusInFlight)

	// A second redrive of the now pending task is refused.
	wantErrs(t, "Redrive of a redriven task", e.redrive(store.RedriveParams{IDs: []rdq.ID{nt.ID}}), store.ErrNotDead)

	// The new life continues the attempt numbers.
	e.advance(30 * time.Second)
	tk = e.claimOne("q", time.Minute, "w")
	eq(t, "claimed Attempts", tk.Attempts, 0)
	eq(t, "claimed Life", tk.Life, 1)
	e.mustFinish(retry(tk, time.Second, failure("again"), "w", time.Millisecond))
	got, atts = e.get(nt.ID)
	eq(t, "Attempts in the new life", got.Attempts, 1)
	checkNumbers(t, "attempts across lives", atts)
	if len(atts) != 3 || atts[2].Life != 1 {
		t.Fatalf("attempts = %v, want 3 with the last in life 1", numbers(atts))
	}
}

func testRedriveMaxLife(t *testing.T, e *env) {
	ids := e.makeDead(func(int) rdq.Failure { return failure("x") }, task("q"))
	id := ids[0]
	wantErrs(t, "Redrive life 0, MaxLife 1", e.redrive(store.RedriveParams{IDs: ids, MaxLife: 1}), nil)
	tk := e.claimOne("q", time.Minute, "w")
	e.mustFinish(kill(tk, failure("x"), "w", 0))

	wantErrs(t, "Redrive life 1, MaxLife 1", e.redrive(store.RedriveParams{IDs: ids, MaxLife: 1}), store.ErrRedriveLimit)
	got, _ := e.get(id)
	eq(t, "Status at the limit", got.Status, rdq.StatusDead)
	eq(t, "Life at the limit", got.Life, 1)

	wantErrs(t, "Redrive life 1, MaxLife 2", e.redrive(store.RedriveParams{IDs: ids, MaxLife: 2}), nil)
	tk = e.claimOne("q", time.Minute, "w")
	eq(t, "Life", tk.Life, 2)
	e.mustFinish(kill(tk, failure("x"), "w", 0))
	wantErrs(t, "Redrive life 2, no MaxLife", e.redrive(store.RedriveParams{IDs: ids}), nil)
	eq(t, "Life without a limit", e.load(id).Life, 3)
}

func testRedrivePayload(t *testing.T, e *env) {
	ids := e.makeDead(func(int) rdq.Failure { return failure("bad payload") }, task("q"), task("q"))
	before0, _ := e.get(ids[0])
	before1, _ := e.get(ids[1])

	_, err := e.redriver().Redrive(e.ctx, store.RedriveParams{IDs: ids, Payload: []byte("x"), Now: e.at()})
	if !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("Redrive of two tasks with a payload: error %v, want one wrapping rdq.ErrInvalid", err)
	}
	for i, id := range ids {
		eq(t, fmt.Sprintf("task %d Status after a refused redrive", i), e.status(id), rdq.StatusDead)
	}

	fixed := []byte(`{"n":1,"fixed":true}`)
	wantErrs(t, "Redrive with payload", e.redrive(store.RedriveParams{IDs: ids[:1], Payload: fixed}), nil)
	got, _ := e.get(ids[0])
	eqBytes(t, "edited Payload", got.Payload, fixed)
	eq(t, "Status", got.Status, rdq.StatusPending)
	eq(t, "ContentType", got.ContentType, before0.ContentType)
	eq(t, "Handler", got.Handler, before0.Handler)

	// An empty, non-nil payload replaces too; nil keeps the payload.
	wantErrs(t, "Redrive with an empty payload", e.redrive(store.RedriveParams{IDs: ids[1:], Payload: []byte{}}), nil)
	got, _ = e.get(ids[1])
	if len(got.Payload) != 0 {
		t.Errorf("Payload after redrive with an empty payload = %q (was %q), want empty", got.Payload, before1.Payload)
	}
	tk := e.claimIDs("q", time.Minute, "w", ids[0])[ids[0]]
	eqBytes(t, "claimed Payload", tk.Payload, fixed)
	e.mustFinish(kill(tk, failure("x"), "w", 0))
	wantErrs(t, "Redrive without payload", e.redrive(store.RedriveParams{IDs: ids[:1]}), nil)
	got, _ = e.get(ids[0])
	eqBytes(t, "Payload after a redrive without payload", got.Payload, fixed)
}

func testRedriveSpread(t *testing.T, e *env) {
	const n = 30
	ids := e.makeDead(func(int) rdq.Failure { return failure("x") }, tasks("q", n)...)
	e.advance(time.Minute)
	wantErrs(t, "Redrive", e.redrive(store.RedriveParams{IDs: ids, Delay: 10 * time.Second, Spread: time.Minute}), make([]error, n)...)
	lo, hi := e.now.Add(10*time.Second), e.now.Add(70*time.Second)
	distinct := map[time.Time]bool{}
	for _, id := range ids {
		got, _ := e.get(id)
		if got.NextAttemptAt.Before(lo) || got.NextAttemptAt.After(hi) {
			t.Errorf("NextAttemptAt = now+%s, want in [now+10s, now+70s)", got.NextAttemptAt.Sub(e.now))
		}
		distinct[got.NextAttemptAt] = true
	}
	if len(distinct) < 2 {
		t.Errorf("%d tasks redriven with a 1m spread are all due at the same instant", n)
	}
}

// Regression: a redriven task whose lease then expires is reclaimed with a
// LEASE_EXPIRED attempt numbered after its whole history (not from the
// reset attempt count), and then finishes normally.
func testRedriveThenLeaseExpiry(t *testing.T, e *env) {
	nt := task("q")
	e.enqueue(nt)
	tk := e.claimOne("q", time.Minute, "w")
	e.mustFinish(retry(tk, 0, failure("one"), "w", 0))
	tk = e.claimOne("q", time.Minute, "w")
	e.mustFinish(kill(tk, failure("two"), "w", 0))
	wantErrs(t, "Redrive", e.redrive(store.RedriveParams{IDs: []rdq.ID{nt.ID}}), nil)

	claimedAt := e.now
	tk = e.claimOne("q", 10*time.Second, "w-crashed")
	e.advance(10 * time.Second)
	rs := e.reclaim([]string{"q"}, 10, time.Minute, "reaper")
	if len(rs) != 1 {
		t.Fatalf("ReclaimExpired returned %d tasks, want 1", len(rs))
	}
	got, atts := e.get(nt.ID)
	eq(t, "Attempts after reclaim", got.Attempts, 1)
	eq(t, "Life after reclaim", got.Life, 1)
	if len(atts) != 3 {
		t.Fatalf("%d attempts, want 3", len(atts))
	}
	le := rdq.LeaseExpiredFailure()
	checkAttempt(t, "lease-expired attempt", atts[2], rdq.Attempt{
		TaskID: nt.ID, Number: 3, Life: 1, Outcome: rdq.OutcomeLeaseExpired, ErrorType: le.Type, Message: le.Message,
		WorkerID: "w-crashed", LeaseToken: tk.LeaseToken, StartedAt: claimedAt, FinishedAt: e.now,
	})

	e.mustFinish(store.Completion{Lease: lease(rs[0]), Status: rdq.StatusPending})
	tk = e.claimOne("q", time.Minute, "w")
	e.mustFinish(succeed(tk, "w", 0))
	got, atts = e.get(nt.ID)
	eq(t, "Status", got.Status, rdq.StatusSucceeded)
	eq(t, "Attempts", got.Attempts, 2)
	checkNumbers(t, "attempts", atts)
	if len(atts) != 4 || atts[3].Outcome != rdq.OutcomeSuccess || atts[3].Life != 1 {
		t.Fatalf("attempts = %+v, want a 4th, successful, in life 1", atts)
	}
}

func testGetNotFound(t *testing.T, e *env) {
	e.enqueue(task("q"))
	e.wantNotFound(rdq.NewID())
	if _, _, err := e.s.Get(e.ctx, rdq.ID{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(zero ID) error = %v, want ErrNotFound", err)
	}
}

// PurgeSucceeded deletes only succeeded tasks that finished more than
// OlderThan ago, at most Limit per call, with their attempts.
func testPurgeSucceeded(t *testing.T, e *env) {
	t0 := e.now
	old := e.makeSucceeded(tasks("q", 3)...)
	dead := e.makeDead(func(int) rdq.Failure { return failure("x") }, task("q"))[0]
	e.now = t0.Add(30 * time.Minute)
	recent := e.makeSucceeded(task("q2"))[0]
	pending := task("q")
	e.enqueue(pending)
	inflight := task("q3")
	e.enqueue(inflight)
	e.claimOne("q3", time.Second, "w")

	purge := func(olderThan time.Duration, limit int) int64 {
		t.Helper()
		n, err := e.s.PurgeSucceeded(e.ctx, store.PurgeSucceededParams{OlderThan: olderThan, Limit: limit, Actor: "janitor", Now: e.at()})
		if err != nil {
			t.Fatalf("PurgeSucceeded: %v", err)
		}
		return n
	}
	e.now = t0.Add(time.Hour)
	var counts []int64
	for range 4 {
		counts = append(counts, purge(45*time.Minute, 2))
	}
	if !slices.Equal(counts, []int64{2, 1, 0, 0}) {
		t.Fatalf("PurgeSucceeded counts with limit 2 = %v, want [2 1 0 0]", counts)
	}
	for _, id := range old {
		e.wantNotFound(id)
	}
	for what, id := range map[string]rdq.ID{"recent": recent, "dead": dead, "pending": pending.ID, "in-flight": inflight.ID} {
		if _, _, err := e.s.Get(e.ctx, id); err != nil {
			t.Errorf("%s task after purge: %v", what, err)
		}
	}
	e.now = t0.Add(90*time.Minute + time.Millisecond)
	if n := purge(time.Hour, 10); n != 1 {
		t.Fatalf("PurgeSucceeded of the recent task = %d, want 1", n)
	}
	e.wantNotFound(recent)

	if a, ok := store.AdminOf(e.s); ok {
		entries, err := a.ListAudit(e.ctx, store.ListAuditParams{Action: "retention", Limit: 100})
		if err != nil {
			t.Fatalf("ListAudit: %v", err)
		}
		var got []int64
		for _, en := range entries {
			got = append(got, en.Count)
			eq(t, "retention audit Actor", en.Actor, "janitor")
		}
		if !slices.Equal(got, []int64{1, 1, 2}) {
			t.Errorf("retention audit counts (newest first) = %v, want [1 1 2]: one entry per purge that deleted something", got)
		}
	}
}

// testNotifications checks that a Notifier delivers a hint for a queue after
// an enqueue and closes the channel when its context is done.
func testNotifications(t *testing.T, h Harness) {
	e := newEnv(t, h)
	n, ok := store.NotifierOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.Notifier", e.s)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := n.Notifications(ctx)
	if err != nil {
		t.Fatalf("Notifications: %v", err)
	}
	// Hints may be dropped, and the subscription may still be starting:
	// keep enqueueing until one arrives.
	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	if _, err := e.s.Enqueue(e.ctx, store.EnqueueParams{Tasks: []store.NewTask{task("notify-q")}}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
wait:
	for {
		select {
		case q, ok := <-ch:
			if !ok {
				t.Fatalf("notification channel closed while its context is live")
			}
			if q == "notify-q" {
				break wait
			}
		case <-tick.C:
			if _, err := e.s.Enqueue(e.ctx, store.EnqueueParams{Tasks: []store.NewTask{task("notify-q")}}); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
		case <-deadline:
			t.Fatalf("no notification for queue notify-q within 15s of enqueueing into it")
		}
	}
	cancel()
	closed := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-closed:
			t.Fatalf("notification channel not closed within 10s of its context being cancelled")
		}
	}
}
