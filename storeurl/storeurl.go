// Package storeurl opens an rdq store from a database URL, so that a
// program, the rdq command and rdq-server choose their backend the same way:
//
//	postgres://... or postgresql://...      PostgreSQL (pgstore)
//	redis://... or rediss://...             Redis (redisstore; rediss is TLS)
//	redis+cluster://h1:p1,h2:p2,...         Redis Cluster (redisstore), from a
//	                                        seed list; rediss+cluster is TLS
//	sqlite:PATH, file:PATH or a plain path  a SQLite file (sqlitestore)
//	empty                                   the default SQLite file, DefaultPath()
//
// The URL usually comes from the RDQ_DATABASE_URL environment variable
// (EnvVar, FromEnv). With nothing set, rdq runs on a SQLite file and needs
// no database server.
//
//	st, err := storeurl.Open(ctx, storeurl.FromEnv(), storeurl.Config{})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//
// A PostgreSQL URL is the driver's (pgx) connection URL plus an optional
// schema parameter (SchemaParam). A program that already has a
// *pgxpool.Pool builds the store directly with pgstore.New instead.
//
// A Redis URL is go-redis's (redis://[user:password@]host:port/db) plus an
// optional namespace parameter (redisstore.NamespaceParam) that prefixes
// the store's keys. A Redis Cluster URL names some of its nodes
// (redis+cluster://[user:password@]host1:port1,host2:port2/?namespace=N),
// from which the client learns the others; it has no database number.
//
// # Secrets in URLs
//
// Nothing this package returns shows a secret: Describe and every error
// show the URL with its password replaced by "xxxxx", and with it the value
// of every query parameter not on a short list of settings known to be
// harmless (sslmode, connect_timeout, application_name, schema and the
// like; see Redact). sslpassword, password, and any parameter this package
// does not know, such as an access token, are hidden.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// EnvVar is the environment variable that names the database.
const EnvVar = "RDQ_DATABASE_URL"

// SchemaParam is the query parameter of a PostgreSQL URL that names the
// schema holding rdq's tables (pgstore.DefaultSchema when absent). It is
// removed before the URL reaches the driver.
const SchemaParam = "schema"

// Store is an opened, migrated backend: the task SPI, the DLQ and operations
// interface, and Close, which releases the connections Open made. A
// PostgreSQL Store also implements store.Notifier.
type Store interface {
	store.Store
	store.Admin
	// Close closes the store and its connections.
	Close() error
}

// Config configures Open. The zero Config is valid.
type Config struct {
	// Logger is handed to the store. Nil discards the store's logs.
	Logger *slog.Logger
	// NoMigrate skips Migrate: Open then only connects. By default Open
	// brings the schema up to date, which is safe to do from every process.
	NoMigrate bool
}

// Kind is the backend a URL selects.
type Kind int

// The backends.
const (
	SQLite Kind = iota + 1
	Postgres
	Redis
)

// String returns the backend's name: "SQLite", "PostgreSQL" or "Redis".
func (k Kind) String() string {
	switch k {
	case SQLite:
		return "SQLite"
	case Postgres:
		return "PostgreSQL"
	case Redis:
		return "Redis"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Target is a parsed database URL.
type Target struct {
	Kind Kind
	// Path is the SQLite file (absolute), for Kind SQLite.
	Path string
	// Default reports that the URL was empty and Path is DefaultPath().
	Default bool
	// ConnString is the PostgreSQL URL without the schema parameter, for
	// Kind Postgres.
	ConnString string
	// Schema is the PostgreSQL schema, for Kind Postgres.
	Schema string
	// RedisURL is the Redis URL, namespace parameter included, for Kind
	// Redis.
	RedisURL string
}

// FromEnv returns the database URL from EnvVar; empty when unset.
func FromEnv() string { return strings.TrimSpace(os.Getenv(EnvVar)) }

// DefaultPath is the SQLite file rdq uses when no database URL is set: a
// per-user data file, the same whatever the working directory, so that a
// program and the rdq command run from anywhere see the same tasks:
//
//   - $XDG_DATA_HOME/rdq/rdq.db when XDG_DATA_HOME is set (an absolute path);
//   - on Windows, %LocalAppData%\rdq\rdq.db;
//   - otherwise ~/.local/share/rdq/rdq.db;
//   - without a home directory, rdq/rdq.db in the temporary directory.
//
// Open creates the directory when it uses this path.
func DefaultPath() string {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "rdq", "rdq.db")
	}
	if runtime.GOOS == "windows" {
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "rdq", "rdq.db")
		}
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "share", "rdq", "rdq.db")
	}
	return filepath.Join(os.TempDir(), "rdq", "rdq.db")
}

// Parse resolves a database URL (see the package documentation) without
// opening anything. Its errors wrap ErrBadURL.
func Parse(rawURL string) (Target, error) {
	u := strings.TrimSpace(rawURL)
	if u == "" {
		return Target{Kind: SQLite, Path: DefaultPath(), Default: true}, nil
	}
	lower := strings.ToLower(u)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return parsePostgres(u)
	case strings.HasPrefix(lower, "redis://"), strings.HasPrefix(lower, "rediss://"),
		strings.HasPrefix(lower, "redis+cluster://"), strings.HasPrefix(lower, "rediss+cluster://"):
		return parseRedis(u)
	case strings.HasPrefix(lower, "sqlite:"):
		return parseSQLitePath(u, u[len("sqlite:"):])
	case strings.HasPrefix(lower, "file:"):
		return parseSQLitePath(u, u[len("file:"):])
	}
	if looksLikeKeywordConnString(u) {
		return Target{}, fmt.Errorf("%w: a keyword/value connection string (host=… dbname=…) is not supported; use a postgres:// URL", ErrBadURL)
	}
	if scheme, _, ok := strings.Cut(u, "://"); ok && !strings.ContainsAny(scheme, `/\`) {
		return Target{}, fmt.Errorf("%w: %q: unknown scheme %q; use postgres://, postgresql://, redis://, rediss://, redis+cluster://, sqlite: or a file path", ErrBadURL, Redact(u), scheme)
	}
	return sqliteTarget(u, u)
}

// looksLikeKeywordConnString reports whether s is a libpq keyword/value
// connection string such as "host=db user=app password=secret", which must
// not be mistaken for a file path (nor echoed, since it may hold a password).
func looksLikeKeywordConnString(s string) bool {
	for _, field := range strings.Fields(s) {
		key, _, ok := strings.Cut(field, "=")
		switch strings.ToLower(key) {
		case "host", "hostaddr", "port", "dbname", "user", "password", "sslmode", "connect_timeout":
			if ok {
				return true
			}
		}
	}
	return false
}

// ErrBadURL is wrapped by every error about a malformed or unsupported
// database URL. It wraps rdq.ErrInvalid.
var ErrBadURL = fmt.Errorf("%w: bad database URL", rdq.ErrInvalid)

func parsePostgres(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %s: %v", ErrBadURL, Redact(raw), errors.Unwrap(err))
	}
	q := u.Query()
	schema := q.Get(SchemaParam)
	if schema == "" {
		schema = pgstore.DefaultSchema
	}
	if err := pgstore.ValidateSchema(schema); err != nil {
		return Target{}, fmt.Errorf("%w: %s: %w", ErrBadURL, Redact(raw), err)
	}
	q.Del(SchemaParam)
	u.RawQuery = q.Encode()
	return Target{Kind: Postgres, ConnString: u.String(), Schema: schema}, nil
}

func parseRedis(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %s: %v", ErrBadURL, Redact(raw), errors.Unwrap(err))
	}
	if u.Host == "" {
		return Target{}, fmt.Errorf("%w: %s: no host; want redis://host:port/db", ErrBadURL, Redact(raw))
	}
	return Target{Kind: Redis, RedisURL: raw}, nil
}

// parseSQLitePath handles sqlite:PATH and file:PATH; a leading "//" (as in
// sqlite:///abs/path) is dropped.
func parseSQLitePath(raw, rest string) (Target, error) {
	rest = strings.TrimPrefix(rest, "//")
	if strings.ContainsAny(rest, "?#") {
		// The query is not shown: it may hold what its writer meant as a
		// secret.
		shown, _, _ := strings.Cut(raw, "?")
		shown, _, _ = strings.Cut(shown, "#")
		return Target{}, fmt.Errorf("%w: %q: SQLite URLs take no query or fragment; give the file path only", ErrBadURL, shown+"?…")
	}
	if rest == "" {
		return Target{}, fmt.Errorf("%w: %q: no file path", ErrBadURL, raw)
	}
	return sqliteTarget(raw, rest)
}

func sqliteTarget(raw, path string) (Target, error) {
	if path == ":memory:" {
		return Target{}, fmt.Errorf("%w: %q: rdq needs a database file that outlives the process", ErrBadURL, raw)
	}
	if rest, ok := strings.CutPrefix(path, "~"+string(filepath.Separator)); ok || path == "~" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Target{}, fmt.Errorf("%w: %q: expanding ~: %v", ErrBadURL, raw, err)
		}
		path = filepath.Join(home, rest)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %q: %v", ErrBadURL, raw, err)
	}
	return Target{Kind: SQLite, Path: abs}, nil
}

// Describe says in one line which database a URL selects, for messages such
// as "rdq: using SQLite at /home/ann/.local/share/rdq/rdq.db (set
// RDQ_DATABASE_URL to use PostgreSQL)". It never shows a password.
func Describe(rawURL string) string {
	t, err := Parse(rawURL)
	if err != nil {
		return err.Error()
	}
	switch t.Kind {
	case SQLite:
		if t.Default {
			return fmt.Sprintf("SQLite at %s (set %s to use PostgreSQL)", t.Path, EnvVar)
		}
		return "SQLite at " + t.Path
	case Redis:
		return "Redis at " + Redact(t.RedisURL)
	default:
		return fmt.Sprintf("PostgreSQL at %s (schema %s)", Redact(t.ConnString), t.Schema)
	}
}

// safeParams are the query parameters whose values Redact shows: settings
// of pgx and libpq that are not secrets. Every other value is hidden.
var safeParams = map[string]bool{
	SchemaParam: true, redisstore.NamespaceParam: true, "sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true,
	"sslsni": true, "sslnegotiation": true, "application_name": true, "connect_timeout": true,
	"target_session_attrs": true, "load_balance_hosts": true, "dbname": true, "host": true,
	"port": true, "user": true, "search_path": true, "timezone": true, "client_encoding": true,
	"channel_binding": true, "gssencmode": true, "krbsrvname": true, "krbspn": true,
	"min_protocol_version": true, "max_protocol_version": true, "require_auth": true,
	"service": true, "servicefile": true, "pool_max_conns": true, "pool_min_conns": true,
	"pool_min_idle_conns": true, "pool_max_conn_lifetime": true, "pool_max_conn_lifetime_jitter": true,
	"pool_max_conn_idle_time": true, "pool_health_check_period": true,
	"statement_cache_capacity": true, "description_cache_capacity": true,
	"default_query_exec_mode": true, "min_read_buffer_size": true,
}

// redactedMark replaces a hidden value.
const redactedMark = "xxxxx"

// Redact returns rawURL fit to show: the password in its user information
// and the value of every query parameter not known to be harmless are
// replaced by "xxxxx", and any fragment is dropped. The parameters whose
// values are shown are schema, namespace (Redis) and these pgx and libpq settings: sslmode,
// sslrootcert, sslcert, sslkey, sslsni, sslnegotiation, application_name,
// connect_timeout, target_session_attrs, load_balance_hosts, dbname, host,
// port, user, search_path, timezone, client_encoding, channel_binding,
// gssencmode, krbsrvname, krbspn, min_protocol_version,
// max_protocol_version, require_auth, service, servicefile, the pool_*
// settings of pgxpool, statement_cache_capacity,
// description_cache_capacity, default_query_exec_mode and
// min_read_buffer_size (names compared exactly, so Password=… is hidden
// too). A URL that does not parse is shown as "(unparsable URL)".
func Redact(rawURL string) string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "(unparsable URL)"
	}
	u.Fragment, u.RawFragment = "", ""
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			// Keep what parsed, hide the rest: ParseQuery returns the
			// pairs it could read.
			q.Set("unparsable_query", redactedMark)
		}
		for k, vs := range q {
			if !safeParams[k] {
				for i := range vs {
					vs[i] = redactedMark
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// secretsOf returns the secret values in rawURL that Redact hides: the
// user information's password and the values of query parameters not on
// the safe list, of at least minSecretLen bytes (shorter ones would match
// too much ordinary text to be scrubbed from messages).
func secretsOf(rawURL string) []string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil
	}
	var out []string
	if pw, ok := u.User.Password(); ok {
		out = append(out, pw)
	}
	q, _ := url.ParseQuery(u.RawQuery) // the pairs that parse; the rest are hidden by Redact
	for k, vs := range q {
		if !safeParams[k] {
			out = append(out, vs...)
		}
	}
	kept := out[:0]
	for _, s := range out {
		if len(s) >= minSecretLen {
			kept = append(kept, s)
		}
	}
	return kept
}

// minSecretLen is the shortest secret value scrubbed from driver messages.
const minSecretLen = 4

// scrub returns err with every secret of rawURL replaced in its message,
// for errors whose text this package does not control (the driver's).
// errors.Is and errors.As still see err's chain.
func scrub(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secretsOf(rawURL) {
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			if strings.Contains(msg, form) {
				msg = strings.ReplaceAll(msg, form, redactedMark)
				changed = true
			}
		}
	}
	if !changed {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubbedError is an error whose message had secrets removed.
type scrubbedError struct {
	msg string
	err error
}

// Error returns the message without secrets.
func (e *scrubbedError) Error() string { return e.msg }

// Unwrap returns the original error, for errors.Is and errors.As; its own
// message may hold the secrets.
func (e *scrubbedError) Unwrap() error { return e.err }

// Open opens the store rawURL names (see Parse), connects and, unless
// cfg.NoMigrate, migrates it. The caller closes the returned Store.
func Open(ctx context.Context, rawURL string, cfg Config) (Store, error) {
	t, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return OpenTarget(ctx, t, cfg)
}

// OpenTarget is Open for an already parsed Target.
func OpenTarget(ctx context.Context, t Target, cfg Config) (Store, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	switch t.Kind {
	case SQLite:
		return openSQLite(ctx, t, cfg, logger)
	case Postgres:
		return openPostgres(ctx, t, cfg, logger)
	case Redis:
		return openRedis(ctx, t, logger)
	}
	return nil, fmt.Errorf("%w: unknown backend %v", ErrBadURL, t.Kind)
}

func openSQLite(ctx context.Context, t Target, cfg Config, logger *slog.Logger) (Store, error) {
	if t.Default {
		if err := os.MkdirAll(filepath.Dir(t.Path), 0o700); err != nil {
			return nil, fmt.Errorf("rdq: creating the directory of the default database: %w", err)
		}
	} else if _, err := os.Stat(filepath.Dir(t.Path)); err != nil {
		return nil, fmt.Errorf("rdq: SQLite database %s: its directory: %w", t.Path, err)
	}
	s, err := sqlitestore.Open(ctx, t.Path, sqlitestore.Config{Logger: logger})
	if err != nil {
		return nil, err
	}
	if !cfg.NoMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	return s, nil
}

// pgStore adds Close, which closes the pool Open created, to a pgstore
// Store; its other methods, Notifications included, are pgstore's.
type pgStore struct {
	*pgstore.Store
	pool *pgxpool.Pool
}

// Close closes the pool Open created for the store.
func (p *pgStore) Close() error {
	p.pool.Close()
	return nil
}

func openPostgres(ctx context.Context, t Target, cfg Config, logger *slog.Logger) (st Store, err error) {
	defer func() { err = scrub(err, t.ConnString) }()
	pcfg, err := pgxpool.ParseConfig(t.ConnString)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrBadURL, Redact(t.ConnString), driverReason(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("rdq: connecting to %s: %w", Redact(t.ConnString), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("rdq: connecting to %s: %w", Redact(t.ConnString), err)
	}
	s, err := pgstore.New(pool, pgstore.Config{Schema: t.Schema, Logger: logger})
	if err != nil {
		pool.Close()
		return nil, err
	}
	if !cfg.NoMigrate {
		if err := s.Migrate(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return &pgStore{Store: s, pool: pool}, nil
}

// openRedis opens a Redis store; there is nothing to migrate.
func openRedis(ctx context.Context, t Target, logger *slog.Logger) (st Store, err error) {
	defer func() { err = scrub(err, t.RedisURL) }()
	s, err := redisstore.Open(ctx, t.RedisURL, redisstore.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("rdq: opening Redis at %s: %w", Redact(t.RedisURL), err)
	}
	return s, nil
}

// driverReason is the driver's reason for rejecting a connection string,
// without the string itself, which pgx quotes in backquotes before the
// reason ("cannot parse `…`: invalid port").
func driverReason(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		return msg[i+len("`: "):]
	}
	return msg
}
