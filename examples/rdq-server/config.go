package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/worker"
)

// config is the JSON configuration file; see config.json beside this file.
type config struct {
	// Listen and GRPCListen are the REST and gRPC addresses.
	Listen     string `json:"listen"`
	GRPCListen string `json:"grpc_listen"`
	// OpsListen, if set, is a separate address for /healthz, /readyz and
	// /metrics, which then leave the REST address.
	OpsListen string `json:"ops_listen"`
	// MetricsToken (or the variable MetricsTokenEnv names), if set, is
	// the bearer token /metrics requires; without one, /metrics is open
	// to whoever reaches its listener (see OpsListen).
	MetricsToken    string `json:"metrics_token"`
	MetricsTokenEnv string `json:"metrics_token_env"`
	// ConsoleTrustedOrigins lists the public origins of the console when
	// a TLS-terminating proxy serves it ("https://rdq.example.com").
	ConsoleTrustedOrigins []string `json:"console_trusted_origins"`
	// MaxConnections bounds the open connections of each listener; zero
	// means 1024.
	MaxConnections int `json:"max_connections"`
	// DatabaseURL selects the store: postgres://... for PostgreSQL, a file
	// path or sqlite:PATH for the embedded store. RDQ_DATABASE_URL, when
	// set, wins; empty means the embedded store in rdq-server.db.
	DatabaseURL string `json:"database_url"`
	// TLSCertFile and TLSKeyFile, when both set, serve REST and gRPC over
	// TLS.
	TLSCertFile string `json:"tls_cert_file"`
	TLSKeyFile  string `json:"tls_key_file"`
	// WorkerID names this node's worker; empty means a generated one.
	WorkerID string `json:"worker_id"`
	// DemoReceiver, if set, is an address where a built-in callback
	// receiver answers (see receiver.go), so the sample works alone.
	DemoReceiver string `json:"demo_receiver"`

	Callback struct {
		// Secret (or the variable SecretEnv names) signs the callbacks of
		// queues without a secret of their own: raw, or "whsec_" + base64.
		Secret    string `json:"secret"`
		SecretEnv string `json:"secret_env"`
		// Allow lists the hosts and URL prefixes callbacks may target.
		Allow []string `json:"allow"`
		// AllowAddrs lists the internal addresses or CIDR prefixes
		// (loopback, private, link-local) callbacks may connect to.
		AllowAddrs []string `json:"allow_addrs"`
		Timeout    duration `json:"timeout"`
	} `json:"callback"`

	Queues map[string]queueConfig `json:"queues"`

	Principals []struct {
		Name     string `json:"name"`
		Token    string `json:"token"`
		TokenEnv string `json:"token_env"`
		Grants   []struct {
			Queue string `json:"queue"`
			Role  string `json:"role"`
		} `json:"grants"`
	} `json:"principals"`
}

type queueConfig struct {
	// URL is the callback every task of the queue is POSTed to.
	URL string `json:"url"`
	// Secret (or the variable SecretEnv names) signs this queue's
	// callbacks; empty means the callback section's secret.
	Secret    string `json:"secret"`
	SecretEnv string `json:"secret_env"`
	// Handlers are the handler names tasks of the queue may name.
	Handlers       []string `json:"handlers"`
	MaxAttempts    int      `json:"max_attempts"`
	InitialBackoff duration `json:"initial_backoff"`
	MaxBackoff     duration `json:"max_backoff"`
	Concurrency    int      `json:"concurrency"`
	Timeout        duration `json:"timeout"`
}

// duration is a time.Duration written as a string such as "1.5s".
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

func loadConfig(path string) (*config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.GRPCListen == "" {
		c.GRPCListen = "127.0.0.1:9090"
	}
	if u := os.Getenv("RDQ_DATABASE_URL"); u != "" {
		c.DatabaseURL = u
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return nil, errors.New("set both tls_cert_file and tls_key_file, or neither")
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = 1024
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// validate checks everything the server is built from, so that a mistake
// in the file is an error naming it rather than a failure (or a panic)
// later on.
func (c *config) validate() error {
	var errs []error
	if c.MaxConnections < 0 {
		errs = append(errs, errors.New("max_connections must not be negative"))
	}
	if c.Callback.Timeout < 0 {
		errs = append(errs, errors.New("callback.timeout must not be negative"))
	}
	if len(c.Queues) == 0 {
		errs = append(errs, errors.New("no queues configured"))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Queues)) {
		q := c.Queues[name]
		if err := rdq.ValidateName("queue", name); err != nil {
			errs = append(errs, fmt.Errorf("queues: %w", err))
			continue
		}
		if q.URL == "" {
			errs = append(errs, fmt.Errorf("queue %s: url is empty: give the callback URL its tasks are POSTed to", name))
		}
		if len(q.Handlers) == 0 {
			errs = append(errs, fmt.Errorf("queue %s: list the handler names its tasks may use", name))
		}
		for _, h := range q.Handlers {
			if err := rdq.ValidateName("handler", h); err != nil {
				errs = append(errs, fmt.Errorf("queue %s: handlers: %w", name, err))
			}
		}
		if q.Concurrency < 0 || q.Timeout < 0 {
			errs = append(errs, fmt.Errorf("queue %s: concurrency and timeout must not be negative", name))
		}
		if err := c.workerQueues()[name].Policy.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("queue %s: %w", name, err))
		}
	}
	if len(c.Principals) == 0 {
		errs = append(errs, errors.New("no principals configured: nobody could call the API"))
	}
	if _, err := c.tokens(); err != nil {
		errs = append(errs, fmt.Errorf("principals: %w", err))
	}
	if tok := secret(c.MetricsToken, c.MetricsTokenEnv); tok != "" {
		if err := server.ValidateToken(tok); err != nil {
			errs = append(errs, fmt.Errorf("metrics_token: %w", err))
		}
	}
	return errors.Join(errs...)
}

// placeholder reports whether a secret is a sample value to be replaced,
// such as the "change-me" tokens of config.json.
func placeholder(secret string) bool {
	s := strings.ToLower(secret)
	return strings.Contains(s, "change-me") || strings.Contains(s, "changeme") || strings.Contains(s, "change_me")
}

// placeholders lists the secrets in use that are sample values: the
// callback secrets and the tokens whose configured value (or environment
// variable) still holds a placeholder.
func (c *config) placeholders() []string {
	var out []string
	if placeholder(secret(c.Callback.Secret, c.Callback.SecretEnv)) {
		out = append(out, "callback.secret (set "+cmp.Or(c.Callback.SecretEnv, "callback.secret")+")")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Queues)) {
		q := c.Queues[name]
		if placeholder(secret(q.Secret, q.SecretEnv)) {
			out = append(out, fmt.Sprintf("queue %s secret (set %s)", name, cmp.Or(q.SecretEnv, "its secret")))
		}
	}
	if placeholder(secret(c.MetricsToken, c.MetricsTokenEnv)) {
		out = append(out, "metrics_token (set "+cmp.Or(c.MetricsTokenEnv, "metrics_token")+")")
	}
	for _, p := range c.Principals {
		if placeholder(secret(p.Token, p.TokenEnv)) {
			out = append(out, fmt.Sprintf("the token of %s (set %s)", p.Name, cmp.Or(p.TokenEnv, "its token")))
		}
	}
	return out
}

// checkSecrets refuses sample secrets unless dev is set, in which case it
// only warns.
func (c *config) checkSecrets(dev bool, log *slog.Logger) error {
	weak := c.placeholders()
	if len(weak) == 0 {
		return nil
	}
	if dev {
		log.Warn("DEVELOPMENT MODE: sample secrets in use; anyone who read config.json can call this server", "secrets", strings.Join(weak, "; "))
		return nil
	}
	return fmt.Errorf("refusing to start with sample secrets: %s. Set real ones (at least 32 random characters each, such as the output of `openssl rand -base64 32`), or pass -dev to try the sample on this machine", strings.Join(weak, "; "))
}

// secret returns the value of envName if set, else literal.
func secret(literal, envName string) string {
	if envName != "" {
		if v := os.Getenv(envName); v != "" {
			return v
		}
	}
	return literal
}

// tokens builds the authenticator from the principals.
func (c *config) tokens() (*server.Tokens, error) {
	m := map[string]*server.Principal{}
	for _, p := range c.Principals {
		pr := &server.Principal{Name: p.Name}
		for _, g := range p.Grants {
			role, err := server.ParseRole(g.Role)
			if err != nil {
				return nil, fmt.Errorf("principal %s: %w", p.Name, err)
			}
			pr.Grants = append(pr.Grants, server.Grant{Queue: g.Queue, Role: role})
		}
		tok := secret(p.Token, p.TokenEnv)
		if _, dup := m[tok]; dup {
			return nil, fmt.Errorf("principal %s: token already used by another principal", p.Name)
		}
		m[tok] = pr
	}
	return server.NewTokens(m)
}

// targets returns the callback target of each queue.
func (c *config) targets() map[string]callback.Target {
	out := make(map[string]callback.Target, len(c.Queues))
	for name, q := range c.Queues {
		t := callback.Target{URL: q.URL}
		if s := secret(q.Secret, q.SecretEnv); s != "" {
			t.Secret = []byte(s)
		}
		out[name] = t
	}
	return out
}

// workerQueues returns the worker's per-queue configuration.
func (c *config) workerQueues() map[string]worker.QueueConfig {
	out := make(map[string]worker.QueueConfig, len(c.Queues))
	for name, q := range c.Queues {
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
