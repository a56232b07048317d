package console_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// addWaiting enqueues a task that waits: never tried (retrying false) or
// with one failed attempt (retrying true), due in an hour.
func (e *env) addWaiting(queue string, retrying bool) rdq.ID {
	e.t.Helper()
	id := rdq.NewID()
	nt := store.NewTask{ID: id, Queue: queue, Handler: "send", Payload: []byte(`{}`), ContentType: "application/json", Delay: time.Hour}
	if retrying {
		nt.FirstFailure = &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, WorkerID: "w",
			Failure: rdq.Failure{Type: "timeout", Message: "slow <b>relay</b>", Fingerprint: rdq.Fingerprint("timeout", "slow relay")}}
	}
	if _, err := e.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{nt}}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func TestLiveTasksListAndActions(t *testing.T) {
	e := newEnv(t, "")
	fresh := e.addWaiting("emails", false)
	retrying := e.addWaiting("emails", true)

	mustContain(t, e.get(userAdmin, "/").body, `href="/live"`)
	r := e.get(userOperator, "/live?state=scheduled&queue=emails")
	mustContain(t, r.body, "/tasks/"+fresh.String())
	mustNotContain(t, r.body, "/tasks/"+retrying.String())
	r = e.get(userOperator, "/live?state=pending&queue=emails")
	mustNotContain(t, r.body, "/tasks/"+fresh.String(), "/tasks/"+retrying.String()) // due in an hour
	r = e.get(userOperator, "/live?state=retrying&queue=emails")
	mustContain(t, r.body, "/tasks/"+retrying.String(), "slow &lt;b&gt;relay&lt;/b&gt;")
	mustNotContain(t, r.body, "/tasks/"+fresh.String(), "<b>relay")
	if r := e.get(userOperator, "/live?state=sleeping"); r.status != 400 {
		t.Errorf("bad state: %d", r.status)
	}
	mustContain(t, e.get(userOperator, "/tasks/"+retrying.String()).body, "/retry-now\"", "/cancel\"")

	// Refused: the reader, and the operator of another queue (to whom
	// the task is as missing).
	before := e.snapshot(fresh, retrying)
	for _, u := range []string{userReader, userOther} {
		want := http.StatusForbidden
		if u == userOther {
			want = http.StatusNotFound
		}
		for _, p := range []string{"/retry-now", "/cancel"} {
			if r := e.post(u, "/tasks/"+retrying.String()+p, url.Values{"reason": {"r"}}); r.status != want {
				t.Errorf("%s %s: %d, want %d", u, p, r.status, want)
			}
		}
		if r := e.get(u, "/live?queue=emails"); u == userOther && r.status != http.StatusForbidden {
			t.Errorf("%s lists emails: %d", u, r.status)
		}
	}
	mustNotContain(t, e.get(userReader, "/tasks/"+retrying.String()).body, "/retry-now\"", "/cancel\"")
	if !before.equal(e.snapshot(fresh, retrying)) {
		t.Fatal("a refused request changed the state")
	}

	if r := e.post(userOperator, "/tasks/"+retrying.String()+"/retry-now", url.Values{}); r.status != 400 {
		t.Errorf("retry now without reason: %d", r.status)
	}
	r = e.post(userOperator, "/tasks/"+retrying.String()+"/retry-now", url.Values{"reason": {"relay is back"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("retry now: %d %s", r.status, excerpt(r.body))
	}
	if task, _ := e.task(retrying); task.Status != rdq.StatusPending || task.NextAttemptAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("after retry now: %s due %s", task.Status, task.NextAttemptAt)
	}
	r = e.post(userOperator, "/tasks/"+fresh.String()+"/cancel", url.Values{"reason": {"not needed"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", r.status, excerpt(r.body))
	}
	task, attempts := e.task(fresh)
	if task.Status != rdq.StatusDead || len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomeCancelled {
		t.Errorf("after cancel: %s %+v", task.Status, attempts)
	}
	// The history names who cancelled, not a worker that ran something.
	page := e.get(userOperator, "/tasks/"+fresh.String()).body
	mustContain(t, page, `by <span class="mono">`+userOperator+`</span>`, "never redriven")
	mustNotContain(t, page, "ran ")
	if r := e.post(userOperator, "/tasks/"+fresh.String()+"/cancel", url.Values{"reason": {"again"}}); r.status != http.StatusConflict {
		t.Errorf("cancelling a dead task: %d", r.status)
	}
	var actions []string
	for _, a := range e.auditEntries() {
		if a.Actor == userOperator {
			actions = append(actions, a.Action)
		}
	}
	if !slices.Equal(actions, []string{"cancel", "retry_now"}) {
		t.Errorf("audit actions %v", actions)
	}
	if !strings.Contains(e.get(userAdmin, "/audit?action=cancel").body, "not needed") {
		t.Error("the audit page lacks the cancel entry")
	}
}

// TestWaitingStates: the overview splits the waiting tasks into due,
// retrying (after a failure), scheduled (delayed, never tried) and held (a
// paused handler's); the live list marks a held task held instead of
// showing a due time it will not keep, and a delayed one scheduled.
func TestWaitingStates(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	delayed := e.addWaiting("emails", false)
	retrying := e.addWaiting("emails", true)
	if _, err := e.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "emails", Handler: "send", Payload: []byte(`{}`), ContentType: "application/json"},
		{ID: rdq.NewID(), Queue: "sms", Handler: "send", Payload: []byte(`{}`), ContentType: "application/json"},
	}}); err != nil {
		t.Fatal(err)
	}
	held := e.addWaiting("sms", true)
	row := func(queue string) string {
		t.Helper()
		body := e.get(userAdmin, "/").body
		i := strings.Index(body, `<th scope="row">`+queue+`</th>`)
		if i < 0 {
			t.Fatalf("no row for %s in %s", queue, excerpt(body))
		}
		end := strings.Index(body[i:], "</tr>")
		return body[i : i+end]
	}
	cells := func(queue string) []string {
		t.Helper()
		var out []string
		for _, c := range strings.Split(row(queue), `<td class="n">`)[1:5] {
			out = append(out, strings.TrimSpace(c[:strings.Index(c, "</td>")]))
		}
		return out
	}
	// Due, Retrying, Scheduled, Held.
	if got, want := cells("emails"), []string{"1", `<a href="/live?queue=emails&amp;state=retrying">1</a>`, `<a href="/live?queue=emails&amp;state=scheduled">1</a>`, "0"}; !slices.Equal(got, want) {
		t.Errorf("emails: %q, want %q", got, want)
	}
	if got, want := cells("sms"), []string{"1", `<a href="/live?queue=sms&amp;state=retrying">1</a>`, "0", "0"}; !slices.Equal(got, want) {
		t.Errorf("sms: %q, want %q", got, want)
	}
	mustContain(t, e.get(userAdmin, "/").body, `title="Not tried yet, due later: submitted with a delay or redriven with a spread">Scheduled</th>`)

	if _, err := e.s.PauseHandler(ctx, store.PauseHandlerParams{Queue: "sms", Handler: "send", Actor: "ops", Reason: "down"}); err != nil {
		t.Fatal(err)
	}
	// Both sms tasks, the due one and the retrying one, are held now.
	if got, want := cells("sms"), []string{"0", "0", "0", "2"}; !slices.Equal(got, want) {
		t.Errorf("sms held: %q, want %q", got, want)
	}
	r := e.get(userAdmin, "/live?state=retrying&queue=sms")
	mustContain(t, r.body, "/tasks/"+held.String(), `title="Its handler is paused: it waits until the handler is resumed">held</span>`)
	r = e.get(userAdmin, "/live?state=retrying&queue=emails")
	mustContain(t, r.body, "/tasks/"+retrying.String())
	mustNotContain(t, r.body, ">held</span>", ">scheduled</span>")
	// Pending lists the due task, Scheduled the delayed one; each tab
	// counts what it lists.
	r = e.get(userAdmin, "/live?state=pending&queue=emails")
	mustContain(t, r.body, `aria-current="page">Pending <span class="count">1</span></a>`,
		`state=retrying" title="Failed at least once in their current life, waiting for their next try">Retrying <span class="count">1</span></a>`,
		`state=scheduled" title="Not tried yet in their current life, due later: submitted with a delay or redriven with a spread">Scheduled <span class="count">1</span></a>`,
		`state=in_flight" title="Being run by a worker" class="empty">In flight <span class="count">0</span></a>`)
	mustNotContain(t, r.body, "/tasks/"+delayed.String(), ">scheduled</span>")
	r = e.get(userAdmin, "/live?state=scheduled&queue=emails")
	mustContain(t, r.body, `aria-current="page">Scheduled <span class="count">1</span></a>`, "/tasks/"+delayed.String())
	if n := strings.Count(r.body, ">scheduled</span>"); n != 1 {
		t.Errorf("scheduled emails: %d tasks marked scheduled, want the delayed one only", n)
	}
	mustNotContain(t, r.body, "/tasks/"+retrying.String())
	r = e.get(userAdmin, "/live?state=scheduled&queue=sms")
	mustContain(t, r.body, "No task in this state matches.", `class="empty">Scheduled <span class="count">0</span></a>`)
}

// TestTaskPageReading: a live task's page marks the Live section of the
// nav, a dead one's the Dead section; a panic's type and its message
// ("panic: …") read "panic" once.
func TestTaskPageReading(t *testing.T) {
	e := newEnv(t, "")
	waiting := e.addWaiting("emails", false)
	mustContain(t, e.get(userAdmin, "/tasks/"+waiting.String()).body, `<a href="/live" aria-current="page">`)
	dead := e.dead(deadSpec{queue: "emails", handler: "send", errType: "panic", msg: "panic: index out of range [3] with length 2"})
	r := e.get(userAdmin, "/tasks/"+dead.String())
	mustContain(t, r.body, `<a href="/dead" aria-current="page">`, `<code class="etype">panic</code>: index out of range [3] with length 2`)
	mustNotContain(t, r.body, "panic</code> panic:")

	ctx := context.Background()
	id := rdq.NewID()
	if _, err := e.s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: id, Queue: "sms", Handler: "text", Payload: []byte(`{}`),
		ContentType: "application/json", Delay: time.Hour, FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, WorkerID: "w",
			Failure: rdq.Failure{Type: "panic", Message: "panic: nil map", Fingerprint: rdq.Fingerprint("panic", "panic: nil map")}}}}}); err != nil {
		t.Fatal(err)
	}
	r = e.get(userAdmin, "/live?state=retrying&queue=sms")
	mustContain(t, r.body, `<code class="etype">panic</code>: nil map`)
	mustNotContain(t, r.body, "panic</code> panic:")
}

// TestErrorTypesBreakBetweenParts: an error type may break after a dot, a
// slash or an underscore, is escaped, and the task pages offer to copy the
// full id.
func TestErrorTypesBreakBetweenParts(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "*json.SyntaxError<b>", msg: "bad"})
	r := e.get(userAdmin, "/dead")
	mustContain(t, r.body, `<td><code class="etype">*json.<wbr>SyntaxError&lt;b&gt;</code></td>`,
		`<button type="button" class="copy js-only" data-copy="`+id.String()+`"`)
	mustNotContain(t, r.body, "SyntaxError<b>")
	mustContain(t, e.get(userAdmin, "/groups").body, `<code class="etype">*json.<wbr>SyntaxError&lt;b&gt;</code>`)
	mustContain(t, e.get(userAdmin, "/tasks/"+id.String()).body, `<button type="button" class="copy js-only" data-copy="`+id.String()+`" aria-label="Copy the task id">Copy id</button>`)
}

// TestLongMessagesCollapse: a message of many lines shows its first line
// until opened; a short one is shown whole.
func TestLongMessagesCollapse(t *testing.T) {
	e := newEnv(t, "")
	long := e.dead(deadSpec{queue: "emails", handler: "send", errType: "validation", msg: "field <a> is invalid\nline 2\nline 3\nline 4\nline 5"})
	short := e.dead(deadSpec{queue: "emails", handler: "send", errType: "validation", msg: "field b is invalid"})
	r := e.get(userAdmin, "/tasks/"+long.String())
	mustContain(t, r.body, `<details class="msg long"><summary>field &lt;a&gt; is invalid</summary><pre tabindex="0">field &lt;a&gt; is invalid
line 2`, `<details class="long"><summary> field &lt;a&gt; is invalid</summary>`)
	r = e.get(userAdmin, "/tasks/"+short.String())
	mustContain(t, r.body, `<p class="msg">field b is invalid</p>`)
	mustNotContain(t, r.body, `<details class="msg long">`, `<details class="long">`)
}
