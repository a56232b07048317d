package callback

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"syscall"
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
	if u, err = cleanURL(u); err != nil {
		return allowEntry{}, fmt.Errorf("callback: allowlist entry %q: %w", raw, err)
	}
	return allowEntry{
		raw:    raw,
		scheme: u.Scheme,
		host:   strings.ToLower(u.Hostname()),
		port:   effectivePort(u),
		path:   u.EscapedPath(),
	}, nil
}

// cleanURL returns u with its path cleaned: percent-decoded once (so
// "%2e%2e" and "..%2f" are dot segments and slashes like any other), dot
// segments resolved ("/hooks/../admin" is "/admin"), and a trailing slash
// kept. A path that still holds an encoded dot, slash or backslash after
// that one decoding (a double encoding, which a receiver might decode
// again) or a backslash is refused with ErrNotAllowed.
func cleanURL(u *url.URL) (*url.URL, error) {
	p := u.Path
	lower := strings.ToLower(p)
	if strings.Contains(p, "\\") || strings.Contains(lower, "%2e") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") {
		return nil, fmt.Errorf("%w: %s: the path holds a backslash or a doubly encoded dot or slash", ErrNotAllowed, redact(u))
	}
	out := *u
	out.RawPath = ""
	if p == "" {
		return &out, nil
	}
	cleaned := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && cleaned != "/" {
		cleaned += "/"
	}
	out.Path = cleaned
	return &out, nil
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

// dialGuard refuses connections to internal addresses (loopback,
// link-local, private, unspecified, multicast and the like) that are not
// explicitly allowed. It checks the address a connection is actually
// dialled to, after name resolution, so DNS answers cannot steer a
// callback inside.
type dialGuard struct {
	allowed []netip.Prefix
}

func newDialGuard(entries []string) (*dialGuard, error) {
	g := &dialGuard{}
	for _, raw := range entries {
		s := strings.TrimSpace(raw)
		var (
			p   netip.Prefix
			err error
		)
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: AllowAddrs entry %q: want an IP address or a CIDR prefix such as 10.0.0.0/8", errInvalidConfig, raw)
		}
		g.allowed = append(g.allowed, unmapPrefix(p.Masked()))
	}
	return g, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Ranges refused besides those netip.Addr classifies.
var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64, which can embed any IPv4 address
	netip.MustParsePrefix("2001:db8::/32"), // documentation
}

// internal reports whether a is an address a callback must not reach
// unless it is allowed explicitly.
func internal(a netip.Addr) bool {
	if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || a.IsPrivate() || a.IsUnspecified() {
		return true
	}
	for _, p := range internalPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// check returns an error wrapping ErrNotAllowed for an internal address
// that no AllowAddrs entry lists.
func (g *dialGuard) check(a netip.Addr) error {
	a = a.Unmap()
	if !internal(a) {
		return nil
	}
	for _, p := range g.allowed {
		if p.Contains(a) {
			return nil
		}
	}
	return fmt.Errorf("%w: connecting to %s, an internal address: list it in AllowAddrs to allow it", ErrNotAllowed, a)
}

// control is a net.Dialer Control hook: it runs before each connection,
// with the resolved address.
func (g *dialGuard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check the address %q of a %s connection", ErrNotAllowed, address, network)
	}
	return g.check(ap.Addr())
}
