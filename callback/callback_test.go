package callback

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("0123456789abcdef-test-secret")

func newCaller(t *testing.T, cfg Config) *Caller {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = secret
	}
	if cfg.Allow == nil {
		cfg.Allow = []string{"127.0.0.1"}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testTask() *rdq.Task {
	return &rdq.Task{
		ID:          rdq.NewID(),
		Queue:       "orders",
		Handler:     "charge",
		Payload:     []byte(`{"order":42}`),
		ContentType: "application/json",
		Headers:     map[string]string{"tenant": "acme", "bad header": "x"},
		Attempts:    2,
		Life:        1,
		LeaseToken:  7,
	}
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func run(t *testing.T, c *Caller, target string, task *rdq.Task) error {
	t.Helper()
	h, err := c.Handler(target)
	if err != nil {
		t.Fatalf("Handler(%s): %v", target, err)
	}
	return h(context.Background(), task)
}

func TestSuccessSendsSignedRequest(t *testing.T) {
	task := testTask()
	var got http.Header
	var body []byte
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := Verify(r, secret, time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		again, _ := io.ReadAll(r.Body)
		if string(again) != string(b) {
			http.Error(w, "body not restored", http.StatusInternalServerError)
			return
		}
		got, body = r.Header.Clone(), b
		w.WriteHeader(http.StatusNoContent)
	})
	if err := run(t, newCaller(t, Config{}), srv.URL+"/hook?k=v", task); err != nil {
		t.Fatalf("callback failed: %v", err)
	}
	if string(body) != `{"order":42}` {
		t.Errorf("body = %q", body)
	}
	want := map[string]string{
		"Content-Type":              "application/json",
		HeaderTaskID:                task.ID.String(),
		HeaderQueue:                 "orders",
		HeaderHandler:               "charge",
		HeaderAttempt:               "3",
		HeaderLife:                  "1",
		HeaderLeaseToken:            "7",
		HeaderMetaPrefix + "Tenant": "acme",
	}
	for k, v := range want {
		if g := got.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}
	for k := range got {
		if strings.Contains(strings.ToLower(k), "bad") {
			t.Errorf("invalid task header forwarded as %q", k)
		}
	}
}

func TestTraceparentFromTaskHeaders(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	task := testTask()
	task.Headers = map[string]string{"traceparent": tp}
	var got string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("traceparent") })
	if err := run(t, newCaller(t, Config{}), srv.URL, task); err != nil {
		t.Fatal(err)
	}
	if got != tp {
		t.Errorf("traceparent = %q, want %q", got, tp)
	}
}

func TestServerErrorIsRetryableWithBodySnippet(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database is down", http.StatusInternalServerError)
	})
	err := run(t, newCaller(t, Config{}), srv.URL, testTask())
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 {
		t.Fatalf("err = %v, want a StatusError 500", err)
	}
	if rdq.IsPermanent(err) {
		t.Error("500 must be retryable")
	}
	if _, ok := rdq.RetryAfterOf(err); ok {
		t.Error("no Retry-After was sent")
	}
	if msg := err.Error(); !strings.Contains(msg, "500 Internal Server Error") || !strings.Contains(msg, "database is down") {
		t.Errorf("message %q lacks status or body", msg)
	}
	if typ := rdq.ErrorTypeOf(err); typ != "http_500" {
		t.Errorf("error type = %q", typ)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	cases := []struct {
		status int
		header string
		want   time.Duration
		within time.Duration
	}{
		{http.StatusServiceUnavailable, "7", 7 * time.Second, 0},
		{http.StatusTooManyRequests, time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), 90 * time.Second, 2 * time.Second},
		{http.StatusRequestTimeout, "99999", 10 * time.Minute, 0}, // capped by MaxRetryAfter
	}
	c := newCaller(t, Config{MaxRetryAfter: 10 * time.Minute})
	for _, tc := range cases {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", tc.header)
			w.WriteHeader(tc.status)
		})
		err := run(t, c, srv.URL, testTask())
		d, ok := rdq.RetryAfterOf(err)
		if !ok || rdq.IsPermanent(err) {
			t.Fatalf("%d: err = %v: want retryable with Retry-After", tc.status, err)
		}
		if d > tc.want || d < tc.want-tc.within {
			t.Errorf("%d: retry after %s, want %s (within %s)", tc.status, d, tc.want, tc.within)
		}
	}
}

func TestClientErrorIsPermanent(t *testing.T) {
	for _, code := range []int{400, 401, 404, 422} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad order", code)
		})
		err := run(t, newCaller(t, Config{}), srv.URL, testTask())
		if !rdq.IsPermanent(err) {
			t.Errorf("%d: err = %v, want permanent", code, err)
		}
		if !strings.Contains(err.Error(), strconv.Itoa(code)) || !strings.Contains(err.Error(), "bad order") {
			t.Errorf("%d: message %q", code, err)
		}
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var hits atomic.Int32
	dest := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, dest.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	err := run(t, newCaller(t, Config{}), srv.URL, testTask())
	if !rdq.IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent failure", err)
	}
	if !strings.Contains(err.Error(), "redirect to "+dest.URL+"/elsewhere not followed") {
		t.Errorf("message %q does not name the redirect", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("redirect target was called %d times", n)
	}
}

func TestHangingCallbackTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	start := time.Now()
	err := run(t, newCaller(t, Config{Timeout: 100 * time.Millisecond}), srv.URL, testTask())
	var te *rdq.TimeoutError
	if !errors.As(err, &te) || rdq.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable rdq.TimeoutError", err)
	}
	if rdq.ErrorTypeOf(err) != "timeout" {
		t.Errorf("error type = %q", rdq.ErrorTypeOf(err))
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
}

func TestWorkerDeadlineEndsCall(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	h, err := newCaller(t, Config{}).Handler(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = h(ctx, testTask())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the worker's deadline", err)
	}
}

func TestTransportErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	target := srv.URL
	srv.Close()
	err := run(t, newCaller(t, Config{}), target, testTask())
	var te *TransportError
	if !errors.As(err, &te) || rdq.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable TransportError", err)
	}
	if rdq.ErrorTypeOf(err) != "transport" {
		t.Errorf("error type = %q", rdq.ErrorTypeOf(err))
	}
}

func TestBodySnippetIsCapped(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat("é", 5000))
	})
	err := run(t, newCaller(t, Config{MaxErrorBody: 101}), srv.URL, testTask())
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatal(err)
	}
	if want := strings.Repeat("é", 50) + "…[truncated]"; se.Body != want {
		t.Errorf("body snippet = %q, want %q", se.Body, want)
	}
}

func TestAllowlist(t *testing.T) {
	c := newCaller(t, Config{Allow: []string{
		"https://hooks.example.com/rdq/",
		"http://svc.internal:8080/cb",
		"127.0.0.1:9000",
		"Any.Example.org",
	}})
	cases := map[string]bool{
		"https://hooks.example.com/rdq/orders":       true,
		"https://hooks.example.com:443/rdq/x":        true,
		"https://hooks.example.com/rdqx":             false,
		"https://hooks.example.com/other":            false,
		"http://hooks.example.com/rdq/orders":        false,
		"https://hooks.example.com:8443/rdq/":        false,
		"http://svc.internal:8080/cb":                true,
		"http://svc.internal:8080/cb/orders":         true,
		"http://svc.internal:8080/cbx":               false,
		"http://svc.internal/cb":                     false,
		"http://127.0.0.1:9000/anything":             true,
		"https://127.0.0.1:9000/":                    true,
		"http://127.0.0.1:9001/":                     false,
		"http://any.example.org:1234/x":              true,
		"ftp://any.example.org/x":                    false,
		"http://user:pw@any.example.org/x":           false,
		"http://evil.example.com/?h=any.example.org": false,
		"/relative": false,
	}
	for target, ok := range cases {
		err := c.Check(target)
		if (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want allowed=%v", target, err, ok)
		}
		if err != nil && (!errors.Is(err, ErrNotAllowed) || !errors.Is(err, rdq.ErrInvalid)) {
			t.Errorf("Check(%q) error %v does not wrap ErrNotAllowed and rdq.ErrInvalid", target, err)
		}
	}
	if _, err := New(Config{Secret: secret, Allow: []string{"ftp://x/"}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("bad allowlist entry: err = %v", err)
	}
}

func TestDisallowedTargetRefused(t *testing.T) {
	var hits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	c := newCaller(t, Config{Allow: []string{"127.0.0.2"}})
	if _, err := c.Handler(srv.URL); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("registration: err = %v, want ErrNotAllowed", err)
	}
	if _, err := c.Router(map[string]string{"orders": srv.URL}); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("router registration: err = %v, want ErrNotAllowed", err)
	}

	// Checked again at call time: a handler registered under a wider
	// allowlist stops working when the allowlist no longer admits it.
	wide := newCaller(t, Config{})
	h, err := wide.Handler(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	wide.allow = c.allow
	err = h(context.Background(), testTask())
	if !errors.Is(err, ErrNotAllowed) || !rdq.IsPermanent(err) {
		t.Fatalf("call: err = %v, want a permanent ErrNotAllowed", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("disallowed target was called %d times", n)
	}
}

func TestRouterDispatchesByQueue(t *testing.T) {
	var orders, mails atomic.Int32
	so := serve(t, func(w http.ResponseWriter, r *http.Request) { orders.Add(1) })
	sm := serve(t, func(w http.ResponseWriter, r *http.Request) { mails.Add(1) })
	h, err := newCaller(t, Config{}).Router(map[string]string{"orders": so.URL, "mails": sm.URL})
	if err != nil {
		t.Fatal(err)
	}
	task := testTask()
	if err := h(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	task.Queue = "mails"
	if err := h(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	task.Queue = "unknown"
	if err := h(context.Background(), task); !rdq.IsPermanent(err) {
		t.Errorf("unknown queue: err = %v, want permanent", err)
	}
	if orders.Load() != 1 || mails.Load() != 1 {
		t.Errorf("calls: orders %d, mails %d", orders.Load(), mails.Load())
	}
}

func TestVerifyRejects(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	body := []byte("payload")
	mk := func(ts int64, sig string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
		if ts != 0 {
			r.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		}
		if sig != "" {
			r.Header.Set(HeaderSignature, sig)
		}
		return r
	}
	good := Sign(secret, now.Unix(), body)
	cases := []struct {
		name string
		req  *http.Request
		want error
	}{
		{"unsigned", mk(0, ""), ErrUnsigned},
		{"no timestamp", mk(0, good), ErrUnsigned},
		{"wrong secret", mk(now.Unix(), Sign([]byte("another-secret-of-16+"), now.Unix(), body)), ErrBadSignature},
		{"tampered body", mk(now.Unix(), Sign(secret, now.Unix(), []byte("payloaD"))), ErrBadSignature},
		{"signed with another timestamp", mk(now.Unix()+1, good), ErrBadSignature},
		{"garbage", mk(now.Unix(), "v1=zz"), ErrBadSignature},
		{"unversioned", mk(now.Unix(), strings.TrimPrefix(good, "v1=")), ErrBadSignature},
		{"stale", mk(now.Add(-10*time.Minute).Unix(), Sign(secret, now.Add(-10*time.Minute).Unix(), body)), ErrStale},
		{"future", mk(now.Add(10*time.Minute).Unix(), Sign(secret, now.Add(10*time.Minute).Unix(), body)), ErrStale},
	}
	for _, tc := range cases {
		if _, err := verifyAt(tc.req, secret, time.Minute, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	r := mk(now.Unix(), "v1=00, "+good)
	got, err := verifyAt(r, secret, time.Minute, now)
	if err != nil || string(got) != "payload" {
		t.Errorf("rotation list: %q, %v", got, err)
	}
}

func TestVerifyHandler(t *testing.T) {
	var reached atomic.Int32
	h := VerifyHandler(secret, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || reached.Load() != 0 {
		t.Errorf("unsigned: status %d, reached %d", w.Code, reached.Load())
	}
	ts := time.Now().Unix()
	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x"))
	r.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	r.Header.Set(HeaderSignature, Sign(secret, ts, []byte("x")))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || reached.Load() != 1 {
		t.Errorf("signed: status %d, reached %d", w.Code, reached.Load())
	}
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"short secret":  {Secret: []byte("short"), Allow: []string{"x"}},
		"no allowlist":  {Secret: secret},
		"neg timeout":   {Secret: secret, Allow: []string{"x"}, Timeout: -1},
		"empty entry":   {Secret: secret, Allow: []string{" "}},
		"entry w/query": {Secret: secret, Allow: []string{"https://x/?a=b"}},
	} {
		if _, err := New(cfg); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%s: err = %v, want rdq.ErrInvalid", name, err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Now()
	if d, ok := parseRetryAfter("-3", now); ok {
		t.Errorf("negative accepted: %s", d)
	}
	if _, ok := parseRetryAfter("soon", now); ok {
		t.Error("garbage accepted")
	}
	if d, ok := parseRetryAfter(now.Add(-time.Hour).UTC().Format(http.TimeFormat), now); !ok || d != 0 {
		t.Errorf("past date: %s %v", d, ok)
	}
}

func TestRedact(t *testing.T) {
	u, _ := url.Parse("https://u:p@h.example/a/b?token=secret#f")
	if got := redact(u); got != "https://h.example/a/b" {
		t.Errorf("redact = %q", got)
	}
}
