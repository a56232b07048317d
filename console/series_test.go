package console_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// plantMinute runs ok successful and failed permanently failing tasks of
// queue and handler at the given time (the store's clock overridden), so
// that the series counts them in that minute.
func plantMinute(t testing.TB, s store.Store, queue, handler string, at time.Time, ok, failed int) {
	t.Helper()
	ctx := context.Background()
	n := ok + failed
	if n == 0 {
		return
	}
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{ID: rdq.NewID(), Queue: queue, Handler: handler, Payload: []byte(`{}`)}
	}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: ts, Now: &at}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{queue}, Limit: n, Lease: time.Minute, WorkerID: "w", Handlers: []string{handler}, Now: &at})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != n {
		t.Fatalf("claimed %d of %d tasks", len(claimed), n)
	}
	cs := make([]store.Completion, n)
	for i, tk := range claimed {
		l := store.Lease{ID: tk.ID, Token: tk.LeaseToken}
		if i < ok {
			cs[i] = store.Completion{Lease: l, Status: rdq.StatusSucceeded, Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}}
			continue
		}
		f := rdq.Failure{Type: "net.OpError", Message: "connection refused", Fingerprint: rdq.Fingerprint("net.OpError", "connection refused")}
		cs[i] = store.Completion{Lease: l, Status: rdq.StatusDead, Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: "w"}}
	}
	errs, err := s.Finish(ctx, store.FinishParams{Completions: cs, Now: &at})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// outage is the failures per minute of an outage that starts 30 minutes
// ago, peaks and ends: rising, then falling.
var outage = []int{1, 3, 6, 10, 6, 3, 1}

// plantOutage plants the outage in queue (handler), with successes around
// it, and in queue other a steady success a minute, and has the store roll
// them up.
func plantOutage(t testing.TB, s store.Store, queue, handler string) time.Time {
	t.Helper()
	start := time.Now().UTC().Truncate(time.Minute).Add(-30 * time.Minute)
	for i := -3; i < len(outage)+3; i++ {
		failed := 0
		if i >= 0 && i < len(outage) {
			failed = outage[i]
		}
		plantMinute(t, s, queue, handler, start.Add(time.Duration(i)*time.Minute+10*time.Second), 2, failed)
		plantMinute(t, s, "other", "report", start.Add(time.Duration(i)*time.Minute+20*time.Second), 1, 0)
	}
	settleSeries(t, s)
	return start
}

var bucketTitle = regexp.MustCompile(`<title>(\d\d:\d\d)–\d\d:\d\d UTC: ([\d,]+) attempts, ([\d,]+) succeeded, ([\d,]+) retryable, ([\d,]+) permanent, ([\d,]+) dead-lettered</title>`)

// minuteFailures reads the charts of a page: the permanent failures of
// each bucket by its start.
func minuteFailures(t *testing.T, body string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range bucketTitle.FindAllStringSubmatch(body, -1) {
		n, err := strconv.Atoi(m[5])
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] += n
	}
	return out
}

// settleSeries reads the activity series until the store has rolled up
// the history planted (a few minutes per read).
func settleSeries(t testing.TB, s store.Store) {
	t.Helper()
	sr, ok := store.SeriesReaderOf(s)
	if !ok {
		t.Fatalf("store %T has no series", s)
	}
	for _, p := range []store.SeriesParams{{Width: time.Minute, Buckets: 60}, {Width: time.Hour, Buckets: 24}} {
		for reads := 1; ; reads++ {
			got, err := sr.Series(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if got.PartialUntil.IsZero() {
				break
			}
			if reads == 1000 {
				t.Fatalf("the series of %s is still partial after %d reads", p.Width, reads)
			}
		}
	}
}

func TestActivityShowsAnOutageRisingAndFalling(t *testing.T) {
	e := newEnv(t, "/ops/")
	start := plantOutage(t, e.s, "emails", "send")

	check := func(path, user string, want []int) {
		t.Helper()
		r := e.get(user, path)
		if r.status != 200 {
			t.Fatalf("GET %s as %s: %d %s", path, user, r.status, r.body)
		}
		got := minuteFailures(t, r.body)
		for i := -3; i < len(want)+3; i++ {
			w := 0
			if i >= 0 && i < len(want) {
				w = want[i]
			}
			at := start.Add(time.Duration(i) * time.Minute).Format("15:04")
			if got[at] != w {
				t.Errorf("GET %s as %s: %d permanent failures at %s, want %d", path, user, got[at], at, w)
			}
		}
	}
	check("/activity", userAdmin, outage)
	check("/activity?queue=emails", userOperator, outage)
	check("/activity?queue=emails&handler=send", userReader, outage)
	check("/", userAdmin, outage)
	// A principal of queue other sees none of emails' failures, on the
	// overview as on the activity page, and may not ask for emails.
	check("/", userOther, nil)
	check("/activity?queue=other", userOther, nil)
	if r := e.get(userOther, "/activity?queue=emails"); r.status != 403 {
		t.Errorf("activity of emails as other: %d, want 403", r.status)
	}
	total := 0
	for _, n := range outage {
		total += n
	}
	r := e.get(userAdmin, "/activity")
	mustContain(t, r.body,
		`<a href="/ops/activity?handler=send&amp;queue=emails">send</a>`,
		fmt.Sprintf(`<td class="n">%d</td><td class="n">%d</td>`, total+2*(len(outage)+6), 2*(len(outage)+6)),
		`aria-current="page">Activity</a>`)
	if r := e.get(userAdmin, "/activity?queue=no%20such"); r.status != 400 {
		t.Errorf("activity of an invalid queue name: %d, want 400", r.status)
	}
}

func TestActivityEmptyState(t *testing.T) {
	e := newEnv(t, "/")
	for _, path := range []string{"/", "/activity"} {
		r := e.get(userAdmin, path)
		mustContain(t, r.body, `<p class="empty">No attempt finished and no task was dead-lettered in the last hour.</p>`)
		mustNotContain(t, r.body, `<svg class="chart series"`, `class="small partial"`)
	}
}

// TestActivityShowsWhereCountsArePartial: with hours of history that no
// read has rolled up yet (as after an upgrade), the first view says which
// counts may be missing.
func TestActivityShowsWhereCountsArePartial(t *testing.T) {
	e := newEnv(t, "/")
	now := time.Now().UTC()
	for i := range 90 {
		plantMinute(t, e.s, "emails", "send", now.Add(-time.Duration(i+3)*time.Minute), 1, 0)
	}
	r := e.get(userAdmin, "/activity")
	mustContain(t, r.body, `<p class="small partial">Attempts before <time`)
}
