package callback

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrNotAllowed is wrapped by the error for a callback target that no entry
// of the allowlist admits, at registration and at call time.
var ErrNotAllowed = errors.New("callback: target is not on the allowlist")

// allowEntry is one parsed allowlist entry.
type allowEntry struct {
	raw    string
	scheme string // "" admits http and https
	host   string // lowercase host name or IP, without port
	port   string // "" admits any port when scheme is "", else the default port
	path   string // "" admits any path; otherwise a path prefix
}

// parseAllow parses an allowlist entry: either a URL prefix such as
// "https://hooks.example.com/rdq/" or a bare host with an optional port such
// as "hooks.internal" or "127.0.0.1:9000".
func parseAllow(raw string) (allowEntry, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return allowEntry{}, fmt.Errorf("callback: empty allowlist entry")
	}
	if !strings.Contains(s, "://") {
		host, port := s, ""
		if h, p, err := net.SplitHostPort(s); err == nil {
			host, port = h, p
		}
		if host == "" || strings.ContainsAny(host, "/?#@ ") {
			return allowEntry{}, fmt.Errorf("callback: allowlist entry %q: want a host, host:port or URL prefix", raw)
		}
		return allowEntry{raw: raw, host: strings.ToLower(host), port: port}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return allowEntry{}, fmt.Errorf("callback: allowlist entry %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return allowEntry{}, fmt.Errorf("callback: allowlist entry %q: scheme must be http or https", raw)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return allowEntry{}, fmt.Errorf("callback: allowlist entry %q: want scheme://host[:port][/path-prefix] without credentials, query or fragment", raw)
	}
	return allowEntry{
		raw:    raw,
		scheme: u.Scheme,
		host:   strings.ToLower(u.Hostname()),
		port:   effectivePort(u),
		path:   u.EscapedPath(),
	}, nil
}

// effectivePort returns u's port, or the scheme's default port.
func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// admits reports whether the entry allows u, an absolute http(s) URL.
func (e allowEntry) admits(u *url.URL) bool {
	if !strings.EqualFold(u.Hostname(), e.host) {
		return false
	}
	if e.scheme == "" {
		return e.port == "" || e.port == effectivePort(u)
	}
	if u.Scheme != e.scheme || effectivePort(u) != e.port {
		return false
	}
	if e.path == "" || e.path == "/" {
		return true
	}
	p := u.EscapedPath()
	if strings.HasSuffix(e.path, "/") {
		return strings.HasPrefix(p, e.path)
	}
	return p == e.path || strings.HasPrefix(p, e.path+"/")
}

// allowlist is the parsed set of allowed targets.
type allowlist []allowEntry

func newAllowlist(entries []string) (allowlist, error) {
	var out allowlist
	for _, raw := range entries {
		e, err := parseAllow(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errInvalidConfig, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// check validates u as a callback target: an absolute http or https URL
// without credentials or fragment, admitted by an entry.
func (a allowlist) check(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %s: scheme must be http or https", ErrNotAllowed, redact(u))
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%w: %s: want an absolute URL without credentials or fragment", ErrNotAllowed, redact(u))
	}
	for _, e := range a {
		if e.admits(u) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNotAllowed, redact(u))
}

// redact returns u without credentials, query or fragment, for messages: a
// query may carry secrets.
func redact(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}
