package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	runBenchCleanups()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// A test principal is picked by the X-Test-User header: the roles of
// rdq-server, expressed through the Authorize hook.
const (
	userReader   = "reader"   // reads every queue, changes nothing
	userOther    = "other"    // operator of queue "other" only
	userOperator = "operator" // operator of queue "emails"
	userAdmin    = "admin"    // everything everywhere
)

var users = []string{userReader, userOther, userOperator, userAdmin}

// authorize is the test hook: operators may do everything but pause in
// their queue; the admin may do everything; the reader only reads.
func authorize(r *http.Request, a console.Action, queue string) error {
	switch u := r.Header.Get("X-Test-User"); u {
	case userAdmin:
		return nil
	case userReader:
		if a == console.ActionRead {
			return nil
		}
		return errors.New("read-only")
	case userOther, userOperator:
		mine := map[string]string{userOther: "other", userOperator: "emails"}[u]
		if queue == mine && a != console.ActionPause {
			return nil
		}
		return fmt.Errorf("%s may not %s in %q", u, a, queue)
	default:
		return errors.New("not signed in")
	}
}

func actor(r *http.Request) string { return r.Header.Get("X-Test-User") }

// env is a console over a fresh PostgreSQL schema.
type env struct {
	t   *testing.T
	s   *pgstore.Store
	c   *console.Console
	srv *httptest.Server
	pfx string
}

func newEnv(t *testing.T, prefix string) *env {
	t.Helper()
	s, _ := pgtest.NewStore(t)
	c, err := console.New(console.Config{Store: s, Prefix: prefix, Authorize: authorize, Actor: actor})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(strings.TrimSuffix(prefix, "/")+"/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return &env{t: t, s: s, c: c, srv: srv, pfx: strings.TrimSuffix(prefix, "/")}
}

// deadTask enqueues a task that is dead at once, with one permanent
// failure.
type deadSpec struct {
	queue, handler string
	errType, msg   string
	stack          string
	payload        string
	contentType    string
	headers        map[string]string
	at             *time.Time
}

func (e *env) dead(spec deadSpec) rdq.ID {
	e.t.Helper()
	return addDead(e.t, e.s, spec)
}

func addDead(t testing.TB, s store.Store, spec deadSpec) rdq.ID {
	t.Helper()
	id := rdq.NewID()
	ct := spec.contentType
	if ct == "" {
		ct = "application/json"
	}
	payload := spec.payload
	if payload == "" {
		payload = `{"n":1}`
	}
	_, err := s.Enqueue(context.Background(), store.EnqueueParams{Now: spec.at, Tasks: []store.NewTask{{
		ID: id, Queue: spec.queue, Handler: spec.handler, Payload: []byte(payload), ContentType: ct, Headers: spec.headers,
		FirstFailure: &store.AttemptRecord{
			Outcome:  rdq.OutcomePermanentFailure,
			Failure:  rdq.Failure{Type: spec.errType, Message: spec.msg, Stack: spec.stack, Fingerprint: rdq.Fingerprint(spec.errType, spec.msg)},
			WorkerID: "worker-1", Duration: 1500 * time.Millisecond,
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// response is a finished request.
type response struct {
	status int
	body   string
	header http.Header
	loc    string
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (e *env) do(method, user, path string, form url.Values, hdr map[string]string) response {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+e.pfx+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if user != "" {
		req.Header.Set("X-Test-User", user)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, body: string(b), header: res.Header, loc: res.Header.Get("Location")}
}

func (e *env) get(user, path string) response { e.t.Helper(); return e.do("GET", user, path, nil, nil) }

func (e *env) post(user, path string, form url.Values) response {
	e.t.Helper()
	return e.do("POST", user, path, form, nil)
}

func (e *env) task(id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	e.t.Helper()
	t, a, err := e.s.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return t, a
}

func (e *env) exists(id rdq.ID) bool {
	e.t.Helper()
	_, _, err := e.s.Get(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

func (e *env) auditEntries() []store.AuditEntry {
	e.t.Helper()
	entries, err := e.s.ListAudit(context.Background(), store.ListAuditParams{Limit: dlq.MaxPageSize})
	if err != nil {
		e.t.Fatal(err)
	}
	return entries
}

func (e *env) paused() []string {
	e.t.Helper()
	p, err := e.s.PausedQueues(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitJob follows a bulk action's page until it is finished.
func (e *env) waitJob(user, path string) response {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.get(user, path)
		if r.status != http.StatusOK {
			e.t.Fatalf("job page %s: %d %s", path, r.status, r.body)
		}
		if !strings.Contains(r.body, `http-equiv="refresh"`) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the bulk action at %s did not finish", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustContain(t *testing.T, body string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(body, p) {
			t.Errorf("the page lacks %q", p)
		}
	}
}

func mustNotContain(t *testing.T, body string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if strings.Contains(body, p) {
			t.Errorf("the page contains %q", p)
		}
	}
}
