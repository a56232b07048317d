package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// rdq series sums the attempts of the window per minute or hour, leaves
// quiet buckets out, filters by queue and handler and prints every bucket
// as JSON.
func TestSeries(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	past := time.Now().Add(-3 * time.Hour)
	var tasks []store.NewTask
	for i := range 5 {
		nt := store.NewTask{ID: rdq.NewID(), Queue: "series-q", Handler: "charge",
			FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "x", Message: "y", Fingerprint: rdq.Fingerprint("x", "y")}}}
		if i == 4 {
			nt.Handler = "refund"
		}
		tasks = append(tasks, nt)
	}
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	old := store.NewTask{ID: rdq.NewID(), Queue: "series-q", Handler: "charge",
		FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: rdq.Failure{Type: "x", Message: "y", Fingerprint: rdq.Fingerprint("x", "y")}}}
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{old}, Now: &past}); err != nil {
		t.Fatal(err)
	}

	out := h.ok("series", "--queue", "series-q", "--since", "15m")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "TIME ") || !strings.Contains(lines[0], "PERMANENT") || len(lines) != 5 {
		t.Fatalf("series output:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[2] != "5" || f[3] != "0" || f[5] != "5" || f[6] != "5" {
		t.Errorf("the busy minute: %q, want 5 attempts, 5 permanent, 5 dead", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "total" || f[1] != "5" {
		t.Errorf("total line: %q", lines[2])
	}
	if !strings.HasPrefix(lines[4], "queue series-q, per minute since ") || !strings.Contains(lines[4], "quiet minutes not shown") {
		t.Errorf("footer: %q", lines[4])
	}
	if out := h.ok("series", "--queue", "series-q", "--handler", "refund", "--since", "15m"); strings.Fields(out[strings.Index(out, "total"):])[1] != "1" {
		t.Errorf("handler refund:\n%s", out)
	}
	// A day reads hours and reaches the retryable failure 3 hours ago.
	out = h.ok("series", "--queue", "series-q", "--since", "1d")
	if !strings.Contains(out, "per hour since") || !strings.Contains(out, ":00Z ") {
		t.Errorf("a day by hour:\n%s", out)
	}
	if f := strings.Fields(out[strings.Index(out, "total"):]); f[1] != "6" || f[3] != "1" {
		t.Errorf("a day's total %q, want 6 attempts, 1 retryable", f[:6])
	}
	if out := h.ok("series", "--queue", "nothing-here"); !strings.HasPrefix(out, "no attempt finished in queue nothing-here since ") {
		t.Errorf("an idle queue: %q", out)
	}

	var js struct {
		Start        time.Time `json:"start"`
		WidthSeconds int64     `json:"width_seconds"`
		Lines        []struct {
			Queue, Handler string
			Buckets        []struct {
				Start     time.Time `json:"start"`
				Attempts  int64     `json:"attempts"`
				Permanent int64     `json:"permanent"`
			} `json:"buckets"`
		} `json:"lines"`
	}
	mustJSON(t, h.ok("--json", "series", "--queue", "series-q", "--since", "10m", "--by", "minute"), &js)
	if js.WidthSeconds != 60 || len(js.Lines) != 2 || js.Lines[0].Handler != "charge" || js.Lines[1].Handler != "refund" || len(js.Lines[0].Buckets) != 11 {
		t.Fatalf("JSON: %+v", js)
	}
	var attempts int64
	for i, b := range js.Lines[0].Buckets {
		attempts += b.Attempts
		if !b.Start.Equal(js.Start.Add(time.Duration(i) * time.Minute)) {
			t.Errorf("bucket %d starts %s", i, b.Start)
		}
	}
	if attempts != 4 {
		t.Errorf("charge's attempts in JSON: %d, want 4", attempts)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"series", "--by", "day"}, `--by "day": use minute or hour`},
		{[]string{"series", "--since", "soon"}, "--since"},
		{[]string{"series", "--since", "3d", "--by", "minute"}, "read hours"},
		{[]string{"series", "--since", "30d"}, "past the counts kept"},
		{[]string{"series", "--queue", "bad name"}, "queue"},
		{[]string{"series", "extra"}, "series takes no arguments"},
	} {
		if r := h.run("", c.args...); r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rdq %s: exit %d, stderr %q; want %d saying %q", strings.Join(c.args, " "), r.code, r.stderr, exitUsage, c.want)
		}
	}
}

// TestSeriesSaysWhereCountsArePartial: with attempts in 20 minutes no
// read has rolled up yet, the first read says which counts may be
// missing, in text and in JSON, and reading again fills them in.
func TestSeriesSaysWhereCountsArePartial(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now()
	for i := range 20 {
		at := now.Add(-time.Duration(30+i) * time.Minute)
		nt := store.NewTask{ID: rdq.NewID(), Queue: "partial-q", Handler: "charge",
			FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "x", Message: "y", Fingerprint: rdq.Fingerprint("x", "y")}}}
		if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{nt}, Now: &at}); err != nil {
			t.Fatal(err)
		}
	}
	var js struct {
		PartialUntil time.Time `json:"partial_until"`
	}
	mustJSON(t, h.ok("--json", "series", "--queue", "partial-q", "--since", "1h"), &js)
	if js.PartialUntil.IsZero() {
		t.Fatal("the first read of 20 busy minutes is not partial")
	}
	for reads := 1; ; reads++ {
		out := h.ok("series", "--queue", "partial-q", "--since", "1h")
		if !strings.Contains(out, "may be missing") {
			if f := strings.Fields(out[strings.Index(out, "total"):]); f[1] != "20" {
				t.Errorf("the total once complete: %q, want 20 attempts", f[:2])
			}
			break
		}
		if !strings.Contains(out, "attempts before ") || !strings.Contains(out, "run again to fill them in") {
			t.Fatalf("the partial note:\n%s", out)
		}
		if reads == 10 {
			t.Fatalf("still partial after %d reads:\n%s", reads, out)
		}
	}
}
