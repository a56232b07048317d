package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/srjn45/rdq/store"
)

// DefaultBusyTimeout is how long a write waits for another connection or
// process to release the database's write lock when Config.BusyTimeout is
// zero.
const DefaultBusyTimeout = 10 * time.Second

// readConns bounds the pool of read connections (Get and the DLQ reads).
// Writes use one connection per Store; see Store.
const readConns = 4

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Config configures a Store. The zero Config is valid.
type Config struct {
	// Logger receives the store's own events (migrations applied, lock
	// waits retried). Nil discards them. Payloads are never logged.
	Logger *slog.Logger
	// BusyTimeout is how long one write waits for the database's write
	// lock, held by another Store or process, before it fails. Zero means
	// DefaultBusyTimeout.
	BusyTimeout time.Duration
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

// Store is rdq's storage on a SQLite database file. It implements
// store.Store and store.Admin. It has no push notifications: workers find
// new tasks by polling.
//
// A Store is safe for concurrent use by many goroutines, and any number of
// Stores, in one process or in several processes on the same host, may open
// the same file at once. Every write is one BEGIN IMMEDIATE transaction:
// SQLite admits one writer at a time for the whole file, so a claim
// selects and leases its tasks with no other writer in between, and no two
// claims ever return the same task. Within a process a Store funnels its
// writes through one connection (waiting in Go, in order); across processes
// they wait on SQLite's lock for up to BusyTimeout. Reads (Get, the DLQ
// listings, Stats) use a small pool of read-only connections and, in WAL
// mode, never wait for writers.
//
// The store's clock is the host's clock, read by the writing process
// inside its write transaction: all processes sharing a file run on one
// host and so share one clock. Times are stored as integer unix
// microseconds.
//
// Do not put the database on a network file system: SQLite's locking and
// WAL shared memory need a local one. And do not open the database file
// (or its -wal and -shm files) with anything but SQLite in a process that
// uses it: on POSIX systems, closing any descriptor of a file drops every
// lock the process holds on it.
type Store struct {
	path        string
	w           *sql.DB // one connection, BEGIN IMMEDIATE
	r           *sql.DB // read-only connections
	log         *slog.Logger
	busyTimeout time.Duration

	keyRetention time.Duration // Config.KeyRetention with the default applied

	mu     sync.Mutex                           // serializes prepare and Close
	stmts  atomic.Pointer[map[string]*sql.Stmt] // hotStatements prepared on w, once all are
	closed bool                                 // guarded by mu

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store = (*Store)(nil)
	_ store.Admin = (*Store)(nil)
)

// Open opens (creating it if needed) the SQLite database at path and
// returns a Store on it. It does not create rdq's tables: call Migrate once
// per process start (it is cheap when the schema is current and safe to
// run from several processes at once).
//
// Every connection runs with:
//
//   - journal_mode=WAL: readers never block the writer nor each other,
//     and several processes can share the file;
//   - synchronous=FULL: a commit is on disk (the WAL is fsynced) before
//     it returns, so an enqueued task or a recorded attempt survives a
//     power loss as well as a crash. NORMAL would survive a crash of the
//     process but could lose the last commits on power loss, which a
//     durable retry engine must not; batching amortizes the fsync;
//   - busy_timeout=BusyTimeout: a write waits for the write lock rather
//     than failing at once;
//   - foreign_keys=ON: deleting a task deletes its attempts;
//   - cache_size: up to 64 MiB of page cache for the write connection and
//     16 MiB for each of the read connections, filled only as the file is
//     read. Each call of a bulk redrive or purge by filter raises the
//     write connection's to 256 MiB until it commits, so that it works in
//     memory on large files.
//
// Close the Store when done.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlitestore: empty database path")
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlitestore: %q: give a file system path (an in-memory database cannot be shared between the store's connections)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: resolving %q: %w", path, err)
	}
	if cfg.KeyRetention < 0 {
		return nil, fmt.Errorf("sqlitestore: negative KeyRetention %s; use 0 for the default (%s)", cfg.KeyRetention, DefaultKeyRetention)
	}
	if cfg.BusyTimeout < 0 {
		return nil, fmt.Errorf("sqlitestore: negative BusyTimeout %s", cfg.BusyTimeout)
	}
	busy := cfg.BusyTimeout
	if busy == 0 {
		busy = DefaultBusyTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		path:        abs,
		log:         logger,
		busyTimeout: busy,

		keyRetention: cmp.Or(cfg.KeyRetention, DefaultKeyRetention),
	}

	busyMS := strconv.FormatInt(max(busy.Milliseconds(), 1), 10)
	common := url.Values{}
	common.Add("_pragma", "busy_timeout("+busyMS+")")
	common.Add("_pragma", "foreign_keys(1)")
	common.Add("_pragma", "synchronous(FULL)")
	common.Add("_pragma", "temp_store(MEMORY)")

	wq := cloneValues(common)
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "cache_size(-65536)") // as sqlWriteCache
	wq.Set("_txlock", "immediate")
	s.w, err = sql.Open("sqlite", fileURI(abs, wq))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", abs, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	// Connect the writer first: it creates the file and switches it to
	// WAL, which the read-only connections cannot do.
	if err := s.retryBusy(ctx, func() error { return s.w.PingContext(ctx) }); err != nil {
		closeErr := s.w.Close()
		return nil, errors.Join(fmt.Errorf("sqlitestore: opening %s: %w", abs, err), closeErr)
	}

	rq := cloneValues(common)
	rq.Add("_pragma", "query_only(1)")
	rq.Add("_pragma", "cache_size(-16384)")
	s.r, err = sql.Open("sqlite", fileURI(abs, rq))
	if err != nil {
		closeErr := s.w.Close()
		return nil, errors.Join(fmt.Errorf("sqlitestore: opening %s: %w", abs, err), closeErr)
	}
	s.r.SetMaxOpenConns(readConns)
	s.r.SetMaxIdleConns(readConns)
	return s, nil
}

func cloneValues(v url.Values) url.Values {
	c := make(url.Values, len(v))
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// fileURI is the SQLite URI of the file at the absolute path abs, so that
// any character in the path (?, #, %) is escaped rather than read as URI
// syntax.
func fileURI(abs string, q url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // Windows: file:///C:/...
	}
	u := url.URL{Scheme: "file", Path: p, RawQuery: q.Encode()}
	// url.URL renders an empty host as "file:///path".
	return u.String()
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the Store's connections. It is safe to call more than once;
// the Store must not be used afterwards.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		var errs []error
		if m := s.stmts.Swap(nil); m != nil {
			for _, st := range *m {
				if err := st.Close(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		s.mu.Unlock()
		if err := s.r.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := s.w.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("sqlitestore: closing %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Migrate brings the database's rdq schema up to date by applying the
// embedded migrations it lacks, in version order, in one BEGIN IMMEDIATE
// transaction with the version table: several processes may call it at
// once, and each migration is applied exactly once. It fails if the file
// was migrated by a newer rdq than this one.
func (s *Store) Migrate(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	var applied []int
	err = s.write(ctx, func(tx *sql.Tx, now int64) error {
		applied = applied[:0]
		if _, err := tx.ExecContext(ctx, sqlCreateMigrations); err != nil {
			return fmt.Errorf("creating the migrations table: %w", err)
		}
		have := make(map[int]bool)
		maxHave := 0
		rows, err := tx.QueryContext(ctx, sqlAppliedMigrations)
		if err != nil {
			return fmt.Errorf("reading applied migrations: %w", err)
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return errors.Join(fmt.Errorf("reading applied migrations: %w", err), rows.Close())
			}
			have[v] = true
			maxHave = max(maxHave, v)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("reading applied migrations: %w", err)
		}
		if latest := migs[len(migs)-1].version; maxHave > latest {
			return fmt.Errorf("the database schema is at version %d, newer than this rdq knows (%d): upgrade rdq", maxHave, latest)
		}
		for _, m := range migs {
			if have[m.version] {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("applying migration %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx, sqlRecordMigration, m.version, now); err != nil {
				return fmt.Errorf("recording migration %s: %w", m.name, err)
			}
			applied = append(applied, m.version)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: migrating %s: %w", s.path, err)
	}
	if len(applied) > 0 {
		s.log.InfoContext(ctx, "rdq: sqlite schema migrated", slog.String("path", s.path), slog.Any("versions", applied))
	}
	return nil
}

type migration struct {
	version int
	name    string
	sql     string
}

// LatestVersion is the schema version this build of sqlitestore migrates
// to: the version of its newest embedded migration.
func LatestVersion() int {
	migs, err := loadMigrations()
	if err != nil {
		return 0
	}
	return migs[len(migs)-1].version
}

// loadMigrations reads migrations/NNNN_name.sql in version order.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationsFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: reading embedded migrations: %w", err)
	}
	var migs []migration
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("sqlitestore: embedded migration %q is not named NNNN_name.sql", name)
		}
		b, err := migrationsFS.ReadFile("migrations/" + name)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: reading embedded migration %s: %w", name, err)
		}
		migs = append(migs, migration{version: v, name: name, sql: string(b)})
	}
	if len(migs) == 0 {
		return nil, errors.New("sqlitestore: no embedded migrations")
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	for i := 1; i < len(migs); i++ {
		if migs[i].version == migs[i-1].version {
			return nil, fmt.Errorf("sqlitestore: two embedded migrations with version %d", migs[i].version)
		}
	}
	return migs, nil
}

// clock returns the time a write transaction runs at, in unix
// microseconds: the override if given, else the host clock. Called after
// the write lock is taken, so successive writers' times do not go back
// because one of them waited for the lock.
func clock(override *time.Time) int64 {
	if override != nil {
		return override.UnixMicro()
	}
	return time.Now().UnixMicro()
}

// write runs fn in one BEGIN IMMEDIATE transaction on the write connection
// and commits it. now is read once the write lock is held, from override if
// set. If the database stays busy (another process holds the lock) beyond
// what SQLite's busy handler absorbs, the whole transaction is retried
// until BusyTimeout has passed; fn must therefore build its results afresh
// on every call.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx, now int64) error) error {
	return s.writeAt(ctx, nil, fn)
}

func (s *Store) writeAt(ctx context.Context, override *time.Time, fn func(tx *sql.Tx, now int64) error) error {
	s.prepare(ctx)
	return notMigrated(s.retryBusy(ctx, func() error {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("beginning a write transaction: %w", err)
		}
		if err := fn(tx, clock(override)); err != nil {
			return errors.Join(err, rollback(tx))
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("committing: %w", err)
		}
		return nil
	}))
}

// notMigrated wraps err with store.ErrNotMigrated when SQLite reports one of
// rdq's tables missing. SQLite has no error code of its own for that, only
// SQLITE_ERROR with the message "no such table".
func notMigrated(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_ERROR && strings.Contains(se.Error(), "no such table") {
		return fmt.Errorf("%w: %w", store.ErrNotMigrated, err)
	}
	return err
}

func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("rolling back: %w", err)
	}
	return nil
}

// retryBusy calls fn again while it fails because the database is busy or
// locked, with a short growing pause, until BusyTimeout has passed since
// the first call or ctx is done.
func (s *Store) retryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(s.busyTimeout)
	pause := time.Millisecond
	for try := 1; ; try++ {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		s.log.DebugContext(ctx, "rdq: sqlite database busy, retrying", slog.String("path", s.path), slog.Int("try", try), slog.String("error", err.Error()))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause = min(pause*2, 50*time.Millisecond)
	}
}

// isDataError reports whether err is SQLite refusing a statement's values
// (a constraint, a value too big, a type mismatch) rather than failing to
// run it.
func isDataError(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
		return true
	}
	return false
}

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED (any extended
// code).
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// hotStatements are the fixed write statements prepared once per Store on
// its write connection (see prepare).
var hotStatements = []string{
	sqlFindByKey, sqlInsertTask, sqlInsertAttempt,
	sqlClaimCandidates, sqlClaimTasks,
	sqlHeartbeat, sqlFinish, sqlRelease, sqlSnooze, sqlRetryInPlace,
	sqlReclaimCandidates, sqlReclaimTask,
	sqlRedriveLookup, sqlRedriveTask,
	sqlPurgeSucceeded, sqlInsertAudit,
}

// prepare prepares the hot statements on the write connection, once. It
// runs before a write transaction begins, never inside one: the write pool
// has a single connection, which a transaction holds. Until the schema
// exists preparing fails; the statements then run unprepared and prepare
// is tried again by the next write.
func (s *Store) prepare(ctx context.Context) {
	if s.stmts.Load() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.stmts.Load() != nil {
		return
	}
	m := make(map[string]*sql.Stmt, len(hotStatements))
	for _, q := range hotStatements {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			// No schema yet, or ctx is done: the statements run
			// unprepared until a later write prepares them.
			for _, prepared := range m {
				if cerr := prepared.Close(); cerr != nil {
					s.log.WarnContext(ctx, "rdq: closing a prepared statement", slog.String("error", cerr.Error()))
				}
			}
			return
		}
		m[q] = st
	}
	s.stmts.Store(&m)
}

// exec runs a write statement in tx, prepared if it is a hot one.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.cached(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// query runs a statement in tx, prepared if it is a hot one.
func (s *Store) query(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := s.cached(query); st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

func (s *Store) cached(query string) *sql.Stmt {
	if m := s.stmts.Load(); m != nil {
		return (*m)[query]
	}
	return nil
}

// read runs fn in one read-only transaction: one consistent snapshot.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return notMigrated(s.retryBusy(ctx, func() error {
		tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return fmt.Errorf("beginning a read transaction: %w", err)
		}
		if err := fn(tx); err != nil {
			return errors.Join(err, rollback(tx))
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("ending a read transaction: %w", err)
		}
		return nil
	}))
}
