// Package pgstore is rdq's PostgreSQL backend, built on pgx/v5.
//
// A Store works on a *pgxpool.Pool the application already has, and keeps all
// of its tables in one schema ("rdq" unless configured otherwise), so several
// independent rdq installations can share a database. The schema is created
// and upgraded by Migrate from migrations embedded in the binary.
//
// Store implements store.Store (the worker and client SPI), store.Admin (the
// dead-letter queue and operations interface), store.LiveTasks (tasks that
// are not dead) and store.Notifier (LISTEN / NOTIFY wake-ups for workers).
// WithTx gives a view that writes in the caller's transaction.
//
// The SQL is plain PostgreSQL: no extensions and no server-side functions,
// so the schema can be created on PostgreSQL-compatible databases too. Every
// query is served by an index; the statements and the index behind each are
// listed in one place (sql.go).
//
// The database's clock is the only clock: due times and lease expiries are
// computed with the server's now(), or with the Now override of a request
// (tests use it to travel in time).
package pgstore

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// DefaultSchema is the schema a Store uses when Config.Schema is empty.
const DefaultSchema = "rdq"

// Config configures a Store. The zero Config is valid.
type Config struct {
	// Schema is the PostgreSQL schema holding rdq's tables; DefaultSchema
	// if empty. It must match ^[a-z_][a-z0-9_]{0,62}$ (a lowercase
	// identifier that needs no quoting).
	Schema string
	// Logger receives operational messages (notification listener
	// reconnects). Payloads are never logged. Nil means slog.Default().
	Logger *slog.Logger
	// KeyRetention is how long an idempotency key outlives its task once
	// retention purges the task (PurgeSucceeded, or PurgeDead with action
	// "retention"): resubmitting the key within that window returns the
	// original task's ID as a purged duplicate instead of running the
	// work again. PurgeSucceeded prunes keys past the window. An
	// operator's PurgeDead frees the keys of the tasks it deletes at
	// once. Zero means DefaultKeyRetention; negative is invalid.
	KeyRetention time.Duration
}

// DefaultKeyRetention is the KeyRetention of a Config that sets none.
const DefaultKeyRetention = 7 * 24 * time.Hour

// Store is the PostgreSQL implementation of store.Store, store.Admin and
// store.Notifier. It is safe for concurrent use; all state lives in the
// database, so any number of Stores in any number of processes may work on
// the same schema.
type Store struct {
	pool    db // the pool New was given, or the caller's transaction in a view made by WithTx
	schema  string
	channel string
	log     *slog.Logger
	q       queries

	// listenPool is the pool New was given, which notification listeners
	// take their connection from.
	listenPool *pgxpool.Pool
	// keyRetention is Config.KeyRetention with the default applied.
	keyRetention time.Duration
	// floors is where one-queue claims start; nil in a view made by
	// WithTx, whose claims start at the front.
	floors *claimFloors
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Admin    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateSchema reports whether name is usable as Config.Schema: 1 to 63
// characters of lowercase ASCII letters, digits and underscores, not
// starting with a digit, and not a reserved "pg_" name. The error wraps
// rdq.ErrInvalid.
func ValidateSchema(name string) error {
	if !schemaPattern.MatchString(name) {
		return fmt.Errorf("%w: pgstore schema %q must be 1 to 63 characters of lowercase letters, digits and underscores, starting with a letter or underscore", rdq.ErrInvalid, name)
	}
	if len(name) >= 3 && name[:3] == "pg_" {
		return fmt.Errorf("%w: pgstore schema %q: names starting with pg_ are reserved by PostgreSQL", rdq.ErrInvalid, name)
	}
	return nil
}

// New returns a Store on pool. It validates the configuration but does not
// touch the database: call Migrate before first use (and after every
// upgrade of rdq). The pool stays the caller's: New does not close it.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: nil pool", rdq.ErrInvalid)
	}
	schema := cfg.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if err := ValidateSchema(schema); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.KeyRetention < 0 {
		return nil, fmt.Errorf("%w: pgstore: KeyRetention %s is negative; use 0 for the default (%s)", rdq.ErrInvalid, cfg.KeyRetention, DefaultKeyRetention)
	}
	s := &Store{
		pool:    mapped{pool},
		schema:  schema,
		channel: channelName(schema),
		log:     log,
		q:       buildQueries(pgx.Identifier{schema}.Sanitize(), pgx.Identifier{channelName(schema)}.Sanitize()),
	}
	s.listenPool = pool
	s.keyRetention = cmp.Or(cfg.KeyRetention, DefaultKeyRetention)
	s.floors = newClaimFloors()
	return s, nil
}

// Schema returns the schema the store keeps its tables in.
func (s *Store) Schema() string { return s.schema }

// Channel returns the LISTEN/NOTIFY channel the store notifies when tasks
// become due. The payload of each notification is a queue name.
func (s *Store) Channel() string { return s.channel }

// channelName derives the notification channel from the schema. Channel
// names are identifiers, limited to 63 bytes; long schema names are hashed.
func channelName(schema string) string {
	name := "rdq_" + schema
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(schema))
	return "rdq_" + hex.EncodeToString(sum[:16])
}

// errInvalid formats a validation error wrapping rdq.ErrInvalid.
func errInvalid(format string, args ...any) error {
	return fmt.Errorf("%w: pgstore: %s", rdq.ErrInvalid, fmt.Sprintf(format, args...))
}

// isCode reports whether err is a PostgreSQL error with the given SQLSTATE.
func isCode(err error, code string) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == code
}
