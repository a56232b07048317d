package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/sqlitestore"
)

const restToken = "0EUBwgrCWlFuwv2f1tbYFRWPNq_VZClSoEkTtY0_CHk"

// restService serves a Service over the embedded store.
func restService(t testing.TB, cfg Config) (*Service, *httptest.Server) {
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
	tokens, err := NewTokens(map[string]*Principal{restToken: {Name: "shop", Grants: []Grant{{Queue: "*", Role: RoleAdmin}}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Auth, cfg.Logger = st, tokens, slog.New(slog.DiscardHandler)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv
}

// post sends a JSON body to srv's path as the REST tests' principal and
// returns the status and the answer's body.
func post(t *testing.T, srv *httptest.Server, path string, body io.Reader) (int, []byte) {
	t.Helper()
	resp, raw := postWith(t, srv, path,
		map[string]string{"Authorization": "Bearer " + restToken, "Content-Type": "application/json"}, body)
	return resp.StatusCode, raw
}

// postWith sends body to srv's path with headers and returns the answer and
// its body, read whole.
func postWith(t *testing.T, srv *httptest.Server, path string, headers map[string]string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// A request that finds MaxConcurrentBodies bodies in flight waits, and is
// refused with 503 when its time runs out; the place is free again once the
// body in flight is done.
func TestRESTBoundsBodiesInFlight(t *testing.T) {
	s, srv := restService(t, Config{MaxConcurrentBodies: 1, RequestTimeout: 2 * time.Second})
	task := `{"version": 1, "queue": "orders", "handler": "charge", "payload": "e30="}`
	pr, pw := io.Pipe()
	first := make(chan int, 1)
	go func() {
		code, _ := post(t, srv, "/v1/tasks", pr)
		first <- code
	}()
	if _, err := io.WriteString(pw, task[:10]); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first body to hold the only place", func() bool { return s.bodies.inUse() == 1 })

	code, body := post(t, srv, "/v1/tasks", strings.NewReader(task))
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"unavailable"`) {
		t.Errorf("second body while the first is in flight: %d %s", code, body)
	}
	if _, err := io.WriteString(pw, task[10:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	<-first
	waitUntil(t, "the place to be released", func() bool { return s.bodies.inUse() == 0 })
	if code, body := post(t, srv, "/v1/tasks", strings.NewReader(task)); code != http.StatusOK {
		t.Errorf("after the first body: %d %s", code, body)
	}
}

func TestRESTBatch(t *testing.T) {
	_, srv := restService(t, Config{MaxBodyBytes: 256 << 10})
	type result struct {
		Task *struct {
			ID       string `json:"id"`
			Attempts int    `json:"attempts"`
		} `json:"task"`
		Error *struct{ Code string } `json:"error"`
	}
	batch := func(body string) (int, []result, string) {
		code, raw := post(t, srv, "/v1/tasks:batch", strings.NewReader(body))
		var out struct{ Results []result }
		if code == 200 {
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
		}
		return code, out.Results, string(raw)
	}
	env := func(extra string) string {
		return `{"version": 1, "queue": "orders", "handler": "charge", "payload": "e30="` + extra + `}`
	}
	code, res, raw := batch(`{"tasks": [` + strings.Join([]string{
		env(""),
		env(`, "first_failure": {"error_type": "timeout", "message": "upstream slow"}`),
		env(`, "First_Failure": {"error_type": "timeout", "message": "any case"}`),
		env(`, "\u0066irst_failure": {"error_type": "timeout", "message": "escaped"}`),
		`{"version": 1, "queue": "bad queue", "handler": "charge"}`,
		env(`, "content_type": "text/plain\r\nX: 1"`),
		`[1]`,
	}, ", ") + `], "note": "ignored"}`)
	if code != 200 || len(res) != 7 {
		t.Fatalf("batch: %d %s", code, raw)
	}
	for i, r := range res[:4] {
		if r.Task == nil || r.Error != nil {
			t.Errorf("item %d: %+v", i, r)
		}
	}
	for i, r := range res[4:] {
		if r.Task != nil || r.Error == nil || r.Error.Code != "invalid_argument" {
			t.Errorf("item %d: %+v", i+4, r)
		}
	}
	// first_failure is found in every spelling the decoder accepts.
	for i, r := range res[:4] {
		if want := min(i, 1); r.Task.Attempts != want {
			t.Errorf("item %d: %d attempts, want %d", i, r.Task.Attempts, want)
		}
	}

	for name, body := range map[string]string{
		"two tasks members": `{"tasks": [], "tasks": []}`,
		"not an object":     `[]`,
		"tasks not array":   `{"tasks": {}}`,
		"cut short":         `{"tasks": [` + env(""),
		"trailing value":    `{"tasks": []} {}`,
		"empty":             ``,
		"too many":          `{"tasks": [` + strings.TrimSuffix(strings.Repeat(`{}, `, MaxBatch+1), ", ") + `]}`,
	} {
		if code, _, raw := batch(body); code != 400 {
			t.Errorf("%s: %d %s", name, code, raw)
		}
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, 300<<10))
	if code, _, raw := batch(`{"tasks": [` + env(`, "x": "`+big+`"`) + `]}`); code != 413 {
		t.Errorf("oversized: %d %s", code, raw)
	}
}

// BenchmarkRESTBatchDecode decodes a batch of 1,000 tasks of 3 KiB each
// (about 4 MiB of JSON); B/op against the body size shows what a batch
// costs in memory.
func BenchmarkRESTBatchDecode(b *testing.B) {
	s, _ := restService(b, Config{})
	payload := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 3<<10))
	var buf bytes.Buffer
	buf.WriteString(`{"tasks": [`)
	for i := range 1000 {
		if i > 0 {
			buf.WriteString(", ")
		}
		fmt.Fprintf(&buf, `{"version": 1, "queue": "orders", "handler": "charge", "payload": %q, "idempotency_key": "k%d"}`, payload, i)
	}
	buf.WriteString(`]}`)
	body := buf.Bytes()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/v1/tasks:batch", bytes.NewReader(body))
		specs, _, _, err := s.decodeBatch(r)
		if err != nil || len(specs) != 1000 {
			b.Fatal(len(specs), err)
		}
	}
}
