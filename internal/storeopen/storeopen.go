// Package storeopen opens an rdq store from a database URL, so that the rdq
// command and the examples choose their backend the same way:
//
//	postgres://... or postgresql://...   PostgreSQL (pgstore)
//	sqlite:PATH, file:PATH or a plain path  a SQLite file (sqlitestore)
//	empty                                  the default SQLite file, DefaultPath()
//
// The URL usually comes from the RDQ_DATABASE_URL environment variable
// (EnvVar, FromEnv). With nothing set, rdq runs on a SQLite file and needs
// no database server.
package storeopen

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
)

// String returns the backend's name: "SQLite" or "PostgreSQL".
func (k Kind) String() string {
	switch k {
	case SQLite:
		return "SQLite"
	case Postgres:
		return "PostgreSQL"
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
	case strings.HasPrefix(lower, "sqlite:"):
		return parseSQLitePath(u, u[len("sqlite:"):])
	case strings.HasPrefix(lower, "file:"):
		return parseSQLitePath(u, u[len("file:"):])
	}
	if looksLikeKeywordConnString(u) {
		return Target{}, fmt.Errorf("%w: a keyword/value connection string (host=… dbname=…) is not supported; use a postgres:// URL", ErrBadURL)
	}
	if scheme, _, ok := strings.Cut(u, "://"); ok && !strings.ContainsAny(scheme, `/\`) {
		return Target{}, fmt.Errorf("%w: %q: unknown scheme %q; use postgres://, postgresql://, sqlite: or a file path", ErrBadURL, redact(u), scheme)
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
		return Target{}, fmt.Errorf("%w: %s: %v", ErrBadURL, redact(raw), errors.Unwrap(err))
	}
	q := u.Query()
	schema := q.Get(SchemaParam)
	if schema == "" {
		schema = pgstore.DefaultSchema
	}
	if err := pgstore.ValidateSchema(schema); err != nil {
		return Target{}, fmt.Errorf("%w: %s: %w", ErrBadURL, redact(raw), err)
	}
	q.Del(SchemaParam)
	u.RawQuery = q.Encode()
	return Target{Kind: Postgres, ConnString: u.String(), Schema: schema}, nil
}

// parseSQLitePath handles sqlite:PATH and file:PATH; a leading "//" (as in
// sqlite:///abs/path) is dropped.
func parseSQLitePath(raw, rest string) (Target, error) {
	rest = strings.TrimPrefix(rest, "//")
	if strings.ContainsAny(rest, "?#") {
		return Target{}, fmt.Errorf("%w: %q: SQLite URLs take no query or fragment; give the file path only", ErrBadURL, raw)
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
	default:
		return fmt.Sprintf("PostgreSQL at %s (schema %s)", redact(t.ConnString), t.Schema)
	}
}

// redact returns a URL with its password, if any, replaced: in the user
// information and in a password query parameter.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

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

func openPostgres(ctx context.Context, t Target, cfg Config, logger *slog.Logger) (Store, error) {
	pcfg, err := pgxpool.ParseConfig(t.ConnString)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadURL, redact(t.ConnString), err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("rdq: connecting to %s: %w", redact(t.ConnString), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("rdq: connecting to %s: %w", redact(t.ConnString), err)
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
