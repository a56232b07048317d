package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/store"
)

const (
	adminToken     = "D4kQ5kQupLP0qmHKfMsVS2TVy9oZlEsu8oY9zk3QtQ8"
	operatorToken  = "tcSP7wOaYSOlJbVtxpOZ5cW0I4Gs5WxG4r3i6RbxTPc"
	submitterToken = "J2VSFK9Uu5c2Tcuy9aFu6Z5z5L8YMDbioT2WIorAJOw"
)

// TestConsoleSignInRolesAndSignOut mounts the console the way rdq-server
// does and signs in as each role.
func TestConsoleSignInRolesAndSignOut(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	tokens, err := server.NewTokens(map[string]*server.Principal{
		adminToken:     {Name: "ada", Grants: []server.Grant{{Queue: "*", Role: server.RoleAdmin}}},
		operatorToken:  {Name: "otto", Grants: []server.Grant{{Queue: "emails", Role: server.RoleOperator}}},
		submitterToken: {Name: "sam", Grants: []server.Grant{{Queue: "*", Role: server.RoleSubmitter}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := svc.Console(server.ConsoleConfig{SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", h)
	mux.Handle("/", svc.Handler())
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()

	ids := map[string]rdq.ID{}
	for _, q := range []string{"emails", "billing"} {
		id := rdq.NewID()
		ids[q] = id
		if _, err := st.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{{
			ID: id, Queue: q, Handler: "h",
			FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "x", Message: "y", Fingerprint: "ab"}},
		}}}); err != nil {
			t.Fatal(err)
		}
	}

	client := func() *http.Client {
		c := srv.Client()
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Jar = jar
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return c
	}
	do := func(c *http.Client, method, path string, form url.Values) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(b)
	}
	signIn := func(token string) *http.Client {
		t.Helper()
		c := client()
		res, _ := do(c, "POST", "/console/signin", url.Values{"token": {token}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in: %d", res.StatusCode)
		}
		ck := res.Cookies()
		if len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].MaxAge <= 0 || ck[0].MaxAge > 3600 || ck[0].Path != "/console/" {
			t.Fatalf("session cookie %+v", ck)
		}
		return c
	}

	// Without a session: sent to sign in; a POST is refused.
	anon := client()
	if res, _ := do(anon, "GET", "/console/", nil); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/signin" {
		t.Errorf("anonymous: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := do(anon, "POST", "/console/tasks/"+ids["emails"].String()+"/purge", url.Values{"reason": {"x"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous POST: %d", res.StatusCode)
	}
	if res, body := do(anon, "POST", "/console/signin", url.Values{"token": {"wrong-token-wrong-token"}}); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not valid") {
		t.Errorf("bad token: %d", res.StatusCode)
	}
	if res, _ := do(anon, "GET", "/console/signin", nil); res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("sign-in page: %d", res.StatusCode)
	}

	// The submitter sees nothing.
	sam := signIn(submitterToken)
	if res, _ := do(sam, "GET", "/console/", nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("submitter overview: %d", res.StatusCode)
	}
	if res, _ := do(sam, "GET", "/console/tasks/"+ids["emails"].String(), nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("submitter task: %d", res.StatusCode)
	}

	// The operator works in emails only, and cannot pause.
	otto := signIn(operatorToken)
	if res, body := do(otto, "GET", "/console/", nil); res.StatusCode != 200 || !strings.Contains(body, ">emails<") || strings.Contains(body, ">billing<") || strings.Contains(body, "/queues/pause") {
		t.Errorf("operator overview: %d", res.StatusCode)
	}
	if res, _ := do(otto, "GET", "/console/tasks/"+ids["billing"].String(), nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("operator reads another queue's task: %d, want 404 as for a missing task", res.StatusCode)
	}
	if res, _ := do(otto, "POST", "/console/queues/pause", url.Values{"queue": {"emails"}, "reason": {"x"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("operator pauses: %d", res.StatusCode)
	}
	if res, _ := do(otto, "POST", "/console/tasks/"+ids["emails"].String()+"/redrive", url.Values{"reason": {"fixed"}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("operator redrives: %d", res.StatusCode)
	}
	entries, err := st.ListAudit(context.Background(), store.ListAuditParams{Limit: 10})
	if err != nil || len(entries) != 1 || entries[0].Actor != "otto" {
		t.Errorf("audit %+v %v", entries, err)
	}

	// The admin pauses; signing out ends the session.
	ada := signIn(adminToken)
	if res, _ := do(ada, "POST", "/console/queues/pause", url.Values{"queue": {"billing"}, "reason": {"x"}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("admin pauses: %d", res.StatusCode)
	}
	u, err := url.Parse(srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	kept := ada.Jar.Cookies(u)
	if len(kept) != 1 {
		t.Fatalf("cookies %+v", kept)
	}
	res, _ := do(ada, "POST", "/console/signout", url.Values{})
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].MaxAge >= 0 {
		t.Errorf("sign out: %d %+v", res.StatusCode, res.Cookies())
	}
	// Even a client that kept the old cookie is signed out.
	stale := client()
	stale.Jar.SetCookies(u, kept)
	if res, _ := do(stale, "GET", "/console/", nil); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/signin" {
		t.Errorf("the old cookie after sign out: %d", res.StatusCode)
	}
	// A cross-origin sign-in or change is refused.
	req, err := http.NewRequest("POST", srv.URL+"/console/signin", strings.NewReader("token="+adminToken))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err = client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign in: %d", res.StatusCode)
	}
	// So is one whose Origin has the console's host over plain http,
	// while the listener serves TLS.
	req, err = http.NewRequest("POST", srv.URL+"/console/signin", strings.NewReader("token="+adminToken))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+strings.TrimPrefix(srv.URL, "https://"))
	res, err = client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("sign in from the http origin on the https listener: %d", res.StatusCode)
	}
}

// TestConsoleSessionExpires checks that the server stops honouring a
// session cookie after the session's lifetime, even from a client that
// replays it.
func TestConsoleSessionExpires(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	tokens, err := server.NewTokens(map[string]*server.Principal{
		adminToken: {Name: "ada", Grants: []server.Grant{{Queue: "*", Role: server.RoleAdmin}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := svc.Console(server.ConsoleConfig{Prefix: "/ops/", SessionTTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.PostForm(srv.URL+"/ops/signin", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(res.Cookies()) != 1 {
		t.Fatalf("cookies %+v", res.Cookies())
	}
	cookie := res.Cookies()[0]
	get := func() *http.Response {
		req, err := http.NewRequest("GET", srv.URL+"/ops/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Cookie", cookie.Name+"="+cookie.Value)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := get(); res.StatusCode != http.StatusOK {
		t.Fatalf("fresh session: %d", res.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := get()
		if res.StatusCode == http.StatusSeeOther && res.Header.Get("Location") == "/ops/signin" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is still honoured 10s after it expired: %d", res.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
