package storeurl_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		want storeurl.Target
	}{
		{"postgres://u:pw@db.example:5433/app?sslmode=disable&schema=jobs",
			storeurl.Target{Kind: storeurl.Postgres, ConnString: "postgres://u:pw@db.example:5433/app?sslmode=disable", Schema: "jobs"}},
		{"postgresql://db.example/app",
			storeurl.Target{Kind: storeurl.Postgres, ConnString: "postgresql://db.example/app", Schema: "rdq"}},
		{"  POSTGRES://db.example/app  ",
			storeurl.Target{Kind: storeurl.Postgres, ConnString: "postgres://db.example/app", Schema: "rdq"}},
		{"sqlite:/var/lib/rdq/tasks.db", storeurl.Target{Kind: storeurl.SQLite, Path: "/var/lib/rdq/tasks.db"}},
		{"sqlite:///var/lib/rdq/tasks.db", storeurl.Target{Kind: storeurl.SQLite, Path: "/var/lib/rdq/tasks.db"}},
		{"sqlite:tasks.db", storeurl.Target{Kind: storeurl.SQLite, Path: filepath.Join(wd, "tasks.db")}},
		{"file:/srv/a b.db", storeurl.Target{Kind: storeurl.SQLite, Path: "/srv/a b.db"}},
		{"./data/rdq.db", storeurl.Target{Kind: storeurl.SQLite, Path: filepath.Join(wd, "data", "rdq.db")}},
		{"/abs/x.db", storeurl.Target{Kind: storeurl.SQLite, Path: "/abs/x.db"}},
		{"~/rdq.db", storeurl.Target{Kind: storeurl.SQLite, Path: filepath.Join(home, "rdq.db")}},
	} {
		got, err := storeurl.Parse(tc.url)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.url, err)
			continue
		}
		if got.ConnString != "" {
			// Query parameter order is the encoder's; compare parsed.
			gu, _ := url.Parse(got.ConnString)
			wu, _ := url.Parse(tc.want.ConnString)
			if gu.Query().Encode() == wu.Query().Encode() {
				gu.RawQuery, wu.RawQuery = "", ""
				got.ConnString, tc.want.ConnString = gu.String(), wu.String()
			}
		}
		if got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.url, got, tc.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"mysql://db/app",
		"postgres://db/app?schema=Bad-Name",
		"postgres://db/app?schema=pg_catalog",
		"sqlite:",
		"sqlite:rdq.db?mode=ro",
		":memory:",
		"sqlite::memory:",
	} {
		_, err := storeurl.Parse(u)
		if !errors.Is(err, storeurl.ErrBadURL) || !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("Parse(%q) error = %v, want ErrBadURL (and rdq.ErrInvalid)", u, err)
		}
	}
}

// The tests below change the environment, so they do not run in parallel.

func TestDefaultPath(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_DATA_HOME", xdg)
	if got, want := storeurl.DefaultPath(), filepath.Join(xdg, "rdq", "rdq.db"); got != want {
		t.Errorf("DefaultPath with XDG_DATA_HOME = %s, want %s", got, want)
	}
	t.Setenv("XDG_DATA_HOME", "relative/ignored")
	home := t.TempDir()
	t.Setenv("HOME", home)
	if got, want := storeurl.DefaultPath(), filepath.Join(home, ".local", "share", "rdq", "rdq.db"); got != want {
		t.Errorf("DefaultPath with HOME = %s, want %s", got, want)
	}
	tg, err := storeurl.Parse("")
	if err != nil || !tg.Default || tg.Kind != storeurl.SQLite || tg.Path != storeurl.DefaultPath() {
		t.Errorf("Parse(\"\") = %+v, %v", tg, err)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(storeurl.EnvVar, " sqlite:/x.db \n")
	if got := storeurl.FromEnv(); got != "sqlite:/x.db" {
		t.Errorf("FromEnv = %q", got)
	}
}

func TestDescribe(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_DATA_HOME", xdg)
	for _, tc := range []struct{ url, want string }{
		{"", "SQLite at " + filepath.Join(xdg, "rdq", "rdq.db") + " (set RDQ_DATABASE_URL to use PostgreSQL)"},
		{"sqlite:/srv/rdq.db", "SQLite at /srv/rdq.db"},
		{"postgres://ann:secret@db:5432/app?schema=jobs", "PostgreSQL at postgres://ann:xxxxx@db:5432/app (schema jobs)"},
	} {
		if got := storeurl.Describe(tc.url); got != tc.want {
			t.Errorf("Describe(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
	if got := storeurl.Describe("mysql://ann:secret@db/app"); strings.Contains(got, "secret") || !strings.Contains(got, "unknown scheme") {
		t.Errorf("Describe of a bad URL = %q", got)
	}
}

// roundTrip enqueues a task, claims and finishes it, and reads it back.
func roundTrip(t *testing.T, s storeurl.Store) {
	t.Helper()
	ctx := t.Context()
	id := rdq.NewID()
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: id, Queue: "q", Handler: "h", Payload: []byte("p")}}}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	errs, err := s.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: id, Token: got[0].LeaseToken}, Status: rdq.StatusSucceeded,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"},
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Finish: %v %v", err, errs)
	}
	stats, err := s.Stats(ctx, store.StatsParams{})
	if err != nil || len(stats) != 1 || stats[0].Succeeded != 1 {
		t.Fatalf("Stats = %+v, %v", stats, err)
	}
}

func TestOpenDefaultSQLite(t *testing.T) {
	xdg := filepath.Join(t.TempDir(), "not", "yet")
	t.Setenv("XDG_DATA_HOME", xdg)
	s, err := storeurl.Open(t.Context(), "", storeurl.Config{})
	if err != nil {
		t.Fatalf("Open default: %v", err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := os.Stat(filepath.Join(xdg, "rdq", "rdq.db")); err != nil {
		t.Errorf("default database file: %v", err)
	}
	if _, ok := store.NotifierOf(s); ok {
		t.Error("the SQLite store claims to implement store.Notifier")
	}
	roundTrip(t, s)
}

func TestOpenSQLitePath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := storeurl.Open(t.Context(), "sqlite:"+path, storeurl.Config{})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A plain path to the same file sees the same data.
	s, err = storeurl.Open(t.Context(), path, storeurl.Config{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := s.Stats(t.Context(), store.StatsParams{})
	if err != nil || len(n) != 1 {
		t.Errorf("Stats after reopen = %+v, %v", n, err)
	}
	if _, err := storeurl.Open(t.Context(), filepath.Join(t.TempDir(), "missing", "x.db"), storeurl.Config{}); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	schema := pgtest.SchemaName()
	pool := pgtest.Pool(t)
	t.Cleanup(func() {
		if err := pgtest.DropSchema(pool, schema); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(storeurl.SchemaParam, schema)
	u.RawQuery = q.Encode()

	s, err := storeurl.Open(t.Context(), u.String(), storeurl.Config{})
	if err != nil {
		t.Fatalf("Open(%s): %v", storeurl.Describe(u.String()), err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, ok := store.NotifierOf(s); !ok {
		t.Error("the PostgreSQL store does not implement store.Notifier")
	}
	roundTrip(t, s)
	var tables int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables == 0 {
		t.Errorf("no tables in schema %s: the schema parameter was not used", schema)
	}
}

func TestOpenPostgresUnreachable(t *testing.T) {
	t.Parallel()
	_, err := storeurl.Open(t.Context(), "postgres://nobody:pw@127.0.0.1:1/none?connect_timeout=2", storeurl.Config{})
	if err == nil {
		t.Fatal("Open of an unreachable PostgreSQL succeeded")
	}
	if strings.Contains(err.Error(), "pw@") {
		t.Errorf("error shows the password: %v", err)
	}
}

func TestPasswordsNeverShown(t *testing.T) {
	for _, raw := range []string{
		"postgres://app:s3cret@db.example:5432/rdq",
		"postgres://app@db.example:5432/rdq?password=s3cret",
		"host=db.example user=app password=s3cret dbname=rdq",
	} {
		if d := storeurl.Describe(raw); strings.Contains(d, "s3cret") {
			t.Errorf("Describe(%q) = %q shows the password", raw, d)
		}
		if _, err := storeurl.Parse(raw); err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q) error %q shows the password", raw, err)
		}
	}
	if _, err := storeurl.Parse("host=db.example password=s3cret"); !errors.Is(err, storeurl.ErrBadURL) {
		t.Errorf("Parse of a keyword/value connection string = %v, want ErrBadURL", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://app:s3cret@db:5432/rdq?sslmode=require&schema=jobs",
			"postgres://app:xxxxx@db:5432/rdq?schema=jobs&sslmode=require"},
		{"postgres://app@db/rdq?sslpassword=s3cret&sslkey=/etc/k.pem&application_name=billing",
			"postgres://app@db/rdq?application_name=billing&sslkey=%2Fetc%2Fk.pem&sslpassword=xxxxx"},
		{"postgres://db/rdq?password=s3cret&Password=s3cret&api_token=s3cret&pass%77ord=s3cret",
			"postgres://db/rdq?Password=xxxxx&api_token=xxxxx&password=xxxxx&password=xxxxx"},
		{"postgres://db/rdq?connect_timeout=5&pool_max_conns=20#s3cret",
			"postgres://db/rdq?connect_timeout=5&pool_max_conns=20"},
		{"postgres://db/rdq?token=a&token=b", "postgres://db/rdq?token=xxxxx&token=xxxxx"},
		{"postgres://db/rdq?sslmode=require&bad=%zzs3cret", "postgres://db/rdq?sslmode=require&unparsable_query=xxxxx"},
		{"postgres://u:pw@db:notaport/rdq", "(unparsable URL)"},
		{"sqlite:/srv/rdq.db", "sqlite:/srv/rdq.db"},
	} {
		if got := storeurl.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSecretsNeverShown provokes every message this package writes about a
// URL (descriptions, parse errors, the driver's rejections, failed
// connections) with secrets in the password, sslpassword and unknown query
// parameters, and checks that none shows them.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Zq9"
	urls := []string{
		"postgres://app:" + secret + "@127.0.0.1:1/rdq?connect_timeout=1",
		"postgres://app@127.0.0.1:1/rdq?sslpassword=" + secret + "&connect_timeout=1",
		"postgres://app@127.0.0.1:1/rdq?api_token=" + secret + "&connect_timeout=1",
		"postgres://app@127.0.0.1:1/rdq?Password=" + secret + "&connect_timeout=1",
		// The driver rejects these, quoting the connection string.
		"postgres://app@127.0.0.1:1/rdq?sslpassword=" + secret + "&sslmode=bogus",
		"postgres://app@127.0.0.1:1/rdq?api_token=" + secret + "&connect_timeout=bogus",
		"postgres://app@127.0.0.1:1/rdq?api_token=" + secret + "&pool_max_conns=bogus",
		// Parse rejects these.
		"postgres://app@127.0.0.1:1/rdq?sslpassword=" + secret + "&schema=Bad-Name",
		"mysql://app:" + secret + "@db/rdq?sslpassword=" + secret,
		"sqlite:rdq.db?key=" + secret,
		"host=db password=" + secret,
	}
	for _, raw := range urls {
		texts := map[string]string{"Describe": storeurl.Describe(raw)}
		if _, err := storeurl.Parse(raw); err != nil {
			texts["Parse"] = err.Error()
		}
		if _, err := storeurl.Open(t.Context(), raw, storeurl.Config{}); err != nil {
			texts["Open"] = err.Error()
		} else {
			t.Errorf("Open(%s) succeeded", storeurl.Redact(raw))
		}
		for what, text := range texts {
			if strings.Contains(text, "s3cret") {
				t.Errorf("%s(%s) shows the secret: %s", what, storeurl.Redact(raw), text)
			}
		}
	}
	// The driver's rejection is still explained.
	_, err := storeurl.Open(t.Context(), "postgres://app@127.0.0.1:1/rdq?sslpassword="+secret+"&sslmode=bogus", storeurl.Config{})
	if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "sslmode") {
		t.Errorf("bad sslmode: %v, want ErrBadURL naming sslmode", err)
	}
}
