package storetest

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// The read capabilities of an operator's console: store.NotDueCounter,
// store.WaitingCounter, store.GroupOriginReader, store.DeadHistogrammer and
// store.DeadGroupKeyer. Each test compares the
// store's answer with what the test made.

// testNotDueCounts checks store.NotDueCounter: per queue, the PENDING tasks
// due after the given time (delayed, retrying, held by a pause), never the
// due, running or finished ones, judged by the Now override or the store's
// clock.
func testNotDueCounts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	nd, ok := store.NotDueCounterOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.NotDueCounter", e.s)
	}
	counts := func(now *time.Time) map[string]int64 {
		t.Helper()
		got, err := nd.NotDueCounts(e.ctx, now)
		if err != nil {
			t.Fatalf("NotDueCounts: %v", err)
		}
		return got
	}
	want := func(when string, now *time.Time, want map[string]int64) {
		t.Helper()
		if got := counts(now); !maps.Equal(got, want) {
			t.Errorf("NotDueCounts %s = %v, want %v", when, got, want)
		}
	}
	if got := counts(e.at()); len(got) != 0 {
		t.Fatalf("NotDueCounts of an empty store = %v, want none", got)
	}

	// Queue a: two tasks delayed by 10 and 20 minutes, one retrying in 30
	// minutes, one due, one running, one succeeded and one dead. Queue b:
	// one task delayed by an hour. Queue c: only due tasks.
	delayed := func(queue string, d time.Duration) store.NewTask {
		nt := task(queue)
		nt.Delay = d
		return nt
	}
	e.enqueue(delayed("a", 10*time.Minute), delayed("a", 20*time.Minute), delayed("b", time.Hour))
	e.makeSucceeded(task("a"))
	e.makeDead(func(int) rdq.Failure { return failure("gone") }, task("a"))
	e.enqueue(task("a"))
	e.claimOne("a", time.Hour, "w") // running
	e.enqueue(task("a"))
	retrying := e.claimOne("a", time.Hour, "w")
	e.mustFinish(retry(retrying, 30*time.Minute, failure("later"), "w", time.Millisecond))
	e.enqueue(append(tasks("c", 3), task("a"))...)
	e.advance(time.Minute)

	start := e.now
	want("a minute after the enqueue", e.at(), map[string]int64{"a": 3, "b": 1})
	// The store's clock is about the virtual one here: every delay is
	// still ahead of it.
	want("by the store's clock", nil, map[string]int64{"a": 3, "b": 1})
	// A held task waits by its due time like any other: queue b's stays
	// paused from here on.
	if hp, ok := store.HandlerPauserOf(e.s); ok {
		if _, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: "b", Handler: "handler-b", Actor: "ops", Now: e.at()}); err != nil {
			t.Fatalf("PauseHandler: %v", err)
		}
		want("with queue b's handler paused", e.at(), map[string]int64{"a": 3, "b": 1})
	}
	// A task due at exactly now is due.
	e.now = start.Add(9 * time.Minute)
	want("when the first delay ends", e.at(), map[string]int64{"a": 2, "b": 1})
	e.now = start.Add(9*time.Minute - time.Millisecond)
	want("a millisecond before the first delay ends", e.at(), map[string]int64{"a": 3, "b": 1})
	e.now = start.Add(25 * time.Minute)
	want("after the second delay", e.at(), map[string]int64{"a": 1, "b": 1})
	e.now = start.Add(40 * time.Minute)
	want("after the retry's backoff", e.at(), map[string]int64{"b": 1})
	e.now = start.Add(2 * time.Hour)
	want("after every delay", e.at(), map[string]int64{})
}

// deadAt makes one dead task of (queue, handler) with failure f at the
// virtual time at, and returns its ID.
func (e *env) deadAt(at time.Time, queue, handler string, f rdq.Failure) rdq.ID {
	e.t.Helper()
	e.now = at
	nt := task(queue)
	nt.Handler = handler
	return e.makeDead(func(int) rdq.Failure { return f }, nt)[0]
}

// testDeadHistogram checks store.DeadHistogrammer: the dead tasks counted
// by when they went dead in half-open buckets, in all and per fingerprint,
// against the finish times the store reports; tasks that left the
// dead-letter queue, or never entered it, are not counted.
func testDeadHistogram(t *testing.T, h Harness) {
	e := newEnv(t, h)
	dh, ok := store.DeadHistogrammerOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.DeadHistogrammer", e.s)
	}
	fa, fb := failure("timeout talking to the bank"), failure("card declined")
	epoch := e.now
	since := epoch.Add(time.Hour)
	const width, buckets = time.Hour, 6
	var ids []rdq.ID
	for _, d := range []struct {
		at    time.Duration // after since
		queue string
		f     rdq.Failure
	}{
		{-time.Minute, "emails", fa},                   // before the first bucket
		{0, "emails", fa},                              // the first instant of bucket 0
		{30 * time.Minute, "emails", fa},               // bucket 0
		{time.Hour - time.Millisecond, "billing", fb},  // the last instant of bucket 0
		{time.Hour, "emails", fb},                      // the first instant of bucket 1
		{90 * time.Minute, "billing", fa},              // bucket 1
		{2*time.Hour + time.Millisecond, "emails", fb}, // bucket 2
		{3*time.Hour + 15*time.Minute, "emails", fa},   // bucket 3
		{3*time.Hour + 15*time.Minute, "billing", fa},  // bucket 3 again
		{4*time.Hour + 59*time.Minute, "billing", fb},  // bucket 4
		{5*time.Hour + 30*time.Minute, "emails", fa},   // bucket 5
		{6 * time.Hour, "emails", fa},                  // the first instant after the last bucket
		{6*time.Hour + time.Minute, "billing", fb},     // after it
	} {
		ids = append(ids, e.deadAt(since.Add(d.at), d.queue, "send", d.f))
	}
	// Neither a retrying task that failed with fa nor a succeeded task is
	// dead.
	e.advance(time.Minute)
	e.enqueue(task("emails"))
	tk := e.claimOne("emails", time.Minute, "w")
	e.mustFinish(retry(tk, time.Hour, fa, "w", time.Millisecond))
	e.makeSucceeded(task("emails"))

	// expect counts the dead tasks from their finish times as Get reports
	// them: per fingerprint, and in all under "".
	expect := func(fps ...string) map[string][]int64 {
		t.Helper()
		out := map[string][]int64{}
		if len(fps) == 0 {
			out[""] = make([]int64, buckets)
		}
		for _, fp := range fps {
			out[fp] = make([]int64, buckets)
		}
		for _, id := range ids {
			tk := e.load(id)
			if tk.Status != rdq.StatusDead || tk.FinishedAt.Before(since) {
				continue
			}
			b := int(tk.FinishedAt.Sub(since) / width)
			if b >= buckets {
				continue
			}
			if len(fps) == 0 {
				out[""][b]++
			} else if h, ok := out[tk.LastError.Fingerprint]; ok {
				h[b]++
			}
		}
		return out
	}
	check := func(when string, fps ...string) {
		t.Helper()
		got, err := dh.DeadHistogram(e.ctx, since, width, buckets, fps)
		if err != nil {
			t.Fatalf("DeadHistogram(%v) %s: %v", fps, when, err)
		}
		want := expect(fps...)
		if !maps.EqualFunc(got, want, slices.Equal[[]int64]) {
			t.Errorf("DeadHistogram(%v) %s = %v, want %v", fps, when, got, want)
		}
	}
	// The buckets, worked out by hand: the rule the expectation follows.
	if want, got := []int64{3, 2, 1, 2, 1, 1}, expect()[""]; !slices.Equal(got, want) {
		t.Fatalf("the dead tasks' finish times put them in buckets %v, want %v: Get does not report the Now of Finish as FinishedAt", got, want)
	}
	check("in all")
	check("per fingerprint", fa.Fingerprint, fb.Fingerprint, rdq.Fingerprint("other", "never failed so"))
	check("of one fingerprint", fb.Fingerprint)

	// One-minute buckets over the first hour after since.
	got, err := dh.DeadHistogram(e.ctx, since, time.Minute, 60, []string{fa.Fingerprint})
	if err != nil {
		t.Fatalf("DeadHistogram by the minute: %v", err)
	}
	minutes := make([]int64, 60)
	minutes[0], minutes[30] = 1, 1
	if !slices.Equal(got[fa.Fingerprint], minutes) || len(got) != 1 {
		t.Errorf("DeadHistogram by the minute = %v, want %v for %s", got, minutes, fa.Fingerprint)
	}

	// A redriven task and a purged one leave the histogram.
	if a, ok := store.AdminOf(e.s); ok {
		e.now = since.Add(7 * time.Hour)
		if errs := e.redrive(store.RedriveParams{IDs: ids[1:2], Delay: time.Hour, Actor: "ops", Reason: "fixed"}); errs[0] != nil {
			t.Fatalf("Redrive: %v", errs[0])
		}
		n, err := a.PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: ids[4:5]}, Limit: 10, Action: "purge", Actor: "ops", Reason: "done"})
		if err != nil || n != 1 {
			t.Fatalf("PurgeDead = %d, %v; want 1", n, err)
		}
		ids = slices.Delete(ids, 4, 5)
		if want, got := []int64{2, 1, 1, 2, 1, 1}, expect()[""]; !slices.Equal(got, want) {
			t.Fatalf("after the redrive and the purge the dead tasks are in buckets %v, want %v", got, want)
		}
		check("after a redrive and a purge")
		check("per fingerprint after a redrive and a purge", fa.Fingerprint, fb.Fingerprint)
	}

	for _, c := range []struct {
		width   time.Duration
		buckets int
	}{{0, 6}, {-time.Hour, 6}, {time.Nanosecond, 6}, {time.Hour, 0}, {time.Hour, store.MaxHistogramBuckets + 1}} {
		if _, err := dh.DeadHistogram(e.ctx, since, c.width, c.buckets, nil); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("DeadHistogram with width %s and %d buckets: error %v, want one wrapping rdq.ErrInvalid", c.width, c.buckets, err)
		}
	}
}

// testDeadGroupKeys checks store.DeadGroupKeyer: the distinct (queue,
// handler) pairs of each fingerprint's dead tasks, sorted, without the
// tasks that left the dead-letter queue or never entered it.
func testDeadGroupKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	gk, ok := store.DeadGroupKeyerOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.DeadGroupKeyer", e.s)
	}
	keys := func(fps ...string) map[string][][2]string {
		t.Helper()
		got, err := gk.DeadGroupKeys(e.ctx, fps)
		if err != nil {
			t.Fatalf("DeadGroupKeys(%v): %v", fps, err)
		}
		return got
	}
	equal := func(a, b map[string][][2]string) bool {
		return maps.EqualFunc(a, b, slices.Equal[[][2]string])
	}
	if got := keys(); got == nil || len(got) != 0 {
		t.Errorf("DeadGroupKeys() = %#v, want an empty map", got)
	}
	fa, fb, fc, fd := failure("timeout"), failure("declined"), failure("redriven later"), failure("retrying")
	for _, d := range []struct {
		queue, handler string
		f              rdq.Failure
	}{
		{"emails", "send", fa}, {"billing", "charge", fa}, {"emails", "send", fa},
		{"emails", "archive", fa}, {"billing", "charge", fa}, {"emails", "send", fb},
		{"zeta", "last", fa},
	} {
		e.deadAt(e.now.Add(time.Second), d.queue, d.handler, d.f)
	}
	e.enqueue(task("retries"))
	tk := e.claimOne("retries", time.Minute, "w")
	e.mustFinish(retry(tk, time.Hour, fd, "w", time.Millisecond))

	wantA := [][2]string{{"billing", "charge"}, {"emails", "archive"}, {"emails", "send"}, {"zeta", "last"}}
	wantB := [][2]string{{"emails", "send"}}
	none := rdq.Fingerprint("other", "never failed so")
	if got, want := keys(fa.Fingerprint, fb.Fingerprint, fd.Fingerprint, none), map[string][][2]string{fa.Fingerprint: wantA, fb.Fingerprint: wantB}; !equal(got, want) {
		t.Errorf("DeadGroupKeys = %v, want %v", got, want)
	}
	if got, want := keys(fb.Fingerprint), map[string][][2]string{fb.Fingerprint: wantB}; !equal(got, want) {
		t.Errorf("DeadGroupKeys of one fingerprint = %v, want %v", got, want)
	}

	// The pair of a redriven task, or of a purged one, goes when no dead
	// task of the fingerprint is left in it.
	if a, ok := store.AdminOf(e.s); ok {
		c1 := e.deadAt(e.now.Add(time.Second), "q1", "h", fc)
		c2 := e.deadAt(e.now.Add(time.Second), "q2", "h", fc)
		c3 := e.deadAt(e.now.Add(time.Second), "q2", "h", fc)
		if got, want := keys(fc.Fingerprint), map[string][][2]string{fc.Fingerprint: {{"q1", "h"}, {"q2", "h"}}}; !equal(got, want) {
			t.Errorf("DeadGroupKeys = %v, want %v", got, want)
		}
		if errs := e.redrive(store.RedriveParams{IDs: []rdq.ID{c1, c2}, Delay: time.Hour, Actor: "ops", Reason: "fixed"}); errs[0] != nil || errs[1] != nil {
			t.Fatalf("Redrive: %v", errs)
		}
		if got, want := keys(fc.Fingerprint), map[string][][2]string{fc.Fingerprint: {{"q2", "h"}}}; !equal(got, want) {
			t.Errorf("DeadGroupKeys after a redrive = %v, want %v", got, want)
		}
		n, err := a.PurgeDead(e.ctx, store.PurgeDeadParams{Filter: store.DeadFilter{IDs: []rdq.ID{c3}}, Limit: 10, Action: "purge", Actor: "ops", Reason: "done"})
		if err != nil || n != 1 {
			t.Fatalf("PurgeDead = %d, %v; want 1", n, err)
		}
		if got := keys(fc.Fingerprint); len(got) != 0 {
			t.Errorf("DeadGroupKeys after the last dead task was purged = %v, want none", got)
		}
		if got, want := keys(fa.Fingerprint), map[string][][2]string{fa.Fingerprint: wantA}; !equal(got, want) {
			t.Errorf("DeadGroupKeys of an untouched fingerprint = %v, want %v", got, want)
		}
	}
}

// testWaitingCounts checks store.WaitingCounter: per queue, the tasks not
// due yet split by whether they failed in their current life (retrying)
// or were never tried (scheduled), and every task of a paused handler
// (held) whatever its due time; due, running and finished tasks are not
// counted.
func testWaitingCounts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	wc, ok := store.WaitingCounterOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.WaitingCounter", e.s)
	}
	want := func(when string, now *time.Time, want map[string]store.WaitingCounts) {
		t.Helper()
		got, err := wc.WaitingCounts(e.ctx, now)
		if err != nil {
			t.Fatalf("WaitingCounts %s: %v", when, err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("WaitingCounts %s = %+v, want %+v", when, got, want)
		}
	}
	want("of an empty store", e.at(), map[string]store.WaitingCounts{})

	// Queue a: two tasks delayed by 10 and 20 minutes, one retrying in 30
	// minutes, one due, one running, one succeeded and one dead. Queue b:
	// one task delayed by an hour and one due.
	delayed := func(queue string, d time.Duration) store.NewTask {
		nt := task(queue)
		nt.Delay = d
		return nt
	}
	e.enqueue(delayed("a", 10*time.Minute), delayed("a", 20*time.Minute), delayed("b", time.Hour))
	e.makeSucceeded(task("a"))
	e.makeDead(func(int) rdq.Failure { return failure("gone") }, task("a"))
	e.enqueue(task("a"))
	e.claimOne("a", time.Hour, "w") // running
	e.enqueue(task("a"))
	retrying := e.claimOne("a", time.Hour, "w")
	e.mustFinish(retry(retrying, 30*time.Minute, failure("later"), "w", time.Millisecond))
	e.enqueue(task("a"), task("b"))
	e.advance(time.Minute)
	start := e.now

	want("a minute after the enqueue", e.at(), map[string]store.WaitingCounts{
		"a": {Retrying: 1, Scheduled: 2}, "b": {Scheduled: 1}})
	want("by the store's clock", nil, map[string]store.WaitingCounts{
		"a": {Retrying: 1, Scheduled: 2}, "b": {Scheduled: 1}})
	e.now = start.Add(25 * time.Minute)
	want("after the second delay", e.at(), map[string]store.WaitingCounts{
		"a": {Retrying: 1}, "b": {Scheduled: 1}})
	e.now = start.Add(40 * time.Minute)
	want("after the retry's backoff", e.at(), map[string]store.WaitingCounts{"b": {Scheduled: 1}})

	// Pausing queue b's handler holds both its tasks, the due one and the
	// delayed one, and counts them as neither retrying nor scheduled.
	if hp, ok := store.HandlerPauserOf(e.s); ok {
		if _, err := hp.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: "b", Handler: "handler-b", Actor: "ops", Now: e.at()}); err != nil {
			t.Fatalf("PauseHandler: %v", err)
		}
		want("with queue b's handler paused", e.at(), map[string]store.WaitingCounts{"b": {Held: 2}})
		e.now = start.Add(2 * time.Hour)
		want("held past every delay", e.at(), map[string]store.WaitingCounts{"b": {Held: 2}})
		return
	}
	e.now = start.Add(2 * time.Hour)
	want("after every delay", e.at(), map[string]store.WaitingCounts{})
}

// testGroupOrigins checks store.GroupOriginReader: a group's origin is the
// first failed attempt of its earliest dead task, in any life, not the
// time that task went dead again after a redrive.
func testGroupOrigins(t *testing.T, h Harness) {
	e := newEnv(t, h)
	gr, ok := store.GroupOriginReaderOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.GroupOriginReader", e.s)
	}
	origins := func(fps ...string) map[string]time.Time {
		t.Helper()
		got, err := gr.GroupOrigins(e.ctx, fps)
		if err != nil {
			t.Fatalf("GroupOrigins: %v", err)
		}
		return got
	}
	outage, other := failure("outage"), failure("other")
	if got := origins(outage.Fingerprint); len(got) != 0 {
		t.Fatalf("GroupOrigins of an empty store = %v, want none", got)
	}
	// Task a fails, retries and dies ten minutes later; task b dies at
	// once five minutes in. Both are redriven and die again, a first.
	a := task("q")
	e.enqueue(a)
	e.mustFinish(retry(e.claimOne("q", time.Minute, "w"), time.Minute, outage, "w", time.Millisecond))
	e.advance(5 * time.Minute)
	b := e.makeDead(func(int) rdq.Failure { return outage }, task("p"))[0]
	e.advance(5 * time.Minute)
	e.killAgain(func(int) rdq.Failure { return outage }, a.ID)
	e.advance(10 * time.Minute)
	wantErrs(t, "redrive", e.redrive(store.RedriveParams{IDs: []rdq.ID{a.ID, b}, Actor: "ops"}), nil, nil)
	e.advance(10 * time.Minute)
	e.killAgain(func(int) rdq.Failure { return outage }, a.ID)
	e.advance(time.Minute)
	e.killAgain(func(int) rdq.Failure { return outage }, b)
	e.advance(time.Minute)
	c := e.makeDead(func(int) rdq.Failure { return other }, task("r"))[0]

	_, attsA := e.get(a.ID)
	tc, _ := e.get(c)
	got := origins(outage.Fingerprint, other.Fingerprint, failure("never seen").Fingerprint)
	if len(got) != 2 {
		t.Fatalf("GroupOrigins = %v, want the two groups with dead tasks", got)
	}
	eqTime(t, "origin of a group redriven and dead again", got[outage.Fingerprint], attsA[0].FinishedAt)
	eqTime(t, "origin of a group dead at its first failure", got[other.Fingerprint], tc.FinishedAt)
	// The admin's groups still date the redriven group by its deaths.
	if ad, ok := store.AdminOf(e.s); ok {
		groups, err := ad.DeadGroups(e.ctx, store.DeadFilter{Fingerprint: outage.Fingerprint})
		if err != nil {
			t.Fatalf("DeadGroups: %v", err)
		}
		if len(groups) != 1 || !groups[0].FirstSeen.After(got[outage.Fingerprint]) {
			t.Errorf("DeadGroups = %+v: want its first dead time after the origin %s", groups, fmtTime(got[outage.Fingerprint]))
		}
	}
}
