package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/sqlitestore"
)

const (
	signInAdminToken     = "f8Kd2LmQ9xZr4TbW7nVc1HsJ6gPy3AeU-oRiNqXtMkE"
	signInSubmitterToken = "Qa7Wm3Zk9Xr2Lp5Tn8Vb1Hc4Jd6Gf0Se-yUoIiRtEwQ"
)

// lockedBuffer is a log sink for concurrent handlers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type signInEnv struct {
	h   http.Handler
	reg *prometheus.Registry
	log *lockedBuffer
	now time.Time
}

// newSignInEnv serves the console of a Service over the embedded store,
// with an admin and a submitter and a clock that only the test moves.
func newSignInEnv(t *testing.T, cfg ConsoleConfig) *signInEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tokens, err := NewTokens(map[string]*Principal{
		signInAdminToken:     {Name: "ada", Grants: []Grant{{Queue: "*", Role: RoleAdmin}}},
		signInSubmitterToken: {Name: "sam", Grants: []Grant{{Queue: "*", Role: RoleSubmitter}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &signInEnv{reg: prometheus.NewRegistry(), log: &lockedBuffer{}, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	svc, err := New(Config{Store: st, Auth: tokens, Metrics: e.reg, Logger: slog.New(slog.NewTextHandler(e.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	svc.consoleNow = func() time.Time { return e.now }
	h, err := svc.Console(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := h.(interface{ Close() error }); ok {
		t.Cleanup(func() { c.Close() })
	}
	e.h = h
	return e
}

// signIn posts token from client (an IP address) and returns the response.
func (e *signInEnv) signIn(client, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "https://rdq.example/console/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = client + ":40000"
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// session returns the session cookie a sign-in set.
func session(t *testing.T, w *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	if w.Code != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", w.Code, w.Body)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == consoleCookie && c.Value != "" {
			return c
		}
	}
	t.Fatalf("sign in set no session cookie")
	return nil
}

// signedIn reports whether the console honours the session cookie c.
func (e *signInEnv) signedIn(c *http.Cookie) bool {
	r := httptest.NewRequest(http.MethodGet, "https://rdq.example/console/", nil)
	r.AddCookie(c)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w.Code == http.StatusOK
}

// However often a submitter signs in, the admin's sessions stay. (Past
// 10,000 sessions in all, sign-ins used to end arbitrary sessions: 11,000
// sign-ins ended some of 100 admin sessions all but surely.)
func TestConsoleSignInsNeverEvictAnotherPrincipal(t *testing.T) {
	e := newSignInEnv(t, ConsoleConfig{MaxSessionsPerPrincipal: 100})
	var admin []*http.Cookie
	for range 100 {
		admin = append(admin, session(t, e.signIn("10.0.0.1", signInAdminToken)))
		e.now = e.now.Add(signInEvery)
	}
	for range 11000 {
		e.signIn("10.1.2.3", signInSubmitterToken)
	}
	for i, c := range admin {
		if !e.signedIn(c) {
			t.Errorf("admin session %d of %d ended by a submitter's sign-ins", i+1, len(admin))
		}
	}
}

// A principal's sessions are capped: a sign-in beyond the cap ends that
// principal's oldest session and nobody else's.
func TestConsoleSessionsCappedPerPrincipal(t *testing.T) {
	e := newSignInEnv(t, ConsoleConfig{MaxSessionsPerPrincipal: 3})
	admin := session(t, e.signIn("10.0.0.1", signInAdminToken))
	var sam []*http.Cookie
	for range 5 {
		sam = append(sam, session(t, e.signIn("10.0.0.2", signInSubmitterToken)))
	}
	if !e.signedIn(admin) {
		t.Error("the admin's session ended")
	}
	for i, c := range sam {
		r := httptest.NewRequest(http.MethodGet, "https://rdq.example/console/", nil)
		r.AddCookie(c)
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		// A submitter's session is refused the pages (403); an ended
		// one is sent to sign in.
		ended := w.Code == http.StatusSeeOther
		if want := i < 2; ended != want {
			t.Errorf("submitter session %d: ended %v, want %v (%d)", i+1, ended, want, w.Code)
		}
	}
}

// Failed sign-ins are throttled per client, sign-ins per principal; every
// refusal is logged without the token and counted.
func TestConsoleSignInThrottled(t *testing.T) {
	e := newSignInEnv(t, ConsoleConfig{})
	wrong := "wrong-token-Zx8Qp2Lm5Rt9Vb3Nc7Hd1Jf4Gk6Sa0We"
	for i := range signInFailureBurst {
		if w := e.signIn("10.0.0.9", wrong); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i+1, w.Code)
		}
	}
	w := e.signIn("10.0.0.9", wrong)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "6" || !strings.Contains(w.Body.String(), "Too many sign-ins from your address") {
		t.Errorf("wrong token beyond the burst: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if w := e.signIn("10.0.0.9", signInAdminToken); w.Code != http.StatusTooManyRequests {
		t.Errorf("a throttled client's valid token: %d", w.Code)
	}
	if w := e.signIn("10.0.0.10", wrong); w.Code != http.StatusUnauthorized {
		t.Errorf("another client: %d", w.Code)
	}
	e.now = e.now.Add(signInFailureEvery)
	if w := e.signIn("10.0.0.9", signInAdminToken); w.Code != http.StatusSeeOther {
		t.Errorf("the throttled client, once its wait is over: %d", w.Code)
	}

	for i := range signInBurst - 1 { // one sign-in of ada's above
		if w := e.signIn("10.0.1.1", signInAdminToken); w.Code != http.StatusSeeOther {
			t.Fatalf("sign-in %d: %d", i+2, w.Code)
		}
	}
	w = e.signIn("10.0.1.2", signInAdminToken)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "with this token") {
		t.Errorf("a principal's sign-in beyond the burst, from another client: %d %s", w.Code, w.Body)
	}

	for result, want := range map[string]float64{signInInvalid: 11, signInThrottled: 3, signInOK: 10} {
		if got := e.signIns(result); got != want {
			t.Errorf("rdq_server_console_signins_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	logs := e.log.String()
	// 11 invalid tokens, and the first throttled sign-in of 10.0.0.9 and of
	// ada: a client's later throttled sign-ins within a minute are counted,
	// not logged.
	if strings.Count(logs, "sign-in refused") != 13 || !strings.Contains(logs, "client=10.0.0.9") || !strings.Contains(logs, "principal=ada") {
		t.Errorf("log:\n%s", logs)
	}
	for _, secret := range []string{wrong, signInAdminToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds a token")
		}
	}
}

// signIns reads rdq_server_console_signins_total{result}.
func (e *signInEnv) signIns(result string) float64 {
	mfs, err := e.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rdq_server_console_signins_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A client is an IPv4 address or an IPv6 /64.
func TestRemoteHost(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:4000":           "192.0.2.7",
		"[2001:db8:1:2:3::9]:4000": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:1": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:4000":  "::ffff:192.0.2.7",
		"not an address":           "not an address",
	} {
		if got := remoteHost(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("remoteHost(%q) = %q, want %q", addr, got, want)
		}
	}
}

// When the throttle tracks as many keys as it may, keys whose bucket is
// full again are forgotten, and keys that still find no room share one
// bucket.
func TestThrottleBoundsItsKeys(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	th := newThrottle(2, time.Second, 2)
	for _, k := range []string{"a", "a", "b", "b"} {
		if ok, _ := th.allow(k, now, true); !ok {
			t.Fatalf("%s refused within its burst", k)
		}
	}
	if ok, wait := th.allow("a", now, true); ok || wait != time.Second {
		t.Errorf("a beyond its burst: %v, wait %s", ok, wait)
	}
	// c and d find no room: they share a bucket of 2.
	okC, _ := th.allow("c", now, true)
	okD, _ := th.allow("d", now, true)
	okE, _ := th.allow("e", now, true)
	if !okC || !okD || okE {
		t.Errorf("overflow keys: %v %v %v, want true true false", okC, okD, okE)
	}
	// Once a's and b's buckets are full again, they make room.
	now = now.Add(2 * time.Second)
	th.allow("f", now, true)
	if len(th.buckets) != 1 || th.buckets["f"] == nil {
		t.Errorf("buckets after refill: %v", th.buckets)
	}
}

// heldBody is a request body that signals its first read and then waits
// for release: a sign-in whose form is still arriving.
type heldBody struct {
	once    sync.Once
	started chan<- struct{}
	release <-chan struct{}
	r       io.Reader
}

func (b *heldBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		b.started <- struct{}{}
		<-b.release
	})
	return b.r.Read(p)
}

// Sign-ins in flight at once count against their client's throttle: 30
// wrong tokens whose forms all arrive together (slow bodies on 30
// connections) get 10 answers of 401 and 20 of 429, as 30 in a row do.
// (The throttle used to be checked before the form was read and charged
// after, so every attempt in flight was tried.)
func TestConsoleSignInThrottleCountsAttemptsInFlight(t *testing.T) {
	e := newSignInEnv(t, ConsoleConfig{})
	const n = 3 * signInFailureBurst
	started := make(chan struct{}, n)
	release := make(chan struct{})
	codes := make(chan int, n)
	form := url.Values{"token": {"wrong-token-Zx8Qp2Lm5Rt9Vb3Nc7Hd1Jf4Gk6Sa0We"}}.Encode()
	for range n {
		go func() {
			r := httptest.NewRequest(http.MethodPost, "https://rdq.example/console/signin",
				&heldBody{started: started, release: release, r: strings.NewReader(form)})
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.RemoteAddr = "10.9.9.9:40000"
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			codes <- w.Code
		}()
	}
	// Wait until every attempt either reads its form or is answered.
	var got []int
	reading := 0
	deadline := time.After(30 * time.Second)
	for reading+len(got) < n {
		select {
		case <-started:
			reading++
		case c := <-codes:
			got = append(got, c)
		case <-deadline:
			t.Fatalf("%d attempts reading, %d answered, of %d", reading, len(got), n)
		}
	}
	close(release)
	for len(got) < n {
		got = append(got, <-codes)
	}
	count := map[int]int{}
	for _, c := range got {
		count[c]++
	}
	if count[http.StatusUnauthorized] != signInFailureBurst || count[http.StatusTooManyRequests] != n-signInFailureBurst {
		t.Errorf("%d wrong tokens at once from one client: %v; want %d tried (401) and the rest throttled (429)", n, count, signInFailureBurst)
	}
}

// A sign-in's form is read up to a few KiB: a larger one is refused before
// it is parsed, and counts as a failed attempt.
func TestConsoleSignInFormIsBounded(t *testing.T) {
	e := newSignInEnv(t, ConsoleConfig{})
	big := url.Values{"token": {strings.Repeat("x", 1<<20)}}.Encode()
	r := httptest.NewRequest(http.MethodPost, "https://rdq.example/console/signin", strings.NewReader(big))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "10.0.0.7:40000"
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge || strings.Contains(w.Body.String(), "xxxx") {
		t.Errorf("a 1 MiB sign-in form: %d %s", w.Code, w.Body)
	}
	if got := e.signIns(signInInvalid); got != 1 {
		t.Errorf("rdq_server_console_signins_total{result=invalid} = %v, want 1", got)
	}
	if w := e.signIn("10.0.0.7", signInAdminToken); w.Code != http.StatusSeeOther {
		t.Errorf("a valid sign-in after it: %d", w.Code)
	}
}

// Behind proxies, a request from a trusted proxy comes from the client the
// last entry of the header names; any other request, or one whose last
// entry is not an address, from its remote address.
func TestProxyClientAddr(t *testing.T) {
	addr, err := ProxyClientAddr("x-forwarded-for", []string{"10.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"10.1.2.3:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"10.1.2.3:5000", []string{"203.0.113.9, 198.51.100.7"}, "198.51.100.7"}, // the first entry is the client's to write
		{"10.1.2.3:5000", []string{"203.0.113.9", "198.51.100.8"}, "198.51.100.8"},
		{"10.1.2.3:5000", []string{"198.51.100.7:4444"}, "198.51.100.7"},
		{"10.1.2.3:5000", []string{"2001:db8:1:2::9"}, "2001:db8:1:2::/64"},
		{"10.1.2.3:5000", []string{"[2001:db8:1:2::9]:443"}, "2001:db8:1:2::/64"},
		{"10.1.2.3:5000", nil, "10.1.2.3"},
		{"10.1.2.3:5000", []string{"198.51.100.7, not-an-address"}, "10.1.2.3"},
		{"[::1]:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"[::ffff:10.0.0.1]:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"192.0.2.1:5000", []string{"198.51.100.7"}, "192.0.2.1"}, // not a proxy: the header is the client's own
		{"[2001:db8:9:9::1]:5000", []string{"198.51.100.7"}, "2001:db8:9:9::/64"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/console/signin", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := addr(r); got != tc.want {
			t.Errorf("from %s with X-Forwarded-For %q: %q, want %q", tc.remote, tc.xff, got, tc.want)
		}
	}
	for _, bad := range []struct {
		header  string
		trusted []string
	}{{"", []string{"10.0.0.1"}}, {"X-Forwarded-For", nil}, {"X-Forwarded-For", []string{"proxy.internal"}}, {"X Real IP", []string{"10.0.0.1"}}} {
		if _, err := ProxyClientAddr(bad.header, bad.trusted); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("ProxyClientAddr(%q, %q): %v, want invalid", bad.header, bad.trusted, err)
		}
	}
}

// Behind a proxy, a client failing sign-ins is throttled alone: another
// client through the same proxy still signs in.
func TestConsoleSignInThrottledPerClientBehindAProxy(t *testing.T) {
	addr, err := ProxyClientAddr("X-Forwarded-For", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	e := newSignInEnv(t, ConsoleConfig{ClientAddr: addr})
	viaProxy := func(client, token string) int {
		r := httptest.NewRequest(http.MethodPost, "https://rdq.example/console/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("X-Forwarded-For", client)
		r.RemoteAddr = "127.0.0.1:40000"
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		return w.Code
	}
	for range signInFailureBurst {
		viaProxy("198.51.100.66", "wrong-token-Zx8Qp2Lm5Rt9Vb3Nc7Hd1Jf4Gk6Sa0We")
	}
	if code := viaProxy("198.51.100.66", "wrong-token-Zx8Qp2Lm5Rt9Vb3Nc7Hd1Jf4Gk6Sa0We"); code != http.StatusTooManyRequests {
		t.Errorf("the failing client: %d, want 429", code)
	}
	if code := viaProxy("198.51.100.7", signInAdminToken); code != http.StatusSeeOther {
		t.Errorf("another client through the same proxy: %d, want a sign-in", code)
	}
	if !strings.Contains(e.log.String(), "client=198.51.100.66") {
		t.Errorf("the log does not name the client:\n%s", e.log.String())
	}
}

// A flood of throttled sign-ins writes one log line per client a minute,
// and counts every one.
func TestConsoleThrottledSignInsLogOncePerMinute(t *testing.T) {
	e := newSignInEnv(t, ConsoleConfig{})
	wrong := "wrong-token-Zx8Qp2Lm5Rt9Vb3Nc7Hd1Jf4Gk6Sa0We"
	for range signInFailureBurst {
		e.signIn("10.0.0.9", wrong)
	}
	for range 500 {
		if w := e.signIn("10.0.0.9", wrong); w.Code != http.StatusTooManyRequests {
			t.Fatalf("a throttled client's sign-in: %d", w.Code)
		}
	}
	countThrottled := func() int {
		n := 0
		for _, line := range strings.Split(e.log.String(), "\n") {
			if strings.Contains(line, "sign-in refused") && strings.Contains(line, "result=throttled") {
				n++
			}
		}
		return n
	}
	if n := countThrottled(); n != 1 {
		t.Errorf("500 throttled sign-ins wrote %d log lines, want 1", n)
	}
	if got := e.signIns(signInThrottled); got != 500 {
		t.Errorf("rdq_server_console_signins_total{result=throttled} = %v, want 500", got)
	}
	e.now = e.now.Add(throttledLogEvery)
	for range signInFailureBurst + 1 {
		e.signIn("10.0.0.9", wrong)
	}
	if n := countThrottled(); n != 2 {
		t.Errorf("after a minute: %d throttled log lines, want 2", n)
	}
}
