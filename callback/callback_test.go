package callback

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
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
	if cfg.AllowAddrs == nil {
		cfg.AllowAddrs = []string{"127.0.0.1"}
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
	h, err := c.Handler(Target{URL: target})
	if err != nil {
		t.Fatalf("Handler(%s): %v", target, err)
	}
	return h(context.Background(), task)
}

func TestSuccessSendsSignedRequest(t *testing.T) {
	task := testTask()
	var got *Message
	var hdr http.Header
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m, err := Verify(r, secret, time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		again, _ := io.ReadAll(r.Body)
		if string(again) != string(m.Raw) {
			http.Error(w, "body not restored", http.StatusInternalServerError)
			return
		}
		got, hdr = m, r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	})
	if err := run(t, newCaller(t, Config{}), srv.URL+"/hook?k=v", task); err != nil {
		t.Fatalf("callback failed: %v", err)
	}
	d := got.Data
	if got.Type != MessageType || d.ID != task.ID.String() || d.Queue != "orders" || d.Handler != "charge" ||
		d.Attempt != 3 || d.Life != 1 || d.LeaseToken != 7 || d.ContentType != "application/json" {
		t.Errorf("message = %+v", got)
	}
	if string(d.Payload) != `{"order":42}` || d.PayloadBase64 != nil || string(d.Body()) != `{"order":42}` {
		t.Errorf("payload = %q, base64 %q", d.Payload, d.PayloadBase64)
	}
	if d.Headers["tenant"] != "acme" || d.Headers["bad header"] != "x" {
		t.Errorf("headers = %v", d.Headers)
	}
	if hdr.Get("Content-Type") != "application/json" || hdr.Get(HeaderID) != task.ID.String() {
		t.Errorf("request headers: %v", hdr)
	}
	for k := range hdr {
		if strings.HasPrefix(strings.ToLower(k), "x-rdq") {
			t.Errorf("unsigned header %s sent", k)
		}
	}
}

// A payload that is not JSON travels in base64; a JSON payload byte for
// byte, whitespace included.
func TestPayloadEncodings(t *testing.T) {
	var got []*Message
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m, err := Verify(r, secret, time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got = append(got, m)
	})
	c := newCaller(t, Config{})
	cases := []struct {
		ct, payload string
		inline      bool
	}{
		{"application/json", "{ \"a\" : [1, 2] }", true},
		{"application/cloudevents+json; charset=utf-8", `{"b":1}`, true},
		{"application/json", `{not json`, false},
		{"text/plain", `{"c":1}`, false},
		{"", "\x00\xff binary", false},
	}
	for _, tc := range cases {
		task := testTask()
		task.ContentType, task.Payload = tc.ct, []byte(tc.payload)
		if err := run(t, c, srv.URL, task); err != nil {
			t.Fatal(err)
		}
		d := got[len(got)-1].Data
		if string(d.Body()) != tc.payload || (len(d.Payload) > 0) != tc.inline {
			t.Errorf("%q %q: got payload %q, base64 %q", tc.ct, tc.payload, d.Payload, d.PayloadBase64)
		}
	}
}

// The identity a receiver acts on is signed: a request seen by one
// receiver, replayed to another with another secret, or with its task id,
// queue or lease token changed, is refused.
func TestForgedOrReplayedCallbackRefused(t *testing.T) {
	secretA, secretB := []byte("secret-of-receiver-a-0123456789"), []byte("secret-of-receiver-b-0123456789")
	var captured *http.Request
	var capturedBody []byte
	a := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := Verify(r, secretA, time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		captured, capturedBody = r.Clone(context.Background()), mustRead(t, r.Body)
	})
	var reachedB atomic.Int32
	b := httptest.NewServer(VerifyHandler(secretB, time.Minute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reachedB.Add(1) })))
	t.Cleanup(b.Close)
	c := newCaller(t, Config{Secret: []byte("default-secret-unused-0123456789")})
	h, err := c.Router(map[string]Target{"orders": {URL: a.URL, Secret: secretA}, "payroll": {URL: b.URL, Secret: secretB}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), testTask()); err != nil {
		t.Fatal(err)
	}
	replay := func(body []byte, mod func(http.Header)) int {
		req, _ := http.NewRequest(http.MethodPost, b.URL, bytes.NewReader(body))
		req.Header = captured.Header.Clone()
		if mod != nil {
			mod(req.Header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := replay(capturedBody, nil); code != http.StatusUnauthorized {
		t.Errorf("replay to another receiver: %d", code)
	}
	forged := bytes.Replace(capturedBody, []byte(`"queue":"orders"`), []byte(`"queue":"payroll"`), 1)
	if bytes.Equal(forged, capturedBody) {
		t.Fatalf("body %s has no queue", capturedBody)
	}
	if code := replay(forged, nil); code != http.StatusUnauthorized {
		t.Errorf("forged queue: %d", code)
	}
	// To its own receiver, a changed id, body or lease token fails too.
	for name, mod := range map[string]func([]byte, http.Header) *http.Request{
		"other id": func(b []byte, h http.Header) *http.Request {
			h.Set(HeaderID, rdq.NewID().String())
			return nil
		},
		"other lease token": func(b []byte, h http.Header) *http.Request {
			return httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(bytes.Replace(b, []byte(`"lease_token":7`), []byte(`"lease_token":8`), 1)))
		},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(capturedBody))
		h := captured.Header.Clone()
		if r := mod(capturedBody, h); r != nil {
			req = r
		}
		req.Header = h
		if _, err := Verify(req, secretA, time.Minute); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: err = %v, want ErrBadSignature", name, err)
		}
	}
	if n := reachedB.Load(); n != 0 {
		t.Errorf("receiver b accepted %d forged requests", n)
	}
}

func mustRead(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A content type that cannot be an HTTP header (from a store written
// before content types were validated) no longer breaks the request: it
// travels in the signed body. A header the request cannot carry is a
// permanent failure, not a retry.
func TestUnsendableFieldsDoNotBurnAttempts(t *testing.T) {
	var hits atomic.Int32
	var got *Message
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m, err := Verify(r, secret, time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		hits.Add(1)
		got = m
	})
	c := newCaller(t, Config{})
	task := testTask()
	task.ContentType = "text/plain\r\nX-Injected: 1"
	if err := run(t, c, srv.URL, task); err != nil {
		t.Fatalf("CR LF content type: %v", err)
	}
	if got.Data.ContentType != task.ContentType {
		t.Errorf("content type = %q", got.Data.ContentType)
	}
	task = testTask()
	task.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Injected: 1"}
	err := run(t, c, srv.URL, task)
	if err == nil || !rdq.IsPermanent(err) {
		t.Fatalf("unsendable traceparent: err = %v, want a permanent failure", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("receiver hit %d times, want 1", n)
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
	h, err := newCaller(t, Config{}).Handler(Target{URL: srv.URL})
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
	if _, err := c.Handler(Target{URL: srv.URL}); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("registration: err = %v, want ErrNotAllowed", err)
	}
	if _, err := c.Router(map[string]Target{"orders": {URL: srv.URL}}); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("router registration: err = %v, want ErrNotAllowed", err)
	}

	// Checked again at call time: a handler registered under a wider
	// allowlist stops working when the allowlist no longer admits it.
	wide := newCaller(t, Config{})
	h, err := wide.Handler(Target{URL: srv.URL})
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
	h, err := newCaller(t, Config{}).Router(map[string]Target{"orders": {URL: so.URL}, "mails": {URL: sm.URL}})
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
	id := rdq.NewID().String()
	body, err := marshalMessage(&rdq.Task{ID: rdq.MustParseID(id), Queue: "q", Handler: "h"}, now)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(id string, ts int64, sig string, body []byte) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if id != "" {
			r.Header.Set(HeaderID, id)
		}
		if ts != 0 {
			r.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		}
		if sig != "" {
			r.Header.Set(HeaderSignature, sig)
		}
		return r
	}
	good := Sign(secret, id, now.Unix(), body)
	otherID := rdq.NewID().String()
	stale := now.Add(-10 * time.Minute).Unix()
	future := now.Add(10 * time.Minute).Unix()
	cases := []struct {
		name string
		req  *http.Request
		want error
	}{
		{"unsigned", mk("", 0, "", body), ErrUnsigned},
		{"no timestamp", mk(id, 0, good, body), ErrUnsigned},
		{"no id", mk("", now.Unix(), good, body), ErrUnsigned},
		{"wrong secret", mk(id, now.Unix(), Sign([]byte("another-secret-of-16+"), id, now.Unix(), body), body), ErrBadSignature},
		{"tampered body", mk(id, now.Unix(), good, append([]byte(" "), body...)), ErrBadSignature},
		{"signed with another timestamp", mk(id, now.Unix()+1, good, body), ErrBadSignature},
		{"signed with another id", mk(otherID, now.Unix(), good, body), ErrBadSignature},
		{"garbage", mk(id, now.Unix(), "v1,!!!", body), ErrBadSignature},
		{"unversioned", mk(id, now.Unix(), strings.TrimPrefix(good, "v1,"), body), ErrBadSignature},
		{"old scheme", mk(id, now.Unix(), "v1=00", body), ErrBadSignature},
		{"stale", mk(id, stale, Sign(secret, id, stale, body), body), ErrStale},
		{"future", mk(id, future, Sign(secret, id, future, body), body), ErrStale},
		{"signed but not a message", mk(id, now.Unix(), Sign(secret, id, now.Unix(), []byte("{}")), []byte("{}")), ErrMalformed},
		{"signed message of another task", mk(otherID, now.Unix(), Sign(secret, otherID, now.Unix(), body), body), ErrMalformed},
	}
	for _, tc := range cases {
		if _, err := verifyAt(tc.req, secret, time.Minute, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	r := mk(id, now.Unix(), "v1,AAAA "+good, body)
	got, err := verifyAt(r, secret, time.Minute, now)
	if err != nil || got.Data.ID != id {
		t.Errorf("rotation list: %+v, %v", got, err)
	}
}

// Secrets in the Standard Webhooks form sign with their decoded key, so a
// receiver using a Standard Webhooks library with the same whsec_ secret
// verifies them.
func TestStandardWebhooksSecret(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	whsec := []byte(SecretPrefix + base64.StdEncoding.EncodeToString(key))
	if a, b := Sign(whsec, "msg_1", 1, []byte("x")), Sign(key, "msg_1", 1, []byte("x")); a != b || a == "" {
		t.Errorf("whsec signature %q, raw-key signature %q", a, b)
	}
	var got *Message
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m, err := Verify(r, key, time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got = m
	})
	if err := run(t, newCaller(t, Config{Secret: whsec}), srv.URL, testTask()); err != nil || got == nil {
		t.Fatalf("whsec caller, raw-key receiver: %v", err)
	}
	if _, err := New(Config{Secret: []byte(SecretPrefix + "not base64!"), Allow: []string{"x"}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("malformed whsec secret: %v", err)
	}
	if _, err := New(Config{Secret: []byte(SecretPrefix + base64.StdEncoding.EncodeToString([]byte("short"))), Allow: []string{"x"}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("short whsec key: %v", err)
	}
}

// The reference vector of the Standard Webhooks specification.
func TestSignMatchesStandardWebhooks(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = 1614265330
		body   = `{"test": 2432232314}`
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	if got := Sign([]byte(secret), id, ts, []byte(body)); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestVerifyHandler(t *testing.T) {
	var reached atomic.Int32
	var seen *Message
	h := VerifyHandler(secret, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		seen, _ = MessageFrom(r.Context())
	}))
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || reached.Load() != 0 {
		t.Errorf("unsigned: status %d, reached %d", w.Code, reached.Load())
	}
	task := testTask()
	body, err := marshalMessage(task, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now().Unix()
	r = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set(HeaderID, task.ID.String())
	r.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	r.Header.Set(HeaderSignature, Sign(secret, task.ID.String(), ts, body))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || reached.Load() != 1 || seen == nil || seen.Data.ID != task.ID.String() {
		t.Errorf("signed: status %d, reached %d, message %+v", w.Code, reached.Load(), seen)
	}
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"short secret":  {Secret: []byte("short"), Allow: []string{"x"}},
		"no allowlist":  {Secret: secret},
		"bad address":   {Secret: secret, Allow: []string{"x"}, AllowAddrs: []string{"localhost"}},
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

// Dot segments, encoded or not, are resolved before the allowlist is
// consulted, and the cleaned path is the one sent.
func TestPathIsCleanedBeforeTheAllowlist(t *testing.T) {
	c := newCaller(t, Config{Allow: []string{"https://hooks.example.com/hooks/"}})
	cases := map[string]bool{
		"https://hooks.example.com/hooks/orders":             true,
		"https://hooks.example.com/hooks/./orders":           true,
		"https://hooks.example.com/hooks/x/../orders":        true,
		"https://hooks.example.com/hooks/../admin":           false,
		"https://hooks.example.com/hooks/%2e%2e/admin":       false,
		"https://hooks.example.com/hooks/%2E%2E/admin":       false,
		"https://hooks.example.com/hooks/..%2fadmin":         false,
		"https://hooks.example.com/hooks/%2e%2e%2fadmin":     false,
		"https://hooks.example.com/hooks/x/../../admin":      false,
		"https://hooks.example.com/hooks/%252e%252e/admin":   false,
		"https://hooks.example.com/hooks/..%5cadmin":         false,
		"https://hooks.example.com/hooks/a\\..\\..\\admin":   false,
		"https://hooks.example.com/hooks/../hooks/orders":    true,
		"https://hooks.example.com/hooks/orders/..":          false, // "/hooks", outside "/hooks/"
		"https://hooks.example.com/hooks/orders/../../hooks": false,
	}
	for target, ok := range cases {
		if err := c.Check(target); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want allowed=%v", target, err, ok)
		}
	}

	var path, query string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { path, query = r.URL.EscapedPath(), r.URL.RawQuery })
	c = newCaller(t, Config{Allow: []string{srv.URL + "/hooks/"}})
	if err := run(t, c, srv.URL+"/hooks/x/%2e%2e/orders/?k=v", testTask()); err != nil {
		t.Fatal(err)
	}
	if path != "/hooks/orders/" || query != "k=v" {
		t.Errorf("sent path %q query %q, want /hooks/orders/ and k=v", path, query)
	}
	if _, err := c.Handler(Target{URL: srv.URL + "/hooks/..%2fadmin"}); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("registration of an escaping path: %v", err)
	}
}

// Connections are checked at dial time, against the resolved address: an
// allowed name that resolves to an internal address reaches nothing unless
// that address is listed in AllowAddrs.
func TestDialGuardRefusesInternalAddresses(t *testing.T) {
	var hits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	u, _ := url.Parse(srv.URL)
	byName := "http://localhost:" + u.Port() + "/hook"

	strict := newCaller(t, Config{Allow: []string{"127.0.0.1", "localhost"}, AllowAddrs: []string{}})
	for _, target := range []string{srv.URL, byName} {
		err := run(t, strict, target, testTask())
		if !errors.Is(err, ErrNotAllowed) || !rdq.IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent ErrNotAllowed", target, err)
		}
	}
	other := newCaller(t, Config{Allow: []string{"127.0.0.1", "localhost"}, AllowAddrs: []string{"10.0.0.0/8", "::1"}})
	if err := run(t, other, srv.URL, testTask()); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("other addresses allowed: err = %v, want ErrNotAllowed", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver was reached %d times", n)
	}

	open := newCaller(t, Config{Allow: []string{"127.0.0.1", "localhost"}, AllowAddrs: []string{"127.0.0.0/8"}})
	if err := run(t, open, srv.URL, testTask()); err != nil {
		t.Errorf("explicitly allowed: %v", err)
	}
	if hits.Load() != 1 {
		t.Errorf("hits = %d, want 1", hits.Load())
	}
}

func TestInternalAddresses(t *testing.T) {
	g, err := newDialGuard([]string{"10.1.0.0/16", "::ffff:192.168.7.7"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{ // address: refused
		"127.0.0.1": true, "127.8.9.10": true, "::1": true, "0.0.0.0": true, "::": true,
		"10.0.0.1": true, "10.1.2.3": false, "172.16.0.1": true, "192.168.1.1": true, "192.168.7.7": false,
		"169.254.169.254": true, "fe80::1": true, "fc00::1": true, "fd12::1": true,
		"224.0.0.1": true, "ff02::1": true, "100.64.0.1": true, "0.1.2.3": true, "255.255.255.255": true,
		"::ffff:127.0.0.1": true, "::ffff:10.1.0.1": false, "64:ff9b::7f00:1": true,
		"8.8.8.8": false, "2606:4700::1111": false, "93.184.216.34": false,
	}
	for addr, refused := range cases {
		err := g.check(netip.MustParseAddr(addr))
		if (err != nil) != refused {
			t.Errorf("%s: err = %v, want refused=%v", addr, err, refused)
		}
		if err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s: %v does not wrap ErrNotAllowed", addr, err)
		}
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", ""} {
		if _, err := newDialGuard([]string{bad}); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("AllowAddrs %q: err = %v", bad, err)
		}
	}
}

// Each target signs with its own secret, or Config.Secret; a target with
// neither is refused at registration.
func TestTargetSecrets(t *testing.T) {
	c, err := New(Config{Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Handler(Target{URL: "http://127.0.0.1/x"}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("no secret anywhere: err = %v", err)
	}
	if _, err := c.Router(map[string]Target{"orders": {URL: "http://127.0.0.1/x", Secret: []byte("short")}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("short target secret: err = %v", err)
	}
	own := []byte("the-target-s-own-secret-0123456789")
	var got *Message
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m, err := Verify(r, own, time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got = m
	})
	h, err := newCaller(t, Config{}).Handler(Target{URL: srv.URL, Secret: own})
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), testTask()); err != nil || got == nil {
		t.Errorf("target secret: %v", err)
	}
}

// A webhook-timestamp is accepted only in the form Sign signs: another
// spelling of the same second is refused, even under a valid signature.
func TestVerifyTimestampIsStrict(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	id := rdq.NewID().String()
	body, err := marshalMessage(&rdq.Task{ID: rdq.MustParseID(id), Queue: "q", Handler: "h"}, now)
	if err != nil {
		t.Fatal(err)
	}
	sig := Sign(secret, id, now.Unix(), body)
	ts := strconv.FormatInt(now.Unix(), 10)
	for _, v := range []string{"+" + ts, "0" + ts, "000" + ts, " " + ts, ts + " ", "\t" + ts, "-0", "00", "1e9", ts + ".0", "0x" + ts,
		"-" + ts, "-1", "99999999999999999999", "9223372036854775808", "1_700_000_000", "１７００００００００", ts + "\x00"} {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set(HeaderID, id)
		r.Header.Set(HeaderTimestamp, v)
		r.Header.Set(HeaderSignature, sig)
		if _, err := verifyAt(r, secret, time.Minute, now); !errors.Is(err, ErrBadSignature) {
			t.Errorf("timestamp %q: err = %v, want ErrBadSignature", v, err)
		}
	}
	// The largest Unix time is well formed, and far from now.
	for v, want := range map[string]error{"9223372036854775807": ErrStale, "0": ErrStale, "": ErrUnsigned} {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set(HeaderID, id)
		r.Header.Set(HeaderTimestamp, v)
		r.Header.Set(HeaderSignature, sig)
		if _, err := verifyAt(r, secret, time.Minute, now); !errors.Is(err, want) {
			t.Errorf("timestamp %q: err = %v, want %v", v, err, want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set(HeaderID, id)
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderSignature, sig)
	if _, err := verifyAt(r, secret, time.Minute, now); err != nil {
		t.Errorf("canonical timestamp %q: %v", ts, err)
	}
}

// A signature is the whole MAC: a prefix of the right one (which an
// attacker guesses in 256 tries for one byte) is refused, and so is a
// signature made with an empty key, which anyone can make, however the
// receiver's secret came to be empty. The timestamp window is exactly
// maxSkew either side of now.
func TestVerifyRefusesPartialSignaturesEmptyKeysAndEdgesOfTheWindow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	id := rdq.NewID().String()
	body, err := marshalMessage(&rdq.Task{ID: rdq.MustParseID(id), Queue: "q", Handler: "h"}, now)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(ts int64, sig string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set(HeaderID, id)
		r.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		r.Header.Set(HeaderSignature, sig)
		return r
	}
	full, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(Sign(secret, id, now.Unix(), body), "v1,"))
	if err != nil || len(full) != 32 {
		t.Fatalf("Sign: %d bytes, %v", len(full), err)
	}
	for _, n := range []int{1, 16, 31} {
		sig := "v1," + base64.StdEncoding.EncodeToString(full[:n])
		if _, err := verifyAt(mk(now.Unix(), sig), secret, time.Minute, now); !errors.Is(err, ErrBadSignature) {
			t.Errorf("the first %d bytes of the right signature: err = %v, want ErrBadSignature", n, err)
		}
	}
	sig := "v1," + base64.StdEncoding.EncodeToString(append(full, 0))
	if _, err := verifyAt(mk(now.Unix(), sig), secret, time.Minute, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("the right signature with a byte more: err = %v, want ErrBadSignature", err)
	}

	emptyMAC := "v1," + base64.StdEncoding.EncodeToString(mac(nil, id, now.Unix(), body))
	for _, empty := range [][]byte{nil, {}, []byte(SecretPrefix)} {
		if _, err := verifyAt(mk(now.Unix(), emptyMAC), empty, time.Minute, now); !errors.Is(err, ErrBadSignature) {
			t.Errorf("verifying with secret %q a request signed with the empty key: err = %v, want ErrBadSignature", empty, err)
		}
	}

	const skew = time.Minute
	for _, c := range []struct {
		offset time.Duration
		want   error
	}{{-skew, nil}, {skew, nil}, {-skew - time.Second, ErrStale}, {skew + time.Second, ErrStale}} {
		ts := now.Add(c.offset).Unix()
		if _, err := verifyAt(mk(ts, Sign(secret, id, ts, body)), secret, skew, now); !errors.Is(err, c.want) {
			t.Errorf("timestamp %s from now, window %s: err = %v, want %v", c.offset, skew, err, c.want)
		}
	}
}
