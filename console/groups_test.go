package console_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// plantGroups makes n failure groups of one dead task each, in queue
// emails.
func plantGroups(t testing.TB, add func(deadSpec) any, n int) {
	t.Helper()
	for i := range n {
		add(deadSpec{queue: "emails", handler: "send", errType: fmt.Sprintf("E%03d", i), msg: fmt.Sprintf("failure kind %d", i)})
	}
}

func TestGroupsPageThroughEveryGroup(t *testing.T) {
	e := newEnv(t, "")
	plantGroups(t, func(s deadSpec) any { return e.dead(s) }, 230)
	seen := map[string]bool{}
	rows := func(body string) int { return strings.Count(body, `<td><code class="etype">E`) }
	r := e.get(userAdmin, "/groups")
	mustContain(t, r.body, "in 230 groups", "groups 1 to 100", `href="/groups?offset=100" rel="next">Next groups (130 more)</a>`)
	mustNotContain(t, r.body, `rel="prev"`)
	for _, path := range []string{"/groups", "/groups?offset=100", "/groups?offset=200"} {
		body := e.get(userAdmin, path).body
		for i := range 230 {
			if strings.Contains(body, fmt.Sprintf(`<code class="etype">E%03d</code>`, i)) {
				if seen[fmt.Sprint(i)] {
					t.Errorf("group E%03d on two pages", i)
				}
				seen[fmt.Sprint(i)] = true
			}
		}
		if n := rows(body); path == "/groups?offset=200" && n != 30 || path != "/groups?offset=200" && n != 100 {
			t.Errorf("%s shows %d groups", path, n)
		}
	}
	if len(seen) != 230 {
		t.Errorf("the pages show %d of 230 groups", len(seen))
	}
	last := e.get(userAdmin, "/groups?offset=200").body
	mustContain(t, last, "groups 201 to 230", `href="/groups?offset=100" rel="prev">Previous groups</a>`)
	mustNotContain(t, last, `rel="next"`)
	for _, bad := range []string{"-100", "7", "x"} {
		if r := e.get(userAdmin, "/groups?offset="+bad); r.status != 400 || !strings.Contains(r.body, "use a multiple of 100") {
			t.Errorf("offset %s: %d", bad, r.status)
		}
	}
	// Groups that died in the last minutes are charted over the last
	// hour, not over a day where they would be one bar.
	mustContain(t, r.body, `<th scope="col">Last 1 h</th>`, `aria-label="1 went dead in the last 1 h"`)
}

func TestGroupChartWindowFollowsTheIncident(t *testing.T) {
	e := newEnv(t, "")
	old := time.Now().Add(-5 * time.Hour)
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "slow", at: &old})
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "refused", msg: "down"})
	// The earliest last death is 5 hours ago: 43 bars of 7 minutes.
	mustContain(t, e.get(userAdmin, "/groups").body, `<th scope="col">Last 301 min</th>`, `aria-label="1 went dead in the last 301 min"`)
}

func TestBrowserGroupsPaging(t *testing.T) {
	b := newBrowserEnv(t)
	plantGroups(t, func(s deadSpec) any { return b.dead(s) }, 130)
	b.login(userAdmin)
	var n int
	b.run(chromedp.Navigate(b.base+browserPrefix+"/groups"), chromedp.WaitVisible(`table.groups`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('table.groups tbody tr').length`, &n))
	if n != 100 {
		t.Fatalf("the first page shows %d groups", n)
	}
	b.run(chromedp.Click(`a[rel="next"]`, chromedp.ByQuery), chromedp.WaitVisible(`a[rel="prev"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('table.groups tbody tr').length`, &n))
	if n != 30 {
		t.Errorf("the second page shows %d groups, want the last 30", n)
	}
	if s := b.text(`p.summary`); !strings.Contains(s, "groups 101 to 130") {
		t.Errorf("the second page says %q", s)
	}
}

func TestSelectionNamesTheTasksToActOn(t *testing.T) {
	e := newEnv(t, "")
	a := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	b := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	mustContain(t, e.get(userOperator, "/dead?queue=emails").body,
		`<form method="get" action="/bulk" id="selection"`, `name="id" value="`+a.String()+`" form="selection"`,
		`<input type="hidden" name="queue" value="emails">`,
		// Full ids: time-ordered ids cut to 13 characters all look alike.
		`">`+a.String()+`</a>`, `">`+b.String()+`</a>`)
	// A reader may act on nothing: no boxes.
	mustNotContain(t, e.get(userReader, "/dead?queue=emails").body, `id="selection"`, `type="checkbox"`)
	// An empty selection is refused, not taken for "everything".
	if r := e.get(userOperator, "/bulk?selected=1&op=redrive"); r.status != 400 || !strings.Contains(r.body, "no task is selected") {
		t.Errorf("an empty selection: %d", r.status)
	}
	if r := e.get(userOperator, "/bulk?selected=1&op=redrive&id=nope"); r.status != 400 || !strings.Contains(r.body, "is not a task id") {
		t.Errorf("a bad id: %d", r.status)
	}
	r := e.post(userOperator, "/bulk/dry-run", map[string][]string{"op": {"redrive"}, "queue": {"emails"}, "id": {b.String()}})
	mustContain(t, r.body, "redrive <span class=\"count\">1</span> dead tasks", "id="+b.String())
	// An empty list says so.
	mustContain(t, e.get(userAdmin, "/dead?queue=nothing").body, `No dead task matches <code>queue=nothing</code>: nothing to redrive or purge.`)
	mustNotContain(t, e.get(userAdmin, "/dead?queue=nothing").body, `Redrive all matching`)
}

// bulkWarnMsg is the failure of plantDiedAgain's group: text that must be
// shown escaped.
const bulkWarnMsg = `refused <script>alert(1)</script>`

// plantDiedAgain makes a group of four dead tasks in payments/charge, three of
// which die again after a redrive, and opens the handler's breaker; it
// returns the group's fingerprint.
func plantDiedAgain(t testing.TB, s *pgstore.Store) string {
	t.Helper()
	ctx := context.Background()
	var ids []rdq.ID
	for range 4 {
		ids = append(ids, addDead(t, s, deadSpec{queue: "payments", handler: "charge", errType: "net.OpError", msg: bulkWarnMsg}))
	}
	fp := rdq.Fingerprint("net.OpError", bulkWarnMsg)
	if _, err := s.Redrive(ctx, store.RedriveParams{IDs: ids[:3], Actor: "op", Reason: "try"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"payments"}, Handlers: []string{"charge"}, Limit: 10, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed %d: %v", len(claimed), err)
	}
	var cs []store.Completion
	for _, tk := range claimed {
		cs = append(cs, store.Completion{Lease: store.Lease{ID: tk.ID, Token: tk.LeaseToken}, Status: rdq.StatusDead,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, WorkerID: "w",
				Failure: rdq.Failure{Type: "net.OpError", Message: bulkWarnMsg, Fingerprint: fp}}})
	}
	if _, err := s.Finish(ctx, store.FinishParams{Completions: cs}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PauseHandler(ctx, store.PauseHandlerParams{Queue: "payments", Handler: "charge", CoolOff: time.Minute,
		Actor: "breaker", Reason: "4 tasks failed alike", Fingerprint: fp}); err != nil {
		t.Fatal(err)
	}
	return fp
}

func TestBulkConfirmationSaysWhatAndWarns(t *testing.T) {
	e := newEnv(t, "")
	a := e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "slow"})
	r := e.post(userAdmin, "/bulk/dry-run", url.Values{"op": {"redrive"}, "id": {a.String()}})
	mustContain(t, r.body, "<h2>What this is</h2>", "<code>timeout</code>", "emails / send<br>", `<a class="mono" href="/tasks/`+a.String()+`">`)
	mustNotContain(t, r.body, "already died again", "circuit breaker")

	fp := plantDiedAgain(t, e.s)
	body := e.post(userAdmin, "/bulk/dry-run", url.Values{"op": {"redrive"}, "fingerprint": {fp}}).body
	mustContain(t, body, "<code>net.OpError</code>", "refused &lt;script&gt;alert(1)&lt;/script&gt;",
		"<strong>3 of these 4 tasks already died again after a redrive.</strong>",
		"<strong>The circuit breaker of handler <code>charge</code> in queue <code>payments</code> is open</strong>", "redriven tasks will wait until it closes")
	mustNotContain(t, body, "<script>alert(1)</script>")
	if n := strings.Count(body, `<a class="mono" href="/tasks/`); n != 3 {
		t.Errorf("the confirmation shows %d sample tasks, want 3", n)
	}
}

func TestBrowserBulkConfirmationWarns(t *testing.T) {
	b := newBrowserEnv(t)
	fp := plantDiedAgain(t, b.s)
	b.login(userAdmin)
	b.run(chromedp.Navigate(b.base+browserPrefix+"/bulk?op=redrive&fingerprint="+fp), chromedp.WaitVisible(`form.bulk`, chromedp.ByQuery),
		chromedp.Click(`form.bulk button[type="submit"]`, chromedp.ByQuery), chromedp.WaitVisible(`form.confirm`, chromedp.ByQuery),
		b.screenshot("console-bulk-warning"))
	var warnings []string
	b.run(chromedp.Evaluate(`Array.from(document.querySelectorAll('p.warning[role="alert"]')).map(p => p.textContent)`, &warnings))
	if len(warnings) != 2 || !strings.Contains(warnings[0], "3 of these 4 tasks already died again") || !strings.Contains(warnings[1], "circuit breaker of handler charge in queue payments is open") {
		t.Errorf("the confirmation's warnings: %q", warnings)
	}
	if s := b.text(`section.selection`); !strings.Contains(s, "net.OpError") || !strings.Contains(s, "refused <script>alert(1)</script>") {
		t.Errorf("what the selection is: %q", s)
	}
}

func TestFiltersTakeHowLongAgo(t *testing.T) {
	e := newEnv(t, "")
	old := time.Now().Add(-3 * time.Hour)
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "old", msg: "hours ago", at: &old})
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "new", msg: "just now"})
	for _, ago := range []string{"1h", "90m", "5400s"} {
		body := e.get(userAdmin, "/dead?dead_after="+ago).body
		mustContain(t, body, `<code class="etype">new</code>`)
		mustNotContain(t, body, `<code class="etype">old</code>`)
	}
	mustContain(t, e.get(userAdmin, "/dead?dead_after=1d").body, `<code class="etype">new</code>`, `<code class="etype">old</code>`)
	for _, bad := range []string{"1x", "-1h", "h", "99999999999d"} {
		if r := e.get(userAdmin, "/dead?dead_after="+url.QueryEscape(bad)); r.status != 400 || !strings.Contains(r.body, "how long ago (15m, 1h, 1d)") {
			t.Errorf("dead_after=%s: %d", bad, r.status)
		}
	}
}

func TestFindByIDOrIdempotencyKey(t *testing.T) {
	e := newEnv(t, "")
	dead := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	keyed := rdq.NewID()
	if _, err := e.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{
		{ID: keyed, Queue: "emails", Handler: "send", Payload: []byte(`{}`), IdempotencyKey: "order-42"},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, query string
		status      int
		loc, says   string
	}{
		{userReader, "q=" + dead.String(), 303, "/tasks/" + dead.String(), ""},
		{userReader, "q=+" + keyed.String() + "+", 303, "/tasks/" + keyed.String(), ""},
		{userReader, "q=order-42&queue=emails", 303, "/tasks/" + keyed.String(), ""},
		{userReader, "q=order-43&queue=emails", 404, "", "not found"},
		{userReader, "q=order-42", 400, "", "give its queue too"},
		{userReader, "q=", 400, "", "nothing to find"},
		// A queue the person may not read: as if no task held the key.
		{userOther, "q=order-42&queue=emails", 404, "", "no task holds key"},
	} {
		r := e.get(c.user, "/find?"+c.query)
		if r.status != c.status || r.loc != c.loc || !strings.Contains(r.body, c.says) {
			t.Errorf("find %s as %s: %d %q %q", c.query, c.user, r.status, r.loc, excerpt(r.body))
		}
	}
}

func TestStackMarksTheHandlersFrames(t *testing.T) {
	e := newEnv(t, "")
	stack := "goroutine 7 [running]:\n" +
		"runtime/debug.Stack()\n\t/usr/lib/go/src/runtime/debug/stack.go:26 +0x5e\n" +
		"github.com/srjn45/rdq/worker.(*Worker).run.func1()\n\t/src/rdq/worker/worker.go:512 +0x45\n" +
		"panic({0x6b2f40?, 0xc000012345?})\n\t/usr/lib/go/src/runtime/panic.go:770 +0x132\n" +
		"example.com/shop/billing.charge(<script>)\n\t/src/shop/billing/charge.go:41 +0x1d\n" +
		"github.com/srjn45/rdq/worker.(*Worker).execute()\n\t/src/rdq/worker/worker.go:600 +0x99\n"
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "panic", msg: "boom", stack: stack})
	body := e.get(userAdmin, "/tasks/"+id.String()).body
	mustContain(t, body,
		"Stack trace: <code>example.com/shop/billing.charge(&lt;script&gt;) at /src/shop/billing/charge.go:41 &#43;0x1d</code>",
		`<mark class="hf">example.com/shop/billing.charge(&lt;script&gt;)</mark>`,
		`<mark class="hf">	/src/shop/billing/charge.go:41 &#43;0x1d</mark>`,
		`<span class="rt">github.com/srjn45/rdq/worker.(*Worker).run.func1()</span>`,
		`<span class="rt">runtime/debug.Stack()</span>`,
		`<span class="rt">panic({0x6b2f40?, 0xc000012345?})</span>`)
	if n := strings.Count(body, `<mark class="hf">`); n != 2 {
		t.Errorf("%d lines marked as the handler's, want its one frame's 2", n)
	}
}

func TestRecentChangesSummariseManyIDs(t *testing.T) {
	e := newEnv(t, "")
	var ids []rdq.ID
	for range 5 {
		ids = append(ids, e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"}))
	}
	if _, err := e.s.Redrive(context.Background(), store.RedriveParams{IDs: ids, Actor: "op", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	body := e.get(userAdmin, "/").body
	mustContain(t, body, "5 tasks by id")
	mustNotContain(t, body, `href="/tasks/`+ids[0].String())
}
