package server

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// rawRPC opens a connection that sends the headers of a Connect JSON call
// of method with token (none if empty) and the first byte of a 1000-byte
// body, and no more.
func rawRPC(t *testing.T, addr, method, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // before the server's Close, which waits for its call
	authz := ""
	if token != "" {
		authz = "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "POST %s%s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", RPCPath, method, addr, authz); err != nil {
		t.Fatal(err)
	}
	// A guard against hanging, not an assertion on time.
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return c
}

// readConnectError reads a Connect error answer from c: its HTTP status,
// Connect code and the stable code of its ErrorInfo detail (the detail's
// value is protobuf; its reason is found in its bytes).
func readConnectError(t *testing.T, c net.Conn) (int, string, string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%d: decoding: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, out.Code, out.Message
}

func requestsTotal(t *testing.T, reg *prometheus.Registry, method, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rdq_server_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["method"] == method && l["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A Connect call without a token is refused from its headers, before its
// body is read: a body that never ends gets its 401 at once, and an
// oversized one is unauthenticated, not too large; both are counted.
func TestConnectAuthenticatesBeforeTheBody(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, srv := slotsService(t, Config{MaxBodyBytes: 1 << 10, BodyReadTimeout: time.Hour, Metrics: reg})
	addr := srv.Listener.Addr().String()

	c := rawRPC(t, addr, "Submit", "")
	status, code, _ := readConnectError(t, c)
	c.Close()
	if status != http.StatusUnauthorized || code != "unauthenticated" {
		t.Errorf("no token, a body that never ends: %d %s, want 401 unauthenticated", status, code)
	}

	req, err := http.NewRequest(http.MethodPost, srv.URL+RPCPath+"Submit", strings.NewReader(`{"task": {"payload": "`+strings.Repeat("A", 4<<10)+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"code":"unauthenticated"`) {
		t.Errorf("no token, an oversized body: %d %s, want 401 unauthenticated", resp.StatusCode, body)
	}
	if n := requestsTotal(t, reg, "Submit", "unauthenticated"); n != 2 {
		t.Errorf("rdq_server_requests_total{method=Submit,code=unauthenticated} = %g, want 2", n)
	}

	// With a token, the same body is too large, and counted so.
	req, err = http.NewRequest(http.MethodPost, srv.URL+RPCPath+"Submit", strings.NewReader(`{"task": {"payload": "`+strings.Repeat("A", 4<<10)+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+slowSubmitterToken)
	resp, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"code":"resource_exhausted"`) {
		t.Errorf("an oversized body: %d %s, want 429 resource_exhausted", resp.StatusCode, body)
	}
	if n := requestsTotal(t, reg, "Submit", "payload_too_large"); n != 1 {
		t.Errorf("rdq_server_requests_total{method=Submit,code=payload_too_large} = %g, want 1", n)
	}
}

// An authenticated Connect call's body is read as a REST one's: in one of
// the principal's places, so that trickling bodies of one principal never
// make another's call wait, and within BodyReadTimeout.
func TestConnectBodySlotsAndReadDeadline(t *testing.T) {
	s, srv := slotsService(t, Config{RequestTimeout: 10 * time.Second, BodyReadTimeout: time.Hour})
	addr := srv.Listener.Addr().String()
	var answered atomic.Int32
	var wg sync.WaitGroup
	var conns []net.Conn
	for range DefaultMaxConcurrentBodies {
		c := rawRPC(t, addr, "Submit", slowSubmitterToken)
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [1]byte
			_, _ = c.Read(b[:]) // returns when the server answers or the test closes c
			answered.Add(1)
		}()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	waitUntil(t, "the trickling Connect bodies to hold every place of their principal", func() bool {
		return s.bodies.inUse() == DefaultMaxConcurrentBodies
	})
	resp, body := postWith(t, srv, RPCPath+"PauseQueue",
		map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + slotsAdminToken},
		strings.NewReader(`{"queue": "orders", "reason": "incident 7"}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin's pause, with the submitter's bodies trickling: %d %s", resp.StatusCode, body)
	}
	if n := answered.Load(); n != 0 {
		t.Errorf("%d trickling calls ended before the admin's pause was served; want all still open", n)
	}
}

// A Connect body that does not arrive within BodyReadTimeout is refused
// with a message saying so, and its place is freed.
func TestConnectBodyReadDeadline(t *testing.T) {
	s, srv := slotsService(t, Config{BodyReadTimeout: 50 * time.Millisecond})
	c := rawRPC(t, srv.Listener.Addr().String(), "Submit", slowSubmitterToken)
	defer c.Close()
	status, code, msg := readConnectError(t, c)
	if status != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(msg, "did not arrive within 50ms") {
		t.Errorf("a Connect body that stopped arriving: %d %s %q", status, code, msg)
	}
	waitUntil(t, "the place to be freed", func() bool { return s.bodies.inUse() == 0 })
}

// A compressed call that is not what it declares is refused with the
// stable code invalid_argument before connect-go reads it: a Connect body
// that is not gzip, a gRPC-Web body cut inside a message, a gRPC-Web
// message flagged compressed that is not gzip.
func TestConnectRefusesBrokenCompression(t *testing.T) {
	_, srv := slotsService(t, Config{MaxBodyBytes: 1 << 10, BodyReadTimeout: time.Hour})
	for _, c := range []struct {
		name, contentType, header, body string
	}{
		{"Connect, not gzip", "application/json", "Content-Encoding", `{"task": {}}`},
		{"gRPC-Web, cut inside a message", "application/grpc-web+proto", "Grpc-Encoding", "\x01\x00\x00\x00\x10abc"},
		{"gRPC-Web, flagged but not gzip", "application/grpc-web+proto", "Grpc-Encoding", "\x01\x00\x00\x00\x03abc"},
	} {
		resp, body := postWith(t, srv, RPCPath+"Submit",
			map[string]string{"Content-Type": c.contentType, c.header: "gzip", "Authorization": "Bearer " + slowSubmitterToken},
			strings.NewReader(c.body))
		// Connect answers 400 with a JSON error; gRPC-Web, without a
		// message, answers its status in headers, the ErrorInfo in the
		// status details (base64 protobuf).
		reason := string(body)
		if d := resp.Header.Get("Grpc-Status-Details-Bin"); d != "" {
			raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d, "="))
			if err != nil {
				t.Fatalf("%s: grpc-status-details-bin: %v", c.name, err)
			}
			reason = string(raw)
		}
		wantStatus := http.StatusBadRequest
		if c.header == "Grpc-Encoding" {
			wantStatus = http.StatusOK
			if got := resp.Header.Get("Grpc-Status"); got != "3" {
				t.Errorf("%s: grpc-status %q, want 3 (InvalidArgument)", c.name, got)
			}
		}
		if resp.StatusCode != wantStatus || !strings.Contains(reason, "invalid_argument") {
			t.Errorf("%s: %d %q %v, want %d with the stable code invalid_argument", c.name, resp.StatusCode, body, resp.Header, wantStatus)
		}
	}
}
