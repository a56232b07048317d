package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/srjn45/rdq/internal/pgtest"
)

// Group commands list their subcommands when asked for help, in every way
// of asking, and exit 0.
func TestGroupHelp(t *testing.T) {
	h := &harness{t: t, env: map[string]string{}}
	subcommands := map[string][]string{
		"dlq":   {"dlq ls", "dlq count", "dlq show ID", "dlq groups", "dlq redrive", "dlq purge", "dlq retention"},
		"queue": {"queue ls", "queue pause QUEUE", "queue resume QUEUE"},
		"audit": {"audit ls"},
		"tasks": {"tasks ls", "tasks show ID", "tasks key QUEUE KEY", "tasks retry ID...", "tasks cancel ID..."},
	}
	for group, subs := range subcommands {
		for _, args := range [][]string{{group, "--help"}, {group, "-h"}, {group, "help"}, {"help", group}, {"--json", group, "--help"}} {
			r := h.run("", args...)
			if r.code != 0 {
				t.Errorf("rdq %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
				continue
			}
			for _, sub := range subs {
				if !strings.Contains(r.stdout, "  "+sub+" ") {
					t.Errorf("rdq %s does not list %q:\n%s", strings.Join(args, " "), sub, r.stdout)
				}
			}
		}
	}
	// A group without a command is still a usage error, pointing at help.
	r := h.run("", "dlq")
	if r.code != exitUsage || !strings.Contains(r.stderr, "rdq help dlq") {
		t.Errorf("rdq dlq: exit %d, stderr %q", r.code, r.stderr)
	}
}

// audit ls --help names every action the audit log holds.
func TestAuditHelpListsEveryAction(t *testing.T) {
	h := newHarness(t)
	payload := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(payload, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.ok("dlq", "redrive", fid(1), "--reason", "r")
	h.ok("dlq", "redrive", fid(2), "--payload-file", payload, "--reason", "r")
	h.ok("dlq", "purge", fid(3), "--reason", "r", "--yes")
	h.ok("dlq", "retention", "--older-than", "1h", "--yes")
	h.ok("queue", "pause", "emails", "--reason", "r")
	h.ok("queue", "resume", "emails", "--reason", "r")
	actions := map[string]bool{}
	for _, a := range h.audit() {
		actions[a.Action] = true
	}
	if len(actions) != 6 {
		t.Fatalf("the audit log holds the actions %v; want six", actions)
	}
	r := h.run("", "audit", "ls", "--help")
	if r.code != 0 {
		t.Fatalf("audit ls --help: exit %d", r.code)
	}
	usage, flags, _ := strings.Cut(r.stderr, "Flags:")
	_, flagLine, _ := strings.Cut(flags, "-action")
	flagLine, _, _ = strings.Cut(flagLine, "-actor")
	for a := range actions {
		word := regexp.MustCompile(`\b` + a + `\b`)
		if !word.MatchString(usage) || !word.MatchString(flagLine) {
			t.Errorf("audit ls --help does not name action %q in its text and its --action flag:\n%s", a, r.stderr)
		}
	}
}

// A PostgreSQL schema that was never migrated gives the remedy, not the SQL
// error, for every kind of command; so does a SQLite file without tables.
func TestNotMigrated(t *testing.T) {
	fresh := pgtest.SchemaName()
	empty := pgtest.SchemaName()
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+empty); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pgtest.DropSchema(pool, empty); err != nil {
			t.Error(err)
		}
	})
	emptyFile := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]map[string]string{
		"absent schema": {"RDQ_DATABASE_URL": pgtest.URL(), "RDQ_SCHEMA": fresh, "USER": "tester"},
		"empty schema":  {"RDQ_DATABASE_URL": pgtest.URL(), "RDQ_SCHEMA": empty, "USER": "tester"},
		"empty SQLite":  {"RDQ_DATABASE_URL": "sqlite:" + emptyFile, "USER": "tester"},
	} {
		h := &harness{t: t, env: env}
		for _, args := range [][]string{
			{"dlq", "ls"}, {"dlq", "count"}, {"dlq", "groups"}, {"dlq", "show", fid(1)}, {"stats"}, {"audit", "ls"},
			{"queue", "ls"}, {"queue", "pause", "q", "--reason", "r"}, {"tasks", "ls"}, {"tasks", "show", fid(1)}, {"dlq", "redrive", "--all", "--reason", "r", "--yes"},
			{"dlq", "redrive", fid(1), "--reason", "r"}, {"dlq", "purge", "--all", "--reason", "r", "--yes"},
		} {
			r := h.run("", args...)
			if r.code != exitError || !strings.Contains(r.stderr, "has no rdq tables: run `rdq migrate` or check --schema") ||
				strings.Contains(r.stderr, "SQLSTATE") || strings.Contains(r.stderr, "no such table") {
				t.Errorf("%s: rdq %s: exit %d, stderr %q", name, strings.Join(args, " "), r.code, r.stderr)
			}
		}
	}
}
