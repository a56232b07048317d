package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/user"
	"strings"
	"time"

	"github.com/srjn45/rdq/console"
)

func init() {
	usages["console"] = `
Usage: rdq console [--listen 127.0.0.1:8080]

Serves the DLQ console (queues, dead tasks, failure groups, task history,
bulk redrive and purge, the audit log) on the database the other commands
use, for the local user: every change is allowed and audited under --actor
(default $USER). It listens on a loopback address only; to share the console,
run rdq-server, which mounts it behind sign-in and roles. It answers only
requests addressed to it by that address or localhost (a Host header of
any other name, such as a page's whose name resolves to 127.0.0.1, is
refused), so open the address it prints. Stop it with Ctrl-C.
`
}

// consoleCmd serves the console until the context ends.
func (e *env) consoleCmd(args []string) error {
	fs := newFlagSet("console", &e.g, e.stderr, usages["console"])
	listen := fs.String("listen", "127.0.0.1:8080", "loopback `address` to listen on (port 0 picks a free one)")
	var actor string
	fs.StringVar(&actor, "actor", "", "who is making changes, for the audit log (default $USER)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("console takes no arguments (got %q)", pos[0])
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usageErrorf("--listen %q: use host:port, such as 127.0.0.1:8080", *listen)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageErrorf("--listen %s: the local console allows every change to whoever reaches it, so it listens on a loopback address only (127.0.0.1 or ::1); share it through rdq-server instead", *listen)
	}
	if actor == "" {
		actor = e.getenv("USER")
	}
	if actor == "" {
		if u, err := user.Current(); err == nil {
			actor = u.Username
		}
	}
	if actor == "" {
		return usageErrorf("pass --actor NAME: every change is attributed to someone, and $USER is not set")
	}
	b, err := e.openBackend(false)
	if err != nil {
		return err
	}
	defer b.close()
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := console.New(console.Config{
		Store:     b.Backend, // the store itself, so its optional methods are found
		Authorize: func(*http.Request, console.Action, string) error { return nil },
		Actor:     func(*http.Request) string { return actor },
		Logger:    logger,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := consoleServer(onlyHosts(ln.Addr(), c), logger)
	fmt.Fprintf(e.stdout, "rdq console on http://%s/ (database: %s, changes recorded as %s); Ctrl-C stops it\n", ln.Addr(), b.desc, actor)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serving the console: %w", err)
	case <-e.ctx.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("stopping the console: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the console: %w", err)
	}
	return nil
}

// consoleServer is the local console's HTTP server: a request's headers
// must arrive within 10 s and its body within 30 s, and an idle
// connection is closed after 2 minutes, so that no client holds a
// connection for as long as it likes.
func consoleServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// onlyHosts serves next to requests whose Host is addr (the listener's
// address) or localhost with addr's port, and refuses any other with 421
// Misdirected Request: a page of another site whose name resolves to the
// loopback address (DNS rebinding) names that site in Host. A Host without
// a port names port 80, as a browser writes it for http.
func onlyHosts(addr net.Addr, next http.Handler) http.Handler {
	allowed := map[string]bool{strings.ToLower(addr.String()): true}
	if _, port, err := net.SplitHostPort(addr.String()); err == nil {
		allowed["localhost:"+port] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		if _, _, err := net.SplitHostPort(host); err != nil && host != "" {
			host = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "80")
		}
		if !allowed[host] {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusMisdirectedRequest)
			// A failed write means the client went away.
			_, _ = fmt.Fprintf(w, "rdq console: the Host %q is not the address this console listens on; open http://%s/ instead (it answers only to its own address, so that pages of other sites cannot reach it)\n", r.Host, addr)
			return
		}
		next.ServeHTTP(w, r)
	})
}
