package pgstore

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the embedded migrations in version order. File
// names are NNNN_description.sql; versions are positive and distinct.
// Versions are reserved ahead of time by the changes that add them, so a
// build may skip one that another change has not landed yet.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading embedded migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("pgstore: migration %q: name must be NNNN_description.sql", name)
		}
		v, err := strconv.Atoi(prefix)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("pgstore: migration %q: name must start with a positive version number", name)
		}
		body, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, fmt.Errorf("pgstore: reading migration %q: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("pgstore: migrations %q and %q have the same version", ms[i-1].name, ms[i].name)
		}
	}
	return ms, nil
}

// LatestVersion is the schema version this build of pgstore migrates to.
func LatestVersion() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// lockKey is the advisory lock that serializes migrations of one schema.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("rdq/pgstore/migrate:" + schema))
	return int64(h.Sum64())
}

// Migrate creates the schema if needed and applies every embedded migration
// not applied yet, each recorded in the schema's schema_migrations table.
//
// It runs in one transaction holding a transaction-scoped advisory lock keyed
// on the schema, so any number of processes may call it at once: one applies
// the migrations, the others wait and then find nothing to do. Calling it
// again is a no-op. A failed migration rolls back entirely.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlMigrateLock, lockKey(s.schema)); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		// Creating needs the CREATE privilege on the database even when
		// the schema exists, so a schema an administrator made is not
		// created again.
		var exists bool
		if err := tx.QueryRow(ctx, sqlSchemaExists, s.schema).Scan(&exists); err != nil {
			return fmt.Errorf("looking for the schema: %w", err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, s.q.createSchema); err != nil {
				return fmt.Errorf("creating the schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, s.q.createMigrationsTable); err != nil {
			return fmt.Errorf("creating the schema_migrations table: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, s.q.currentVersion).Scan(&current); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if latest := ms[len(ms)-1].version; current > latest {
			return fmt.Errorf("schema is at version %d, newer than this build of rdq knows (%d): upgrade rdq", current, latest)
		}
		for _, m := range ms {
			if m.version <= current {
				continue
			}
			body := strings.ReplaceAll(m.sql, "{schema}", s.quotedSchema())
			if _, err := tx.Exec(ctx, body); err != nil {
				return fmt.Errorf("applying migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, s.q.recordVersion, m.version, m.name); err != nil {
				return fmt.Errorf("recording migration %s: %w", m.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: migrating schema %s: %w", s.schema, err)
	}
	return nil
}

// Version returns the schema's current migration version: 0 if Migrate has
// never run on it. Compare it with LatestVersion to see whether Migrate has
// work to do.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, s.q.currentVersion).Scan(&v)
	if err != nil {
		// 3F000 invalid_schema_name, 42P01 undefined_table: never migrated.
		if isCode(err, "3F000") || isCode(err, "42P01") {
			return 0, nil
		}
		return 0, fmt.Errorf("pgstore: reading the schema version of %s: %w", s.schema, err)
	}
	return v, nil
}

func (s *Store) quotedSchema() string { return pgx.Identifier{s.schema}.Sanitize() }
