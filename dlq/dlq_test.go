package dlq_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/store"
)

func TestFiltersMatchBruteForce(t *testing.T) {
	_, q, tasks := newDLQ(t, 240, dlq.Config{})
	// A pending and a succeeded task must never show up.
	mid := tasks[len(tasks)/2].FinishedAt
	some := tasks[17]
	filters := map[string]dlq.Filter{
		"all":                  {},
		"queue":                {Queue: "billing"},
		"handler":              {Handler: "sync:v2"},
		"error type":           {ErrorType: "timeout"},
		"error type with star": {ErrorType: "*net.OpError"},
		"fingerprint":          {Fingerprint: some.LastError.Fingerprint},
		"fingerprint upper":    {Fingerprint: strings.ToUpper(some.LastError.Fingerprint)},
		"dead after":           {DeadAfter: mid},
		"dead before":          {DeadBefore: mid},
		"dead range":           {DeadAfter: tasks[30].FinishedAt, DeadBefore: tasks[90].FinishedAt},
		"message":              {MessageContains: "Connection REFUSED"},
		"message percent":      {MessageContains: "100%"},
		"message underscore":   {MessageContains: "more_than"},
		"message underscore wildcard must not match": {MessageContains: "more_tha_"},
		"message no match":                           {MessageContains: "no such text anywhere"},
		"ids":                                        {IDs: []rdq.ID{tasks[3].ID, tasks[99].ID, tasks[200].ID, rdq.NewID()}},
		"queue and type":                             {Queue: "emails", ErrorType: "panic"},
		"everything": {Queue: "search.index", Handler: "send", ErrorType: "validation",
			DeadAfter: tasks[10].FinishedAt, DeadBefore: tasks[230].FinishedAt, MessageContains: "amount"},
	}
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			want := expect(tasks, f)
			if name != "message no match" && name != "message underscore wildcard must not match" && len(want) == 0 {
				t.Fatalf("filter selects nothing in the corpus; the test would prove little")
			}
			got := listAll(t, q, f, 13)
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("List: got %d tasks, want %d\n got %v\nwant %v", len(got), len(want), ids(got), ids(want))
			}
			n, err := q.Count(ctxT(t), f)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(want)) {
				t.Fatalf("Count = %d, want %d", n, len(want))
			}
			checkGroups(t, q, f, want)
		})
	}
}

// Life filters over tasks in lives 0, 1 and 2 (redrive loops), alone and
// with other fields, against the brute-force reference.
func TestLifeFiltersMatchBruteForce(t *testing.T) {
	s, q, tasks := newDLQ(t, 60, dlq.Config{})
	ctx := ctxT(t)
	// Redrives make tasks due on the real clock.
	at := time.Now()
	for _, tk := range tasks {
		at = maxTime(at, tk.FinishedAt)
	}
	// Every fourth emails task dies again after a redrive; half of those
	// after a second one too.
	var again []rdq.ID
	for i, tk := range expect(tasks, dlq.Filter{Queue: "emails"}) {
		if i%4 == 0 {
			again = append(again, tk.ID)
		}
	}
	for round := range 2 {
		if res, err := q.RedriveTasks(ctx, again, dlq.RedriveOptions{Actor: "a", Reason: "loop"}); err != nil || res.Redriven != int64(len(again)) {
			t.Fatalf("round %d: %+v %v", round, res, err)
		}
		at = at.Add(time.Minute)
		failAgain(t, s, again, "emails", at)
		again = again[:len(again)/2]
	}
	for i := range tasks {
		tasks[i] = get(t, s, tasks[i].ID)
	}
	for name, f := range map[string]dlq.Filter{
		"life at least 1":        {LifeMin: 1},
		"life at least 2":        {LifeMin: 2},
		"life exactly 1":         {LifeMin: 1, LifeBelow: 2},
		"never redriven":         {LifeBelow: 1},
		"queue and life":         {Queue: "emails", LifeMin: 1},
		"other queue and life":   {Queue: "billing", LifeBelow: 1},
		"type and life":          {ErrorType: "again", LifeMin: 2},
		"life, message and time": {LifeBelow: 2, MessageContains: "again", DeadAfter: tasks[0].FinishedAt},
	} {
		t.Run(name, func(t *testing.T) {
			want := expect(tasks, f)
			if len(want) == 0 {
				t.Fatalf("filter selects nothing in the corpus; the test would prove little")
			}
			got := listAll(t, q, f, 3)
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("List: got %d tasks, want %d\n got %v\nwant %v", len(got), len(want), ids(got), ids(want))
			}
			if n, err := q.Count(ctx, f); err != nil || n != int64(len(want)) {
				t.Fatalf("Count = %d, %v, want %d", n, err, len(want))
			}
			checkGroups(t, q, f, want)
		})
	}
	// A bulk redrive by life touches exactly the redrive loop.
	loop := expect(tasks, dlq.Filter{LifeMin: 2})
	dry, err := q.Redrive(ctx, dlq.Filter{LifeMin: 2}, dlq.RedriveOptions{DryRun: true})
	if err != nil || dry.Matched != int64(len(loop)) {
		t.Fatalf("dry run by life: %+v %v, want %d matched", dry, err, len(loop))
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// checkGroups compares Groups with groups computed from the expected tasks.
func checkGroups(t *testing.T, q *dlq.DLQ, f dlq.Filter, want []*rdq.Task) {
	t.Helper()
	type agg struct {
		count       int64
		first, last time.Time
		example     *rdq.Task
	}
	ref := map[string]*agg{}
	for _, task := range want { // newest first: the first seen is the example
		a := ref[task.LastError.Fingerprint]
		if a == nil {
			a = &agg{first: task.FinishedAt, last: task.FinishedAt, example: task}
			ref[task.LastError.Fingerprint] = a
		}
		a.count++
		a.first = minTime(a.first, task.FinishedAt)
	}
	groups, err := q.Groups(ctxT(t), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != len(ref) {
		t.Fatalf("Groups: %d groups, want %d", len(groups), len(ref))
	}
	for i, g := range groups {
		if i > 0 && groups[i-1].Count < g.Count {
			t.Fatalf("Groups not largest first: %d then %d", groups[i-1].Count, g.Count)
		}
		a := ref[g.Fingerprint]
		if a == nil {
			t.Fatalf("unexpected group %s", g.Fingerprint)
		}
		if g.Count != a.count || !g.FirstSeen.Equal(a.first) || !g.LastSeen.Equal(a.last) {
			t.Fatalf("group %s: count %d first %s last %s, want %d %s %s", g.Fingerprint, g.Count, g.FirstSeen, g.LastSeen, a.count, a.first, a.last)
		}
		// The example is the most recently dead task; with tied dead times any of them.
		ex := a.example
		var tied bool
		for _, task := range want {
			if task.ID == g.ExampleID && task.FinishedAt.Equal(ex.FinishedAt) && task.LastError.Fingerprint == g.Fingerprint {
				tied = true
				ex = task
			}
		}
		if !tied {
			t.Fatalf("group %s: example %s is not a most recent task of the group", g.Fingerprint, g.ExampleID)
		}
		if g.ErrorType != ex.LastError.Type || g.Message != ex.LastError.Message {
			t.Fatalf("group %s: type/message %q %q, want the example's %q %q", g.Fingerprint, g.ErrorType, g.Message, ex.LastError.Type, ex.LastError.Message)
		}
	}
}

func TestListExcludesLiveTasks(t *testing.T) {
	s, q, tasks := newDLQ(t, 5, dlq.Config{})
	ctx := ctxT(t)
	// A pending task with a failure recorded at submission is not dead.
	f := rdq.Failure{Type: "timeout", Message: "handler timed out after 1s", Fingerprint: rdq.Fingerprint("timeout", "handler timed out after 1s")}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{
		ID: rdq.NewID(), Queue: "emails", Handler: "send", Payload: []byte("{}"), Delay: time.Hour,
		FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: f, WorkerID: "w"},
	}}}); err != nil {
		t.Fatal(err)
	}
	got := listAll(t, q, dlq.Filter{}, 2)
	if !slices.Equal(ids(got), ids(expect(tasks, dlq.Filter{}))) {
		t.Fatalf("List shows %v, want only the dead tasks", ids(got))
	}
}

func TestPaginationNeitherSkipsNorRepeats(t *testing.T) {
	s, q, tasks := newDLQ(t, 60, dlq.Config{})
	want := ids(expect(tasks, dlq.Filter{}))
	for _, size := range []int{1, 2, 3, 7, 59, 60, 61, 1000} {
		got := listAll(t, q, dlq.Filter{}, size)
		if !slices.Equal(ids(got), want) {
			t.Fatalf("page size %d: got %v, want %v", size, ids(got), want)
		}
	}

	// Tasks going dead while a listing is in progress are newer than its
	// cursor: the listing neither repeats nor skips what it started with.
	p1, err := q.List(ctxT(t), dlq.Filter{}, dlq.ListOptions{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	seedDead(t, s, []seed{{queue: "emails", handler: "send", errType: "timeout", msg: "late", deadAt: base.Add(1000 * time.Hour)}})
	seen := ids(p1.Tasks)
	token := p1.NextPageToken
	for token != "" {
		p, err := q.List(ctxT(t), dlq.Filter{}, dlq.ListOptions{PageSize: 10, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, ids(p.Tasks)...)
		token = p.NextPageToken
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("listing during inserts: got %v, want %v", seen, want)
	}
}

func TestPageTokens(t *testing.T) {
	_, q, _ := newDLQ(t, 12, dlq.Config{})
	ctx := ctxT(t)
	f := dlq.Filter{Queue: "emails"}
	p, err := q.List(ctx, f, dlq.ListOptions{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.NextPageToken == "" {
		t.Fatal("no next page token")
	}
	for _, c := range p.NextPageToken {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			t.Fatalf("token %q is not URL-safe", p.NextPageToken)
		}
	}
	bad := map[string]struct {
		f     dlq.Filter
		token string
		want  string
	}{
		"garbage":        {f, "not a token!", "not one this version issued"},
		"truncated":      {f, p.NextPageToken[:10], "not one this version issued"},
		"other filter":   {dlq.Filter{Queue: "billing"}, p.NextPageToken, "different filter"},
		"flipped":        {f, flip(p.NextPageToken), ""},
		"padded base64":  {f, p.NextPageToken + "=", "not one this version issued"},
		"wrong version":  {f, "AA" + p.NextPageToken[2:], ""},
		"empty filter":   {dlq.Filter{}, p.NextPageToken, "different filter"},
		"life added":     {dlq.Filter{Queue: "emails", LifeMin: 1}, p.NextPageToken, "different filter"},
		"life bound":     {dlq.Filter{Queue: "emails", LifeBelow: 1}, p.NextPageToken, "different filter"},
		"all-zero bytes": {f, strings.Repeat("A", len(p.NextPageToken)), ""},
	}
	for name, c := range bad {
		_, err := q.List(ctx, c.f, dlq.ListOptions{PageSize: 2, PageToken: c.token})
		if !errors.Is(err, rdq.ErrInvalid) {
			t.Fatalf("%s: err = %v, want rdq.ErrInvalid", name, err)
		}
		if c.want != "" && !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err = %v, want it to mention %q", name, err, c.want)
		}
	}
}

// flip changes a character in the middle of the filter digest, so the
// token decodes but is bound to no filter.
func flip(s string) string {
	b := []byte(s)
	i := len(b) - 3
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestFilterValidation(t *testing.T) {
	_, q, _ := newDLQ(t, 1, dlq.Config{})
	now := time.Now()
	bad := map[string]dlq.Filter{
		"queue charset":        {Queue: "emails; drop table"},
		"queue too long":       {Queue: strings.Repeat("q", rdq.MaxNameLength+1)},
		"handler charset":      {Handler: "-send"},
		"error type too long":  {ErrorType: strings.Repeat("e", dlq.MaxErrorTypeLength+1)},
		"error type control":   {ErrorType: "time\x00out"},
		"fingerprint not hex":  {Fingerprint: "xyz"},
		"fingerprint too long": {Fingerprint: strings.Repeat("a", dlq.MaxFingerprintLength+1)},
		"message too long":     {MessageContains: strings.Repeat("m", dlq.MaxMessageFilterLength+1)},
		"message not utf8":     {MessageContains: "\xff\xfe"},
		"message newline":      {MessageContains: "a\nb"},
		"empty range":          {DeadAfter: now, DeadBefore: now},
		"reversed range":       {DeadAfter: now, DeadBefore: now.Add(-time.Hour)},
		"year 1":               {DeadAfter: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)},
		"zero id":              {IDs: []rdq.ID{{}}},
		"too many ids":         {IDs: make([]rdq.ID, dlq.MaxFilterIDs+1)},
		"negative life":        {LifeMin: -1},
		"negative life bound":  {LifeBelow: -2},
		"life too large":       {LifeMin: dlq.MaxFilterLife + 1},
		"empty life range":     {LifeMin: 2, LifeBelow: 2},
		"reversed life range":  {LifeMin: 3, LifeBelow: 1},
	}
	for name, f := range bad {
		if err := f.Validate(); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want rdq.ErrInvalid", name, err)
		}
		if _, err := q.List(ctxT(t), f, dlq.ListOptions{}); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%s: List = %v, want rdq.ErrInvalid", name, err)
		}
		if _, err := q.Count(ctxT(t), f); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%s: Count = %v, want rdq.ErrInvalid", name, err)
		}
		if _, err := q.Groups(ctxT(t), f); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%s: Groups = %v, want rdq.ErrInvalid", name, err)
		}
	}
	for _, size := range []int{-1, dlq.MaxPageSize + 1} {
		if _, err := q.List(ctxT(t), dlq.Filter{}, dlq.ListOptions{PageSize: size}); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("page size %d: %v, want rdq.ErrInvalid", size, err)
		}
	}
}

func TestShowHistoryAcrossLives(t *testing.T) {
	s, q, tasks := newDLQ(t, 1, dlq.Config{})
	ctx := ctxT(t)
	id := tasks[0].ID
	if err := q.RedriveTask(ctx, id, dlq.RedriveOptions{Actor: "alice", Reason: "retry"}); err != nil {
		t.Fatal(err)
	}
	failAgain(t, s, []rdq.ID{id}, tasks[0].Queue, time.Now().Add(time.Minute))
	d, err := q.Show(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Task.Status != rdq.StatusDead || d.Task.Life != 1 || d.Task.Attempts != 1 {
		t.Fatalf("task %+v: want DEAD, life 1, 1 attempt", d.Task)
	}
	if len(d.Attempts) != 2 || d.Attempts[0].Number != 1 || d.Attempts[0].Life != 0 || d.Attempts[1].Number != 2 || d.Attempts[1].Life != 1 {
		t.Fatalf("history %+v: want attempt 1 in life 0 and attempt 2 in life 1", d.Attempts)
	}
	if d.Attempts[0].Message != tasks[0].LastError.Message || d.Attempts[1].ErrorType != "again" {
		t.Fatalf("history messages %+v", d.Attempts)
	}
	if _, err := q.Show(ctx, rdq.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Show of a missing task: %v, want store.ErrNotFound", err)
	}
	if _, err := q.Show(ctx, rdq.ID{}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("Show of the zero id: %v, want rdq.ErrInvalid", err)
	}
}

func TestDryRunsChangeNothing(t *testing.T) {
	s, q, tasks := newDLQ(t, 30, dlq.Config{})
	ctx := ctxT(t)
	f := dlq.Filter{Queue: "emails"}
	want := int64(len(expect(tasks, f)))
	rr, err := q.Redrive(ctx, f, dlq.RedriveOptions{DryRun: true, Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.DryRun || rr.Matched != want || rr.Redriven != 4 {
		t.Fatalf("redrive dry run = %+v, want matched %d, would redrive 4", rr, want)
	}
	rr, err = q.Redrive(ctx, f, dlq.RedriveOptions{DryRun: true})
	if err != nil || rr.Redriven != want {
		t.Fatalf("redrive dry run = %+v, %v; want %d", rr, err, want)
	}
	pr, err := q.Purge(ctx, f, dlq.PurgeOptions{DryRun: true})
	if err != nil || !pr.DryRun || pr.Matched != want || pr.Purged != want {
		t.Fatalf("purge dry run = %+v, %v; want %d", pr, err, want)
	}
	rt, err := q.Retention(ctx, dlq.RetentionOptions{OlderThan: time.Hour, DryRun: true})
	if err != nil || rt.Purged != int64(len(tasks)) {
		t.Fatalf("retention dry run = %+v, %v; want %d", rt, err, len(tasks))
	}
	res, err := q.RedriveTasks(ctx, []rdq.ID{tasks[0].ID, rdq.NewID()}, dlq.RedriveOptions{DryRun: true})
	if err != nil || res.Redriven != 1 || len(res.Failed) != 1 || !errors.Is(res.Failed[0].Err, store.ErrNotFound) {
		t.Fatalf("ids dry run = %+v, %v", res, err)
	}
	if err := q.EditAndRedrive(ctx, tasks[1].ID, []byte("new"), dlq.RedriveOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		now := get(t, s, task.ID)
		if now.Status != rdq.StatusDead || now.Life != task.Life || !now.UpdatedAt.Equal(task.UpdatedAt) || string(now.Payload) != string(task.Payload) {
			t.Fatalf("dry run changed task %s: %+v", task.ID, now)
		}
	}
	if entries := audit(t, q, ""); len(entries) != 0 {
		t.Fatalf("dry runs wrote %d audit entries", len(entries))
	}
}

func TestRedriveByFilterChunkedWithProgressAndAudit(t *testing.T) {
	s, q, tasks := newDLQ(t, 45, dlq.Config{ChunkSize: 4, Parallelism: 1})
	ctx := ctxT(t)
	f := dlq.Filter{Queue: "billing"}
	want := expect(tasks, f)
	if len(want) != 15 {
		t.Fatalf("corpus has %d billing tasks; the test expects 15", len(want))
	}
	var calls [][2]int64
	res, err := q.Redrive(ctx, f, dlq.RedriveOptions{
		Actor: "alice", Reason: "INC-42 fixed", Progress: func(done, total int64) { calls = append(calls, [2]int64{done, total}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 15 || res.Redriven != 15 || res.AtLimit != 0 || res.DryRun {
		t.Fatalf("result %+v", res)
	}
	wantCalls := [][2]int64{{0, 15}, {4, 15}, {8, 15}, {12, 15}, {15, 15}}
	if !slices.Equal(calls, wantCalls) {
		t.Fatalf("progress calls %v, want %v", calls, wantCalls)
	}
	redriven := map[rdq.ID]bool{}
	for _, task := range want {
		redriven[task.ID] = true
	}
	for _, task := range tasks {
		now := get(t, s, task.ID)
		if redriven[task.ID] {
			if now.Status != rdq.StatusPending || now.Life != 1 || now.Attempts != 0 || now.LastError != task.LastError {
				t.Fatalf("redriven task %+v: want PENDING, life 1, 0 attempts, last error kept", now)
			}
		} else if now.Status != rdq.StatusDead || now.Life != 0 {
			t.Fatalf("task outside the filter changed: %+v", now)
		}
	}
	entries := audit(t, q, dlq.ActionRedrive)
	if len(entries) != 4 {
		t.Fatalf("%d audit entries, want one per chunk (4)", len(entries))
	}
	var total int64
	for _, e := range entries {
		if e.Actor != "alice" || e.Reason != "INC-42 fixed" || !strings.Contains(e.Filter, "billing") {
			t.Fatalf("audit entry %+v", e)
		}
		total += e.Count
	}
	if total != 15 {
		t.Fatalf("audit counts sum to %d, want 15", total)
	}
	if n, _ := q.Count(ctx, f); n != 0 {
		t.Fatalf("%d billing tasks still dead", n)
	}
}

func TestRedriveMax(t *testing.T) {
	_, q, tasks := newDLQ(t, 30, dlq.Config{ChunkSize: 3})
	ctx := ctxT(t)
	f := dlq.Filter{ErrorType: "timeout"}
	matched := int64(len(expect(tasks, f)))
	res, err := q.Redrive(ctx, f, dlq.RedriveOptions{Actor: "bob", Reason: "canary", Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redriven != 5 || res.Matched != matched {
		t.Fatalf("result %+v, want 5 of %d", res, matched)
	}
	if n, _ := q.Count(ctx, f); n != matched-5 {
		t.Fatalf("%d still dead, want %d", n, matched-5)
	}
}

func TestRedriveSpreadWindow(t *testing.T) {
	s, q, tasks := newDLQ(t, 40, dlq.Config{})
	ctx := ctxT(t)
	const delay, spread = time.Hour, 2 * time.Hour
	before := time.Now()
	if _, err := q.Redrive(ctx, dlq.Filter{}, dlq.RedriveOptions{Actor: "a", Reason: "r", All: true, Delay: delay, Spread: spread}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	const skew = 2 * time.Second // database and test share a machine
	distinct := map[time.Time]bool{}
	for _, task := range tasks {
		now := get(t, s, task.ID)
		lo, hi := before.Add(delay-skew), after.Add(delay+spread+skew)
		if now.NextAttemptAt.Before(lo) || !now.NextAttemptAt.Before(hi) {
			t.Fatalf("next attempt %s outside [%s, %s)", now.NextAttemptAt, lo, hi)
		}
		distinct[now.NextAttemptAt] = true
	}
	if len(distinct) < len(tasks)/2 {
		t.Fatalf("only %d distinct due times for %d tasks: not spread", len(distinct), len(tasks))
	}
	// Spread beyond the cap is refused.
	if _, err := q.Redrive(ctx, dlq.Filter{}, dlq.RedriveOptions{Actor: "a", Reason: "r", All: true, Spread: dlq.MaxSpread + 1}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("oversized spread: %v", err)
	}
}

func TestRedriveMaxLifeCap(t *testing.T) {
	s, q, tasks := newDLQ(t, 12, dlq.Config{MaxLife: 1})
	ctx := ctxT(t)
	// Redrive the emails tasks once and kill them again: they are at the cap.
	emails := expect(tasks, dlq.Filter{Queue: "emails"})
	var again []rdq.ID
	for _, task := range emails {
		again = append(again, task.ID)
	}
	if res, err := q.RedriveTasks(ctx, again, dlq.RedriveOptions{Actor: "a", Reason: "first try"}); err != nil || res.Redriven != int64(len(again)) {
		t.Fatalf("%+v %v", res, err)
	}
	failAgain(t, s, again, "emails", time.Now().Add(time.Minute))

	dry, err := q.Redrive(ctx, dlq.Filter{}, dlq.RedriveOptions{All: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Matched != 12 || dry.AtLimit != int64(len(again)) || dry.Redriven != 12-int64(len(again)) || dry.MaxLife != 1 {
		t.Fatalf("dry run %+v, want %d at the cap", dry, len(again))
	}
	res, err := q.Redrive(ctx, dlq.Filter{}, dlq.RedriveOptions{All: true, Actor: "a", Reason: "second try"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redriven != 12-int64(len(again)) || res.AtLimit != int64(len(again)) || res.MaxLife != 1 {
		t.Fatalf("result %+v, want %d at the cap", res, len(again))
	}
	for _, id := range again {
		if now := get(t, s, id); now.Status != rdq.StatusDead || now.Life != 1 {
			t.Fatalf("task at the cap changed: %+v", now)
		}
	}
	err = q.RedriveTask(ctx, again[0], dlq.RedriveOptions{Actor: "a", Reason: "third try"})
	if !errors.Is(err, store.ErrRedriveLimit) {
		t.Fatalf("RedriveTask at the cap: %v, want store.ErrRedriveLimit", err)
	}
	// A per-call cap overrides the default; negative lifts it.
	if err := q.RedriveTask(ctx, again[0], dlq.RedriveOptions{Actor: "a", Reason: "override", MaxLife: -1}); err != nil {
		t.Fatalf("RedriveTask without a cap: %v", err)
	}
}

func TestRedriveTaskErrors(t *testing.T) {
	s, q, tasks := newDLQ(t, 3, dlq.Config{})
	ctx := ctxT(t)
	opts := dlq.RedriveOptions{Actor: "a", Reason: "r"}
	if err := q.RedriveTask(ctx, rdq.NewID(), opts); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing task: %v", err)
	}
	if err := q.RedriveTask(ctx, tasks[0].ID, opts); err != nil {
		t.Fatal(err)
	}
	if err := q.RedriveTask(ctx, tasks[0].ID, opts); !errors.Is(err, store.ErrNotDead) {
		t.Fatalf("pending task: %v", err)
	}
	res, err := q.RedriveTasks(ctx, []rdq.ID{tasks[1].ID, tasks[0].ID, tasks[1].ID}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Redriven != 1 || len(res.Failed) != 1 || res.Failed[0].ID != tasks[0].ID || !errors.Is(res.Failed[0].Err, store.ErrNotDead) {
		t.Fatalf("mixed ids: %+v", res)
	}
	entries := audit(t, q, dlq.ActionRedrive)
	if len(entries) != 2 || len(entries[0].IDs) == 0 || entries[0].Count != 1 {
		t.Fatalf("audit entries %+v", entries)
	}
	if now := get(t, s, tasks[2].ID); now.Status != rdq.StatusDead {
		t.Fatalf("untouched task changed: %+v", now)
	}
}

func TestEditAndRedriveAuditsHashes(t *testing.T) {
	s, q, tasks := newDLQ(t, 2, dlq.Config{})
	ctx := ctxT(t)
	old := tasks[0].Payload
	edited := []byte(`{"n":0,"email":"fixed@example.com"}`)
	if err := q.EditAndRedrive(ctx, tasks[0].ID, edited, dlq.RedriveOptions{Actor: "carol", Reason: "fix address"}); err != nil {
		t.Fatal(err)
	}
	now := get(t, s, tasks[0].ID)
	if string(now.Payload) != string(edited) || now.Status != rdq.StatusPending || now.Life != 1 {
		t.Fatalf("edited task %+v", now)
	}
	entries := audit(t, q, dlq.ActionEditPayload)
	if len(entries) != 1 {
		t.Fatalf("%d edit_payload entries", len(entries))
	}
	e := entries[0]
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	if e.Details["old_sha256"] != sum(old) || e.Details["new_sha256"] != sum(edited) {
		t.Fatalf("details %v, want old %s new %s", e.Details, sum(old), sum(edited))
	}
	if e.Actor != "carol" || e.Reason != "fix address" || e.Count != 1 || !slices.Equal(e.IDs, []rdq.ID{tasks[0].ID}) {
		t.Fatalf("entry %+v", e)
	}
	if err := q.EditAndRedrive(ctx, tasks[1].ID, make([]byte, rdq.MaxPayloadBytes+1), dlq.RedriveOptions{Actor: "a", Reason: "r"}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("oversized payload: %v", err)
	}
	if err := q.EditAndRedrive(ctx, tasks[0].ID, edited, dlq.RedriveOptions{Actor: "a", Reason: "r"}); !errors.Is(err, store.ErrNotDead) {
		t.Fatalf("edit of a pending task: %v", err)
	}
}

func TestMutationsRequireActorReasonAndAll(t *testing.T) {
	_, q, tasks := newDLQ(t, 2, dlq.Config{})
	ctx := ctxT(t)
	f := dlq.Filter{Queue: "emails"}
	checks := map[string]struct {
		err  error
		want error
	}{}
	add := func(name string, err, want error) { checks[name] = struct{ err, want error }{err, want} }
	_, err := q.Redrive(ctx, f, dlq.RedriveOptions{Reason: "r"})
	add("redrive no actor", err, dlq.ErrActorRequired)
	_, err = q.Redrive(ctx, f, dlq.RedriveOptions{Actor: "a"})
	add("redrive no reason", err, dlq.ErrReasonRequired)
	_, err = q.Redrive(ctx, dlq.Filter{}, dlq.RedriveOptions{Actor: "a", Reason: "r"})
	add("redrive empty filter", err, dlq.ErrAllRequired)
	add("redrive task no actor", q.RedriveTask(ctx, tasks[0].ID, dlq.RedriveOptions{Reason: "r"}), dlq.ErrActorRequired)
	add("edit no actor", q.EditAndRedrive(ctx, tasks[0].ID, []byte("x"), dlq.RedriveOptions{Reason: "r"}), dlq.ErrActorRequired)
	_, err = q.Purge(ctx, f, dlq.PurgeOptions{Reason: "r"})
	add("purge no actor", err, dlq.ErrActorRequired)
	_, err = q.Purge(ctx, f, dlq.PurgeOptions{Actor: "a"})
	add("purge no reason", err, dlq.ErrReasonRequired)
	_, err = q.Purge(ctx, dlq.Filter{}, dlq.PurgeOptions{Actor: "a", Reason: "r"})
	add("purge empty filter", err, dlq.ErrAllRequired)
	_, err = q.Retention(ctx, dlq.RetentionOptions{OlderThan: time.Hour})
	add("retention no actor", err, dlq.ErrActorRequired)
	_, err = q.Retention(ctx, dlq.RetentionOptions{Actor: "a"})
	add("retention no age", err, rdq.ErrInvalid)
	_, err = q.Redrive(ctx, f, dlq.RedriveOptions{Actor: "a\x07", Reason: "r"})
	add("actor control char", err, rdq.ErrInvalid)
	_, err = q.Purge(ctx, f, dlq.PurgeOptions{Actor: "a", Reason: strings.Repeat("r", dlq.MaxReasonLength+1)})
	add("reason too long", err, rdq.ErrInvalid)
	for name, c := range checks {
		if !errors.Is(c.err, c.want) || !errors.Is(c.err, rdq.ErrInvalid) {
			t.Errorf("%s: %v, want %v", name, c.err, c.want)
		}
	}
	if n, _ := q.Count(ctx, dlq.Filter{}); n != 2 {
		t.Fatalf("refused mutations changed the DLQ: %d dead", n)
	}
	if e := audit(t, q, ""); len(e) != 0 {
		t.Fatalf("refused mutations wrote audit entries: %+v", e)
	}
}

func TestPurge(t *testing.T) {
	s, q, tasks := newDLQ(t, 40, dlq.Config{ChunkSize: 5})
	ctx := ctxT(t)

	// By ids: only dead tasks go.
	if err := q.RedriveTask(ctx, tasks[0].ID, dlq.RedriveOptions{Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	res, err := q.Purge(ctx, dlq.Filter{IDs: []rdq.ID{tasks[0].ID, tasks[1].ID, tasks[2].ID}}, dlq.PurgeOptions{Actor: "dave", Reason: "junk"})
	if err != nil || res.Purged != 2 || res.Matched != 2 {
		t.Fatalf("purge by ids: %+v %v", res, err)
	}
	if get(t, s, tasks[0].ID).Status != rdq.StatusPending {
		t.Fatal("purge by id deleted a pending task")
	}
	for _, id := range []rdq.ID{tasks[1].ID, tasks[2].ID} {
		if _, _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("purged task %s: Get = %v", id, err)
		}
	}
	rest := tasks[3:]

	// By fingerprint, chunked, with progress and a max.
	fp := rest[0].LastError.Fingerprint
	f := dlq.Filter{Fingerprint: fp}
	matched := int64(len(expect(rest, f)))
	var calls [][2]int64
	res, err = q.Purge(ctx, f, dlq.PurgeOptions{Actor: "dave", Reason: "known bad", Max: matched - 1,
		Progress: func(d, total int64) { calls = append(calls, [2]int64{d, total}) }})
	if err != nil || res.Purged != matched-1 || res.Matched != matched {
		t.Fatalf("purge by fingerprint: %+v %v (matched %d)", res, err, matched)
	}
	if last := calls[len(calls)-1]; last != [2]int64{matched - 1, matched - 1} || calls[0] != [2]int64{0, matched - 1} {
		t.Fatalf("progress %v", calls)
	}
	if n, _ := q.Count(ctx, f); n != 1 {
		t.Fatalf("%d left, want 1", n)
	}

	// By filter: everything in billing.
	res, err = q.Purge(ctx, dlq.Filter{Queue: "billing"}, dlq.PurgeOptions{Actor: "dave", Reason: "queue retired"})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Count(ctx, dlq.Filter{Queue: "billing"}); n != 0 || res.Purged == 0 {
		t.Fatalf("billing purge left %d (purged %d)", n, res.Purged)
	}

	var sum int64
	entries := audit(t, q, dlq.ActionPurge)
	for _, e := range entries {
		if e.Actor != "dave" {
			t.Fatalf("entry %+v", e)
		}
		sum += e.Count
	}
	if want := 2 + (matched - 1) + res.Purged; sum != want {
		t.Fatalf("purge audit counts sum to %d, want %d", sum, want)
	}
	if len(entries) < 4 {
		t.Fatalf("%d purge entries; chunks of 5 should give more", len(entries))
	}
}

func TestRetentionAndMetrics(t *testing.T) {
	var redriven, purged, retention counter
	s, q, tasks := newDLQ(t, 6, dlq.Config{Metrics: dlq.Metrics{Redriven: &redriven, Purged: &purged, RetentionPurged: &retention}})
	ctx := ctxT(t)
	// The corpus went dead in 2025; add one that went dead just now.
	fresh := seedDead(t, s, []seed{{queue: "emails", handler: "send", errType: "timeout", msg: "new", deadAt: time.Now().UTC().Truncate(time.Second)}})
	res, err := q.Retention(ctx, dlq.RetentionOptions{OlderThan: 24 * time.Hour, Actor: "retention-job"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Purged != int64(len(tasks)) {
		t.Fatalf("retention purged %d, want %d", res.Purged, len(tasks))
	}
	if get(t, s, fresh[0].ID).Status != rdq.StatusDead {
		t.Fatal("retention deleted a fresh task")
	}
	entries := audit(t, q, dlq.ActionRetention)
	if len(entries) != 1 || entries[0].Actor != "retention-job" || entries[0].Count != 6 || !strings.Contains(entries[0].Reason, "24h") {
		t.Fatalf("retention audit %+v", entries)
	}
	if err := q.RedriveTask(ctx, fresh[0].ID, dlq.RedriveOptions{Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	seedDead(t, s, []seed{{queue: "x", handler: "h", errType: "e", msg: "m", deadAt: base}, {queue: "x", handler: "h", errType: "e", msg: "m", deadAt: base}})
	if _, err := q.Purge(ctx, dlq.Filter{Queue: "x"}, dlq.PurgeOptions{Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		got  *counter
		want float64
	}{"retention": {&retention, 6}, "redriven": {&redriven, 1}, "purged": {&purged, 2}} {
		if got := c.got.value(); got != c.want {
			t.Errorf("%s counter = %v, want %v", name, got, c.want)
		}
	}
	// A DLQ without counters counts nothing and needs none.
	if _, err := dlq.New(s, dlq.Config{}); err != nil {
		t.Fatalf("a DLQ without metrics: %v", err)
	}
	if _, err := q.Retention(ctx, dlq.RetentionOptions{OlderThan: time.Hour, Actor: "a", Filter: dlq.Filter{DeadBefore: base}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("retention with dead-before: %v", err)
	}
}

func TestAuditQueries(t *testing.T) {
	_, q, tasks := newDLQ(t, 6, dlq.Config{})
	ctx := ctxT(t)
	start := time.Now().Add(-time.Minute)
	if err := q.RedriveTask(ctx, tasks[0].ID, dlq.RedriveOptions{Actor: "alice", Reason: "one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Purge(ctx, dlq.Filter{IDs: []rdq.ID{tasks[1].ID}}, dlq.PurgeOptions{Actor: "bob", Reason: "two"}); err != nil {
		t.Fatal(err)
	}
	if err := q.EditAndRedrive(ctx, tasks[2].ID, []byte("{}"), dlq.RedriveOptions{Actor: "alice", Reason: "three"}); err != nil {
		t.Fatal(err)
	}
	all, err := q.Audit(ctx, dlq.AuditQuery{})
	if err != nil || len(all) != 3 || all[0].Reason != "three" || all[2].Reason != "one" {
		t.Fatalf("all entries newest first: %+v %v", all, err)
	}
	byActor, _ := q.Audit(ctx, dlq.AuditQuery{Actor: "alice"})
	byAction, _ := q.Audit(ctx, dlq.AuditQuery{Action: dlq.ActionPurge})
	if len(byActor) != 2 || len(byAction) != 1 || byAction[0].Actor != "bob" {
		t.Fatalf("by actor %+v, by action %+v", byActor, byAction)
	}
	inRange, _ := q.Audit(ctx, dlq.AuditQuery{Since: start, Until: time.Now().Add(time.Minute)})
	future, _ := q.Audit(ctx, dlq.AuditQuery{Since: time.Now().Add(time.Hour)})
	if len(inRange) != 3 || len(future) != 0 {
		t.Fatalf("time range: %d entries, future %d", len(inRange), len(future))
	}
	page, _ := q.Audit(ctx, dlq.AuditQuery{Limit: 2})
	next, _ := q.Audit(ctx, dlq.AuditQuery{Limit: 2, BeforeID: page[1].ID})
	if len(page) != 2 || len(next) != 1 || next[0].Reason != "one" {
		t.Fatalf("audit paging %+v then %+v", page, next)
	}
	for name, aq := range map[string]dlq.AuditQuery{
		"bad action": {Action: "DROP TABLE"}, "reversed": {Since: time.Now(), Until: time.Now().Add(-time.Hour)},
		"limit": {Limit: dlq.MaxPageSize + 1}, "before": {BeforeID: -1},
	} {
		if _, err := q.Audit(ctx, aq); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestStats(t *testing.T) {
	_, q, tasks := newDLQ(t, 9, dlq.Config{})
	ctx := ctxT(t)
	if err := q.RedriveTask(ctx, tasks[0].ID, dlq.RedriveOptions{Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	stats, err := q.Stats(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.QueueStats{}
	for _, s := range stats {
		got[s.Queue] = s
	}
	if len(stats) != 3 || got["emails"].Dead != 2 || got["emails"].Pending != 1 || got["billing"].Dead != 3 {
		t.Fatalf("stats %+v", stats)
	}
	if _, err := q.Stats(ctx, -time.Second); !errors.Is(err, rdq.ErrInvalid) {
		t.Fatalf("negative window: %v", err)
	}
}

// A redriven task whose next lease expires is reclaimed and finishes
// normally: attempt numbers continue across lives and never collide.
func TestRedrivenTaskReclaimAfterLeaseExpiry(t *testing.T) {
	s, q, tasks := newDLQ(t, 1, dlq.Config{})
	ctx := ctxT(t)
	id := tasks[0].ID
	if err := q.RedriveTask(ctx, id, dlq.RedriveOptions{Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Minute)
	claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{tasks[0].Queue}, Limit: 1, Lease: time.Second, WorkerID: "w1", Now: &at})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	later := at.Add(time.Minute)
	reclaimed, err := s.ReclaimExpired(ctx, store.ReclaimParams{Limit: 10, Lease: time.Minute, WorkerID: "w2", Now: &later})
	if err != nil || len(reclaimed) != 1 {
		t.Fatalf("reclaim: %v %v", reclaimed, err)
	}
	errs, err := s.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: id, Token: reclaimed[0].LeaseToken}, Status: rdq.StatusPending, RetryIn: time.Second,
	}}, Now: &later})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	claimAt := later.Add(time.Minute)
	claimed, err = s.Claim(ctx, store.ClaimParams{Queues: []string{tasks[0].Queue}, Limit: 1, Lease: time.Minute, WorkerID: "w3", Now: &claimAt})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("second claim: %v %v", claimed, err)
	}
	errs, err = s.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: id, Token: claimed[0].LeaseToken}, Status: rdq.StatusSucceeded,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w3", Duration: time.Millisecond},
	}}, Now: &claimAt})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	d, err := q.Show(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Task.Status != rdq.StatusSucceeded || len(d.Attempts) != 3 {
		t.Fatalf("task %+v with %d attempts", d.Task, len(d.Attempts))
	}
	for i, a := range d.Attempts {
		wantLife := 1
		if i == 0 {
			wantLife = 0
		}
		if a.Number != i+1 || a.Life != wantLife {
			t.Fatalf("attempt %d: number %d life %d", i, a.Number, a.Life)
		}
	}
	if d.Attempts[1].Outcome != rdq.OutcomeLeaseExpired || d.Attempts[1].WorkerID != "w1" || d.Attempts[2].Outcome != rdq.OutcomeSuccess {
		t.Fatalf("history %+v", d.Attempts)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, cfg := range []dlq.Config{{ChunkSize: -1}, {ChunkSize: dlq.MaxChunkSize + 1}, {MaxLife: -1}, {Parallelism: -1}, {Parallelism: dlq.MaxParallelism + 1}} {
		if _, err := dlq.New(exampleStore(), cfg); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want rdq.ErrInvalid", cfg, err)
		}
	}
	if _, err := dlq.New(nil, dlq.Config{}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("New(nil) = %v", err)
	}
}

func TestParallelChunks(t *testing.T) {
	s, q, tasks := newDLQ(t, 45, dlq.Config{ChunkSize: 3, Parallelism: 4})
	ctx := ctxT(t)
	var mu sync.Mutex
	var last int64
	progress := func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if done < last || done > total {
			t.Errorf("progress went from %d to %d of %d", last, done, total)
		}
		last = done
	}
	res, err := q.Redrive(ctx, dlq.Filter{}, dlq.RedriveOptions{All: true, Actor: "a", Reason: "r", Max: 40, Progress: progress})
	if err != nil || res.Redriven != 40 || last != 40 {
		t.Fatalf("redrive %+v %v, last progress %d", res, err, last)
	}
	var sum int64
	for _, e := range audit(t, q, dlq.ActionRedrive) {
		if e.Count > 3 {
			t.Fatalf("chunk of %d, chunk size 3", e.Count)
		}
		sum += e.Count
	}
	pending := 0
	for _, task := range tasks {
		if get(t, s, task.ID).Status == rdq.StatusPending {
			pending++
		}
	}
	if sum != 40 || pending != 40 {
		t.Fatalf("audit sum %d, %d pending; want 40", sum, pending)
	}
	last = 0
	pr, err := q.Purge(ctx, dlq.Filter{}, dlq.PurgeOptions{All: true, Actor: "a", Reason: "r", Progress: progress})
	if err != nil || pr.Purged != 5 || last != 5 {
		t.Fatalf("purge %+v %v", pr, err)
	}
	if n, _ := q.Count(ctx, dlq.Filter{}); n != 0 {
		t.Fatalf("%d dead left", n)
	}
}

// chunkingBackend names its own bulk chunk size (store.BulkChunker) and
// records how many tasks each store call was asked to change.
type chunkingBackend struct {
	dlq.Backend
	size int

	mu      sync.Mutex
	redrive []int // the Limit of each RedriveDead call
	purge   []int // the Limit of each PurgeDead call
	ids     []int // the number of IDs of each Redrive call
}

func (b *chunkingBackend) BulkChunkSize() int { return b.size }

func (b *chunkingBackend) RedriveDead(ctx context.Context, p store.RedriveDeadParams) (store.RedriveDeadResult, error) {
	b.mu.Lock()
	b.redrive = append(b.redrive, p.Limit)
	b.mu.Unlock()
	return b.Backend.RedriveDead(ctx, p)
}

func (b *chunkingBackend) PurgeDead(ctx context.Context, p store.PurgeDeadParams) (int64, error) {
	b.mu.Lock()
	b.purge = append(b.purge, p.Limit)
	b.mu.Unlock()
	return b.Backend.PurgeDead(ctx, p)
}

func (b *chunkingBackend) Redrive(ctx context.Context, p store.RedriveParams) ([]error, error) {
	b.mu.Lock()
	b.ids = append(b.ids, len(p.IDs))
	b.mu.Unlock()
	return b.Backend.Redrive(ctx, p)
}

// TestBackendChunkSize: without a ChunkSize, a redrive or purge by filter
// runs in chunks of the backend's BulkChunkSize, and tasks named by ID go
// in batches of DefaultChunkSize; a ChunkSize applies to all of them.
func TestBackendChunkSize(t *testing.T) {
	s, _, tasks := newDLQ(t, 45, dlq.Config{})
	ctx := ctxT(t)
	b := &chunkingBackend{Backend: s, size: 4}
	q, err := dlq.New(b, dlq.Config{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Redrive(ctx, dlq.Filter{Queue: "billing"}, dlq.RedriveOptions{Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	ids := make([]rdq.ID, 0, 6)
	for _, task := range expect(tasks, dlq.Filter{Queue: "emails"})[:6] {
		ids = append(ids, task.ID)
	}
	if _, err := q.RedriveTasks(ctx, ids, dlq.RedriveOptions{Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Purge(ctx, dlq.Filter{}, dlq.PurgeOptions{All: true, Actor: "a", Reason: "r", Max: 10}); err != nil {
		t.Fatal(err)
	}
	if want := []int{4, 4, 4, 3}; !slices.Equal(b.redrive, want) {
		t.Errorf("RedriveDead limits %v, want %v", b.redrive, want)
	}
	if want := []int{6}; !slices.Equal(b.ids, want) {
		t.Errorf("Redrive batches %v, want %v", b.ids, want)
	}
	if want := []int{4, 4, 2}; !slices.Equal(b.purge, want) {
		t.Errorf("PurgeDead limits %v, want %v", b.purge, want)
	}

	b2 := &chunkingBackend{Backend: s, size: 4}
	q2, err := dlq.New(b2, dlq.Config{ChunkSize: 5, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q2.Purge(ctx, dlq.Filter{}, dlq.PurgeOptions{All: true, Actor: "a", Reason: "r", Max: 7}); err != nil {
		t.Fatal(err)
	}
	if want := []int{5, 2}; !slices.Equal(b2.purge, want) {
		t.Errorf("with ChunkSize 5, PurgeDead limits %v, want %v", b2.purge, want)
	}
}

// counter is a dlq.Counter that remembers its total.
type counter struct {
	mu sync.Mutex
	n  float64
}

func (c *counter) Add(v float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += v
}

func (c *counter) value() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestBackendOf: BackendOf finds the admin interface of a store, and the
// backend it returns lets the store's other capabilities be found through
// it (here the chunk size the DLQ then uses).
func TestBackendOf(t *testing.T) {
	s, _, _ := newDLQ(t, 9, dlq.Config{})
	ctx := ctxT(t)
	inner := &chunkingBackend{Backend: s, size: 4}
	b, ok := dlq.BackendOf(inner)
	if !ok {
		t.Fatal("BackendOf: no admin interface in a backend")
	}
	bc, ok := store.BulkChunkerOf(b)
	if !ok || bc.BulkChunkSize() != 4 {
		t.Fatalf("BulkChunkerOf(BackendOf(store)) = %v, %v; want the store's chunk size 4", bc, ok)
	}
	q, err := dlq.New(b, dlq.Config{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Purge(ctx, dlq.Filter{}, dlq.PurgeOptions{All: true, Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if want := []int{4, 4, 1}; !slices.Equal(inner.purge, want) {
		t.Errorf("PurgeDead limits %v, want %v", inner.purge, want)
	}
	if _, ok := dlq.BackendOf(struct{ store.Store }{}); ok {
		t.Error("BackendOf found an admin interface in a store without one")
	}
}
