package serverconfig

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/callback/grpccall"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/worker"
)

// Tokens returns the authenticator of the principals, for
// server.Config.Auth.
func (f *File) Tokens() (*server.Tokens, error) {
	m := make(map[string]*server.Principal, len(f.Principals))
	for _, p := range f.Principals {
		pr := &server.Principal{Name: p.Name}
		for _, g := range p.Grants {
			role, err := server.ParseRole(g.Role)
			if err != nil {
				return nil, fmt.Errorf("principal %s: %w", p.Name, err)
			}
			pr.Grants = append(pr.Grants, server.Grant{Queue: g.Queue, Role: role})
		}
		if _, dup := m[p.Token]; dup {
			return nil, fmt.Errorf("principal %s: its token is also another principal's", p.Name)
		}
		m[p.Token] = pr
	}
	return server.NewTokens(m)
}

// ConsoleConfig returns the configuration of the console
// (server.Service.Console): its trusted origins and, behind proxies, how
// it names its clients.
func (f *File) ConsoleConfig() (server.ConsoleConfig, error) {
	cfg := server.ConsoleConfig{TrustedOrigins: f.ConsoleTrustedOrigins}
	if f.ConsoleClientHeader == "" && len(f.ConsoleTrustedProxies) == 0 {
		return cfg, nil
	}
	addr, err := server.ProxyClientAddr(f.ConsoleClientHeader, f.ConsoleTrustedProxies)
	if err != nil {
		return cfg, fmt.Errorf("console_client_header and console_trusted_proxies: %w", err)
	}
	cfg.ClientAddr = addr
	return cfg, nil
}

// CallbackConfig returns the configuration of the callback caller: the
// callback section, whose Secret is nil when the section has none.
func (f *File) CallbackConfig() callback.Config {
	return callback.Config{
		Secret:     secretBytes(f.Callback.Secret),
		Allow:      f.Callback.Allow,
		AllowAddrs: f.Callback.AllowAddrs,
		Timeout:    time.Duration(f.Callback.Timeout),
	}
}

// Targets returns the callback target of each queue whose handler is an
// HTTP callback, for callback.Caller's Router; a queue without a secret of
// its own has a nil Target.Secret.
func (f *File) Targets() map[string]callback.Target {
	out := make(map[string]callback.Target, len(f.Queues))
	for name, q := range f.Queues {
		if !IsGRPC(q.URL) {
			out[name] = callback.Target{URL: q.URL, Secret: secretBytes(q.Secret)}
		}
	}
	return out
}

// IsGRPC reports whether a queue's url names a gRPC handler: its scheme
// is grpc or grpcs.
func IsGRPC(url string) bool {
	scheme, _, ok := strings.Cut(url, "://")
	return ok && (strings.EqualFold(scheme, grpccall.SchemeTLS) || strings.EqualFold(scheme, grpccall.SchemePlaintext))
}

// GRPCTargets returns the target of each queue whose handler is a gRPC
// handler, for grpccall.Caller's Router.
func (f *File) GRPCTargets() map[string]grpccall.Target {
	out := map[string]grpccall.Target{}
	for name, q := range f.Queues {
		if IsGRPC(q.URL) {
			out[name] = grpccall.Target{URL: q.URL, Metadata: maps.Clone(q.Metadata)}
		}
	}
	return out
}

// GRPCConfig returns the configuration of the gRPC handler caller: the
// callback section's allowlist, addresses and timeout, and its TLS files
// read into a tls.Config.
func (f *File) GRPCConfig() (grpccall.Config, error) {
	cfg := grpccall.Config{
		Allow:      f.Callback.Allow,
		AllowAddrs: f.Callback.AllowAddrs,
		Timeout:    time.Duration(f.Callback.Timeout),
	}
	c := f.Callback
	if c.TLSCAFile == "" && c.TLSCertFile == "" && c.TLSKeyFile == "" {
		return cfg, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return cfg, fmt.Errorf("callback.tls_ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return cfg, fmt.Errorf("callback.tls_ca_file %s holds no PEM certificate: give the file of the authorities that sign the handlers' certificates", c.TLSCAFile)
		}
	}
	if c.TLSCertFile != "" || c.TLSKeyFile != "" {
		if c.TLSCertFile == "" || c.TLSKeyFile == "" {
			return cfg, errors.New("callback.tls_cert_file and callback.tls_key_file: set both to present a client certificate (mutual TLS), or neither")
		}
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return cfg, fmt.Errorf("callback.tls_cert_file and callback.tls_key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	cfg.TLS = tc
	return cfg, nil
}

func secretBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// WorkerQueues returns each queue's policy, concurrency and timeout, for
// worker.Config.Queues.
func (f *File) WorkerQueues() map[string]worker.QueueConfig {
	out := make(map[string]worker.QueueConfig, len(f.Queues))
	for name, q := range f.Queues {
		out[name] = worker.QueueConfig{
			Policy: rdq.Policy{
				MaxAttempts:    q.MaxAttempts,
				InitialBackoff: time.Duration(q.InitialBackoff),
				MaxBackoff:     time.Duration(q.MaxBackoff),
			},
			Concurrency: q.Concurrency,
			Timeout:     time.Duration(q.Timeout),
		}
	}
	return out
}

// QueueHandlers returns each queue's handler names, for
// server.Config.Queues.
func (f *File) QueueHandlers() map[string][]string {
	out := make(map[string][]string, len(f.Queues))
	for name, q := range f.Queues {
		out[name] = slices.Clone(q.Handlers)
	}
	return out
}

// Handlers returns the handler names of every queue, sorted, each once:
// those a worker registers the callback router under.
func (f *File) Handlers() []string {
	var out []string
	for _, q := range f.Queues {
		out = append(out, q.Handlers...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// placeholder reports whether a secret is a sample value to be replaced,
// such as the "change-me" tokens of a sample configuration.
func placeholder(secret string) bool {
	s := strings.ToLower(secret)
	return strings.Contains(s, "change-me") || strings.Contains(s, "changeme") || strings.Contains(s, "change_me")
}

// SampleSecrets lists the secrets in use whose value (from the file or
// the environment) is a sample to be replaced, one containing "change-me"
// (or "changeme", "change_me"), each named with the setting or variable to
// set instead. It is empty when every secret is real.
func (f *File) SampleSecrets() []string {
	var out []string
	if placeholder(f.Callback.Secret) {
		out = append(out, "callback.secret (set "+cmp.Or(f.Callback.SecretEnv, "callback.secret")+")")
	}
	for _, name := range slices.Sorted(maps.Keys(f.Queues)) {
		q := f.Queues[name]
		if placeholder(q.Secret) {
			out = append(out, fmt.Sprintf("queue %s secret (set %s)", name, cmp.Or(q.SecretEnv, "its secret")))
		}
		for _, k := range slices.Sorted(maps.Keys(q.Metadata)) {
			if placeholder(q.Metadata[k]) {
				out = append(out, fmt.Sprintf("queue %s metadata %s (set %s)", name, k, cmp.Or(q.MetadataEnv[k], "its value")))
			}
		}
	}
	if placeholder(f.MetricsToken) {
		out = append(out, "metrics_token (set "+cmp.Or(f.MetricsTokenEnv, "metrics_token")+")")
	}
	for _, p := range f.Principals {
		if placeholder(p.Token) {
			out = append(out, fmt.Sprintf("the token of %s (set %s)", p.Name, cmp.Or(p.TokenEnv, "its token")))
		}
	}
	return out
}

// CheckSecrets refuses sample secrets (see SampleSecrets) with an error
// naming each and saying how to replace it, unless dev is set, in which
// case it logs a warning on log and returns nil.
func (f *File) CheckSecrets(dev bool, log *slog.Logger) error {
	weak := f.SampleSecrets()
	if len(weak) == 0 {
		return nil
	}
	if dev {
		log.Warn("DEVELOPMENT MODE: sample secrets in use; anyone who has read the sample configuration can call this server", "secrets", strings.Join(weak, "; "))
		return nil
	}
	return fmt.Errorf("refusing to start with sample secrets: %s. Set real ones (at least 32 random characters each, such as the output of `openssl rand -base64 32`), or pass -dev to try the sample on this machine", strings.Join(weak, "; "))
}

// Flags are the command-line flags through which a server program takes
// its File: -config, the file's path, and -dev, development mode, in which
// sample secrets are accepted with a warning.
type Flags struct {
	Path string
	Dev  bool
}

// Register defines -config (defaulting to defaultPath) and -dev on fs.
func (fl *Flags) Register(fs *flag.FlagSet, defaultPath string) {
	fs.StringVar(&fl.Path, "config", defaultPath, "configuration file (JSON)")
	fs.BoolVar(&fl.Dev, "dev", false, "development mode: accept the sample change-me tokens and secrets")
}

// Load loads the file at fl.Path (see Load) and checks its secrets (see
// CheckSecrets) in development mode if fl.Dev is set.
func (fl *Flags) Load(log *slog.Logger) (*File, error) {
	f, err := Load(fl.Path)
	if err != nil {
		return nil, err
	}
	if err := f.CheckSecrets(fl.Dev, log); err != nil {
		return nil, err
	}
	return f, nil
}
