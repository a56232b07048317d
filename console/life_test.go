package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// killAgain redrives the dead tasks ids and kills each again with the
// given failure: they are dead in their next life.
func (e *env) killAgain(queue string, f rdq.Failure, ids ...rdq.ID) {
	e.t.Helper()
	ctx := context.Background()
	errs, err := e.s.Redrive(ctx, store.RedriveParams{IDs: ids, Actor: "test", Reason: "loop"})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	claimed, err := e.s.Claim(ctx, store.ClaimParams{Queues: []string{queue}, Limit: len(ids) + 10, Lease: time.Minute, WorkerID: "worker-2"})
	if err != nil || len(claimed) != len(ids) {
		e.t.Fatalf("claimed %d of %d redriven tasks: %v", len(claimed), len(ids), err)
	}
	var cs []store.Completion
	for _, c := range claimed {
		cs = append(cs, store.Completion{Lease: store.Lease{ID: c.ID, Token: c.LeaseToken}, Status: rdq.StatusDead,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: "worker-2", Duration: time.Second}})
	}
	if _, err := e.s.Finish(ctx, store.FinishParams{Completions: cs}); err != nil {
		e.t.Fatal(err)
	}
}

// The life filter finds redrive loops on the dead-task, groups and bulk
// pages, lives in the query string, and keeps page tokens bound to it.
func TestLifeFilter(t *testing.T) {
	e := newEnv(t, "")
	again := rdq.Failure{Type: "timeout", Message: "relay still down", Fingerprint: rdq.Fingerprint("timeout", "relay still down")}
	var loop []rdq.ID
	for range 3 {
		loop = append(loop, e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down"}))
	}
	fresh := e.dead(deadSpec{queue: "emails", handler: "send", errType: "validation", msg: "bad address"})
	e.killAgain("emails", again, loop...)
	e.killAgain("emails", again, loop[0])

	r := e.get(userAdmin, "/dead?life_min=1")
	if r.status != 200 {
		t.Fatalf("/dead?life_min=1: %d %s", r.status, r.body)
	}
	mustContain(t, r.body, "life&gt;=1", `name="life_min" type="number" min="0" inputmode="numeric" value="1"`,
		loop[0].String(), loop[1].String(), loop[2].String(), "life filters are not counted in advance")
	mustNotContain(t, r.body, fresh.String())
	r = e.get(userAdmin, "/dead?life_below=1")
	mustContain(t, r.body, fresh.String(), "<code>life=0</code>")
	mustNotContain(t, r.body, loop[0].String(), loop[1].String())
	r = e.get(userAdmin, "/dead?life_below=2")
	mustContain(t, r.body, fresh.String(), loop[1].String(), "<code>life&lt;2</code>")
	mustNotContain(t, r.body, loop[0].String())
	r = e.get(userAdmin, "/dead?life_min=1&life_below=2")
	mustContain(t, r.body, loop[1].String(), loop[2].String(), "<code>life=1</code>")
	mustNotContain(t, r.body, loop[0].String(), fresh.String())

	// Paging keeps the filter, and a token is refused with another filter.
	r = e.get(userAdmin, "/dead?life_min=1&size=2")
	m := regexp.MustCompile(`href="(/dead\?[^"]+)" rel="next"`).FindStringSubmatch(r.body)
	if m == nil {
		t.Fatalf("no next page:\n%s", r.body)
	}
	next := strings.ReplaceAll(m[1], "&amp;", "&")
	u, err := url.Parse(next)
	if err != nil || u.Query().Get("life_min") != "1" {
		t.Fatalf("next page %q lost the life filter", next)
	}
	mustContain(t, e.get(userAdmin, next).body, loop[2].String()[:8])
	u.RawQuery = strings.Replace(u.RawQuery, "life_min=1", "life_min=2", 1)
	if r := e.get(userAdmin, u.String()); r.status != http.StatusBadRequest || !strings.Contains(r.body, "different filter") {
		t.Errorf("a life_min=1 token with life_min=2: %d, want 400 naming the filter", r.status)
	}

	// Groups: only the loop's failure.
	r = e.get(userAdmin, "/groups?life_min=1")
	mustContain(t, r.body, again.Fingerprint)
	mustNotContain(t, r.body, rdq.Fingerprint("validation", "bad address"))

	// Bulk: the dry run counts the loop; the confirmation keeps the filter.
	r = e.post(userOperator, "/bulk/dry-run", url.Values{"op": {"redrive"}, "queue": {"emails"}, "life_min": {"2"}})
	if r.status != 200 {
		t.Fatalf("dry run: %d %s", r.status, r.body)
	}
	mustContain(t, r.body, `redrive <span class="count">1</span> dead tasks`, `name="life_min" value="2"`, `href="/dead?life_min=2&amp;queue=emails">Cancel`)

	// Bad bounds are refused with what to do, and change nothing.
	for path, want := range map[string]string{
		"/dead?life_min=two":              "not a whole number",
		"/dead?life_min=2&life_below=2":   "empty range",
		"/dead?life_below=-1":             "outside 0",
		"/groups?life_min=99999999999999": "outside 0",
	} {
		if r := e.get(userAdmin, path); r.status != http.StatusBadRequest || !strings.Contains(r.body, want) {
			t.Errorf("%s: %d, want 400 mentioning %q", path, r.status, want)
		}
	}
	if task, _ := e.task(loop[0]); task.Status != rdq.StatusDead || task.Life != 2 {
		t.Errorf("loop task: %s life %d, want DEAD in life 2", task.Status, task.Life)
	}
}

// TestGroupFirstSeenIsTheFailuresOrigin: a group redriven and dead again
// is dated by when its failure first happened, not by the redrive.
func TestGroupFirstSeenIsTheFailuresOrigin(t *testing.T) {
	e := newEnv(t, "")
	outage := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Second)
	f := rdq.Failure{Type: "conn", Message: "refused", Fingerprint: rdq.Fingerprint("conn", "refused")}
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: f.Type, msg: f.Message, at: &outage})
	fresh := e.dead(deadSpec{queue: "emails", handler: "send", errType: "other", msg: "new"})
	e.killAgain("emails", f, id)
	redead, _ := e.task(id)
	if !redead.FinishedAt.After(outage.Add(time.Hour)) {
		t.Fatalf("the redriven task died again at %s, not after the outage at %s", redead.FinishedAt, outage)
	}
	body := e.get(userAdmin, "/groups").body
	mustContain(t, body, `<span title="When the failure first happened; the first of these tasks to die again did so at `+
		redead.FinishedAt.UTC().Format("2006-01-02 15:04:05")+` UTC, after a redrive">`+timeHTML(outage)+`</span>`)
	// A group that never was redriven reads its first death.
	freshTask, _ := e.task(fresh)
	mustContain(t, body, `<td>`+timeHTML(freshTask.FinishedAt)+`</td>`)
	// Narrowed to a queue, the page reads no task outside it: the
	// group is dated by its deaths.
	mustNotContain(t, e.get(userAdmin, "/groups?queue=emails").body, "When the failure first happened")
}

// timeHTML is how the console writes a time.
func timeHTML(t time.Time) string {
	u := t.UTC()
	return `<time datetime="` + u.Format(time.RFC3339Nano) + `" title="` + u.Format("2006-01-02 15:04:05.000 UTC") + `">` + u.Format("2006-01-02 15:04:05") + `</time>`
}
