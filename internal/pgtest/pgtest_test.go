package pgtest_test

import (
	"context"
	"testing"

	"github.com/srjn45/rdq/internal/leakcheck"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func schemaExists(t *testing.T, schema string) bool {
	t.Helper()
	pool := pgtest.Pool(t)
	var n int
	err := pool.QueryRow(context.Background(),
		"SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestNewStoreCreatesAndDropsSchema(t *testing.T) {
	var schema string
	t.Run("inner", func(t *testing.T) {
		s, name := pgtest.NewStore(t)
		schema = name
		if s.Schema() != name {
			t.Fatalf("store schema %q, returned name %q", s.Schema(), name)
		}
		v, err := s.Version(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if v != pgstore.LatestVersion() || v == 0 {
			t.Fatalf("version %d after NewStore, want %d", v, pgstore.LatestVersion())
		}
		if !schemaExists(t, name) {
			t.Fatalf("schema %s does not exist during the test", name)
		}
	})
	if schemaExists(t, schema) {
		t.Fatalf("schema %s still exists after the test ended", schema)
	}
}

func TestOpenReachesTheSameSchema(t *testing.T) {
	_, schema := pgtest.NewStore(t)
	s, closeFn, err := pgtest.Open(context.Background(), schema)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closeFn(); err != nil {
			t.Error(err)
		}
	}()
	v, err := s.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v != pgstore.LatestVersion() {
		t.Fatalf("version %d through Open, want %d", v, pgstore.LatestVersion())
	}
}

func TestSchemaNamesAreValidAndDistinct(t *testing.T) {
	a, b := pgtest.SchemaName(), pgtest.SchemaName()
	if a == b {
		t.Fatalf("two schema names are equal: %s", a)
	}
	if err := pgstore.ValidateSchema(a); err != nil {
		t.Fatal(err)
	}
}

func TestURLHonoursEnvironment(t *testing.T) {
	t.Setenv(pgtest.EnvURL, "postgres://example.invalid/db")
	if got := pgtest.URL(); got != "postgres://example.invalid/db" {
		t.Fatalf("URL() = %q with %s set", got, pgtest.EnvURL)
	}
	t.Setenv(pgtest.EnvURL, "")
	if got := pgtest.URL(); got != pgtest.DefaultURL {
		t.Fatalf("URL() = %q with %s empty, want the default", got, pgtest.EnvURL)
	}
}
