package netguard

import (
	"errors"
	"net/netip"
	"net/url"
	"testing"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// One allowlist serves HTTP callbacks and gRPC handlers: a bare host
// admits it over every scheme the caller accepts, a URL prefix its own
// scheme only, and each caller admits only its schemes.
func TestSchemes(t *testing.T) {
	a, err := NewAllowlist([]string{"hooks.internal", "grpcs://handlers.example.com:8443", "https://web.example.com/rdq/"})
	if err != nil {
		t.Fatal(err)
	}
	httpSchemes, grpcSchemes := []string{"http", "https"}, []string{"grpc", "grpcs"}
	cases := []struct {
		target  string
		schemes []string
		ok      bool
	}{
		{"https://hooks.internal/x", httpSchemes, true},
		{"grpcs://hooks.internal:9000", grpcSchemes, true},
		{"grpc://hooks.internal", grpcSchemes, true},
		{"grpcs://hooks.internal", httpSchemes, false},
		{"https://hooks.internal/x", grpcSchemes, false},
		{"grpcs://handlers.example.com:8443", grpcSchemes, true},
		{"grpc://handlers.example.com:8443", grpcSchemes, false},
		{"https://handlers.example.com:8443", httpSchemes, false},
		{"grpcs://web.example.com/rdq/", grpcSchemes, false},
		{"https://web.example.com/rdq/a", httpSchemes, true},
		{"grpcs://handlers.example.com", grpcSchemes, false},
	}
	for _, tc := range cases {
		u, err := url.Parse(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		err = a.Check(u, tc.schemes...)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%s, %v) = %v, want allowed %v", tc.target, tc.schemes, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("Check(%s) = %v, does not wrap ErrNotAllowed", tc.target, err)
		}
	}
	// grpcs defaults to port 443, like https.
	b, err := NewAllowlist([]string{"grpcs://h.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for target, ok := range map[string]bool{"grpcs://h.example.com:443": true, "grpcs://h.example.com:444": false} {
		u, _ := url.Parse(target)
		if err := b.Check(u, "grpcs"); (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want allowed %v", target, err, ok)
		}
	}
	for _, bad := range []string{"ftp://x/", "grpc://", "grpcs://u:p@h/"} {
		if _, err := NewAllowlist([]string{bad}); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("entry %q: err = %v, want rdq.ErrInvalid", bad, err)
		}
	}
}

// The guard refuses the IPv6 forms that carry an internal IPv4 address or
// are deprecated local scopes, and passes public ones.
func TestDialGuardIPv6Forms(t *testing.T) {
	g, err := NewDialGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr    string
		refused bool
	}{
		{"64:ff9b:1::a00:1", true},        // local-use NAT64 of 10.0.0.1
		{"64:ff9b:1:ffff::808:808", true}, // local-use NAT64, whatever it embeds
		{"2002:a00:1::1", true},           // 6to4 of 10.0.0.1
		{"2002:7f00:1::1", true},          // 6to4 of 127.0.0.1
		{"2002:a9fe:a9fe::1", true},       // 6to4 of 169.254.169.254
		{"2002:808:808::1", false},        // 6to4 of 8.8.8.8
		{"::a00:1", true},                 // IPv4-compatible 10.0.0.1
		{"::808:808", true},               // IPv4-compatible, deprecated whatever it embeds
		{"fec0::1", true},                 // site-local
		{"2606:4700::1111", false},        // public
	} {
		err := g.Check(netip.MustParseAddr(c.addr))
		if c.refused != errors.Is(err, ErrNotAllowed) {
			t.Errorf("Check(%s) = %v, want refused %t", c.addr, err, c.refused)
		}
	}
}
