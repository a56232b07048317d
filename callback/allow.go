package callback

import (
	"net/netip"
	"net/url"
	"syscall"

	"github.com/srjn45/rdq/callback/internal/netguard"
)

// ErrNotAllowed is wrapped by the error for a callback target that no entry
// of the allowlist admits, at registration and at call time, and by the
// error for a connection to an internal address AllowAddrs does not list.
var ErrNotAllowed = netguard.ErrNotAllowed

// allowlist is the parsed set of allowed targets; HTTP callbacks accept
// http and https URLs only.
type allowlist struct{ netguard.Allowlist }

func newAllowlist(entries []string) (allowlist, error) {
	a, err := netguard.NewAllowlist(entries)
	return allowlist{a}, err
}

// check validates u as a callback target: an absolute http or https URL
// without credentials or fragment, admitted by an entry.
func (a allowlist) check(u *url.URL) error { return a.Check(u, "http", "https") }

// cleanURL returns u with its path cleaned (see netguard.CleanURL).
func cleanURL(u *url.URL) (*url.URL, error) { return netguard.CleanURL(u) }

// redact returns u without credentials, query or fragment, for messages: a
// query may carry secrets.
func redact(u *url.URL) string { return netguard.Redact(u) }

// dialGuard refuses connections to internal addresses that AllowAddrs does
// not list (see netguard.DialGuard).
type dialGuard struct{ g *netguard.DialGuard }

func newDialGuard(entries []string) (*dialGuard, error) {
	g, err := netguard.NewDialGuard(entries)
	if err != nil {
		return nil, err
	}
	return &dialGuard{g}, nil
}

func (g *dialGuard) check(a netip.Addr) error { return g.g.Check(a) }

func (g *dialGuard) control(network, address string, c syscall.RawConn) error {
	return g.g.Control(network, address, c)
}
