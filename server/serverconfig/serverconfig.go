// Package serverconfig reads the configuration of an rdq server from a
// JSON file, checks it, and builds from it what the server is made of: the
// authenticator (server.Tokens), the callback caller's configuration and
// targets (package callback) and the worker's queues (package worker).
//
// Load reads a file, takes the environment into account (RDQ_DATABASE_URL
// and every "*_env" variable the file names), fills in defaults and
// validates the result. Every mistake it finds is reported at once, each
// naming the setting by its JSON path and saying what to do, so that a
// server built from a loaded File does not fail (or panic) later on
// account of its configuration.
//
// A file looks like this (examples/rdq-server/config.json is a complete
// sample):
//
//	{
//	  "listen": "127.0.0.1:8080",
//	  "grpc_listen": "127.0.0.1:9090",
//	  "database_url": "postgres://rdq@db/rdq",
//	  "callback": {"secret_env": "RDQ_CALLBACK_SECRET", "allow": ["hooks.internal"], "timeout": "10s"},
//	  "queues": {
//	    "orders": {"url": "https://hooks.internal/orders", "handlers": ["charge"], "max_attempts": 5}
//	  },
//	  "principals": [
//	    {"name": "shop", "token_env": "RDQ_TOKEN_SHOP", "grants": [{"queue": "orders", "role": "submitter"}]}
//	  ]
//	}
//
// A queue whose url is grpcs://host:port (or grpc://host:port, plaintext)
// runs its tasks on a gRPC handler (package grpccall) instead of an HTTP
// callback, through the same allowlist, retries and dead-letter queue; its
// "metadata" (or "metadata_env") authenticates the calls, and the callback
// section's "tls_ca_file", "tls_cert_file" and "tls_key_file" set the
// trusted authorities and the client certificate of mutual TLS:
//
//	"payments": {"url": "grpcs://payments.internal:8443", "handlers": ["charge"],
//	             "metadata_env": {"authorization": "RDQ_PAYMENTS_AUTH"}}
package serverconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"time"
)

// Defaults Load fills in for settings the file leaves out.
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultGRPCListen     = "127.0.0.1:9090"
	DefaultMaxConnections = 1024
)

// DatabaseURLEnv names the environment variable that, when set and not
// empty, replaces the file's database_url.
const DatabaseURLEnv = "RDQ_DATABASE_URL"

// File is the configuration of an rdq server. Load fills it from a JSON
// file; the JSON names of its fields are those of the tags. After Load,
// each secret holds its effective value: the value of the variable its
// *Env field names when that is set and not empty, else the literal of the
// file. A File holds secrets: do not log it.
type File struct {
	// Listen and GRPCListen are the host:port addresses of the REST and
	// gRPC listeners; empty means DefaultListen and DefaultGRPCListen.
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
	// ConsoleClientHeader and ConsoleTrustedProxies, set together, name
	// the console's clients behind reverse proxies, for throttling failed
	// sign-ins per client and for the log: a request from one of the
	// proxies (IP addresses or CIDR prefixes) comes from the client the
	// last entry of the header names (X-Forwarded-For, as the proxy
	// appends to it). Without them every request comes from its remote
	// address: behind a proxy, the proxy's. See server.ProxyClientAddr.
	ConsoleClientHeader   string   `json:"console_client_header"`
	ConsoleTrustedProxies []string `json:"console_trusted_proxies"`
	// MaxConnections bounds the open connections of each listener; zero
	// means DefaultMaxConnections.
	MaxConnections int `json:"max_connections"`
	// DatabaseURL selects the store (see package storeurl): postgres://...
	// for PostgreSQL, a file path or sqlite:PATH for the embedded store;
	// empty means the embedded store's default file. The variable
	// DatabaseURLEnv, when set, wins.
	DatabaseURL string `json:"database_url"`
	// TLSCertFile and TLSKeyFile, when both set, serve REST and gRPC over
	// TLS. Set both or neither.
	TLSCertFile string `json:"tls_cert_file"`
	TLSKeyFile  string `json:"tls_key_file"`
	// WorkerID names this node's worker; empty means a generated one.
	WorkerID string `json:"worker_id"`
	// DemoReceiver, if set, is an address where the program may serve a
	// demonstration callback receiver, so that a sample works alone.
	DemoReceiver string `json:"demo_receiver"`
	// Callback configures the callbacks that run the queues' tasks.
	Callback Callback `json:"callback"`
	// Queues maps each queue's name to its callback and policy; at least
	// one.
	Queues map[string]Queue `json:"queues"`
	// Principals are the callers of the API, each with its token; at
	// least one.
	Principals []Principal `json:"principals"`
}

// Callback is the "callback" section of a File (see callback.Config and,
// for gRPC handlers, grpccall.Config).
type Callback struct {
	// Secret (or the variable SecretEnv names) signs the callbacks of
	// queues without a secret of their own: raw, or "whsec_" + base64; at
	// least callback.MinSecretLength bytes.
	Secret    string `json:"secret"`
	SecretEnv string `json:"secret_env"`
	// Allow lists the hosts and URL prefixes callbacks and gRPC handlers
	// may target; at least one.
	Allow []string `json:"allow"`
	// AllowAddrs lists the internal addresses or CIDR prefixes
	// (loopback, private, link-local) callbacks may connect to.
	AllowAddrs []string `json:"allow_addrs"`
	// Timeout bounds one callback or gRPC handler call; zero means
	// callback.DefaultTimeout (grpccall.DefaultTimeout, the same).
	Timeout Duration `json:"timeout"`
	// TLSCAFile, TLSCertFile and TLSKeyFile configure the connections to
	// gRPC handlers over grpcs: a PEM file of the certificate authorities
	// to trust (empty means the system's) and, for mutual TLS, the client
	// certificate and its key (set both or neither).
	TLSCAFile   string `json:"tls_ca_file"`
	TLSCertFile string `json:"tls_cert_file"`
	TLSKeyFile  string `json:"tls_key_file"`
}

// Queue is one queue of a File: where its tasks are sent and how they
// are retried.
type Queue struct {
	// URL is where the queue's tasks run, admitted by the callback
	// section's allowlist: an http or https callback every task is POSTed
	// to (package callback), or a gRPC handler, grpcs://host:port or
	// grpc://host:port, whose HandlerService is called once per attempt
	// (package grpccall).
	URL string `json:"url"`
	// Secret (or the variable SecretEnv names) signs this queue's HTTP
	// callbacks; empty means the callback section's secret. A gRPC
	// handler has none: it authenticates calls by Metadata and TLS.
	Secret    string `json:"secret"`
	SecretEnv string `json:"secret_env"`
	// Metadata is sent with every call to a gRPC handler, such as
	// {"authorization": "Bearer ..."}; MetadataEnv maps a key to the
	// variable holding its value, which wins when set and not empty.
	Metadata    map[string]string `json:"metadata"`
	MetadataEnv map[string]string `json:"metadata_env"`
	// AllowPlaintextMetadata lets Metadata go to a grpc:// (plaintext)
	// handler on a host other than localhost or a loopback address,
	// where anyone on the path can read it; without it, such a queue is
	// refused.
	AllowPlaintextMetadata bool `json:"allow_plaintext_metadata"`
	// Handlers are the handler names tasks of the queue may name; at
	// least one.
	Handlers []string `json:"handlers"`
	// MaxAttempts, InitialBackoff and MaxBackoff are the queue's retry
	// policy (rdq.Policy); zero means rdq's default, MaxAttempts -1
	// unlimited attempts.
	MaxAttempts    int      `json:"max_attempts"`
	InitialBackoff Duration `json:"initial_backoff"`
	MaxBackoff     Duration `json:"max_backoff"`
	// Concurrency bounds the queue's tasks running at once, and Timeout
	// one execution (worker.QueueConfig); zero means the worker's default.
	Concurrency int      `json:"concurrency"`
	Timeout     Duration `json:"timeout"`
}

// Principal is a caller of the API (see server.Principal).
type Principal struct {
	// Name is the caller's name in the audit log; unique.
	Name string `json:"name"`
	// Token (or the variable TokenEnv names) is the caller's bearer
	// token: at least server.MinTokenLength random characters, unique.
	Token    string `json:"token"`
	TokenEnv string `json:"token_env"`
	// Grants are the caller's roles per queue pattern.
	Grants []Grant `json:"grants"`
}

// Grant is a role in the queues matching a pattern (see server.Grant).
type Grant struct {
	// Queue is a queue name, a prefix followed by "*", or "*".
	Queue string `json:"queue"`
	// Role is "submitter", "operator" or "admin".
	Role string `json:"role"`
}

// Duration is a time.Duration written in JSON as a string that
// time.ParseDuration accepts, such as "1.5s" or "1m".
type Duration time.Duration

// UnmarshalJSON parses a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s is not a duration: write one as a string such as \"30s\" or \"1m\"", clip(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: use a number and a unit (ms, s, m, h), such as \"30s\" or \"1m30s\"", clip([]byte(s)))
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as UnmarshalJSON reads it.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// clip shortens a piece of the file for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// Load reads the file at path with Parse. Its errors start with path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse decodes a configuration (one JSON object, whose every member must
// be a setting of File), replaces each secret by the value of its *_env
// variable and DatabaseURL by that of DatabaseURLEnv when those are set
// and not empty, fills in the defaults and validates the result (see
// Validate). A syntax or type error names the line and column. Every error
// wraps rdq.ErrInvalid.
func Parse(data []byte) (*File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, &invalidError{errs: []error{decodeError(data, err)}}
	}
	if end := dec.InputOffset(); len(bytes.TrimSpace(data[end:])) > 0 {
		rest := end + int64(len(data[end:])-len(bytes.TrimLeft(data[end:], " \t\r\n")))
		return nil, &invalidError{errs: []error{fmt.Errorf("line %d: more after the configuration's closing brace: the file must hold one JSON object", line(data, rest))}}
	}
	f.applyEnv()
	f.applyDefaults()
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// decodeError rewrites a decoding error to name its place in data and the
// setting concerned by its JSON path.
func decodeError(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		l, c := position(data, syntax.Offset)
		return fmt.Errorf("line %d, column %d: the file is not valid JSON: %w", l, c, err)
	case errors.As(err, &typ):
		l, c := position(data, typ.Offset)
		return fmt.Errorf("line %d, column %d: %s must be %s, not a %s", l, c, typ.Field, kind(typ), typ.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the file ends before its JSON object does: %w", err)
	}
	if name, ok := bytes.CutPrefix([]byte(err.Error()), []byte("json: unknown field ")); ok {
		return fmt.Errorf("unknown setting %s: check its spelling and section against the sample configuration", name)
	}
	return err
}

// kind describes the JSON the field of e takes.
func kind(e *json.UnmarshalTypeError) string {
	switch e.Type.Kind() {
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + e.Type.String()
}

// position returns the line and column (from 1) of byte offset off of
// data, counting a column per byte.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}

// line returns the line (from 1) of byte offset off of data.
func line(data []byte, off int64) int {
	l, _ := position(data, off)
	return l
}

// applyEnv replaces the secrets and the database URL by the environment
// variables that override them.
func (f *File) applyEnv() {
	if u := os.Getenv(DatabaseURLEnv); u != "" {
		f.DatabaseURL = u
	}
	fromEnv(&f.MetricsToken, f.MetricsTokenEnv)
	fromEnv(&f.Callback.Secret, f.Callback.SecretEnv)
	for name, q := range f.Queues {
		fromEnv(&q.Secret, q.SecretEnv)
		for k, env := range q.MetadataEnv {
			if v := os.Getenv(env); env != "" && v != "" {
				q.Metadata = maps.Clone(q.Metadata)
				if q.Metadata == nil {
					q.Metadata = map[string]string{}
				}
				q.Metadata[k] = v
			}
		}
		f.Queues[name] = q
	}
	for i := range f.Principals {
		fromEnv(&f.Principals[i].Token, f.Principals[i].TokenEnv)
	}
}

// fromEnv sets *v to the value of the variable env names, if set and not
// empty.
func fromEnv(v *string, env string) {
	if env == "" {
		return
	}
	if s := os.Getenv(env); s != "" {
		*v = s
	}
}

func (f *File) applyDefaults() {
	if f.Listen == "" {
		f.Listen = DefaultListen
	}
	if f.GRPCListen == "" {
		f.GRPCListen = DefaultGRPCListen
	}
	if f.MaxConnections == 0 {
		f.MaxConnections = DefaultMaxConnections
	}
}
