package console_test

import (
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/srjn45/rdq"
)

// A task of a queue the principal may not read is answered exactly as a
// task that does not exist: same status, same body, its queue unnamed.
func TestForeignTaskLooksMissing(t *testing.T) {
	e := newEnv(t, "")
	foreign := e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down"})
	missing := rdq.NewID()
	routes := []struct{ method, path string }{
		{"GET", "/tasks/%s"},
		{"POST", "/tasks/%s/redrive"},
		{"POST", "/tasks/%s/purge"},
		{"POST", "/tasks/%s/edit"},
		{"POST", "/tasks/%s/edit/confirm"},
		{"POST", "/tasks/%s/retry-now"},
		{"POST", "/tasks/%s/cancel"},
	}
	// Every route of the console that names a task is in the table.
	src, err := os.ReadFile("console.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`HandleFunc\("(GET|POST) (/tasks/\{id\}[^"]*)"`).FindAllStringSubmatch(string(src), -1) {
		route := struct{ method, path string }{m[1], strings.Replace(m[2], "{id}", "%s", 1)}
		if !slices.Contains(routes, route) {
			t.Errorf("route %s %s names a task and is not checked here", m[1], m[2])
		}
	}
	for _, req := range routes {
		at := func(id rdq.ID) response {
			var form url.Values
			if req.method == "POST" {
				form = url.Values{"reason": {"r"}, "payload": {"{}"}}
			}
			r := e.do(req.method, userOther, strings.Replace(req.path, "%s", id.String(), 1), form, nil)
			r.body = strings.ReplaceAll(r.body, id.String(), "ID")
			return r
		}
		f, m := at(foreign), at(missing)
		if f.status != http.StatusNotFound || m.status != http.StatusNotFound {
			t.Errorf("%s %s: foreign %d, missing %d; want 404 for both", req.method, req.path, f.status, m.status)
		}
		if f.body != m.body {
			t.Errorf("%s %s: the foreign task's page differs from a missing task's:\n%s\n---\n%s", req.method, req.path, excerpt(f.body), excerpt(m.body))
		}
		mustNotContain(t, f.body, "emails")
	}
	if r := e.get(userOperator, "/tasks/"+foreign.String()); r.status != http.StatusOK {
		t.Errorf("the task's own operator: %d", r.status)
	}
}

// An operator of one queue sees no figure that counts another queue: no
// group chart counting the other queue's dead tasks, no audit entry of a
// change across queues on a task page.
func TestPagesScopedToThePrincipalsQueues(t *testing.T) {
	e := newEnv(t, "")
	mine := e.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down"})
	for range 3 {
		e.dead(deadSpec{queue: "other", handler: "send", errType: "timeout", msg: "relay down"})
	}
	fp := rdq.Fingerprint("timeout", "relay down")

	groups := e.get(userOperator, "/groups?queue=emails")
	if groups.status != http.StatusOK {
		t.Fatalf("groups: %d %s", groups.status, excerpt(groups.body))
	}
	mustNotContain(t, groups.body, "4 went dead", "3 went dead")
	if all := e.get(userAdmin, "/groups"); !strings.Contains(all.body, "4 went dead") {
		t.Errorf("the admin's unfiltered groups page lacks the chart of the 4 tasks")
	}

	r := e.post(userAdmin, "/bulk/run", url.Values{"op": {"redrive"}, "fingerprint": {fp}, "confirmed": {"4"}, "reason": {"cross-queue fix 42"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("bulk redrive: %d %s", r.status, excerpt(r.body))
	}
	e.waitJob(userAdmin, r.loc)
	// The admin's bulk action is as missing to the operator.
	job, none := e.get(userOperator, r.loc), e.get(userOperator, "/jobs/no-such-job")
	if job.status != http.StatusNotFound || job.body != none.body {
		t.Errorf("the operator reads the admin's bulk action over every queue: %d %s", job.status, excerpt(job.body))
	}
	if page := e.get(userAdmin, "/tasks/"+mine.String()); !strings.Contains(page.body, "cross-queue fix 42") {
		t.Fatalf("the admin's task page lacks the bulk redrive")
	}
	page := e.get(userOperator, "/tasks/"+mine.String())
	if page.status != http.StatusOK {
		t.Fatalf("task page: %d", page.status)
	}
	mustNotContain(t, page.body, "cross-queue fix 42")

	// A change of this task alone stays on its page.
	e.post(userAdmin, "/queues/pause", url.Values{"queue": {"emails"}, "reason": {"hold"}})
	id := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y"})
	if r := e.post(userOperator, "/tasks/"+id.String()+"/redrive", url.Values{"reason": {"single fix 7"}}); r.status != http.StatusSeeOther {
		t.Fatalf("redrive: %d %s", r.status, excerpt(r.body))
	}
	mustContain(t, e.get(userOperator, "/tasks/"+id.String()).body, "single fix 7")
}
