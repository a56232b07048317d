package serverconfig

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/callback/grpccall"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/worker"
)

// Validate checks everything a server is built from and reports every
// problem it finds, one a line, each naming the setting by its JSON path
// ("queues.orders.url") and saying what to do; the error wraps
// rdq.ErrInvalid and the error of each problem. It reads no
// environment variable: Parse has applied them. Parse and Load call it;
// call it again after changing a File.
func (f *File) Validate() error {
	var v validation
	f.validateListeners(&v)
	f.validateCallback(&v)
	f.validateQueues(&v)
	f.validatePrincipals(&v)
	if f.MetricsToken != "" {
		if err := server.ValidateToken(f.MetricsToken); err != nil {
			v.addf("%s: %w", envNote("metrics_token", f.MetricsTokenEnv), err)
		}
	}
	return v.err()
}

// validation collects the problems of a File.
type validation struct{ errs []error }

// err returns the problems as one error, or nil if there are none.
func (v *validation) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &invalidError{errs: v.errs}
}

// invalidError is a File's problems, one a line.
type invalidError struct{ errs []error }

func (e *invalidError) Error() string { return errors.Join(e.errs...).Error() }

// Unwrap returns the problems and rdq.ErrInvalid.
func (e *invalidError) Unwrap() []error { return append(slices.Clip(e.errs), rdq.ErrInvalid) }

func (v *validation) addf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

// envNote names a secret setting, and the variable it was taken from when
// there is one.
func envNote(setting, env string) string {
	if env == "" {
		return setting
	}
	return fmt.Sprintf("%s (or %s)", setting, env)
}

func (f *File) validateListeners(v *validation) {
	seen := map[string]string{}
	for _, l := range []struct{ setting, addr string }{
		{"listen", f.Listen}, {"grpc_listen", f.GRPCListen}, {"ops_listen", f.OpsListen}, {"demo_receiver", f.DemoReceiver},
	} {
		if l.addr == "" && (l.setting == "ops_listen" || l.setting == "demo_receiver") {
			continue
		}
		_, port, err := net.SplitHostPort(l.addr)
		if err != nil {
			v.addf("%s %q is not host:port: write it as 127.0.0.1:8080, or :8080 for every interface", l.setting, l.addr)
			continue
		}
		if other, dup := seen[l.addr]; dup && port != "0" {
			v.addf("%s %s is also %s: give each listener its own address", l.setting, l.addr, other)
		}
		seen[l.addr] = l.setting
	}
	if (f.TLSCertFile == "") != (f.TLSKeyFile == "") {
		v.addf("tls_cert_file and tls_key_file: set both to serve TLS, or neither")
	}
	if f.MaxConnections < 0 {
		v.addf("max_connections is %d: use a positive number, or 0 for the default (%d)", f.MaxConnections, DefaultMaxConnections)
	}
	if f.ConsoleClientHeader != "" || len(f.ConsoleTrustedProxies) > 0 {
		if _, err := server.ProxyClientAddr(f.ConsoleClientHeader, f.ConsoleTrustedProxies); err != nil {
			v.addf("console_client_header and console_trusted_proxies: set both, the header your proxies write the client's address in and the addresses they connect from: %w", err)
		}
	}
}

func (f *File) validateCallback(v *validation) {
	c := f.Callback
	if c.Timeout < 0 {
		v.addf("callback.timeout is %s: use a positive duration, or leave it out for the default (%s)", time.Duration(c.Timeout), callback.DefaultTimeout)
	}
	if _, err := f.GRPCConfig(); err != nil {
		v.addf("%w", err)
	}
	if c.Secret != "" {
		if err := callback.ValidateSecret([]byte(c.Secret)); err != nil {
			v.addf("%s: %w", envNote("callback.secret", c.SecretEnv), err)
		}
	}
	if len(c.Allow) == 0 {
		v.addf(`callback.allow is empty: list the hosts or URL prefixes callbacks may target, such as "hooks.internal" or "https://hooks.example.com/rdq/"`)
		return
	}
	// The allowlist and the addresses are checked apart, so that each
	// error names its setting; the queues' URLs against the allowlist as
	// the caller enforces it.
	allow, err := callback.New(callback.Config{Allow: c.Allow})
	if err != nil {
		v.addf("callback.allow: %w", err)
		return
	}
	defer allow.Close()
	grpcAllow, err := grpccall.New(grpccall.Config{Allow: c.Allow})
	if err != nil {
		v.addf("callback.allow: %w", err)
		return
	}
	defer func() {
		if err := grpcAllow.Close(); err != nil {
			v.addf("checking callback.allow: %w", err)
		}
	}()
	if addrs, err := callback.New(callback.Config{Allow: c.Allow, AllowAddrs: c.AllowAddrs}); err != nil {
		v.addf("callback.allow_addrs: %w", err)
	} else {
		addrs.Close()
	}
	for _, name := range slices.Sorted(maps.Keys(f.Queues)) {
		if u := f.Queues[name].URL; u != "" {
			check := allow.Check
			if IsGRPC(u) {
				check = grpcAllow.Check
			}
			if err := check(u); err != nil {
				v.addf("queues.%s.url: %w: list it (or a prefix of it) in callback.allow", name, err)
			}
		}
	}
}

func (f *File) validateQueues(v *validation) {
	if len(f.Queues) == 0 {
		v.addf("queues: none configured: add one, with the url its tasks are POSTed to and the handler names they may use")
	}
	for _, name := range slices.Sorted(maps.Keys(f.Queues)) {
		q := f.Queues[name]
		if err := rdq.ValidateName("queue", name); err != nil {
			v.addf("queues: %w", err)
			continue
		}
		at := "queues." + name
		if q.URL == "" {
			v.addf("%s.url is empty: give the callback URL its tasks are POSTed to", at)
		}
		grpc := IsGRPC(q.URL)
		switch {
		case grpc && q.Secret != "":
			v.addf("%s: a gRPC handler's calls are not signed: remove the secret, and authenticate them with metadata (or metadata_env) over grpcs", envNote(at+".secret", q.SecretEnv))
		case grpc:
			// Authenticated by metadata and TLS, checked below.
		case len(q.Metadata) > 0 || len(q.MetadataEnv) > 0:
			v.addf("%s.metadata: only gRPC handlers (grpcs:// or grpc:// urls) take metadata; an HTTP callback is authenticated by its signature", at)
		case q.Secret != "":
			if err := callback.ValidateSecret([]byte(q.Secret)); err != nil {
				v.addf("%s: %w", envNote(at+".secret", q.SecretEnv), err)
			}
		case f.Callback.Secret == "":
			v.addf("%s: no secret signs its callbacks: set callback.secret or callback.secret_env for every queue, or this queue's secret or secret_env%s",
				at, unsetNote(f.Callback.SecretEnv, q.SecretEnv))
		}
		if grpc && (len(q.Metadata) > 0 || len(q.MetadataEnv) > 0) && !q.AllowPlaintextMetadata && !tlsOrLoopback(q.URL) {
			v.addf("%s.metadata: a grpc:// handler's calls are not encrypted, and its metadata would cross the network readable: use grpcs://, or set allow_plaintext_metadata: true if the network is trusted", at)
		}
		if grpc {
			if err := grpccall.ValidateMetadata(q.Metadata); err != nil {
				v.addf("%s.metadata: %w", at, err)
			}
			for _, k := range slices.Sorted(maps.Keys(q.MetadataEnv)) {
				if err := grpccall.ValidateMetadata(map[string]string{k: ""}); err != nil {
					v.addf("%s.metadata_env: %w", at, err)
				}
			}
		}
		if len(q.Handlers) == 0 {
			v.addf("%s.handlers is empty: list the handler names its tasks may use", at)
		}
		for _, h := range q.Handlers {
			if err := rdq.ValidateName("handler", h); err != nil {
				v.addf("%s.handlers: %w", at, err)
			}
		}
		if q.MaxAttempts < rdq.Unlimited {
			v.addf("%s.max_attempts is %d: use a positive number, 0 for the default (%d) or -1 for no limit", at, q.MaxAttempts, rdq.DefaultMaxAttempts)
		}
		for _, d := range []struct {
			setting string
			value   Duration
		}{{"initial_backoff", q.InitialBackoff}, {"max_backoff", q.MaxBackoff}, {"timeout", q.Timeout}} {
			if d.value < 0 {
				v.addf("%s.%s is %s: use a positive duration, or leave it out for the default", at, d.setting, time.Duration(d.value))
			}
		}
		if q.Concurrency < 0 {
			v.addf("%s.concurrency is %d: use a positive number, or 0 for the default (%d)", at, q.Concurrency, worker.DefaultConcurrency)
		}
	}
}

// unsetNote says which of the named variables are not set, as a clause to
// end a sentence with ("" if none is named).
func unsetNote(envs ...string) string {
	var named []string
	for _, e := range envs {
		if e != "" {
			named = append(named, e)
		}
	}
	switch len(named) {
	case 0:
		return ""
	case 1:
		return " (" + named[0] + " is not set)"
	}
	return " (" + named[0] + " and " + named[1] + " are not set)"
}

func (f *File) validatePrincipals(v *validation) {
	if len(f.Principals) == 0 {
		v.addf("principals: none configured, so nobody could call the API: add one with a token and grants")
	}
	names := map[string]bool{}
	tokens := map[string]string{}
	for i, p := range f.Principals {
		at := fmt.Sprintf("principals[%d]", i)
		if p.Name == "" {
			v.addf("%s.name is empty: name the caller, as the audit log will", at)
		} else {
			at = "principal " + p.Name
			if names[p.Name] {
				v.addf("principals: %s appears twice: give each caller its own name, so that the audit log tells them apart", p.Name)
			}
			names[p.Name] = true
		}
		sp := server.Principal{Name: p.Name}
		for j, g := range p.Grants {
			role, err := server.ParseRole(g.Role)
			if err != nil {
				v.addf("%s: grants[%d]: %w", at, j, err)
				continue
			}
			sp.Grants = append(sp.Grants, server.Grant{Queue: g.Queue, Role: role})
		}
		if p.Name != "" {
			if err := sp.Validate(); err != nil {
				v.addf("principals: %w", err)
			}
		}
		switch {
		case p.Token == "":
			v.addf("%s has no token: set token_env to a variable holding one%s, or token; %s", at, unsetNote(p.TokenEnv), server.StrongTokenHint)
		case tokens[p.Token] != "":
			v.addf("%s: its token is also the token of %s: give each principal its own", at, tokens[p.Token])
		default:
			if err := server.ValidateToken(p.Token); err != nil {
				v.addf("%s: %s: %w", at, envNote("token", p.TokenEnv), err)
			}
			tokens[p.Token] = cmp.Or(p.Name, at)
		}
	}
}

// tlsOrLoopback reports whether calls to the gRPC handler at raw are
// encrypted (grpcs://) or stay on this machine (localhost or a loopback
// address).
func tlsOrLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, grpccall.SchemePlaintext) {
		return true // grpcs://, or a URL refused on its own
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
