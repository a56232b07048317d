package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/dlq"
)

// Console defaults.
const (
	// DefaultConsolePrefix is where Console mounts the DLQ console when
	// ConsoleConfig.Prefix is empty.
	DefaultConsolePrefix = "/console"
	// DefaultSessionTTL is how long a console session lasts when
	// ConsoleConfig.SessionTTL is zero.
	DefaultSessionTTL = 8 * time.Hour
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
func (s *Service) Console(cfg ConsoleConfig) (http.Handler, error) {
	b, ok := s.store.(dlq.Backend)
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
	sc := &consoleSessions{auth: s.auth, prefix: prefix, ttl: ttl, byHash: map[[sha256.Size]byte]consoleSession{}, now: time.Now}
	c, err := console.New(console.Config{
		Store: b, DLQ: s.dlq, Prefix: prefix, Logger: s.log,
		Authorize: authorizeConsole,
		Actor: func(r *http.Request) string {
			if p, ok := PrincipalFrom(r.Context()); ok {
				return p.Name
			}
			return ""
		},
		SignOutPath: prefix + "/signout",
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
	protect := http.NewCrossOriginProtection()
	return protect.Handler(mux), nil
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
// random cookie value.
type consoleSessions struct {
	auth   Authenticator
	prefix string
	ttl    time.Duration
	now    func() time.Time

	mu     sync.Mutex
	byHash map[[sha256.Size]byte]consoleSession
}

// maxSessions bounds the sessions kept; expired ones are dropped first.
const maxSessions = 10000

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
		delete(sc.byHash, h)
		return nil, h, false
	}
	return s.p, h, true
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

func (sc *consoleSessions) signIn(w http.ResponseWriter, r *http.Request) {
	p, err := sc.auth.Authenticate(r.Context(), strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			sc.renderSignIn(w, http.StatusUnauthorized, "That token is not valid.")
			return
		}
		sc.renderSignIn(w, http.StatusInternalServerError, "Signing in failed; try again.")
		return
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	value := base64.RawURLEncoding.EncodeToString(b[:])
	expires := sc.now().Add(sc.ttl)
	sc.mu.Lock()
	if len(sc.byHash) >= maxSessions {
		now := sc.now()
		for h, s := range sc.byHash {
			if !now.Before(s.expires) {
				delete(sc.byHash, h)
			}
		}
		for h := range sc.byHash {
			if len(sc.byHash) < maxSessions {
				break
			}
			delete(sc.byHash, h)
		}
	}
	sc.byHash[sha256.Sum256([]byte(value))] = consoleSession{p: p, expires: expires}
	sc.mu.Unlock()
	http.SetCookie(w, sc.cookie(value, expires))
	http.Redirect(w, r, sc.prefix+"/", http.StatusSeeOther)
}

func (sc *consoleSessions) signOut(w http.ResponseWriter, r *http.Request) {
	if _, h, ok := sc.lookup(r); ok {
		sc.mu.Lock()
		delete(sc.byHash, h)
		sc.mu.Unlock()
	}
	http.SetCookie(w, sc.cookie("", time.Time{}))
	http.Redirect(w, r, sc.prefix+"/signin", http.StatusSeeOther)
}
