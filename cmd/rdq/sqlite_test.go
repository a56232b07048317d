package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srjn45/rdq/sqlitestore"
)

// The same commands on a SQLite file print the same tables as on
// PostgreSQL: the golden files are shared.
func TestSQLiteEndToEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rdq.db")
	h := &harness{t: t, env: map[string]string{"RDQ_DATABASE_URL": "sqlite:" + path, "USER": "tester"}}

	r := h.run("", "dlq", "ls")
	if r.code != exitError || !strings.Contains(r.stderr, "run 'rdq migrate'") {
		t.Fatalf("missing file: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a read created the database file")
	}
	if out := h.ok("migrate"); !strings.Contains(out, "migrated SQLite at "+path) {
		t.Fatalf("migrate: %q", out)
	}

	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	seedFixtures(t, s, fixtures)

	golden(t, "ls.golden", h.ok("dlq", "ls"))
	page1 := h.ok("dlq", "ls", "--queue", "emails", "--limit", "2")
	golden(t, "ls_page1.golden", page1)
	token := strings.TrimSpace(page1[strings.LastIndex(page1, "--page ")+len("--page "):])
	golden(t, "ls_page2.golden", h.ok("dlq", "ls", "--queue", "emails", "--limit", "2", "--page", token))
	golden(t, "ls_filtered.golden", h.ok("dlq", "ls", "--error-type", "timeout", "--since", "2025-03-01T09:00:00Z", "--until", "2025-03-02", "--grep", "TIMED OUT"))
	golden(t, "show.golden", h.ok("dlq", "show", fid(4)))
	golden(t, "groups.golden", h.ok("dlq", "groups"))
	golden(t, "count.golden", h.ok("dlq", "count", "--queue", "billing"))

	r = h.run("", "dlq", "redrive", "--queue", "emails", "--reason", "relay fixed", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "redrove 3 of 3") || !strings.Contains(r.stderr, "rdq: database: SQLite at "+path) {
		t.Fatalf("redrive: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	h.ok("dlq", "purge", fid(5), "--reason", "junk", "--yes")
	if out := h.ok("dlq", "count"); strings.TrimSpace(out) != "1" {
		t.Fatalf("count after redrive and purge: %q", out)
	}
	audit := h.ok("audit", "ls")
	if !strings.Contains(audit, "redrive") || !strings.Contains(audit, "purge") || !strings.Contains(audit, "relay fixed") {
		t.Fatalf("audit:\n%s", audit)
	}
	if r := h.run("", "--schema", "x", "dlq", "ls"); r.code != exitUsage || !strings.Contains(r.stderr, "PostgreSQL only") {
		t.Fatalf("--schema on SQLite: %d %q", r.code, r.stderr)
	}
}

// With no URL at all, rdq uses the per-user default SQLite file, and only
// migrate creates it.
func TestDefaultDatabase(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	path := filepath.Join(os.Getenv("XDG_DATA_HOME"), "rdq", "rdq.db")
	h := &harness{t: t, env: map[string]string{"USER": "tester"}}
	r := h.run("", "dlq", "ls")
	if r.code != exitError || !strings.Contains(r.stderr, "no rdq database at "+path) {
		t.Fatalf("missing default file: exit %d, %q", r.code, r.stderr)
	}
	r = h.run("", "migrate")
	if r.code != 0 || !strings.Contains(r.stderr, "rdq: database: SQLite at "+path+" (set RDQ_DATABASE_URL to use PostgreSQL)") {
		t.Fatalf("migrate: exit %d, %q", r.code, r.stderr)
	}
	// Finding nothing, it names the store it looked in.
	if out := h.ok("dlq", "ls"); !strings.Contains(out, "no dead tasks in SQLite at "+path+" (set RDQ_DATABASE_URL to use PostgreSQL)") {
		t.Fatalf("ls on the new default file: %q, want the file named", out)
	}
}

func TestDatabaseURLsNeverShowPasswords(t *testing.T) {
	h := &harness{t: t, env: map[string]string{"USER": "tester"}}
	for _, u := range []string{
		"host=db password=hunter2",
		"postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=1",
		"postgres://u@127.0.0.1:1/db?password=hunter2&connect_timeout=1",
		"postgres://u@127.0.0.1:1/db?password=hunter2&schema=Bad-Schema",
		"postgres://u@127.0.0.1:1/db?sslpassword=hunter2&connect_timeout=1",
		"postgres://u@127.0.0.1:1/db?sslpassword=hunter2&sslmode=bogus",
		"postgres://u@127.0.0.1:1/db?api_token=hunter2&connect_timeout=bogus",
	} {
		h.env["RDQ_DATABASE_URL"] = u
		for _, args := range [][]string{{"dlq", "purge", "--all", "--reason", "r", "--yes"}, {"migrate"}} {
			r := h.run("", args...)
			if r.code == 0 || strings.Contains(r.stderr+r.stdout, "hunter2") {
				t.Errorf("%s: rdq %s: exit %d, output shows the password: %q", u, args[0], r.code, r.stderr)
			}
		}
	}
}
