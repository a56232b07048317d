package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/srjn45/rdq/store"
)

func TestHandlerBreakers(t *testing.T) {
	e := newEnv(t, "")
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	mustContain(t, e.get(userAdmin, "/").body, "every breaker is closed", "/handlers/pause", `<span class="badge running">running</span>`)

	paused := func() []store.HandlerPause {
		t.Helper()
		ps, err := e.s.PausedHandlers(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	// Operators may not pause; nothing changes.
	if r := e.post(userOperator, "/handlers/pause", url.Values{"queue": {"emails"}, "handler": {"send"}, "reason": {"r"}}); r.status != http.StatusForbidden {
		t.Errorf("operator pauses a handler: %d", r.status)
	}
	if r := e.post(userAdmin, "/handlers/pause", url.Values{"queue": {"emails"}, "handler": {"send"}}); r.status != http.StatusBadRequest {
		t.Errorf("pause without reason: %d", r.status)
	}
	if len(paused()) != 0 {
		t.Fatal("a refused pause paused the handler")
	}
	r := e.post(userAdmin, "/handlers/pause", url.Values{"queue": {"emails"}, "handler": {"send"}, "reason": {"downstream <b>down</b>"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("pause: %d %s", r.status, excerpt(r.body))
	}
	if ps := paused(); len(ps) != 1 || ps[0].Handler != "send" || ps[0].Actor != userAdmin {
		t.Fatalf("paused %+v", ps)
	}
	r = e.get(userAdmin, "/")
	mustContain(t, r.body, "<td>send</td>", "held until resumed", "downstream &lt;b&gt;down&lt;/b&gt;", "/handlers/resume",
		// The queue runs, but its handler is held: it does not read
		// "running".
		`>send held</span>`)
	mustNotContain(t, r.body, `<span class="badge running">running</span>`)
	mustNotContain(t, e.get(userReader, "/").body, "/handlers/resume", "/handlers/pause")
	mustContain(t, e.get(userReader, "/").body, "<td>send</td>")
	if r := e.post(userReader, "/handlers/resume", url.Values{"queue": {"emails"}, "handler": {"send"}, "reason": {"r"}}); r.status != http.StatusForbidden || len(paused()) != 1 {
		t.Errorf("reader resumes: %d", r.status)
	}
	if r := e.post(userAdmin, "/handlers/resume", url.Values{"queue": {"emails"}, "handler": {"send"}, "reason": {"back"}}); r.status != http.StatusSeeOther || len(paused()) != 0 {
		t.Errorf("resume: %d, paused %v", r.status, paused())
	}
	mustContain(t, e.get(userAdmin, "/").body, `<span class="badge running">running</span>`)
	var actions []string
	for _, a := range e.auditEntries() {
		actions = append(actions, a.Action+"/"+a.Actor)
	}
	if len(actions) != 2 || actions[0] != "resume_handler/admin" || actions[1] != "pause_handler/admin" {
		t.Errorf("audit %v", actions)
	}
}

// TestBreakerLinksToTheWaitingTasksOfItsCause: a breaker tripped by one
// failure links to the tasks waiting after that failure (where its tasks
// are while it is open), not only to the dead ones.
func TestBreakerLinksToTheWaitingTasksOfItsCause(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	if _, err := e.s.PauseHandler(ctx, store.PauseHandlerParams{Queue: "emails", Handler: "send", CoolOff: time.Minute,
		Actor: "breaker", Reason: "12 tasks failed alike", Fingerprint: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.get(userAdmin, "/").body,
		`href="/live?fingerprint=0123456789abcdef&amp;handler=send&amp;queue=emails&amp;state=retrying">tasks waiting after this failure</a>`,
		`href="/groups?fingerprint=0123456789abcdef">dead of group 0123456789abcdef</a>`)
}
