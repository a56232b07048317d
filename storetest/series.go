package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// seriesEvent is one thing the Series part plants, and what it must count.
type seriesEvent struct {
	at      time.Time
	queue   string
	handler string
	c       store.SeriesCounts
}

// testSeries checks store.SeriesReader: every outcome counted in the bucket
// of its attempt's finish time, a dead-lettering counted once per life
// that ended DEAD (redriven or not, a cancellation included), the filters,
// hour buckets, racing readers, counts that stay once rolled up although
// their tasks are purged, and refused parameters.
func testSeries(t *testing.T, h Harness) {
	e := newEnv(t, h)
	sr, ok := store.SeriesReaderOf(e.s)
	if !ok {
		t.Fatalf("store %T does not implement store.SeriesReader", e.s)
	}
	read := func(p store.SeriesParams) store.Series {
		t.Helper()
		got, err := sr.Series(e.ctx, p)
		if err != nil {
			t.Fatalf("Series(%+v): %v", p, err)
		}
		return got
	}

	// An empty store: no lines, and the window where it belongs.
	p := store.SeriesParams{Width: time.Minute, Buckets: 12, Now: e.at()}
	if got := read(p); len(got.Lines) != 0 || !got.Start.Equal(store.SeriesStart(p, e.now)) || got.Width != time.Minute {
		t.Fatalf("Series of an empty store = %+v, want no lines from %s", got, store.SeriesStart(p, e.now))
	}

	base := e.now.Truncate(time.Minute).Add(time.Minute)
	e.now = base.Add(5 * time.Second)
	var events []seriesEvent
	plant := func(queue string, c store.SeriesCounts) {
		events = append(events, seriesEvent{at: e.now, queue: queue, handler: "handler-" + queue, c: c})
	}
	fa := failure("connection refused")
	var (
		success = store.SeriesCounts{Attempts: 1, Successes: 1}
		retried = store.SeriesCounts{Attempts: 1, Retryable: 1}
		perm    = store.SeriesCounts{Attempts: 1, Permanent: 1}
		dead    = store.SeriesCounts{DeadLettered: 1}
	)

	// Minute 0: a retry, a success, a permanent failure (dead).
	a, b, c := task("emails"), task("emails"), task("emails")
	e.enqueue(a, b, c)
	got := e.claimIDs("emails", time.Minute, "w1", a.ID, b.ID, c.ID)
	e.mustFinish(retry(got[a.ID], time.Second, fa, "w1", time.Millisecond),
		succeed(got[b.ID], "w1", time.Millisecond),
		kill(got[c.ID], fa, "w1", time.Millisecond))
	plant("emails", retried)
	plant("emails", success)
	plant("emails", perm.Add(dead))

	// Minute 1: a retryable failure that exhausts a (dead); in billing a
	// success and a lease that will expire.
	e.now = base.Add(time.Minute + 10*time.Second)
	got = e.claimIDs("emails", time.Minute, "w1", a.ID)
	e.mustFinish(store.Completion{Lease: lease(got[a.ID]), Status: rdq.StatusDead,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: fa, WorkerID: "w1", Duration: time.Millisecond}})
	plant("emails", retried.Add(dead))
	d, x := task("billing"), task("billing")
	e.enqueue(d, x)
	got = e.claimIDs("billing", 30*time.Second, "w2", d.ID, x.ID)
	e.mustFinish(succeed(got[d.ID], "w2", time.Millisecond))
	plant("billing", success)

	// Minute 2: x's lease expired; reclaimed, its lost execution is a
	// LEASE_EXPIRED attempt (retryable), and it waits again.
	e.now = base.Add(2*time.Minute + 10*time.Second)
	if r := e.reclaim([]string{"billing"}, 10, time.Minute, "w3"); len(r) != 1 {
		t.Fatalf("ReclaimExpired returned %d tasks, want x", len(r))
	}
	plant("billing", retried)

	admin, hasAdmin := store.AdminOf(e.s)
	if hasAdmin {
		// Minute 3: c redriven and dead again; its first death still
		// counts in minute 0.
		e.now = base.Add(3*time.Minute + 5*time.Second)
		e.redrive(store.RedriveParams{IDs: []rdq.ID{c.ID}, Actor: "op", Reason: "fixed"})
		got = e.claimIDs("emails", time.Minute, "w1", c.ID)
		e.mustFinish(kill(got[c.ID], fa, "w1", time.Millisecond))
		plant("emails", perm.Add(dead))
	}
	if lt, ok := store.LiveTasksOf(e.s); ok {
		// Minute 3: a cancellation dead-letters without an attempt.
		e.now = base.Add(3*time.Minute + 20*time.Second)
		f := task("emails")
		e.enqueue(f)
		errs, err := lt.Cancel(e.ctx, store.CancelParams{IDs: []rdq.ID{f.ID}, Actor: "op", Reason: "not needed", Now: e.at()})
		if err != nil || errs[0] != nil {
			t.Fatalf("Cancel: %v %v", err, errs)
		}
		plant("emails", dead)
	}
	// Minute 9, within the lag of the reads below: counted from the
	// history.
	e.now = base.Add(9*time.Minute + 30*time.Second)
	e.makeSucceeded(task("billing"))
	plant("billing", success)

	readAt := base.Add(10*time.Minute + 15*time.Second)
	expect := func(p store.SeriesParams) store.Series {
		start := store.SeriesStart(p, *p.Now)
		want := store.Series{Start: start, Width: p.Width}
		for _, ev := range events {
			if p.Queue != "" && ev.queue != p.Queue || p.Handler != "" && ev.handler != p.Handler {
				continue
			}
			i := int(ev.at.Sub(start) / p.Width)
			if ev.at.Before(start) || i >= p.Buckets {
				continue
			}
			j := slices.IndexFunc(want.Lines, func(l store.SeriesLine) bool { return l.Queue == ev.queue && l.Handler == ev.handler })
			if j < 0 {
				want.Lines = append(want.Lines, store.SeriesLine{Queue: ev.queue, Handler: ev.handler, Counts: make([]store.SeriesCounts, p.Buckets)})
				j = len(want.Lines) - 1
			}
			want.Lines[j].Counts[i] = want.Lines[j].Counts[i].Add(ev.c)
		}
		store.SortSeriesLines(want.Lines)
		return want
	}
	// check reads p again until the store has rolled up everything
	// (Series.PartialUntil zero), each partial read right from
	// PartialUntil on, and the last one right throughout.
	check := func(what string, p store.SeriesParams) {
		t.Helper()
		want := expect(p)
		got := read(p)
		for reads := 1; !got.PartialUntil.IsZero(); reads++ {
			if err := samePartialSeries(got, want, *p.Now); err != nil {
				t.Errorf("Series %s (%+v), read %d: %v", what, p, reads, err)
				return
			}
			if reads == maxSeriesReads {
				t.Errorf("Series %s (%+v): still partial (until %s) after %d reads", what, p, got.PartialUntil, reads)
				return
			}
			got = read(p)
		}
		if err := sameSeries(got, want); err != nil {
			t.Errorf("Series %s (%+v): %v", what, p, err)
		}
	}
	minutes := store.SeriesParams{Width: time.Minute, Buckets: 15, Now: &readAt}
	// Worked out by hand for the first bucket of emails: the rule expect
	// follows.
	if w := expect(minutes); len(w.Lines) != 2 || w.Lines[1].Queue != "emails" ||
		w.Lines[1].Counts[4] != (store.SeriesCounts{Attempts: 3, Successes: 1, Retryable: 1, Permanent: 1, DeadLettered: 1}) {
		t.Fatalf("the expectation is off: %+v", w)
	}

	// Racing first readers roll each minute up once.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			got, err := sr.Series(e.ctx, minutes)
			if err == nil {
				err = samePartialSeries(got, expect(minutes), readAt)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("racing reader %d: %v", i, err)
		}
	}
	check("read again", minutes)
	check("of queue billing", store.SeriesParams{Width: time.Minute, Buckets: 15, Queue: "billing", Now: &readAt})
	check("of handler handler-emails", store.SeriesParams{Width: time.Minute, Buckets: 15, Handler: "handler-emails", Now: &readAt})
	check("of a queue with nothing", store.SeriesParams{Width: time.Minute, Buckets: 15, Queue: "nothing", Now: &readAt})
	check("of a short window", store.SeriesParams{Width: time.Minute, Buckets: 3, Now: &readAt})
	check("by the hour", store.SeriesParams{Width: time.Hour, Buckets: 3, Now: &readAt})
	later := readAt.Add(30 * time.Minute)
	check("later, everything rolled up", store.SeriesParams{Width: time.Minute, Buckets: 60, Now: &later})
	// Hours after, the hours are complete: rolled up again into hours.
	hoursLater := readAt.Add(3 * time.Hour)
	byHour := store.SeriesParams{Width: time.Hour, Buckets: 6, Now: &hoursLater}
	check("hours later, by the hour", byHour)
	check("hours later, by the hour again", byHour)
	check("hours later, of queue billing by the hour", store.SeriesParams{Width: time.Hour, Buckets: 6, Queue: "billing", Now: &hoursLater})

	if hasAdmin {
		// Rolled-up minutes keep their counts when their tasks go.
		n, err := admin.PurgeDead(e.ctx, store.PurgeDeadParams{Limit: 100, Action: "purge", Actor: "op", Reason: "done"})
		if err != nil || n == 0 {
			t.Fatalf("PurgeDead: %d, %v", n, err)
		}
		check("after the dead tasks were purged", store.SeriesParams{Width: time.Minute, Buckets: 60, Now: &later})
		check("after the dead tasks were purged, by the hour", byHour)
	}

	for _, bad := range []store.SeriesParams{
		{Width: 2 * time.Minute, Buckets: 5},
		{Width: time.Minute, Buckets: 0},
		{Width: time.Minute, Buckets: store.MaxSeriesBuckets + 1},
		{Width: time.Hour, Buckets: int(store.SeriesRetention/time.Hour) + 1},
	} {
		bad.Now = &readAt
		if _, err := sr.Series(e.ctx, bad); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("Series(%+v) = %v, want an error wrapping rdq.ErrInvalid", bad, err)
		}
	}
}

// maxSeriesReads bounds the reads a store may take to roll up a few hours
// of history (see store.Series.PartialUntil).
const maxSeriesReads = 1000

// samePartialSeries reports how got differs from want in the buckets that
// start at or after got.PartialUntil (every bucket when it is zero), read
// at now; PartialUntil must lie within the window.
func samePartialSeries(got, want store.Series, now time.Time) error {
	if got.PartialUntil.IsZero() {
		return sameSeries(got, want)
	}
	if !got.PartialUntil.After(got.Start) || got.PartialUntil.After(now) {
		return fmt.Errorf("partial until %s: not within the window from %s to %s", got.PartialUntil, got.Start, now)
	}
	first := int((got.PartialUntil.Sub(got.Start) + got.Width - 1) / got.Width)
	cut := func(s store.Series) store.Series {
		out := store.Series{Start: s.Start, Width: s.Width}
		for _, l := range s.Lines {
			if first >= len(l.Counts) {
				continue
			}
			l.Counts = l.Counts[first:]
			if slices.ContainsFunc(l.Counts, func(c store.SeriesCounts) bool { return !c.IsZero() }) {
				out.Lines = append(out.Lines, l)
			}
		}
		return out
	}
	if err := sameSeries(cut(got), cut(want)); err != nil {
		return fmt.Errorf("from %s on (partial until %s): %w", got.Start.Add(time.Duration(first)*got.Width), got.PartialUntil, err)
	}
	return nil
}

// sameSeries reports how got differs from want.
func sameSeries(got, want store.Series) error {
	if !got.Start.Equal(want.Start) || got.Width != want.Width {
		return fmt.Errorf("window starts %s, %s wide; want %s, %s", got.Start, got.Width, want.Start, want.Width)
	}
	if len(got.Lines) != len(want.Lines) {
		return fmt.Errorf("%d lines %+v, want %d %+v", len(got.Lines), got.Lines, len(want.Lines), want.Lines)
	}
	for i := range got.Lines {
		g, w := got.Lines[i], want.Lines[i]
		if g.Queue != w.Queue || g.Handler != w.Handler || !slices.Equal(g.Counts, w.Counts) {
			return fmt.Errorf("line %d = %s/%s %+v, want %s/%s %+v", i, g.Queue, g.Handler, g.Counts, w.Queue, w.Handler, w.Counts)
		}
	}
	return nil
}
