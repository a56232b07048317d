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
	r := e.get(userOperator, "/live?state=pending&queue=emails")
	mustContain(t, r.body, "/tasks/"+fresh.String())
	mustNotContain(t, r.body, "/tasks/"+retrying.String())
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
