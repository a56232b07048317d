package console_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/srjn45/rdq"
)

// hostile is text a failing task could carry: markup that breaks out of
// text, attributes and script contexts.
const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(2)>' onmouseover='alert(3)` + "`${alert(4)}`"

// rawMarkers must never appear unescaped in a page.
var rawMarkers = []string{"<script>alert", "<img src=x", "onerror=alert(2)>", `"><img`, `' onmouseover='`}

func TestUntrustedTextIsEscapedEverywhere(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{
		queue: "emails", handler: "send",
		errType: hostile, msg: hostile, stack: hostile,
		payload: hostile, contentType: "text/plain",
		headers: map[string]string{hostile: hostile},
	})
	jsonID := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y", payload: `{"a":"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}`})
	binID := e.dead(deadSpec{queue: "emails", handler: "send", errType: "x", msg: "y", payload: "\x00\x01<script>alert(5)</script>", contentType: "application/octet-stream"})
	e.post(userAdmin, "/tasks/"+jsonID.String()+"/redrive", url.Values{"reason": {hostile}})

	pages := map[string]string{
		"overview": "/",
		"dead":     "/dead?queue=emails&message=" + url.QueryEscape(hostile),
		"dead all": "/dead",
		"groups":   "/groups",
		"task":     "/tasks/" + id.String(),
		"json":     "/tasks/" + jsonID.String(),
		"binary":   "/tasks/" + binID.String(),
		"audit":    "/audit?actor=" + url.QueryEscape("<b>x</b>"),
		"audit 2":  "/audit",
		"bulk":     "/bulk?op=redrive&message=" + url.QueryEscape(hostile),
	}
	for name, p := range pages {
		r := e.get(userAdmin, p)
		if r.status != 200 {
			t.Errorf("%s: %d", name, r.status)
			continue
		}
		for _, m := range rawMarkers {
			if strings.Contains(r.body, m) {
				t.Errorf("%s: the page contains %q unescaped", name, m)
			}
		}
	}
	// The hostile text is shown, escaped, in text and in attributes.
	r := e.get(userAdmin, "/dead?queue=emails")
	mustContain(t, r.body, "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(2)&gt;", `title="&lt;script&gt;`)
	r = e.get(userAdmin, "/tasks/"+binID.String())
	mustContain(t, r.body, "shown as hex", "|..&lt;script&gt;alert")

	// The diff and the confirmation's hidden field.
	r = e.post(userAdmin, "/tasks/"+id.String()+"/edit", url.Values{"payload": {hostile + "\n" + hostile}})
	if r.status != 200 {
		t.Fatalf("edit: %d", r.status)
	}
	for _, m := range rawMarkers {
		if strings.Contains(r.body, m) {
			t.Errorf("diff page: %q unescaped", m)
		}
	}
	mustContain(t, r.body, `<span class="dadd">&#43; &lt;script&gt;`)
	// A bulk confirmation carries the filter in hidden fields.
	r = e.post(userAdmin, "/bulk/dry-run", url.Values{"op": {"purge"}, "message": {hostile}})
	for _, m := range rawMarkers {
		if strings.Contains(r.body, m) {
			t.Errorf("bulk confirmation: %q unescaped", m)
		}
	}
	// And the payload round-trips through the hidden field unchanged.
	m := regexp.MustCompile(`name="payload" value="([^"]*)"`).FindStringSubmatch(e.post(userAdmin, "/tasks/"+id.String()+"/edit", url.Values{"payload": {hostile}}).body)
	if m == nil {
		t.Fatal("no hidden payload field")
	}
	r = e.post(userAdmin, "/tasks/"+id.String()+"/edit/confirm", url.Values{"payload": {htmlUnescape(m[1])}, "reason": {"x"}})
	if task, _ := e.task(id); string(task.Payload) != hostile || task.Status != rdq.StatusPending {
		t.Errorf("payload after the round trip: %q (%s), response %d", task.Payload, task.Status, r.status)
	}
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&#43;", "+", "&#96;", "`", "&amp;", "&").Replace(s)
}
