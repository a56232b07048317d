// Package netguard holds the rules a callback target passes whatever its
// protocol (HTTP callbacks in package callback, gRPC handlers in package
// grpccall): the allowlist of target URLs, the cleaning of their paths, and
// the check of the address each connection is dialled to.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/srjn45/rdq"
)

// errInvalidConfig is wrapped by every configuration error.
var errInvalidConfig = fmt.Errorf("%w: callback", rdq.ErrInvalid)

// Schemes a target URL or an allowlist entry may have.
var schemes = []string{"http", "https", "grpc", "grpcs"}

// ErrNotAllowed is wrapped by the error for a callback target that no entry
// of the allowlist admits, at registration and at call time.
var ErrNotAllowed = errors.New("callback: target is not on the allowlist")

// allowEntry is one parsed allowlist entry.
type allowEntry struct {
	raw    string
	scheme string // "" admits every scheme the caller accepts
	host   string // lowercase host name or IP, without port
	port   string // "" admits any port when scheme is "", else the default port
	path   string // "" admits any path; otherwise a path prefix
}

// parseAllow parses an allowlist entry: either a URL prefix such as
// "https://hooks.example.com/rdq/" or "grpcs://handlers.internal:8443", or a
// bare host with an optional port such as "hooks.internal" or
// "127.0.0.1:9000", which admits that host (and port) over every scheme the
// caller accepts.
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
	if !slices.Contains(schemes, u.Scheme) {
		return allowEntry{}, fmt.Errorf("callback: allowlist entry %q: scheme must be http, https, grpc or grpcs", raw)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return allowEntry{}, fmt.Errorf("callback: allowlist entry %q: want scheme://host[:port][/path-prefix] without credentials, query or fragment", raw)
	}
	if u, err = CleanURL(u); err != nil {
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

// CleanURL returns u with its path cleaned: percent-decoded once (so
// "%2e%2e" and "..%2f" are dot segments and slashes like any other), dot
// segments resolved ("/hooks/../admin" is "/admin"), and a trailing slash
// kept. A path that still holds an encoded dot, slash or backslash after
// that one decoding (a double encoding, which a receiver might decode
// again) or a backslash is refused with ErrNotAllowed.
func CleanURL(u *url.URL) (*url.URL, error) {
	p := u.Path
	lower := strings.ToLower(p)
	if strings.Contains(p, "\\") || strings.Contains(lower, "%2e") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") {
		return nil, fmt.Errorf("%w: %s: the path holds a backslash or a doubly encoded dot or slash", ErrNotAllowed, Redact(u))
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

// effectivePort returns u's port, or the scheme's default port: 443 for
// https and grpcs, 80 for http and grpc.
func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" || u.Scheme == "grpcs" {
		return "443"
	}
	return "80"
}

// admits reports whether the entry allows u, an absolute URL.
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

// Allowlist is the parsed set of allowed targets.
type Allowlist []allowEntry

// NewAllowlist parses the entries of an allowlist (see parseAllow); its
// error wraps rdq.ErrInvalid and names the entry.
func NewAllowlist(entries []string) (Allowlist, error) {
	var out Allowlist
	for _, raw := range entries {
		e, err := parseAllow(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errInvalidConfig, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Check validates u as a callback target: an absolute URL of one of
// schemes without credentials or fragment, admitted by an entry. Its error
// wraps ErrNotAllowed.
func (a Allowlist) Check(u *url.URL, schemes ...string) error {
	if !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("%w: %s: scheme must be %s", ErrNotAllowed, Redact(u), strings.Join(schemes, " or "))
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%w: %s: want an absolute URL without credentials or fragment", ErrNotAllowed, Redact(u))
	}
	for _, e := range a {
		if e.admits(u) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNotAllowed, Redact(u))
}

// Redact returns u without credentials, query or fragment, for messages: a
// query may carry secrets.
func Redact(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// DialGuard refuses connections to internal addresses (loopback,
// link-local, private, unspecified, multicast and the like) that are not
// explicitly allowed. It checks the address a connection is actually
// dialled to, after name resolution, so DNS answers cannot steer a
// callback inside.
type DialGuard struct {
	allowed []netip.Prefix
}

// NewDialGuard returns a DialGuard that lets connections reach the
// internal addresses and CIDR prefixes of entries; its error wraps
// rdq.ErrInvalid and names the entry.
func NewDialGuard(entries []string) (*DialGuard, error) {
	g := &DialGuard{}
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
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64, which can embed any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215), the same
	netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated), the same
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
}

// sixToFour is the 6to4 prefix (RFC 3056): its next 32 bits are an IPv4
// address, the relay's way to reach it.
var sixToFour = netip.MustParsePrefix("2002::/16")

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
	if sixToFour.Contains(a) {
		b := a.As16()
		return internal(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	return false
}

// Check returns an error wrapping ErrNotAllowed for an internal address
// that no AllowAddrs entry lists.
func (g *DialGuard) Check(a netip.Addr) error {
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

// Control is a net.Dialer Control hook: it runs before each connection,
// with the resolved address.
func (g *DialGuard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check the address %q of a %s connection", ErrNotAllowed, address, network)
	}
	return g.Check(ap.Addr())
}
