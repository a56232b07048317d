package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

// hostile is text an attacker controls (a failure message, a header, an
// audit reason) written to take over a terminal: set the window title
// (OSC ... BEL), clear the screen, colour, return the cursor to overwrite
// the line, delete, an 8-bit CSI (U+009B), a right-to-left override and a
// bidi isolate.
const hostile = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\rfake\x7f\u009b1m\u202eevil\u2066x\bz"

// terminalUnsafe returns the first character in s that could drive a
// terminal, and whether there is one. Newlines and tabs are layout.
func terminalUnsafe(s string) (string, bool) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Sprintf("invalid UTF-8 at byte %d", i), true
		case r == '\n' || r == '\t':
		case r < 0x20 || r >= 0x7f && r < 0xa0 || unicode.Is(unicode.Bidi_Control, r):
			return fmt.Sprintf("%U at byte %d", r, i), true
		}
	}
	return "", false
}

func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if c, bad := terminalUnsafe(out); bad {
		t.Errorf("%s prints %s raw:\n%q", what, c, out)
	}
}

// seedHostile adds a dead task whose every free-text field is hostile, and
// an audit entry whose actor, reason and details are, and returns the task.
func seedHostile(t *testing.T, h *harness) rdq.ID {
	t.Helper()
	ctx := context.Background()
	id := rdq.MustParseID("01954a1e-c000-7000-8000-0000000000ff")
	at := base.Add(20 * time.Minute)
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Now: &at, Tasks: []store.NewTask{{
		ID: id, Queue: "emails", Handler: "send_welcome", Payload: []byte(hostile),
		ContentType: "text/plain", IdempotencyKey: "key",
	}}}); err != nil {
		t.Fatal(err)
	}
	// Intake refuses control characters in these fields; a row written by an
	// older version or another writer may still hold them.
	headers, err := json.Marshal(map[string]string{"x-evil\x1b[8m": hostile})
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := pgtest.Pool(t).Exec(ctx, `UPDATE `+pgx.Identifier{h.schema}.Sanitize()+`.tasks SET content_type = $2, headers = $3, idempotency_key = $4 WHERE id = $1`,
		id.String(), "text/plain; x=\x1b[5m", headers, "key"+hostile); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("making the stored task hostile: %v (%d rows)", err, tag.RowsAffected())
	}
	claimed, err := h.s.Claim(ctx, store.ClaimParams{Queues: []string{"emails"}, Limit: 10, Lease: time.Minute, WorkerID: "worker" + hostile, Now: &at})
	if err != nil {
		t.Fatal(err)
	}
	var lease store.Lease
	for _, c := range claimed {
		if c.ID == id {
			lease = store.Lease{ID: c.ID, Token: c.LeaseToken}
		}
	}
	done := at.Add(time.Second)
	errs, err := h.s.Finish(ctx, store.FinishParams{Now: &done, Completions: []store.Completion{{
		Lease: lease, Status: rdq.StatusDead,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, WorkerID: "worker" + hostile, Duration: time.Second,
			Failure: rdq.Failure{Type: "type" + hostile, Message: "message" + hostile, Stack: "stack" + hostile + "\n\tframe" + hostile,
				Fingerprint: rdq.Fingerprint("type"+hostile, "message"+hostile)}},
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	// An audit entry as a store other than this one could have written it.
	details, err := json.Marshal(map[string]string{"note" + hostile: hostile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgtest.Pool(t).Exec(ctx, `INSERT INTO `+pgx.Identifier{h.schema}.Sanitize()+`.audit (at, actor, action, filter, count, reason, details)
		VALUES (now(), $1, 'redrive', $2, 1, $3, $4)`, "actor"+hostile, `{"grep":"`+strings.ReplaceAll(hostile, "\x1b", `\u001b`)+`"}`, "reason"+hostile, details); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestHostileTextIsEscaped feeds hostile text through every command that
// prints it and checks no control character reaches the terminal, while the
// text is still shown, escaped.
func TestHostileTextIsEscaped(t *testing.T) {
	h := newHarness(t)
	id := seedHostile(t, h)
	if _, err := h.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "orders", Handler: "charge"}}}); err != nil {
		t.Fatal(err)
	}
	h.ok("queue", "pause", "orders", "--reason", "INC-1")
	// A live task that failed once with hostile text and waits to retry.
	live := rdq.MustParseID("01954a1e-c000-7000-8000-0000000000fe")
	liveAt := base.Add(30 * time.Minute)
	ctx := context.Background()
	if _, err := h.s.Enqueue(ctx, store.EnqueueParams{Now: &liveAt, Tasks: []store.NewTask{{
		ID: live, Queue: "retries", Handler: "h", Payload: []byte(hostile), IdempotencyKey: "live" + hostile,
	}}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := h.s.Claim(ctx, store.ClaimParams{Queues: []string{"retries"}, Limit: 1, Lease: time.Minute, WorkerID: "w", Now: &liveAt})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if errs, err := h.s.Finish(ctx, store.FinishParams{Now: &liveAt, Completions: []store.Completion{{
		Lease: store.Lease{ID: live, Token: claimed[0].LeaseToken}, Status: rdq.StatusPending, RetryIn: time.Hour,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, WorkerID: "w", Failure: rdq.Failure{Type: "t", Message: "live" + hostile}},
	}}}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	escaped := `\x1b]0;owned\a\x1b[2J\x1b[31mred\rfake\x7f\u009b1m\u202eevil\u2066x\bz`
	// Message cells squeeze whitespace, the CR included, onto one line.
	squeezed := `\x1b]0;owned\a\x1b[2J\x1b[31mred fake\x7f\u009b1m\u202eevil\u2066x\bz`
	bidi := "\u202e\u2066\u200f\u061c"
	for _, c := range []struct {
		args []string
		want string // the hostile text, escaped, in the output
	}{
		{[]string{"dlq", "ls"}, "type" + escaped + "  message" + squeezed},
		{[]string{"dlq", "ls", "--grep", bidi}, "no dead tasks match"},
		{[]string{"dlq", "show", id.String()}, "stack" + escaped},
		{[]string{"dlq", "groups"}, "type" + escaped},
		{[]string{"dlq", "groups", "--grep", bidi}, "no dead tasks match"},
		{[]string{"dlq", "count", "--grep", "\u202eevil"}, "1"},
		{[]string{"dlq", "redrive", "--grep", bidi, "--dry-run"}, "would redrive 0"},
		{[]string{"dlq", "purge", "--grep", bidi, "--dry-run"}, "no dead tasks matching"},
		{[]string{"audit", "ls"}, "actor" + escaped},
		{[]string{"audit", "ls"}, "reason" + squeezed},
		{[]string{"audit", "ls"}, "note" + escaped + "=" + escaped},
		{[]string{"queue", "ls"}, "orders"},
		{[]string{"tasks", "ls", "--state", "retrying"}, "t: live" + squeezed},
		{[]string{"tasks", "show", live.String()}, "live" + escaped},
		{[]string{"tasks", "key", "retries", "live" + hostile}, "live" + escaped},
		{[]string{"stats"}, "emails"},
	} {
		name := strings.Join(c.args, " ")
		r := h.run("", c.args...)
		if r.code != 0 {
			t.Errorf("rdq %q: exit %d, stderr %q", name, r.code, r.stderr)
			continue
		}
		assertTerminalSafe(t, "rdq "+name, r.stdout)
		assertTerminalSafe(t, "rdq "+name+" (stderr)", r.stderr)
		if !strings.Contains(r.stdout, c.want) {
			t.Errorf("rdq %q does not show %q:\n%s", name, c.want, r.stdout)
		}
	}
	t.Run("show keeps the stack's lines", func(t *testing.T) {
		out := h.ok("dlq", "show", id.String())
		if !strings.Contains(out, "stack"+escaped+"\n      \tframe"+escaped) {
			t.Errorf("stack lines lost:\n%s", out)
		}
		for _, want := range []string{"worker" + escaped, `x-evil\x1b[8m=` + escaped, "key" + escaped, `text/plain; x=\x1b[5m`} {
			if !strings.Contains(out, want) {
				t.Errorf("dlq show does not show %q:\n%s", want, out)
			}
		}
	})
	t.Run("errors on stderr", func(t *testing.T) {
		for _, args := range [][]string{
			{"dlq", "purge", "--grep", "\u202eevil", "--reason", "r"}, // refused without --yes, quoting the filter
			{"dlq", "ls", "--grep", hostile},
			{"dlq", "ls", "--error-type", hostile},
			{"audit", "ls", "--actor", hostile},
			{"dlq", "show", hostile},
			{"queue", "pause", hostile, "--reason", "r"},
			{"audit", hostile},
		} {
			r := h.run("", args...)
			if r.code == 0 || r.stderr == "" {
				t.Errorf("rdq %q: exit %d, stderr %q", args, r.code, r.stderr)
			}
			assertTerminalSafe(t, fmt.Sprintf("rdq %q (stderr)", args), r.stderr)
			assertTerminalSafe(t, fmt.Sprintf("rdq %q", args), r.stdout)
		}
	})
	t.Run("payload", func(t *testing.T) {
		// To a file or pipe the payload is the raw bytes...
		if out := h.ok("dlq", "show", id.String(), "--payload"); out != hostile {
			t.Errorf("payload to a pipe = %q, want the raw bytes", out)
		}
		// ...on a terminal it is escaped.
		orig := isTerminal
		t.Cleanup(func() { isTerminal = orig })
		isTerminal = func(any) bool { return true }
		out := h.ok("dlq", "show", id.String(), "--payload")
		assertTerminalSafe(t, "dlq show --payload on a terminal", out)
		if out != escaped {
			t.Errorf("payload on a terminal = %q, want %q", out, escaped)
		}
	})
	t.Run("JSON is unchanged", func(t *testing.T) {
		var show struct {
			Task struct {
				Headers   map[string]string        `json:"headers"`
				LastError struct{ Message string } `json:"last_error"`
			} `json:"task"`
			Attempts []struct {
				Stack    string `json:"stack"`
				WorkerID string `json:"worker_id"`
			} `json:"attempts"`
		}
		mustJSON(t, h.ok("dlq", "show", id.String(), "--json"), &show)
		if show.Task.LastError.Message != "message"+hostile || show.Attempts[0].Stack != "stack"+hostile+"\n\tframe"+hostile ||
			show.Task.Headers["x-evil\x1b[8m"] != hostile || show.Attempts[0].WorkerID != "worker"+hostile {
			t.Errorf("JSON changed the text: %+v", show)
		}
		var audit struct {
			Entries []struct{ Actor, Reason string } `json:"entries"`
		}
		mustJSON(t, h.ok("audit", "ls", "--json"), &audit)
		if len(audit.Entries) == 0 || !strings.Contains(fmt.Sprint(audit.Entries), "reason"+hostile) {
			t.Errorf("JSON audit entries %q lack the reason", audit.Entries)
		}
	})
}

func TestTermWriter(t *testing.T) {
	t.Run("a character split across writes", func(t *testing.T) {
		var b bytes.Buffer
		w := newTermWriter(&b, nil)
		for _, s := range [][]byte{[]byte("a\xe2\x80"), []byte("\xaeb\xc2"), []byte("\x9bc é"), []byte("\xe2")} {
			if n, err := w.Write(s); n != len(s) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
		if got, want := b.String(), `a\u202eb\u009bc é\xe2`; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("JSON passes", func(t *testing.T) {
		var b bytes.Buffer
		raw := true
		w := newTermWriter(&b, &raw)
		if _, err := w.Write([]byte("\u009b\x1b")); err != nil {
			t.Fatal(err)
		}
		if b.String() != "\u009b\x1b" {
			t.Fatalf("got %q", b.String())
		}
	})
	t.Run("cells", func(t *testing.T) {
		for in, want := range map[string]string{
			"plain":          "plain",
			"two\nlines\r":   `two\nlines\r`,
			"caf\u00e9 \xff": `café \xff`,
			"\u2028 stays":   "\u2028 stays",
			"\u061c\u200f":   `\u061c\u200f`,
		} {
			if got := cell(in); got != want {
				t.Errorf("cell(%q) = %q, want %q", in, got, want)
			}
		}
	})
}
