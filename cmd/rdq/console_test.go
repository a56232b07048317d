package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// TestConsoleServesTheLocalStore starts 'rdq console' on a SQLite file
// holding a task that died, was redriven and succeeded (what the
// quickstart leaves), and reads its history through the console.
func TestConsoleServesTheLocalStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rdq.db")
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	seedFixtures(t, s, fixtures[:1])
	id := rdq.MustParseID(fid(1))
	if errs, err := s.Redrive(ctx, store.RedriveParams{IDs: []rdq.ID{id}, Actor: "quickstart", Reason: "relay fixed"}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"emails"}, Limit: 1, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatal(err, claimed)
	}
	if errs, err := s.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: id, Token: claimed[0].LeaseToken}, Status: rdq.StatusSucceeded,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w", Duration: time.Millisecond},
	}}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}

	env := map[string]string{"RDQ_DATABASE_URL": "sqlite:" + path, "USER": "tester"}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	code := make(chan int, 1)
	go func() {
		c := run(runCtx, []string{"console", "--listen", "127.0.0.1:0"}, strings.NewReader(""), outW, &stderr, func(k string) string { return env[k] })
		outW.Close()
		code <- c
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v (stderr %q)", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	base := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(line)
	if base == "" || !strings.Contains(line, "changes recorded as tester") {
		t.Fatalf("first line %q", line)
	}
	get := func(path string) string {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
		}
		return string(b)
	}
	overview := get("/")
	for _, want := range []string{">emails<", "Recent changes", "relay fixed", "/tasks/" + id.String()} {
		if !strings.Contains(overview, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
	page := get("/tasks/" + id.String())
	for _, want := range []string{"Life 0", "Life 1", "PERMANENT_FAILURE", "SUCCESS", "connection refused", "<td>quickstart</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}

	// A request naming another host, as a page of a rebinding name that
	// resolves to 127.0.0.1 sends, is refused before the console sees
	// it; localhost with the console's port is served.
	postAs := func(host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", base+"/tasks/"+id.String()+"/purge", strings.NewReader("reason=rebound"))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(b)
	}
	port := base[strings.LastIndex(base, ":")+1:]
	for _, host := range []string{"rebind.example:" + port, "rebind.example", "127.0.0.2:" + port, "localhost:1"} {
		code, body := postAs(host)
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "not the address this console listens on") || !strings.Contains(body, strings.TrimPrefix(base, "http://")) {
			t.Errorf("Host %s: %d %q", host, code, body)
		}
	}
	if !strings.Contains(get("/tasks/"+id.String()), "SUCCESS") {
		t.Error("the task is gone after the refused requests")
	}
	if code, _ := postAs("localhost:" + port); code == http.StatusMisdirectedRequest {
		t.Errorf("Host localhost:%s refused", port)
	}
	stop()
	if c := <-code; c != 0 {
		t.Errorf("exit %d: %s", c, stderr.String())
	}
}

func TestConsoleListensOnLoopbackOnly(t *testing.T) {
	h := &harness{t: t, env: map[string]string{"RDQ_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "x.db"), "USER": "tester"}}
	r := h.run("", "console", "--listen", "0.0.0.0:8080")
	if r.code != exitUsage || !strings.Contains(r.stderr, "loopback") {
		t.Errorf("exit %d, %q", r.code, r.stderr)
	}
}

// The local console answers only to its own address, or localhost with its
// port, whatever the listener's address family; any other Host, a missing
// one included, is refused with 421 naming the address to open.
func TestConsoleHostCheck(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, tc := range []struct {
		listen  string
		allowed []string
		refused []string
	}{
		{"127.0.0.1:8080",
			[]string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080"},
			[]string{"", "127.0.0.1", "127.0.0.1:80", "127.0.0.1:8081", "127.0.0.1.evil:8080", "127.0.0.1.evil", "evil.example:8080",
				"localhost", "localhost.:8080", "127.0.0.2:8080", "[::1]:8080", "0.0.0.0:8080", "127.1:8080", "2130706433:8080"}},
		{"[::1]:8080",
			[]string{"[::1]:8080", "localhost:8080"},
			[]string{"", "[::1]", "[::1]:8081", "127.0.0.1:8080", "[::2]:8080", "[::1].evil:8080", "evil.example:8080", "[0:0:0:0:0:0:0:1]:8080"}},
		// On port 80 a browser sends the Host without a port.
		{"127.0.0.1:80",
			[]string{"127.0.0.1", "127.0.0.1:80", "localhost", "localhost:80"},
			[]string{"", "127.0.0.1:8080", "rebind.example", "rebind.example:80"}},
		{"[::1]:80",
			[]string{"[::1]", "[::1]:80", "localhost"},
			[]string{"", "127.0.0.1", "rebind.example"}},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		h := onlyHosts(addr, ok)
		serve := func(host string) (int, string) {
			r := httptest.NewRequest(http.MethodPost, "/tasks/x/purge", strings.NewReader("reason=r"))
			r.Host = host
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code, w.Body.String()
		}
		for _, host := range tc.allowed {
			if code, body := serve(host); code != http.StatusNoContent {
				t.Errorf("listening on %s, Host %q refused: %d %s", tc.listen, host, code, body)
			}
		}
		for _, host := range tc.refused {
			code, body := serve(host)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "open http://"+addr.String()+"/") {
				t.Errorf("listening on %s, Host %q: %d %q, want 421 naming the address", tc.listen, host, code, body)
			}
		}
	}
}

// The local console's server bounds how long a client may take to send a
// request and hold an idle connection.
func TestConsoleServerTimeouts(t *testing.T) {
	srv := consoleServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Errorf("console server limits: header %s, read %s, write %s, idle %s, header bytes %d",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}
