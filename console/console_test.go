package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

func TestConfigIsChecked(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	allow := func(*http.Request, console.Action, string) error { return nil }
	name := func(*http.Request) string { return "x" }
	for _, cfg := range []console.Config{
		{Authorize: allow, Actor: name},
		{Store: s, Actor: name},
		{Store: s, Authorize: allow},
		{Store: s, Authorize: allow, Actor: name, Prefix: "ops"},
		{Store: s, Authorize: allow, Actor: name, Prefix: `/a"b`},
	} {
		if _, err := console.New(cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
}

func TestEveryPageRenders(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "timed out after 30s", stack: "goroutine 1 [running]:\nmain.send()",
		headers: map[string]string{"traceparent": "00-abc-01"}})
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "timed out after 31s"})
	e.dead(deadSpec{queue: "billing", handler: "charge", errType: "validation", msg: "amount -5 is negative"})
	if _, err := e.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "emails", Handler: "send", Delay: time.Hour},
		{ID: rdq.NewID(), Queue: "emails", Handler: "send"},
	}}); err != nil {
		t.Fatal(err)
	}

	r := e.get(userAdmin, "/")
	if r.status != 200 {
		t.Fatalf("overview: %d %s", r.status, r.body)
	}
	mustContain(t, r.body, "<th scope=\"row\">emails</th>", "<th scope=\"row\">billing</th>", `class="chart"`, "Pause", "since redriven or purged are not counted")
	// emails: 1 due, none retrying, 1 scheduled (the delayed one), none
	// held, none in flight, 2 dead.
	if !regexp.MustCompile(`emails</th>\s*<td class="n">1</td>\s*<td class="n">0</td>\s*<td class="n"><a href="/live\?queue=emails&amp;state=scheduled">1</a></td>\s*<td class="n">0</td>\s*<td class="n">0</td>\s*<td class="n"><a href="/dead\?queue=emails">2</a>`).MatchString(r.body) {
		t.Errorf("overview counts of emails are wrong:\n%s", r.body)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}

	r = e.get(userAdmin, "/dead?queue=emails")
	mustContain(t, r.body, `<strong class="count">2</strong>`, "timed out after 30s", "timed out after 31s")
	mustNotContain(t, r.body, "amount -5")

	r = e.get(userAdmin, "/groups")
	mustContain(t, r.body, "<strong class=\"count\">3</strong> dead tasks in 2", "emails / send", `class="spark"`,
		"/dead?fingerprint="+rdq.Fingerprint("timeout", "timed out after 30s"))
	if strings.Index(r.body, "timeout") > strings.Index(r.body, "validation") {
		t.Error("groups are not biggest first")
	}

	r = e.get(userAdmin, "/tasks/"+id.String())
	mustContain(t, r.body, "Life 0", "Attempt 1", "PERMANENT_FAILURE", "Stack trace", "main.send()", "traceparent", "worker-1", "1.5s",
		"&#34;n&#34;: 1", "application/json", "7 bytes")

	r = e.get(userAdmin, "/audit")
	if r.status != 200 {
		t.Fatalf("audit: %d", r.status)
	}
	r = e.get(userAdmin, "/bulk?op=redrive&queue=emails")
	mustContain(t, r.body, "Dry run", "queue=emails")

	for _, p := range []string{"/static/htmx.min.js", "/static/console.css", "/static/console.js"} {
		r := e.get("", p)
		if r.status != 200 || len(r.body) < 100 {
			t.Errorf("%s: %d, %d bytes", p, r.status, len(r.body))
		}
	}
	if r := e.get(userAdmin, "/nope"); r.status != 404 {
		t.Errorf("unknown page: %d", r.status)
	}
	if r := e.get(userAdmin, "/tasks/"+rdq.NewID().String()); r.status != 404 {
		t.Errorf("unknown task: %d", r.status)
	}
	if r := e.get(userAdmin, "/dead?dead_after=yesterday"); r.status != 400 || !strings.Contains(r.body, "dead after") {
		t.Errorf("bad filter: %d %s", r.status, r.body)
	}
}

func TestListPagesWithKeysetTokens(t *testing.T) {
	e := newEnv(t, "")
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for i := range 7 {
		at := base.Add(time.Duration(i) * time.Second)
		e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "m", at: &at})
	}
	seen := map[string]bool{}
	path := "/dead?queue=emails&size=3"
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("too many pages")
		}
		r := e.get(userAdmin, path)
		for _, m := range regexp.MustCompile(`href="/tasks/([0-9a-f-]{36})"`).FindAllStringSubmatch(r.body, -1) {
			if seen[m[1]] {
				t.Errorf("task %s shown twice", m[1])
			}
			seen[m[1]] = true
		}
		path = ""
		if m := regexp.MustCompile(`href="(/dead\?[^"]+)" rel="next"`).FindStringSubmatch(r.body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 7 {
		t.Errorf("paging showed %d of 7 tasks", len(seen))
	}
}

func TestPauseAndResume(t *testing.T) {
	e := newEnv(t, "")
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	if r := e.post(userAdmin, "/queues/pause", url.Values{"queue": {"emails"}}); r.status != 400 || !strings.Contains(r.body, "reason is required") {
		t.Fatalf("pause without reason: %d %s", r.status, r.body)
	}
	// A reason follows the rules of every audited reason: bounded, no
	// control characters.
	for _, bad := range []string{strings.Repeat("x", 5000), "INC-1\x1b[2J"} {
		if r := e.post(userAdmin, "/queues/pause", url.Values{"queue": {"emails"}, "reason": {bad}}); r.status != 400 {
			t.Fatalf("pause with reason %.20q: %d %s", bad, r.status, r.body)
		}
	}
	if p := e.paused(); len(p) != 0 {
		t.Fatalf("a refused pause paused %v", p)
	}
	r := e.post(userAdmin, "/queues/pause", url.Values{"queue": {"emails"}, "reason": {"INC-1 relay down"}})
	if r.status != http.StatusSeeOther || r.loc != "/?done=paused" {
		t.Fatalf("pause: %d %s", r.status, r.loc)
	}
	if p := e.paused(); len(p) != 1 || p[0] != "emails" {
		t.Fatalf("paused %v", p)
	}
	mustContain(t, e.get(userAdmin, "/").body, "badge paused", "Resume")
	e.post(userAdmin, "/queues/resume", url.Values{"queue": {"emails"}, "reason": {"relay back"}})
	if p := e.paused(); len(p) != 0 {
		t.Fatalf("still paused: %v", p)
	}
	a := e.auditEntries()
	if len(a) != 2 || a[0].Action != "resume" || a[1].Action != "pause" || a[1].Actor != userAdmin || a[1].Reason != "INC-1 relay down" {
		t.Errorf("audit %+v", a)
	}
}

func TestRedriveAndPurgeOneTask(t *testing.T) {
	e := newEnv(t, "")
	a := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	b := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	if r := e.post(userOperator, "/tasks/"+a.String()+"/redrive", url.Values{}); r.status != 400 {
		t.Errorf("redrive without reason: %d", r.status)
	}
	r := e.post(userOperator, "/tasks/"+a.String()+"/redrive", url.Values{"reason": {"fixed"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("redrive: %d %s", r.status, r.body)
	}
	if task, _ := e.task(a); task.Status != rdq.StatusPending || task.Life != 1 {
		t.Errorf("after redrive: %s life %d", task.Status, task.Life)
	}
	if r := e.post(userOperator, "/tasks/"+a.String()+"/redrive", url.Values{"reason": {"again"}}); r.status != http.StatusConflict {
		t.Errorf("redriving a pending task: %d", r.status)
	}
	r = e.post(userOperator, "/tasks/"+b.String()+"/purge", url.Values{"reason": {"junk"}})
	if r.status != http.StatusSeeOther || e.exists(b) {
		t.Fatalf("purge: %d, exists %v", r.status, e.exists(b))
	}
	entries := e.auditEntries()
	if len(entries) != 2 || entries[0].Action != "purge" || entries[1].Action != "redrive" || entries[0].Actor != userOperator || entries[1].Actor != userOperator {
		t.Errorf("audit %+v", entries)
	}
	// The task page lists the entries that touched it.
	mustContain(t, e.get(userOperator, "/tasks/"+a.String()).body, "<td>redrive</td>", "<td>fixed</td>", "by id", "(redriven once)")
}

func TestEditPayloadShowsDiffValidatesAndRedrives(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y", payload: `{"to":"a@example.com","n":1}`})
	r := e.post(userOperator, "/tasks/"+id.String()+"/edit", url.Values{"payload": {`{"to": "a@example.com",`}})
	if r.status != 400 || !strings.Contains(r.body, "not valid JSON") || strings.Contains(r.body, "/edit/confirm") {
		t.Fatalf("invalid JSON: %d", r.status)
	}
	newPayload := "{\r\n  \"to\": \"b@example.com\",\r\n  \"n\": 1\r\n}"
	r = e.post(userOperator, "/tasks/"+id.String()+"/edit", url.Values{"payload": {newPayload}})
	if r.status != 200 {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	mustContain(t, r.body, `<span class="ddel">-   &#34;to&#34;: &#34;a@example.com&#34;,</span>`,
		`<span class="dadd">&#43;   &#34;to&#34;: &#34;b@example.com&#34;,</span>`, `<span class="dsame">    &#34;n&#34;: 1</span>`, "/edit/confirm")
	if task, _ := e.task(id); task.Status != rdq.StatusDead {
		t.Fatal("the review step changed the task")
	}
	r = e.post(userOperator, "/tasks/"+id.String()+"/edit/confirm", url.Values{"payload": {newPayload}, "reason": {"wrong address"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("confirm: %d %s", r.status, r.body)
	}
	task, _ := e.task(id)
	if task.Status != rdq.StatusPending || string(task.Payload) != "{\n  \"to\": \"b@example.com\",\n  \"n\": 1\n}" {
		t.Errorf("after edit: %s %q", task.Status, task.Payload)
	}
	if a := e.auditEntries(); len(a) != 1 || a[0].Action != "edit_payload" || a[0].Actor != userOperator || a[0].Details["new_sha256"] == "" {
		t.Errorf("audit %+v", a)
	}
}

func TestBulkRedriveDryRunConfirmAndCap(t *testing.T) {
	e := newEnv(t, "")
	var ids []rdq.ID
	for range 3 {
		ids = append(ids, e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down"}))
	}
	other := e.dead(deadSpec{queue: "emails", handler: "send", errType: "validation", msg: "bad"})
	fp := rdq.Fingerprint("timeout", "relay down")
	form := url.Values{"op": {"redrive"}, "queue": {"emails"}, "fingerprint": {fp}, "spread": {"1s"}}
	r := e.post(userOperator, "/bulk/dry-run", form)
	if r.status != 200 {
		t.Fatalf("dry run: %d %s", r.status, r.body)
	}
	mustContain(t, r.body, "redrive <span class=\"count\">3</span> dead tasks", "queue=emails fingerprint="+fp, `name="confirmed" value="3"`, "spread over 1s")
	for _, id := range ids {
		if task, _ := e.task(id); task.Status != rdq.StatusDead {
			t.Fatal("the dry run changed a task")
		}
	}
	// A task of the group dies after the dry run: the confirmed count caps
	// the action, so it stays dead.
	late := e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down"})

	run := url.Values{"reason": {"relay fixed"}, "confirmed": {"3"}}
	for k, v := range form {
		run[k] = v
	}
	r = e.post(userOperator, "/bulk/run", url.Values{"confirmed": {"3"}, "op": {"redrive"}, "queue": {"emails"}, "fingerprint": {fp}})
	if r.status != 400 {
		t.Errorf("run without reason: %d", r.status)
	}
	r = e.post(userOperator, "/bulk/run", run)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.loc, "/jobs/") {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	done := e.waitJob(userOperator, r.loc)
	mustContain(t, done.body, "<strong class=\"count\">3</strong> tasks redriven", "Its audit entries", "/audit?action=redrive&amp;actor=operator")
	redriven := 0
	for _, id := range append(ids, late) {
		if task, _ := e.task(id); task.Status == rdq.StatusPending {
			redriven++
		}
	}
	if redriven != 3 {
		t.Errorf("%d tasks redriven; the confirmed count was 3", redriven)
	}
	if task, _ := e.task(other); task.Status != rdq.StatusDead {
		t.Error("a task outside the filter was redriven")
	}
	a := e.auditEntries()
	if len(a) == 0 || a[0].Actor != userOperator || a[0].Action != "redrive" || a[0].Reason != "relay fixed" {
		t.Errorf("audit %+v", a)
	}
	// The job page's audit link finds the entry.
	m := regexp.MustCompile(`href="(/audit\?[^"]+)"`).FindStringSubmatch(done.body)
	if m == nil {
		t.Fatal("no audit link")
	}
	mustContain(t, e.get(userOperator, strings.ReplaceAll(m[1], "&amp;", "&")+"&queue=emails").body, "<td>relay fixed</td>")
}

func TestBulkPurgeAndTheWholeQueueNeedsAll(t *testing.T) {
	e := newEnv(t, "")
	a := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	b := e.dead(deadSpec{queue: "billing", handler: "charge", errType: "x", msg: "y"})
	if r := e.post(userAdmin, "/bulk/dry-run", url.Values{"op": {"purge"}}); r.status != 400 || !strings.Contains(r.body, "whole dead-letter queue") {
		t.Errorf("empty filter without all: %d", r.status)
	}
	r := e.post(userAdmin, "/bulk/dry-run", url.Values{"op": {"purge"}, "all": {"1"}})
	mustContain(t, r.body, "delete for good <span class=\"count\">2</span> dead tasks", "all dead tasks")
	r = e.post(userAdmin, "/bulk/run", url.Values{"op": {"purge"}, "all": {"1"}, "confirmed": {"2"}, "reason": {"cleanup"}})
	e.waitJob(userAdmin, r.loc)
	if e.exists(a) || e.exists(b) {
		t.Error("purge left tasks")
	}
}

func TestAuditFilters(t *testing.T) {
	e := newEnv(t, "")
	a := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	b := e.dead(deadSpec{queue: "billing", handler: "charge", errType: "x", msg: "y"})
	e.post(userAdmin, "/tasks/"+a.String()+"/redrive", url.Values{"reason": {"r-one"}})
	e.post(userOperator, "/queues/pause", url.Values{"queue": {"emails"}, "reason": {"r-two"}}) // refused: operators do not pause
	e.post(userAdmin, "/queues/pause", url.Values{"queue": {"billing"}, "reason": {"r-three"}})
	e.post(userAdmin, "/tasks/"+b.String()+"/purge", url.Values{"reason": {"r-four"}})

	r := e.get(userAdmin, "/audit")
	mustContain(t, r.body, "r-one", "r-three", "r-four")
	mustNotContain(t, r.body, "r-two")
	r = e.get(userAdmin, "/audit?action=pause")
	mustContain(t, r.body, "r-three")
	mustNotContain(t, r.body, "r-one", "r-four")
	r = e.get(userAdmin, "/audit?queue=billing")
	mustContain(t, r.body, "r-three")
	mustNotContain(t, r.body, "r-one")
	r = e.get(userAdmin, "/audit?actor=nobody")
	mustContain(t, r.body, "No entry matches")
	future := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04")
	mustContain(t, e.get(userAdmin, "/audit?since="+future).body, "No entry matches")
}

func TestMountedUnderAPrefix(t *testing.T) {
	e := newEnv(t, "/ops/rdq/")
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	r := e.get(userAdmin, "/")
	if r.status != 200 {
		t.Fatalf("%d", r.status)
	}
	for _, m := range regexp.MustCompile(`(?:href|action|src|hx-get)="([^"]*)"`).FindAllStringSubmatch(r.body, -1) {
		if u := m[1]; !strings.HasPrefix(u, "/ops/rdq/") && u != "?" && u != "#main" {
			t.Errorf("URL %q is outside the prefix", u)
		}
	}
	r = e.post(userAdmin, "/tasks/"+id.String()+"/redrive", url.Values{"reason": {"x"}})
	if r.status != http.StatusSeeOther || r.loc != "/ops/rdq/tasks/"+id.String()+"?done=redriven" {
		t.Errorf("redirect %d %q", r.status, r.loc)
	}
	res, err := http.Get(e.srv.URL + "/tasks/" + id.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("outside the prefix: %d", res.StatusCode)
	}
}

func TestOversizedFormIsRefused(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	r := e.post(userAdmin, "/tasks/"+id.String()+"/edit", url.Values{"payload": {strings.Repeat("x", 5<<20)}})
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.body, "payloads are limited") {
		t.Errorf("%d %s", r.status, excerpt(r.body))
	}
	if task, _ := e.task(id); task.Status != rdq.StatusDead {
		t.Error("the task changed")
	}
}

// TestAuditQueueFindsRedriveByIDs checks that the audit log filtered by
// queue finds a bulk redrive of ticked tasks and a purge of one task: their
// selection is IDs, which name no queue.
func TestAuditQueueFindsRedriveByIDs(t *testing.T) {
	e := newEnv(t, "")
	const n = 300
	batch := make([]store.NewTask, n)
	form := url.Values{"op": {"redrive"}, "selected": {"1"}, "confirmed": {strconv.Itoa(n)}, "reason": {"replay-payments"}}
	for i := range batch {
		batch[i] = store.NewTask{
			ID: rdq.NewID(), Queue: "payments", Handler: "charge", Payload: []byte(`{}`), ContentType: "application/json",
			FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "x", Message: "y", Fingerprint: rdq.Fingerprint("x", "y")}},
		}
		form.Add("id", batch[i].ID.String())
	}
	if _, err := e.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: batch}); err != nil {
		t.Fatal(err)
	}
	other := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	e.post(userAdmin, "/tasks/"+other.String()+"/purge", url.Values{"reason": {"purge-emails"}})

	r := e.post(userAdmin, "/bulk/run", form)
	if r.status != http.StatusSeeOther {
		t.Fatalf("bulk run: %d %s", r.status, excerpt(r.body))
	}
	e.waitJob(userAdmin, r.loc)
	var redriven int64
	for _, en := range e.auditEntries() {
		if en.TouchesQueue("payments") {
			redriven += en.Count
		}
	}
	if redriven != n {
		t.Fatalf("audit entries touching payments count %d tasks, want %d: %+v", redriven, n, e.auditEntries())
	}

	r = e.get(userAdmin, "/audit?queue=payments")
	mustContain(t, r.body, "replay-payments", "<td>payments</td>")
	mustNotContain(t, r.body, "purge-emails", "No entry matches")
	r = e.get(userAdmin, "/audit?queue=emails")
	mustContain(t, r.body, "purge-emails")
	mustNotContain(t, r.body, "replay-payments")
}
