package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq/sqlitestore"
)

const (
	slowSubmitterToken = "Yq3vN8mK2xR7pL0tW5cJ9hB4fD6gS1aZ-eUoXiQrTyM"
	slotsAdminToken    = "Hn7bV2cX9zL4kJ8mQ1wE5rT0yU3iO6pA-sDfGhJkLzX"
)

// slotsService serves a Service with a submitter and an admin.
func slotsService(t *testing.T, cfg Config) (*Service, *httptest.Server) {
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
		slowSubmitterToken: {Name: "shop", Grants: []Grant{{Queue: "*", Role: RoleSubmitter}}},
		slotsAdminToken:    {Name: "root", Grants: []Grant{{Queue: "*", Role: RoleAdmin}}},
	})
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

// trickle opens a connection that sends a submission's headers and the
// first byte of its body, and no more. answered is set once the server
// answers or closes the connection.
func trickle(t *testing.T, srv *httptest.Server, answered *atomic.Int32, wg *sync.WaitGroup) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(c, "POST /v1/tasks HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
		srv.Listener.Addr(), slowSubmitterToken)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var b [1]byte
		_, _ = c.Read(b[:]) // returns when the server answers or the test closes c
		answered.Add(1)
	}()
	return c
}

// Twenty connections of one principal trickling their bodies hold every
// place of that principal, and an admin's pause is served while they are
// all still open, unanswered.
func TestRESTSlowBodiesDoNotStarveAnotherPrincipal(t *testing.T) {
	s, srv := slotsService(t, Config{RequestTimeout: 10 * time.Second, BodyReadTimeout: time.Hour})
	var answered atomic.Int32
	var wg sync.WaitGroup
	var conns []net.Conn
	for range 20 {
		conns = append(conns, trickle(t, srv, &answered, &wg))
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	waitUntil(t, "the trickling bodies to hold every place of their principal", func() bool {
		return s.bodies.inUse() == DefaultMaxConcurrentBodies
	})

	resp, body := postWith(t, srv, "/v1/queues:pause", map[string]string{"Authorization": "Bearer " + slotsAdminToken},
		strings.NewReader(`{"queue": "orders", "reason": "incident 7"}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin's pause, with the submitter's bodies trickling: %d %s", resp.StatusCode, body)
	}
	if n := answered.Load(); n != 0 {
		t.Fatalf("%d trickling requests ended before the admin's pause was served; want all still open", n)
	}
	if n := s.bodies.inUse(); n != DefaultMaxConcurrentBodies {
		t.Errorf("after the pause, %d places held; want the submitter's %d", n, DefaultMaxConcurrentBodies)
	}
}

// A body that does not arrive within BodyReadTimeout is refused with a
// message saying so, and its place is freed, on every POST route.
func TestRESTBodyReadDeadline(t *testing.T) {
	s, srv := slotsService(t, Config{BodyReadTimeout: 50 * time.Millisecond})
	posts := 0
	for _, rt := range restRoutes {
		if rt.method != http.MethodPost {
			continue
		}
		posts++
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
			rt.path, srv.Listener.Addr(), slotsAdminToken)
		if err != nil {
			t.Fatal(err)
		}
		// A guard against hanging, not an assertion on time.
		if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s: no answer to a body that stopped arriving: %v", rt.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "did not arrive within 50ms") {
			t.Errorf("POST %s, a body that stopped arriving: %d %s", rt.path, resp.StatusCode, body)
		}
		waitUntil(t, "the place to be freed", func() bool { return s.bodies.inUse() == 0 })
	}
	if posts < 8 {
		t.Errorf("%d POST routes checked", posts)
	}
}
