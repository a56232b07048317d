package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/srjn45/rdq"
)

// snapshot is the state every mutation could change.
type snapshot struct {
	statuses map[rdq.ID]rdq.Status
	payloads map[rdq.ID]string
	audit    int
	paused   []string
}

func (e *env) snapshot(ids ...rdq.ID) snapshot {
	e.t.Helper()
	s := snapshot{statuses: map[rdq.ID]rdq.Status{}, payloads: map[rdq.ID]string{}, audit: len(e.auditEntries()), paused: e.paused()}
	for _, id := range ids {
		if !e.exists(id) {
			s.statuses[id] = "GONE"
			continue
		}
		t, _ := e.task(id)
		s.statuses[id], s.payloads[id] = t.Status, string(t.Payload)
	}
	return s
}

func (s snapshot) equal(o snapshot) bool {
	if s.audit != o.audit || !slices.Equal(s.paused, o.paused) || len(s.statuses) != len(o.statuses) {
		return false
	}
	for id, st := range s.statuses {
		if o.statuses[id] != st || o.payloads[id] != s.payloads[id] {
			return false
		}
	}
	return true
}

// TestAuthorizationMatrix runs every action as every principal: the
// reader, an operator of another queue, the operator of the task's queue
// and the admin. A refused request gets 403 and changes nothing; an
// allowed one succeeds; and a page shows a control only to those the hook
// allows.
func TestAuthorizationMatrix(t *testing.T) {
	e := newEnv(t, "")
	e.dead(deadSpec{queue: "other", handler: "h", errType: "x", msg: "y"})
	type action struct {
		name string
		// allowed lists the principals who may do it.
		allowed []string
		// run does it on fresh tasks and returns the response.
		run func(task rdq.ID) response
		// mutates reports that success changes state.
		mutates bool
	}
	operators := []string{userOperator, userAdmin}
	readers := []string{userReader, userOperator, userAdmin}
	fp := rdq.Fingerprint("timeout", "relay down")
	actions := []action{
		{"read overview", []string{userReader, userOther, userOperator, userAdmin}, func(rdq.ID) response { return e.get(curUser, "/") }, false},
		{"read dead list of emails", readers, func(rdq.ID) response { return e.get(curUser, "/dead?queue=emails") }, false},
		{"read groups of emails", readers, func(rdq.ID) response { return e.get(curUser, "/groups?queue=emails") }, false},
		{"read every dead task", []string{userReader, userAdmin}, func(rdq.ID) response { return e.get(curUser, "/dead") }, false},
		{"read task", readers, func(id rdq.ID) response { return e.get(curUser, "/tasks/"+id.String()) }, false},
		{"read audit", []string{userReader, userAdmin}, func(rdq.ID) response { return e.get(curUser, "/audit") }, false},
		{"read audit of emails", readers, func(rdq.ID) response { return e.get(curUser, "/audit?queue=emails") }, false},
		{"redrive task", operators, func(id rdq.ID) response {
			return e.post(curUser, "/tasks/"+id.String()+"/redrive", url.Values{"reason": {"r"}})
		}, true},
		{"review payload edit", operators, func(id rdq.ID) response {
			return e.post(curUser, "/tasks/"+id.String()+"/edit", url.Values{"payload": {`{"n":2}`}})
		}, false},
		{"edit payload and redrive", operators, func(id rdq.ID) response {
			return e.post(curUser, "/tasks/"+id.String()+"/edit/confirm", url.Values{"payload": {`{"n":2}`}, "reason": {"r"}})
		}, true},
		{"purge task", operators, func(id rdq.ID) response {
			return e.post(curUser, "/tasks/"+id.String()+"/purge", url.Values{"reason": {"r"}})
		}, true},
		{"bulk form", operators, func(rdq.ID) response { return e.get(curUser, "/bulk?op=redrive&queue=emails") }, false},
		{"bulk redrive dry run", operators, func(rdq.ID) response {
			return e.post(curUser, "/bulk/dry-run", url.Values{"op": {"redrive"}, "queue": {"emails"}, "fingerprint": {fp}})
		}, false},
		{"bulk redrive", operators, func(rdq.ID) response {
			return e.post(curUser, "/bulk/run", url.Values{"op": {"redrive"}, "queue": {"emails"}, "fingerprint": {fp}, "confirmed": {"1"}, "reason": {"r"}})
		}, true},
		{"bulk purge", operators, func(rdq.ID) response {
			return e.post(curUser, "/bulk/run", url.Values{"op": {"purge"}, "queue": {"emails"}, "fingerprint": {fp}, "confirmed": {"1"}, "reason": {"r"}})
		}, true},
		{"bulk redrive of every queue", []string{userAdmin}, func(rdq.ID) response {
			return e.post(curUser, "/bulk/run", url.Values{"op": {"redrive"}, "fingerprint": {fp}, "confirmed": {"1"}, "reason": {"r"}})
		}, true},
		{"pause queue", []string{userAdmin}, func(rdq.ID) response {
			return e.post(curUser, "/queues/pause", url.Values{"queue": {"emails"}, "reason": {"r"}})
		}, true},
		{"resume queue", []string{userAdmin}, func(rdq.ID) response {
			return e.post(curUser, "/queues/resume", url.Values{"queue": {"emails"}, "reason": {"r"}})
		}, true},
	}
	for _, a := range actions {
		for _, u := range users {
			curUser = u
			// Fresh state: one dead task of the group in emails, and the
			// queue paused when the action is a resume.
			id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down"})
			if a.name == "resume queue" {
				e.post(userAdmin, "/queues/pause", url.Values{"queue": {"emails"}, "reason": {"setup"}})
			}
			before := e.snapshot(id)
			r := a.run(id)
			if r.loc != "" && strings.Contains(r.loc, "/jobs/") {
				e.waitJob(u, r.loc)
			}
			after := e.snapshot(id)
			allowed := slices.Contains(a.allowed, u)
			// A task of a queue the principal cannot read is answered
			// as a missing one.
			refused := http.StatusForbidden
			if taskActions[a.name] && !slices.Contains(readers, u) {
				refused = http.StatusNotFound
			}
			switch {
			case allowed && r.status >= 400:
				t.Errorf("%s as %s: %d, want success: %s", a.name, u, r.status, excerpt(r.body))
			case allowed && a.mutates && before.equal(after):
				t.Errorf("%s as %s: allowed but nothing changed", a.name, u)
			case !allowed && r.status != refused:
				t.Errorf("%s as %s: %d, want %d", a.name, u, r.status, refused)
			case !allowed && !before.equal(after):
				t.Errorf("%s as %s: refused, but the state changed: %+v -> %+v", a.name, u, before, after)
			}
			// Clean up: leave the queue running and the task gone.
			e.post(userAdmin, "/queues/resume", url.Values{"queue": {"emails"}, "reason": {"cleanup"}})
			if e.exists(id) {
				if tk, _ := e.task(id); tk.Status == rdq.StatusDead {
					e.post(userAdmin, "/tasks/"+id.String()+"/purge", url.Values{"reason": {"cleanup"}})
				}
			}
		}
	}
}

// taskActions are the matrix's actions on one task, by name.
var taskActions = map[string]bool{"read task": true, "redrive task": true, "review payload edit": true, "edit payload and redrive": true, "purge task": true}

// curUser is the principal the matrix's current row runs as.
var curUser string

// TestControlsFollowTheHook checks that pages show mutating controls only
// to principals allowed to use them.
func TestControlsFollowTheHook(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down"})
	controls := []string{"/redrive\"", "/purge\"", "/edit\"", "/queues/pause", "Redrive all matching", "Purge all matching", "Redrive…", "Purge…"}
	for _, u := range []string{userReader} {
		for _, p := range []string{"/", "/dead?queue=emails", "/groups?queue=emails", "/tasks/" + id.String()} {
			r := e.get(u, p)
			if r.status != 200 {
				t.Fatalf("%s %s: %d", u, p, r.status)
			}
			mustNotContain(t, r.body, controls...)
			mustNotContain(t, r.body, "<button type=\"submit\">Redrive</button>", "Pause</button>")
		}
	}
	mustContain(t, e.get(userOperator, "/tasks/"+id.String()).body, "/redrive\"", "/purge\"", "/edit\"")
	mustNotContain(t, e.get(userOperator, "/").body, "/queues/pause")
	mustContain(t, e.get(userAdmin, "/").body, "/queues/pause")
	mustContain(t, e.get(userOperator, "/dead?queue=emails").body, "Redrive all matching", "Purge all matching")
	// The operator of another queue sees neither emails on the overview
	// nor its tasks.
	mustNotContain(t, e.get(userOther, "/").body, ">emails<")
	if r := e.get("", "/"); r.status != 403 {
		t.Errorf("anonymous overview: %d", r.status)
	}
}

// TestCrossOriginPostsAreRefused forges POSTs from another site, as a
// browser would send them: 403 and nothing changes, even for the admin.
func TestCrossOriginPostsAreRefused(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	before := e.snapshot(id)
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "https://evil.example"},
		// The console's own host under another scheme than its listener's.
		{"Origin": "https://" + strings.TrimPrefix(e.srv.URL, "http://")},
	} {
		for _, p := range []string{"/tasks/" + id.String() + "/redrive", "/tasks/" + id.String() + "/purge", "/queues/pause"} {
			r := e.do("POST", userAdmin, p, url.Values{"reason": {"forged"}, "queue": {"emails"}}, h)
			if r.status != http.StatusForbidden || !strings.Contains(r.body, "cross-origin request refused") {
				t.Errorf("%s with %v: %d", p, h, r.status)
			}
		}
	}
	if !before.equal(e.snapshot(id)) {
		t.Error("a forged POST changed the state")
	}
	// The same POST from the console's own origin works.
	r := e.do("POST", userAdmin, "/tasks/"+id.String()+"/redrive", url.Values{"reason": {"real"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if r.status != http.StatusSeeOther {
		t.Errorf("same-origin POST: %d", r.status)
	}
}

func excerpt(s string) string {
	if i := strings.Index(s, `class="error"`); i >= 0 {
		s = s[i:]
	}
	return clipStr(s, 300)
}

func clipStr(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
