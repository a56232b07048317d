package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// admitRaw sends the headers of a POST to path with a body of declared
// bytes, and its first byte only, and returns the answer.
func admitRaw(t *testing.T, addr, path, contentType string, declared int) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n{",
		path, addr, slowSubmitterToken, contentType, declared); err != nil {
		t.Fatal(err)
	}
	// A guard against hanging, not an assertion on time.
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("POST %s: no answer to a body larger than the limit that never ends: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// REST and Connect admit a request alike: a body whose Content-Length is
// over the limit is refused as payload_too_large before it is read, at
// once (the body read deadline is an hour), and the connection closes.
func TestAdmitRefusesAnOversizeBodyUnread(t *testing.T) {
	_, srv := slotsService(t, Config{MaxBodyBytes: 1 << 10, BodyReadTimeout: time.Hour})
	addr := srv.Listener.Addr().String()

	resp := admitRaw(t, addr, "/v1/tasks", "application/json", 1<<10+1)
	var p struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || p.Code != string(CodePayloadTooLarge) || !resp.Close {
		t.Errorf("REST: status %d, code %q, close %v; want 413, payload_too_large, a closed connection", resp.StatusCode, p.Code, resp.Close)
	}

	resp = admitRaw(t, addr, RPCPath+"Submit", "application/json", 1<<10+1)
	var ce struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ce); err != nil {
		t.Fatal(err)
	}
	if ce.Code != "resource_exhausted" || !resp.Close {
		t.Errorf("Connect: code %q, close %v; want resource_exhausted and a closed connection", ce.Code, resp.Close)
	}
}
