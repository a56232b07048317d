package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// A REST call refused before its body is read is answered at once, not
// after the server waits to drain a body that never ends; the connection
// then closes.
func TestRESTRefusesAnUnreadBodyAtOnce(t *testing.T) {
	_, srv := slotsService(t, Config{MaxBodyBytes: 1 << 10, BodyReadTimeout: time.Hour})
	addr := srv.Listener.Addr().String()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The headers of a 1000-byte body, and its first byte only.
	if _, err := fmt.Fprintf(c, "POST /v1/tasks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr); err != nil {
		t.Fatal(err)
	}
	// A guard against hanging, not an assertion on time.
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never ends: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", resp.StatusCode)
	}
	if !resp.Close {
		t.Error("the connection stays open after a refusal that left the body unread")
	}
}
