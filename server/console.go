package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/origin"
)

// Console defaults.
const (
	// DefaultConsolePrefix is where Console mounts the DLQ console when
	// ConsoleConfig.Prefix is empty.
	DefaultConsolePrefix = "/console"
	// DefaultSessionTTL is how long a console session lasts when
	// ConsoleConfig.SessionTTL is zero.
	DefaultSessionTTL = 8 * time.Hour
	// DefaultMaxSessionsPerPrincipal bounds one principal's console
	// sessions when ConsoleConfig.MaxSessionsPerPrincipal is zero.
	DefaultMaxSessionsPerPrincipal = 32
	// consoleCookie names the session cookie.
	consoleCookie = "rdq_console"
)

// ConsoleConfig configures Service.Console. The zero value is valid.
type ConsoleConfig struct {
	// Prefix is the path the console lives under; empty means
	// DefaultConsolePrefix. Mount the handler as mux.Handle(Prefix+"/", h).
	Prefix string
	// SessionTTL is how long a sign-in lasts; zero means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessionsPerPrincipal bounds the sessions of one principal; a
	// sign-in beyond it ends that principal's oldest session, never
	// another principal's. Zero means DefaultMaxSessionsPerPrincipal.
	MaxSessionsPerPrincipal int
	// ClientAddr names the client of a sign-in, for throttling failed
	// attempts per client and for the log; nil means the host of
	// r.RemoteAddr. Behind a reverse proxy every request comes from the
	// proxy: return the client address the proxy writes (the last
	// X-Forwarded-For entry it appends, say), never a header a client
	// can set.
	ClientAddr func(r *http.Request) string
	// TrustedOrigins lists the origins ("https://rdq.example.com")
	// besides the listener's own from which sign-ins and changes are
	// accepted: the public origin when a TLS-terminating proxy serves the
	// console over https to a plain-http listener.
	TrustedOrigins []string
}

// Console returns the DLQ console (package console) for the service's
// store, behind sign-in: a person signs in once with their bearer token
// at Prefix/signin and gets a session cookie (Secure, HttpOnly,
// SameSite=Strict, expiring after SessionTTL); Prefix/signout ends it. What
// they may do follows their grants: operators read, redrive, edit and
// purge in their queues (every queue with a "*" grant), admins also pause
// and resume; submitters see nothing. Every change is audited under the
// principal's name. Sessions live in this process's memory: a restart
// signs everyone out.
//
// Each principal keeps at most MaxSessionsPerPrincipal sessions (a
// sign-in beyond ends its own oldest). Failed sign-ins are throttled per
// client (10 in a row, then one per 6 s) and sign-ins per principal (10 in
// a row, then one per 30 s), answered 429 with Retry-After; refusals are
// logged (client, principal when known, never the token) and counted in
// rdq_server_console_signins_total{result}. Sign-ins and changes are
// accepted from the listener's own origin (scheme, host and port) and
// TrustedOrigins only. The session cookie is Secure: serve the console
// over TLS, or behind a proxy that terminates it.
func (s *Service) Console(cfg ConsoleConfig) (http.Handler, error) {
	b, ok := dlq.BackendOf(s.store)
	if !ok {
		return nil, fmt.Errorf("%w: server: the store has no DLQ interface (store.Admin), so the console cannot run on it", rdq.ErrInvalid)
	}
	prefix := strings.TrimSuffix(cfg.Prefix, "/")
	if prefix == "" {
		prefix = DefaultConsolePrefix
	}
	ttl := cfg.SessionTTL
	if ttl == 0 {
		ttl = DefaultSessionTTL
	}
	if ttl < 0 {
		return nil, fmt.Errorf("%w: server: console session TTL %s is negative", rdq.ErrInvalid, ttl)
	}
	perPrincipal := cfg.MaxSessionsPerPrincipal
	if perPrincipal < 0 {
		return nil, fmt.Errorf("%w: server: console MaxSessionsPerPrincipal %d is negative", rdq.ErrInvalid, perPrincipal)
	}
	if perPrincipal == 0 {
		perPrincipal = DefaultMaxSessionsPerPrincipal
	}
	sc := &consoleSessions{
		auth: s.auth, prefix: prefix, ttl: ttl, now: time.Now, log: s.log, m: s.m,
		clientAddr: cfg.ClientAddr, perPrincipal: perPrincipal,
		byHash:          map[[sha256.Size]byte]consoleSession{},
		byName:          map[string][][sha256.Size]byte{},
		failures:        newThrottle(signInFailureBurst, signInFailureEvery, maxThrottled),
		signIns:         newThrottle(signInBurst, signInEvery, maxThrottled),
		loggedThrottled: newThrottle(1, throttledLogEvery, maxThrottled),
	}
	if sc.clientAddr == nil {
		sc.clientAddr = remoteHost
	}
	if s.consoleNow != nil {
		sc.now = s.consoleNow
	}
	c, err := console.New(console.Config{
		Store: b, DLQ: s.dlq, Prefix: prefix, Logger: s.log,
		Authorize: authorizeConsole,
		Actor: func(r *http.Request) string {
			if p, ok := PrincipalFrom(r.Context()); ok {
				return p.Name
			}
			return ""
		},
		SignOutPath:    prefix + "/signout",
		TrustedOrigins: cfg.TrustedOrigins,
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+prefix+"/signin", sc.signInPage)
	mux.HandleFunc("POST "+prefix+"/signin", sc.signIn)
	mux.HandleFunc("POST "+prefix+"/signout", sc.signOut)
	mux.Handle(prefix+"/static/", c)
	mux.Handle(prefix+"/", sc.require(c))
	h, err := origin.Protect(mux, cfg.TrustedOrigins, nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w: server: console: %w", rdq.ErrInvalid, err), c.Close())
	}
	return h, nil
}

// authorizeConsole maps the console's actions to roles: operator for
// reading and changing dead tasks, admin for pausing queues.
func authorizeConsole(r *http.Request, a console.Action, queue string) error {
	p, ok := PrincipalFrom(r.Context())
	if !ok {
		return errors.New("sign in first")
	}
	role := RoleOperator
	if a == console.ActionPause {
		role = RoleAdmin
	}
	if queue == console.AllQueues {
		if p.CanAll(role) {
			return nil
		}
		return fmt.Errorf("%s needs the %s role in every queue to %s across queues; filter by one of your queues", p.Name, role, a)
	}
	if p.Can(role, queue) {
		return nil
	}
	return fmt.Errorf("%s needs the %s role in queue %s to %s", p.Name, role, queue, a)
}

type consoleSession struct {
	p       *Principal
	expires time.Time
}

// consoleSessions keeps signed-in sessions, by the SHA-256 of their
// random cookie value, at most perPrincipal per principal name.
type consoleSessions struct {
	auth         Authenticator
	prefix       string
	ttl          time.Duration
	now          func() time.Time
	log          *slog.Logger
	m            *metrics
	clientAddr   func(r *http.Request) string
	perPrincipal int

	mu       sync.Mutex
	byHash   map[[sha256.Size]byte]consoleSession
	byName   map[string][][sha256.Size]byte // each principal's sessions, oldest first
	failures *throttle                      // failed sign-ins, per client
	signIns  *throttle                      // sign-ins, per principal
	// loggedThrottled bounds the log lines of throttled sign-ins: one per
	// client (or principal) per throttledLogEvery; the counter counts all.
	loggedThrottled *throttle
}

// Sign-in throttles: a client may fail signInFailureBurst times in a row,
// then once per signInFailureEvery; a principal may sign in signInBurst
// times in a row, then once per signInEvery. Each throttle tracks at most
// maxThrottled clients or principals at once.
const (
	signInFailureBurst = 10
	signInFailureEvery = 6 * time.Second
	signInBurst        = 10
	signInEvery        = 30 * time.Second
	maxThrottled       = 10000
	// throttledLogEvery is how often a client's throttled sign-ins are
	// logged; rdq_server_console_signins_total counts every one.
	throttledLogEvery = time.Minute
)

// remoteHost is the host of r.RemoteAddr: an IPv4 address, or the /64
// prefix of an IPv6 one (a client commonly holds a whole /64).
func remoteHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return clientOf(h)
}

// clientOf names the client at address host: itself, or the /64 prefix of
// an IPv6 address.
func clientOf(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() && !a.Is4In6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return host
}

// ProxyClientAddr returns a ConsoleConfig.ClientAddr for a console behind
// reverse proxies: a request whose remote address is in trusted (IP
// addresses or CIDR prefixes, "10.0.0.0/8") comes from the client the last
// entry of its header names: the address the proxy appends to
// X-Forwarded-For, or the one it writes in X-Real-IP. Any other request,
// or one whose last entry is not an IP address, comes from its remote
// address. Entries before the last are the client's own words and are
// never read. It fails with an error wrapping rdq.ErrInvalid for an empty
// header, no trusted proxy, or one that is not an address or prefix.
func ProxyClientAddr(header string, trusted []string) (func(r *http.Request) string, error) {
	if header == "" || strings.ContainsAny(header, " :\r\n") {
		return nil, fmt.Errorf("%w: server: client header %q: name the header your proxy writes the client's address in, such as X-Forwarded-For", rdq.ErrInvalid, header)
	}
	if len(trusted) == 0 {
		return nil, fmt.Errorf("%w: server: no trusted proxy: list the addresses your proxies connect from, or the header %s is a client's to forge", rdq.ErrInvalid, header)
	}
	var proxies []netip.Prefix
	for _, t := range trusted {
		p, err := netip.ParsePrefix(t)
		if err != nil {
			a, aerr := netip.ParseAddr(t)
			if aerr != nil {
				return nil, fmt.Errorf("%w: server: trusted proxy %q is neither an IP address nor a CIDR prefix (such as 10.0.0.0/8)", rdq.ErrInvalid, t)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		proxies = append(proxies, p.Masked())
	}
	header = http.CanonicalHeaderKey(header)
	return func(r *http.Request) string {
		h, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		remote, err := netip.ParseAddr(h)
		if err != nil || !slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(remote.Unmap()) || p.Contains(remote) }) {
			return clientOf(h)
		}
		values := r.Header.Values(header)
		if len(values) == 0 {
			return clientOf(h)
		}
		entries := strings.Split(values[len(values)-1], ",")
		last := strings.TrimSpace(entries[len(entries)-1])
		if host, _, err := net.SplitHostPort(last); err == nil {
			last = host
		}
		client, err := netip.ParseAddr(strings.Trim(last, "[]"))
		if err != nil {
			return clientOf(h)
		}
		return clientOf(client.Unmap().String())
	}, nil
}

func (sc *consoleSessions) cookie(value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{
		Name: consoleCookie, Value: value, Path: sc.prefix + "/",
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Expires: expires.UTC(), MaxAge: int(time.Until(expires).Seconds()),
	}
	if value == "" {
		c.MaxAge, c.Expires = -1, time.Unix(0, 0)
	}
	return c
}

func (sc *consoleSessions) lookup(r *http.Request) (*Principal, [sha256.Size]byte, bool) {
	ck, err := r.Cookie(consoleCookie)
	if err != nil || ck.Value == "" {
		return nil, [sha256.Size]byte{}, false
	}
	h := sha256.Sum256([]byte(ck.Value))
	sc.mu.Lock()
	defer sc.mu.Unlock()
	s, ok := sc.byHash[h]
	if !ok {
		return nil, h, false
	}
	if !sc.now().Before(s.expires) {
		sc.drop(h)
		return nil, h, false
	}
	return s.p, h, true
}

// drop forgets the session h; sc.mu is held.
func (sc *consoleSessions) drop(h [sha256.Size]byte) {
	s, ok := sc.byHash[h]
	if !ok {
		return
	}
	delete(sc.byHash, h)
	name := s.p.Name
	hs := slices.DeleteFunc(sc.byName[name], func(x [sha256.Size]byte) bool { return x == h })
	if len(hs) == 0 {
		delete(sc.byName, name)
	} else {
		sc.byName[name] = hs
	}
}

// add keeps a new session of p, first dropping p's expired sessions and,
// when p has perPrincipal, its oldest; sc.mu is held.
func (sc *consoleSessions) add(h [sha256.Size]byte, p *Principal, expires time.Time) {
	now := sc.now()
	for _, old := range slices.Clone(sc.byName[p.Name]) {
		if !now.Before(sc.byHash[old].expires) {
			sc.drop(old)
		}
	}
	for len(sc.byName[p.Name]) >= sc.perPrincipal {
		sc.drop(sc.byName[p.Name][0])
	}
	sc.byHash[h] = consoleSession{p: p, expires: expires}
	sc.byName[p.Name] = append(sc.byName[p.Name], h)
}

// require serves next to signed-in people, with their principal in the
// request context; others are sent to sign in (or refused, for a POST).
func (sc *consoleSessions) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _, ok := sc.lookup(r)
		if !ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, sc.prefix+"/signin", http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

var signInPage = template.Must(template.New("signin").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>Sign in · rdq console</title>
<link rel="stylesheet" href="{{.Prefix}}/static/console.css"></head>
<body><main id="main"><h1>Sign in to the rdq console</h1>
{{with .Error}}<p class="error" role="alert">{{.}}</p>{{end}}
<form method="post" action="{{.Prefix}}/signin" class="confirm">
<label>Your API token <input type="password" name="token" autocomplete="current-password" required size="40" autofocus></label>
<button type="submit">Sign in</button>
</form>
<p class="small">Your session lasts {{.TTL}}; sign out ends it.</p></main></body></html>`))

func (sc *consoleSessions) renderSignIn(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	// A failed write means the client went away.
	_ = signInPage.Execute(w, struct {
		Prefix, Error string
		TTL           time.Duration
	}{sc.prefix, msg, sc.ttl})
}

func (sc *consoleSessions) signInPage(w http.ResponseWriter, r *http.Request) {
	sc.renderSignIn(w, http.StatusOK, "")
}

// maxSignInBytes bounds a sign-in's form: a token, with room to spare.
const maxSignInBytes = 8 << 10

// signIn signs a person in with their token. Failed attempts are
// throttled per client and sign-ins per principal; every refusal is
// logged (without the token) and counted.
func (sc *consoleSessions) signIn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	client := sc.clientAddr(r)
	// Every attempt takes one of its client's places before its form is
	// read, so that attempts in flight at once (slow bodies, many
	// connections) count as well; a valid token gives it back.
	if ok, wait := sc.failures.allow(client, sc.now(), true); !ok {
		sc.refuse(w, r, client, "", signInThrottled, wait)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBytes)
	if err := r.ParseForm(); err != nil {
		status, result := http.StatusBadRequest, signInInvalid
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			status = http.StatusRequestEntityTooLarge
		}
		sc.m.signIn(result)
		sc.log.WarnContext(ctx, "rdq console: sign-in refused", "client", client, "result", result, "reason", "unreadable form")
		sc.renderSignIn(w, status, "The sign-in form could not be read; send the token alone.")
		return
	}
	p, err := sc.auth.Authenticate(ctx, strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			sc.refuse(w, r, client, "", signInInvalid, 0)
			return
		}
		sc.failures.give(client, sc.now())
		sc.log.ErrorContext(ctx, "rdq console: sign-in failed", "client", client, "error", err)
		sc.m.signIn(signInError)
		sc.renderSignIn(w, http.StatusInternalServerError, "Signing in failed; try again.")
		return
	}
	sc.failures.give(client, sc.now())
	if ok, wait := sc.signIns.allow(p.Name, sc.now(), true); !ok {
		sc.refuse(w, r, client, p.Name, signInThrottled, wait)
		return
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	value := base64.RawURLEncoding.EncodeToString(b[:])
	expires := sc.now().Add(sc.ttl)
	sc.mu.Lock()
	sc.add(sha256.Sum256([]byte(value)), p, expires)
	sc.mu.Unlock()
	sc.m.signIn(signInOK)
	sc.log.InfoContext(ctx, "rdq console: signed in", "principal", p.Name, "client", client)
	http.SetCookie(w, sc.cookie(value, expires))
	http.Redirect(w, r, sc.prefix+"/", http.StatusSeeOther)
}

// Sign-in results, the values of the result label of
// rdq_server_console_signins_total.
const (
	signInOK        = "ok"
	signInInvalid   = "invalid"
	signInThrottled = "throttled"
	signInError     = "error"
)

// refuse answers a refused sign-in, logs and counts it. principal is empty
// when the token named nobody.
func (sc *consoleSessions) refuse(w http.ResponseWriter, r *http.Request, client, principal, result string, wait time.Duration) {
	sc.m.signIn(result)
	attrs := []any{"client", client, "result", result}
	if principal != "" {
		attrs = append(attrs, "principal", principal)
	}
	if result != signInThrottled {
		sc.log.WarnContext(r.Context(), "rdq console: sign-in refused", attrs...)
	} else if ok, _ := sc.loggedThrottled.allow(client+"\x00"+principal, sc.now(), true); ok {
		attrs = append(attrs, "note", "further throttled sign-ins of this client are counted, not logged, for "+throttledLogEvery.String())
		sc.log.WarnContext(r.Context(), "rdq console: sign-in refused", attrs...)
	}
	if result == signInInvalid {
		sc.renderSignIn(w, http.StatusUnauthorized, "That token is not valid.")
		return
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	who := "from your address"
	if principal != "" {
		who = "with this token"
	}
	sc.renderSignIn(w, http.StatusTooManyRequests, fmt.Sprintf("Too many sign-ins %s; try again in %d seconds.", who, secs))
}

func (sc *consoleSessions) signOut(w http.ResponseWriter, r *http.Request) {
	if _, h, ok := sc.lookup(r); ok {
		sc.mu.Lock()
		sc.drop(h)
		sc.mu.Unlock()
	}
	http.SetCookie(w, sc.cookie("", time.Time{}))
	http.Redirect(w, r, sc.prefix+"/signin", http.StatusSeeOther)
}
