package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func TestGoldenTables(t *testing.T) {
	h := newHarness(t)
	golden(t, "ls.golden", h.ok("dlq", "ls"))
	page1 := h.ok("dlq", "ls", "--queue", "emails", "--limit", "2")
	golden(t, "ls_page1.golden", page1)
	token := page1[strings.LastIndex(page1, "--page ")+len("--page "):]
	golden(t, "ls_page2.golden", h.ok("dlq", "ls", "--queue", "emails", "--limit", "2", "--page", strings.TrimSpace(token)))
	golden(t, "ls_filtered.golden", h.ok("dlq", "ls", "--error-type", "timeout", "--since", "2025-03-01T09:00:00Z", "--until", "2025-03-02", "--grep", "TIMED OUT"))
	golden(t, "ls_empty.golden", strings.ReplaceAll(h.ok("dlq", "ls", "--handler", "nobody"), h.desc(), "DATABASE"))
	golden(t, "show.golden", h.ok("dlq", "show", fid(4)))
	golden(t, "groups.golden", h.ok("dlq", "groups"))
	golden(t, "groups_queue.golden", h.ok("dlq", "groups", "--queue", "emails"))
	golden(t, "stats.golden", h.ok("stats"))
	golden(t, "count.golden", h.ok("dlq", "count", "--queue", "billing"))

	// Mutations, then the audit log with its volatile times normalized.
	h.ok("dlq", "redrive", fid(1), "--reason", "SMTP relay fixed (INC-7)", "--actor", "alice")
	payload := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(payload, []byte(`{"invoice":"inv_2","amount":5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.ok("dlq", "redrive", fid(5), "--payload-file", payload, "--reason", "sign fixed", "--actor", "bob")
	h.ok("dlq", "purge", "--handler", "send_receipt", "--reason", "obsolete receipts", "--yes")
	golden(t, "audit.golden", timestampRE.ReplaceAllString(h.ok("audit", "ls"), "YYYY-MM-DD hh:mm:ssZ"))
	golden(t, "help.golden", h.ok("help"))
	golden(t, "help_redrive.golden", h.ok("help", "dlq", "redrive"))
}

func TestJSONOutput(t *testing.T) {
	h := newHarness(t)
	var ls struct {
		Tasks []struct {
			ID            string    `json:"id"`
			Queue         string    `json:"queue"`
			Handler       string    `json:"handler"`
			Status        string    `json:"status"`
			Life          int       `json:"life"`
			Attempts      int       `json:"attempts"`
			PayloadBytes  int       `json:"payload_bytes"`
			PayloadSHA256 string    `json:"payload_sha256"`
			FinishedAt    time.Time `json:"finished_at"`
			LastError     struct {
				Type, Message, Fingerprint string
			} `json:"last_error"`
		} `json:"tasks"`
		NextPageToken string `json:"next_page_token"`
	}
	mustJSON(t, h.ok("dlq", "ls", "--json"), &ls)
	if len(ls.Tasks) != len(fixtures) || ls.NextPageToken != "" {
		t.Fatalf("ls: %d tasks, token %q", len(ls.Tasks), ls.NextPageToken)
	}
	// Newest dead first: fixture 5, then 4 and 3 (4 died later), 2, 1.
	var order []string
	for _, task := range ls.Tasks {
		order = append(order, task.ID)
	}
	if want := []string{fid(5), fid(4), fid(3), fid(2), fid(1)}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	first := ls.Tasks[0]
	sum := sha256.Sum256([]byte(fixtures[4].payload))
	if first.Status != "DEAD" || first.Queue != "billing" || first.LastError.Type != "validation" ||
		first.LastError.Fingerprint != rdq.Fingerprint("validation", "amount -5 is negative") ||
		first.PayloadBytes != len(fixtures[4].payload) || first.PayloadSHA256 != hex.EncodeToString(sum[:]) ||
		!first.FinishedAt.Equal(base.Add(10*time.Minute+1500*time.Millisecond)) {
		t.Fatalf("ls first task %+v", first)
	}
	// The JSON page token pages like the table's.
	mustJSON(t, h.ok("dlq", "ls", "--json", "--limit", "3"), &ls)
	token := ls.NextPageToken
	mustJSON(t, h.ok("dlq", "ls", "--json", "--limit", "3", "--page", token), &ls)
	if len(ls.Tasks) != 2 || ls.Tasks[0].ID != fid(2) || ls.NextPageToken != "" {
		t.Fatalf("page 2: %+v", ls)
	}

	var show struct {
		Task struct {
			ID      string            `json:"id"`
			Payload []byte            `json:"payload"`
			Headers map[string]string `json:"headers"`
		} `json:"task"`
		Attempts []struct {
			Number     int     `json:"number"`
			Life       int     `json:"life"`
			Outcome    string  `json:"outcome"`
			ErrorType  string  `json:"error_type"`
			Stack      string  `json:"stack"`
			WorkerID   string  `json:"worker_id"`
			DurationMS float64 `json:"duration_ms"`
		} `json:"attempts"`
	}
	mustJSON(t, h.ok("dlq", "show", fid(4), "--json"), &show)
	if string(show.Task.Payload) != fixtures[3].payload || show.Task.Headers["traceparent"] == "" || len(show.Attempts) != 2 {
		t.Fatalf("show %+v", show)
	}
	if a := show.Attempts[1]; a.Number != 2 || a.Outcome != "PERMANENT_FAILURE" || a.ErrorType != "panic" || a.Stack != panicStack || a.WorkerID != "worker-a" || a.DurationMS != 1500 {
		t.Fatalf("attempt 2 %+v", a)
	}

	var groups struct {
		Groups []struct {
			Fingerprint string    `json:"fingerprint"`
			Count       int64     `json:"count"`
			ExampleID   string    `json:"example_id"`
			FirstSeen   time.Time `json:"first_seen"`
		} `json:"groups"`
	}
	mustJSON(t, h.ok("dlq", "groups", "--json", "--queue", "emails"), &groups)
	if len(groups.Groups) != 2 || groups.Groups[0].Count != 2 || groups.Groups[0].ExampleID != fid(2) {
		t.Fatalf("groups %+v", groups)
	}

	var stats struct {
		Queues []struct {
			Queue string `json:"queue"`
			Dead  int64  `json:"dead"`
		} `json:"queues"`
	}
	mustJSON(t, h.ok("stats", "--json"), &stats)
	if len(stats.Queues) != 2 || stats.Queues[0].Queue != "billing" || stats.Queues[0].Dead != 2 || stats.Queues[1].Dead != 3 {
		t.Fatalf("stats %+v", stats)
	}

	var count struct{ Count int64 }
	mustJSON(t, h.ok("--json", "dlq", "count", "--handler", "send_welcome"), &count)
	if count.Count != 2 {
		t.Fatalf("count %+v", count)
	}

	var rr struct {
		DryRun   bool  `json:"dry_run"`
		Matched  int64 `json:"matched"`
		Redriven int64 `json:"redriven"`
		AtLimit  int64 `json:"at_limit"`
		Failed   []struct{ ID, Error string }
	}
	mustJSON(t, h.ok("dlq", "redrive", "--queue", "emails", "--dry-run", "--json"), &rr)
	if !rr.DryRun || rr.Matched != 3 || rr.Redriven != 3 || h.deadCount() != 5 {
		t.Fatalf("dry run %+v", rr)
	}
	mustJSON(t, h.ok("dlq", "redrive", "--queue", "emails", "--max", "2", "--yes", "--reason", "r", "--json"), &rr)
	if rr.DryRun || rr.Matched != 3 || rr.Redriven != 2 || h.deadCount() != 3 {
		t.Fatalf("redrive %+v", rr)
	}

	var audit struct {
		Entries []struct {
			ID     int64           `json:"id"`
			Actor  string          `json:"actor"`
			Action string          `json:"action"`
			Filter json.RawMessage `json:"filter"`
			Count  int64           `json:"count"`
			Reason string          `json:"reason"`
		} `json:"entries"`
	}
	mustJSON(t, h.ok("audit", "ls", "--json", "--actor", "tester"), &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Action != "redrive" || audit.Entries[0].Count != 2 || !strings.Contains(string(audit.Entries[0].Filter), "emails") {
		t.Fatalf("audit %+v", audit)
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
}

func TestBulkRedriveWithYesChangesStoreAndAudits(t *testing.T) {
	h := newHarness(t)
	r := h.run("", "dlq", "redrive", "--fingerprint", fixtures[0].fails[0].Fingerprint, "--spread", "10m", "--reason", "relay fixed", "--yes", "--chunk-size", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "rdq: database: PostgreSQL at postgres://") || !strings.Contains(r.stderr, h.schema) {
		t.Fatalf("stderr does not say which database: %q", r.stderr)
	}
	if !strings.Contains(r.stdout, "redrove 2 of 2 dead tasks") {
		t.Fatalf("stdout %q", r.stdout)
	}
	now := time.Now()
	for _, i := range []int{1, 2} {
		task := h.task(fid(i))
		if task.Status != rdq.StatusPending || task.Life != 1 {
			t.Fatalf("task %d: %+v", i, task)
		}
		if task.NextAttemptAt.After(now.Add(10*time.Minute + 2*time.Second)) {
			t.Fatalf("task %d due %s: beyond the spread window", i, task.NextAttemptAt)
		}
	}
	entries := h.audit()
	if len(entries) != 2 { // chunk size 1: one entry per chunk
		t.Fatalf("audit %+v", entries)
	}
	for _, e := range entries {
		if e.Action != "redrive" || e.Actor != "tester" || e.Reason != "relay fixed" || e.Count != 1 {
			t.Fatalf("entry %+v", e)
		}
	}
}

func TestBulkMutationsRefuseWithoutYesOnNonTerminal(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"dlq", "redrive", "--queue", "emails", "--reason", "r"},
		{"dlq", "purge", "--queue", "emails", "--reason", "r"},
		{"dlq", "purge", fid(1), "--reason", "r"},
		{"dlq", "retention", "--older-than", "1h"},
	} {
		r := h.run("y\n", args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "pass --yes") || !strings.Contains(r.stderr, "not a terminal") {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if h.deadCount() != 5 || len(h.audit()) != 0 {
		t.Fatal("a refused mutation changed the store")
	}
}

func TestConfirmationPromptOnTerminal(t *testing.T) {
	h := newHarness(t)
	orig := isTerminal
	t.Cleanup(func() { isTerminal = orig })
	isTerminal = func(v any) bool { return true }

	r := h.run("n\n", "dlq", "purge", "--queue", "emails", "--reason", "r")
	if r.code != exitError || !strings.Contains(r.stderr, "Permanently delete 3 dead tasks matching queue=emails? [y/N]") || !strings.Contains(r.stderr, "aborted") {
		t.Fatalf("declined: exit %d, stderr %q", r.code, r.stderr)
	}
	if h.deadCount() != 5 {
		t.Fatal("a declined purge deleted tasks")
	}
	r = h.run("", "dlq", "purge", "--queue", "emails", "--reason", "r")
	if r.code != exitUsage || !strings.Contains(r.stderr, "no answer") {
		t.Fatalf("no answer: exit %d, stderr %q", r.code, r.stderr)
	}
	r = h.run("yes\n", "dlq", "purge", "--queue", "emails", "--reason", "r")
	if r.code != 0 || h.deadCount() != 2 {
		t.Fatalf("confirmed: exit %d, stderr %q", r.code, r.stderr)
	}
	// Progress is drawn on a terminal.
	if !strings.Contains(r.stderr, "purged 3 / 3") {
		t.Fatalf("no progress on stderr: %q", r.stderr)
	}
	if !strings.Contains(r.stdout, "deleted 3 of 3 dead tasks matching queue=emails") {
		t.Fatalf("stdout %q", r.stdout)
	}
}

func TestRedriveByIDWithPayloadEdit(t *testing.T) {
	h := newHarness(t)
	edited := []byte(`{"invoice":"inv_2","amount":5}`)
	r := h.run(string(edited), "dlq", "redrive", fid(5), "--payload-file", "-", "--reason", "sign fixed", "--actor", "carol")
	if r.code != 0 || !strings.Contains(r.stdout, "redrove 1 of 1 dead task") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	task := h.task(fid(5))
	if string(task.Payload) != string(edited) || task.Status != rdq.StatusPending {
		t.Fatalf("task %+v", task)
	}
	e := h.audit()[0]
	oldSum, newSum := sha256.Sum256([]byte(fixtures[4].payload)), sha256.Sum256(edited)
	if e.Action != "edit_payload" || e.Actor != "carol" || e.Details["old_sha256"] != hex.EncodeToString(oldSum[:]) || e.Details["new_sha256"] != hex.EncodeToString(newSum[:]) {
		t.Fatalf("audit %+v", e)
	}
	// The payload round-trips through show --payload.
	if got := h.ok("dlq", "show", fid(5), "--payload"); got != string(edited) {
		t.Fatalf("show --payload = %q", got)
	}
}

func TestPurgeAndRetention(t *testing.T) {
	h := newHarness(t)
	r := h.run("", "dlq", "purge", "--queue", "billing", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "dry run: purge would delete 2 of 2") || h.deadCount() != 5 {
		t.Fatalf("dry run: %d %q", r.code, r.stdout)
	}
	h.ok("dlq", "purge", fid(1), fid(2), "--reason", "spam", "--yes")
	if h.deadCount() != 3 {
		t.Fatalf("%d dead after purge by id", h.deadCount())
	}
	// Fixtures went dead in 2025: a one-day retention takes them all.
	out := h.ok("dlq", "retention", "--older-than", "1d", "--queue", "billing", "--yes")
	if !strings.Contains(out, "deleted 2 of 2") || h.deadCount() != 1 {
		t.Fatalf("retention: %q, %d left", out, h.deadCount())
	}
	entries := h.audit()
	if len(entries) != 2 || entries[0].Action != "retention" || entries[0].Count != 2 || entries[1].Action != "purge" || len(entries[1].IDs) != 0 && entries[1].Count != 2 {
		t.Fatalf("audit %+v", entries)
	}
	if entries[1].Reason != "spam" || entries[0].Reason != "dead for longer than 24h0m0s" {
		t.Fatalf("reasons %q %q", entries[1].Reason, entries[0].Reason)
	}
}

func TestExitCodes(t *testing.T) {
	h := newHarness(t)
	// Fixture 3 is pending again: not dead.
	if errs, err := h.s.Redrive(t.Context(), store.RedriveParams{IDs: []rdq.ID{rdq.MustParseID(fid(3))}, Actor: "setup", Reason: "setup"}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	setupEntries := len(h.audit())
	payload := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(payload, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", nil, exitUsage, "no command"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown dlq command", []string{"dlq", "zap"}, exitUsage, "unknown dlq command"},
		{"bad flag", []string{"dlq", "ls", "--colour"}, exitUsage, "flag provided but not defined: -colour"},
		{"bad limit", []string{"dlq", "ls", "--limit", "0"}, exitUsage, "--limit 0"},
		{"bad queue", []string{"dlq", "ls", "--queue", "bad queue"}, exitUsage, "queue name"},
		{"bad since", []string{"dlq", "ls", "--since", "yesterday"}, exitUsage, "--since"},
		{"reversed range", []string{"dlq", "ls", "--since", "1h", "--until", "2h"}, exitUsage, "range is empty"},
		{"bad token", []string{"dlq", "ls", "--page", "nonsense"}, exitUsage, "page token"},
		{"bad id", []string{"dlq", "show", "42"}, exitUsage, "not a task id"},
		{"show two ids", []string{"dlq", "show", fid(1), fid(2)}, exitUsage, "one task id"},
		{"not found", []string{"dlq", "show", "01954a1e-c000-7000-8000-0000000000ff"}, exitNotFound, "not found"},
		{"redrive not found", []string{"dlq", "redrive", "01954a1e-c000-7000-8000-0000000000ff", "--reason", "r"}, exitNotFound, "not found"},
		{"redrive not dead", []string{"dlq", "redrive", fid(3), "--reason", "r"}, exitConflict, "is PENDING, not dead: only a dead task can be redriven"},
		{"edit not dead", []string{"dlq", "redrive", fid(3), "--payload-file", payload, "--reason", "r"}, exitConflict, "is PENDING, not dead: only a dead task can be redriven"},
		{"edit not found", []string{"dlq", "redrive", "01954a1e-c000-7000-8000-0000000000ff", "--payload-file", payload, "--reason", "r"}, exitNotFound, "not found"},
		{"redrive no selection", []string{"dlq", "redrive", "--reason", "r"}, exitUsage, "select what to redrive"},
		{"redrive ids and filter", []string{"dlq", "redrive", fid(1), "--queue", "emails", "--reason", "r"}, exitUsage, "not both"},
		{"redrive no reason", []string{"dlq", "redrive", fid(1)}, exitUsage, "pass --reason"},
		{"payload without id", []string{"dlq", "redrive", "--queue", "emails", "--payload-file", "x", "--reason", "r"}, exitUsage, "name it by id"},
		{"payload file missing", []string{"dlq", "redrive", fid(1), "--payload-file", "/nonexistent/p.json", "--reason", "r"}, exitUsage, "--payload-file"},
		{"bad spread", []string{"dlq", "redrive", "--queue", "emails", "--spread", "soon", "--reason", "r"}, exitUsage, "invalid value"},
		{"purge all and filter", []string{"dlq", "purge", "--all", "--queue", "emails", "--reason", "r"}, exitUsage, "--all"},
		{"retention without age", []string{"dlq", "retention"}, exitUsage, "--older-than"},
		{"audit bad action", []string{"audit", "ls", "--action", "DROP"}, exitUsage, "audit action"},
		{"audit unknown", []string{"audit", "rm"}, exitUsage, "unknown audit command"},
		{"bad schema", []string{"--schema", "Bad-Schema", "dlq", "ls"}, exitUsage, "schema"},
		{"help topic", []string{"help", "nonsense"}, exitUsage, "no help"},
	}
	for _, c := range cases {
		r := h.run("", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%s: rdq %v: exit %d (want %d), stderr %q (want %q)", c.name, c.args, r.code, c.code, r.stderr, c.msg)
		}
	}
	if r := h.run("", "dlq", "ls", "-h"); r.code != exitOK || !strings.Contains(r.stderr, "Usage: rdq dlq ls") {
		t.Errorf("-h: exit %d, stderr %q", r.code, r.stderr)
	}
	if h.deadCount() != 4 || len(h.audit()) != setupEntries {
		t.Fatal("a failed command changed the store")
	}

	// An unreachable database is a runtime error that says what to set.
	h.env["RDQ_DATABASE_URL"] = "postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2"
	r := h.run("", "dlq", "ls")
	if r.code != exitError || !strings.Contains(r.stderr, "RDQ_DATABASE_URL") || strings.Contains(r.stderr, "secret") {
		t.Fatalf("unreachable: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestActorDefaultsToUser(t *testing.T) {
	h := newHarness(t)
	h.env["USER"] = ""
	r := h.run("", "dlq", "redrive", fid(1), "--reason", "r")
	if r.code != exitUsage || !strings.Contains(r.stderr, "pass --actor") {
		t.Fatalf("no actor: exit %d, %q", r.code, r.stderr)
	}
	h.env["USER"] = "ops-oncall"
	h.ok("dlq", "redrive", fid(1), "--reason", "r")
	if e := h.audit(); len(e) != 1 || e[0].Actor != "ops-oncall" {
		t.Fatalf("audit %+v", e)
	}
}

func TestGlobalFlagsAnywhere(t *testing.T) {
	h := newHarness(t)
	url := h.env["RDQ_DATABASE_URL"]
	h.env = map[string]string{"USER": "tester"}
	a := h.ok("--database-url", url, "--schema", h.schema, "--json", "dlq", "count")
	b := h.ok("dlq", "count", "--json", "--database-url", url, "--schema", h.schema)
	if a != b || strings.TrimSpace(a) != `{
  "count": 5
}` {
		t.Fatalf("global flags before %q and after %q the command", a, b)
	}
	// Flags after a positional argument still parse.
	out := h.ok("dlq", "show", fid(1), "--database-url", url, "--schema", h.schema, "--json")
	if !strings.HasPrefix(out, "{") {
		t.Fatalf("show with trailing flags: %q", out)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Time{
		"2h":                        now.Add(-2 * time.Hour),
		"7d":                        now.Add(-7 * 24 * time.Hour),
		"1d12h":                     now.Add(-36 * time.Hour),
		"2025-05-01":                time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC),
		"2025-05-01T10:00:00Z":      time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC),
		"2025-05-01T10:00:00+02:00": time.Date(2025, 5, 1, 8, 0, 0, 0, time.UTC),
	}
	for in, want := range cases {
		got, err := parseTime("--since", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-2h", "0s", "2025-13-01", "d", "xd"} {
		if _, err := parseTime("--since", bad, now); err == nil || exitCode(err) != exitUsage {
			t.Errorf("parseTime(%q): %v, want a usage error", bad, err)
		}
	}
}

func TestBenchCommand(t *testing.T) {
	h := newHarness(t)
	var res struct {
		Queue          string  `json:"queue"`
		Tasks          int     `json:"tasks"`
		Succeeded      int64   `json:"succeeded"`
		TasksPerSecond float64 `json:"tasks_per_second"`
	}
	mustJSON(t, h.ok("bench", "--workloads", "noop", "--ceiling", "0", "--tasks", "300", "--batch", "100", "--concurrency", "20", "--warmup", "0", "--json"), &res)
	if res.Tasks != 300 || res.Succeeded != 300 || res.TasksPerSecond <= 0 || !strings.HasPrefix(res.Queue, "rdq-bench-") {
		t.Fatalf("bench %+v", res)
	}
	// The bench never touches the dead-letter queue.
	if h.deadCount() != int64(len(fixtures)) {
		t.Fatalf("%d dead after bench", h.deadCount())
	}
	if r := h.run("", "bench", "--tasks", "0"); r.code != exitUsage || !strings.Contains(r.stderr, "--tasks 0") {
		t.Fatalf("bad --tasks: %d %q", r.code, r.stderr)
	}
	if r := h.run("", "bench", "--workloads", "noop,thunder"); r.code != exitUsage || !strings.Contains(r.stderr, `"thunder"`) {
		t.Fatalf("bad --workloads: %d %q", r.code, r.stderr)
	}
	if r := h.run("", "bench", "--warmup", "-1"); r.code != exitUsage || !strings.Contains(r.stderr, "--warmup -1") {
		t.Fatalf("bad --warmup: %d %q", r.code, r.stderr)
	}
	// On PostgreSQL the measured run follows a warm-up and an ANALYZE.
	r := h.run("", "bench", "--workloads", "noop", "--ceiling", "0", "--tasks", "50", "--batch", "25", "--concurrency", "5", "--warmup", "30")
	if r.code != 0 || !strings.Contains(r.stderr, "warming up: 30 no-op tasks, then ANALYZE") {
		t.Fatalf("bench with a warm-up: %d %q", r.code, r.stderr)
	}
	// The other statistics states: a table holding finished tasks, and an
	// ANALYZE taken while the queue is busy.
	dead := h.deadCount()
	r = h.run("", "bench", "--workloads", "noop", "--ceiling", "0", "--tasks", "50", "--batch", "25", "--concurrency", "5",
		"--preload", "20", "--warm-busy", "40")
	if r.code != 0 || !strings.Contains(r.stderr, "preloading 20 succeeded and 20 dead tasks, then ANALYZE") ||
		!strings.Contains(r.stderr, "warming up: 40 no-op tasks, with an ANALYZE half way through") {
		t.Fatalf("bench with --preload and --warm-busy: %d %q", r.code, r.stderr)
	}
	if got := h.deadCount(); got != dead+20 {
		t.Fatalf("%d dead after a bench with --preload 20, want %d", got, dead+20)
	}
	if r := h.run("", "bench", "--warm-busy", "-1"); r.code != exitUsage || !strings.Contains(r.stderr, "--warm-busy -1") {
		t.Fatalf("bad --warm-busy: %d %q", r.code, r.stderr)
	}
}

// Every workload runs, each figure next to the ceiling of the same run:
// fail-once makes two attempts per task, the storm kills every task after
// all its attempts.
func TestBenchWorkloadsAgainstCeiling(t *testing.T) {
	h := newHarness(t)
	var res struct {
		Ceiling   float64 `json:"ceiling_tasks_per_second"`
		Workloads []struct {
			Workload          string  `json:"workload"`
			Tasks             int     `json:"tasks"`
			Attempts          int64   `json:"attempts"`
			Succeeded         int64   `json:"succeeded"`
			Dead              int64   `json:"dead"`
			AttemptsPerSecond float64 `json:"attempts_per_second"`
			OfCeiling         float64 `json:"of_ceiling"`
			ProcessCPUSeconds float64 `json:"process_cpu_seconds"`
		} `json:"workloads"`
	}
	mustJSON(t, h.ok("bench", "--tasks", "200", "--storm-tasks", "100", "--attempts", "3", "--batch", "50",
		"--concurrency", "20", "--ceiling", "500ms", "--warmup", "100", "--json"), &res)
	if res.Ceiling <= 0 || len(res.Workloads) != 3 {
		t.Fatalf("bench: %+v", res)
	}
	want := []struct {
		name               string
		attempts, ok, dead int64
	}{{"noop", 200, 200, 0}, {"fail-once", 400, 200, 0}, {"storm", 300, 0, 100}}
	for i, w := range want {
		got := res.Workloads[i]
		if got.Workload != w.name || got.Attempts != w.attempts || got.Succeeded != w.ok || got.Dead != w.dead || got.OfCeiling <= 0 || got.AttemptsPerSecond <= 0 {
			t.Errorf("workload %d = %+v, want %s with %d attempts, %d succeeded, %d dead, a share of the ceiling", i, got, w.name, w.attempts, w.ok, w.dead)
		}
		if got.ProcessCPUSeconds <= 0 && runtime.GOOS != "windows" {
			t.Errorf("workload %d = %+v: no CPU time of the rdq process", i, got)
		}
	}
	out := h.ok("bench", "--tasks", "100", "--storm-tasks", "50", "--batch", "50", "--concurrency", "20", "--ceiling", "300ms", "--warmup", "0")
	for _, line := range []string{"ceiling", "noop", "fail-once", "storm", "of the ceiling", "% of noop", "attempts/s", "rdq's own CPU"} {
		if !strings.Contains(out, line) {
			t.Errorf("bench output lacks %q:\n%s", line, out)
		}
	}
}
