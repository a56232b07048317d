package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/srjn45/rdq"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const envelopeDir = "testdata"

// goldenEnvelopes are the valid golden files and the envelopes they hold.
// Encoding each must reproduce its file byte for byte (indented with two
// spaces, newline-terminated); decoding each file must give it back.
func goldenEnvelopes() map[string]Envelope {
	id := rdq.MustParseID("0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b")
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t.UTC()
	}
	failMsg := "POST https://mail.example.com/send: 503 Service Unavailable"
	failType := "*mail.HTTPError"
	return map[string]Envelope{
		"minimal.json": {Task: rdq.Task{Queue: "emails", Handler: "send_welcome"}},
		"submission.json": {
			Task: rdq.Task{
				Queue:          "emails",
				Handler:        "send_welcome",
				Payload:        []byte(`{"user_id":42,"locale":"en"}`),
				ContentType:    "application/json",
				Headers:        map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme"},
				IdempotencyKey: "signup-42",
				MaxAttempts:    5,
				Timeout:        90 * time.Second,
			},
			Delay: 30 * time.Second,
		},
		"task_pending.json": {
			Task: rdq.Task{
				ID:            id,
				Queue:         "emails",
				Handler:       "send_welcome",
				Payload:       []byte(`{"user_id":42,"locale":"en"}`),
				ContentType:   "application/json",
				Status:        rdq.StatusPending,
				Attempts:      1,
				NextAttemptAt: at("2024-06-01T12:00:02.5Z"),
				LeaseToken:    1,
				LeaseOwner:    "worker-a",
				CreatedAt:     at("2024-06-01T12:00:00Z"),
				UpdatedAt:     at("2024-06-01T12:00:01.000123Z"),
				LastError:     rdq.ErrorSummary{Type: failType, Message: failMsg, Fingerprint: "d87da7dfbe71909b"}, // opaque to the envelope
			},
		},
		"task_full.json": {
			Task: rdq.Task{
				ID:             id,
				Queue:          "billing/charges",
				Handler:        "charge.card:v2",
				Payload:        []byte{0x00, 0x01, 0xfe, 0xff, 'r', 'd', 'q', 0x80},
				ContentType:    "application/octet-stream",
				Headers:        map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x-note": "<café & crème>"},
				IdempotencyKey: "charge-7f3a",
				Status:         rdq.StatusInFlight,
				Attempts:       1,
				Life:           1,
				MaxAttempts:    rdq.Unlimited,
				Timeout:        2500 * time.Millisecond,
				Snoozes:        2,
				NextAttemptAt:  at("2024-06-02T09:00:00Z"),
				LeaseToken:     4,
				LeaseExpiresAt: at("2024-06-02T09:01:00Z"),
				LeaseOwner:     "worker-b",
				CreatedAt:      at("2024-06-01T12:00:00Z"),
				UpdatedAt:      at("2024-06-02T09:00:00.123456789Z"),
				LastError:      summaryOf(rdq.LeaseExpiredFailure()),
			},
			History: []rdq.Attempt{
				{TaskID: id, Number: 1, Life: 0, Outcome: rdq.OutcomeRetryableFailure, ErrorType: "*errors.errorString",
					Message: "card declined: \"insufficient funds\"", WorkerID: "producer", LeaseToken: 0,
					StartedAt: at("2024-06-01T12:00:00Z"), FinishedAt: at("2024-06-01T12:00:00Z")},
				{TaskID: id, Number: 2, Life: 0, Outcome: rdq.OutcomeRetryableFailure, ErrorType: "timeout",
					Message: "handler timed out after 30s", WorkerID: "worker-a", LeaseToken: 1,
					StartedAt: at("2024-06-01T12:00:01Z"), FinishedAt: at("2024-06-01T12:00:31Z")},
				{TaskID: id, Number: 3, Life: 0, Outcome: rdq.OutcomePermanentFailure, ErrorType: "panic",
					Message: "panic: runtime error: index out of range [3] with length 3",
					Stack:   "goroutine 7 [running]:\nmain.charge(...)\n\tcharge.go:42 +0x1d\n", WorkerID: "worker-a", LeaseToken: 2,
					StartedAt: at("2024-06-01T12:00:35Z"), FinishedAt: at("2024-06-01T12:00:35.25Z")},
				{TaskID: id, Number: 4, Life: 1, Outcome: rdq.OutcomeLeaseExpired, ErrorType: "lease_expired",
					Message: rdq.LeaseExpiredFailure().Message, WorkerID: "worker-c", LeaseToken: 3,
					StartedAt: at("2024-06-02T08:58:00Z"), FinishedAt: at("2024-06-02T09:00:00Z")},
			},
		},
		"task_dead.json": {
			Task: rdq.Task{
				ID:            rdq.MustParseID("0190a5b2-7c3e-7b00-9abc-000000000001"),
				Queue:         "emails",
				Handler:       "send_welcome",
				Status:        rdq.StatusDead,
				Attempts:      1,
				NextAttemptAt: at("2024-06-01T12:00:00Z"),
				LeaseToken:    1,
				LeaseOwner:    "worker-a",
				CreatedAt:     at("2024-06-01T12:00:00Z"),
				UpdatedAt:     at("2024-06-01T12:00:01Z"),
				FinishedAt:    at("2024-06-01T12:00:01Z"),
				LastError:     rdq.ErrorSummary{Type: "*errors.errorString", Message: "unknown template \"welcome_v9\"", Fingerprint: "db0310d26fef8555"},
			},
			History: []rdq.Attempt{
				{TaskID: rdq.MustParseID("0190a5b2-7c3e-7b00-9abc-000000000001"), Number: 1, Outcome: rdq.OutcomePermanentFailure,
					ErrorType: "*errors.errorString", Message: "unknown template \"welcome_v9\"", WorkerID: "worker-a", LeaseToken: 1,
					StartedAt: at("2024-06-01T12:00:00.75Z"), FinishedAt: at("2024-06-01T12:00:01Z")},
			},
		},
	}
}

func summaryOf(f rdq.Failure) rdq.ErrorSummary {
	return rdq.ErrorSummary{Type: f.Type, Message: f.Message, Fingerprint: f.Fingerprint}
}

func indentJSON(t *testing.T, compact []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, compact, "", "  "); err != nil {
		t.Fatalf("indenting %s: %v", compact, err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

func TestEnvelopeGolden(t *testing.T) {
	for name, want := range goldenEnvelopes() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(envelopeDir, name)
			compact, err := Marshal(want)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got := indentJSON(t, compact)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden file (run go test -run TestEnvelopeGolden -update to create it): %v", err)
			}
			if !bytes.Equal(got, golden) {
				t.Errorf("encoding differs from %s (rerun with -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, got, golden)
			}
			decoded, err := Unmarshal(golden)
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", path, err)
			}
			if !reflect.DeepEqual(decoded, want) {
				t.Errorf("decoding %s:\ngot  %+v\nwant %+v", path, decoded, want)
			}
			// The compact form decodes to the same value as the indented one.
			decoded2, err := Unmarshal(compact)
			if err != nil || !reflect.DeepEqual(decoded2, want) {
				t.Errorf("decoding the compact form: %v\ngot  %+v\nwant %+v", err, decoded2, want)
			}
		})
	}
}

// TestEnvelopeGoldenFilesAccounted keeps testdata and the tests in
// step: every file is either a valid golden above or an invalid case with
// an expected error.
func TestEnvelopeGoldenFilesAccounted(t *testing.T) {
	expected := invalidCases(t)
	golden := goldenEnvelopes()
	files, err := filepath.Glob(filepath.Join(envelopeDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		_, isGolden := golden[name]
		_, isInvalid := expected[name]
		switch {
		case name == "expected_errors.json":
		case strings.HasPrefix(name, "invalid_") && !isInvalid:
			t.Errorf("%s has no entry in expected_errors.json", name)
		case !strings.HasPrefix(name, "invalid_") && !isGolden:
			t.Errorf("%s is not a known golden envelope", name)
		}
	}
	for name := range expected {
		if !seen[name] {
			t.Errorf("expected_errors.json names %s, which does not exist", name)
		}
	}
	for name := range golden {
		if !seen[name] {
			t.Errorf("golden %s is missing (run with -update)", name)
		}
	}
}

func invalidCases(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(envelopeDir, "expected_errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("expected_errors.json: %v", err)
	}
	if len(m) == 0 {
		t.Fatal("expected_errors.json lists no cases")
	}
	return m
}

func TestEnvelopeInvalidGolden(t *testing.T) {
	cases := invalidCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := cases[name]
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(envelopeDir, name))
			if err != nil {
				t.Fatal(err)
			}
			assertInvalid(t, data, want)
			// UnmarshalJSON reports the same error and leaves the
			// destination untouched.
			e := Envelope{Task: rdq.Task{Queue: "keep"}}
			if err := e.UnmarshalJSON(data); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("UnmarshalJSON error = %v, want it to contain %q", err, want)
			}
			if e.Task.Queue != "keep" {
				t.Errorf("UnmarshalJSON changed its destination on error")
			}
		})
	}
}

func assertInvalid(t *testing.T, data []byte, want string) {
	t.Helper()
	e, err := Unmarshal(data)
	if err == nil {
		t.Fatalf("Unmarshal accepted the document: %+v", e)
	}
	if !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("error %v does not wrap ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if !reflect.DeepEqual(e, Envelope{}) {
		t.Errorf("Unmarshal returned a partial envelope with its error: %+v", e)
	}
}

func TestEnvelopeLimits(t *testing.T) {
	doc := func(fields string) []byte {
		return []byte(`{"version":1,"queue":"q","handler":"h"` + fields + `}`)
	}
	t.Run("payload at the limit", func(t *testing.T) {
		p := bytes.Repeat([]byte{0xab}, rdq.MaxPayloadBytes)
		e, err := Unmarshal(doc(`,"payload":"` + base64.StdEncoding.EncodeToString(p) + `"`))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.Task.Payload, p) {
			t.Fatal("payload changed in decoding")
		}
	})
	t.Run("payload over the limit", func(t *testing.T) {
		p := make([]byte, rdq.MaxPayloadBytes+1)
		assertInvalid(t, doc(`,"payload":"`+base64.StdEncoding.EncodeToString(p)+`"`), "payload is 1048577 bytes; the limit is 1048576")
	})
	t.Run("document one byte over the limit", func(t *testing.T) {
		base := doc(`,"padding":""`)
		data := doc(`,"padding":"` + strings.Repeat("x", MaxBytes-len(base)+1) + `"`)
		assertInvalid(t, data, fmt.Sprintf("envelope is %d bytes; the limit is %d", MaxBytes+1, MaxBytes))
	})
	t.Run("invalid UTF-8", func(t *testing.T) {
		assertInvalid(t, doc(`,"content_type":"text/`+"\xff"+`"`), "not valid UTF-8")
	})
	t.Run("64 headers", func(t *testing.T) {
		var b strings.Builder
		for i := range rdq.MaxHeaders {
			fmt.Fprintf(&b, `,"h%d":"v"`, i)
		}
		e, err := Unmarshal(doc(`,"headers":{` + b.String()[1:] + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Task.Headers) != rdq.MaxHeaders {
			t.Fatalf("decoded %d headers", len(e.Task.Headers))
		}
	})
	t.Run("names at the limit", func(t *testing.T) {
		name := strings.Repeat("n", rdq.MaxNameLength)
		e, err := Unmarshal([]byte(`{"version":1,"queue":"` + name + `","handler":"` + name + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		if e.Task.Queue != name || e.Task.Handler != name {
			t.Fatal("names changed in decoding")
		}
	})
}

func TestUnmarshalEnvelopeRules(t *testing.T) {
	t.Run("unknown fields are ignored", func(t *testing.T) {
		e, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","priority":9,"extra":{"a":[1,2]},` +
			`"last_error":{"type":"t","future":true},"history":[{"number":1,"outcome":"SUCCESS","cost":3}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if e.Task.LastError.Type != "t" || len(e.History) != 1 || e.History[0].Outcome != rdq.OutcomeSuccess {
			t.Fatalf("decoded %+v", e)
		}
	})
	t.Run("null means absent", func(t *testing.T) {
		e, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","id":null,"payload":null,` +
			`"headers":null,"status":null,"attempts":null,"created_at":null,"last_error":null,"history":null}`))
		if err != nil {
			t.Fatal(err)
		}
		want := Envelope{Task: rdq.Task{Queue: "q", Handler: "h"}}
		if !reflect.DeepEqual(e, want) {
			t.Fatalf("got %+v, want %+v", e, want)
		}
	})
	t.Run("empty collections decode to nil", func(t *testing.T) {
		e, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","payload":"","headers":{},"history":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		if e.Task.Payload != nil || e.Task.Headers != nil || e.History != nil {
			t.Fatalf("got %+v", e)
		}
	})
	t.Run("times in any offset decode to UTC", func(t *testing.T) {
		e, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","created_at":"2024-06-01T14:00:00.5+02:00"}`))
		if err != nil {
			t.Fatal(err)
		}
		want := time.Date(2024, 6, 1, 12, 0, 0, 5e8, time.UTC)
		if e.Task.CreatedAt != want {
			t.Fatalf("created_at = %v, want %v", e.Task.CreatedAt, want)
		}
	})
	t.Run("uppercase id is canonicalized", func(t *testing.T) {
		e, err := Unmarshal([]byte(`{"version":1,"id":"0190A5B2-7C3E-7A41-8F00-3C1D2E4F5A6B","queue":"q","handler":"h","history":[{"number":1,"outcome":"SUCCESS"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if e.Task.ID.String() != "0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b" {
			t.Fatalf("id = %s", e.Task.ID)
		}
		if e.History[0].TaskID != e.Task.ID {
			t.Fatalf("history task id = %s, want the envelope's", e.History[0].TaskID)
		}
	})
	t.Run("delay_ms", func(t *testing.T) {
		e, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","delay_ms":1500}`))
		if err != nil {
			t.Fatal(err)
		}
		if e.Delay != 1500*time.Millisecond {
			t.Fatalf("delay = %s", e.Delay)
		}
	})
	t.Run("version 1.0 is not version 1", func(t *testing.T) {
		assertInvalid(t, []byte(`{"version":1.0,"queue":"q","handler":"h"}`), "unsupported envelope version 1.0")
	})
	t.Run("trailing data", func(t *testing.T) {
		assertInvalid(t, []byte(`{"version":1,"queue":"q","handler":"h"} {}`), "not valid JSON")
	})
	t.Run("empty document", func(t *testing.T) {
		assertInvalid(t, nil, "envelope is not valid JSON")
	})
	t.Run("json.Unmarshal into a struct field", func(t *testing.T) {
		var body struct {
			Tasks []Envelope `json:"tasks"`
		}
		err := json.Unmarshal([]byte(`{"tasks":[{"version":1,"queue":"q","handler":"h"},{"version":3,"queue":"q","handler":"h"}]}`), &body)
		if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), "unsupported envelope version 3") {
			t.Fatalf("error = %v", err)
		}
	})
}

func TestMarshalEnvelopeRules(t *testing.T) {
	valid := func() Envelope { return Envelope{Task: rdq.Task{Queue: "q", Handler: "h"}} }
	t.Run("delay rounds up to whole milliseconds", func(t *testing.T) {
		e := valid()
		e.Delay = 1500*time.Microsecond + 1
		b, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"delay_ms":2`)) {
			t.Fatalf("encoded %s", b)
		}
	})
	t.Run("times are written in UTC", func(t *testing.T) {
		e := valid()
		e.Task.CreatedAt = time.Date(2024, 6, 1, 14, 0, 0, 0, time.FixedZone("CEST", 2*3600))
		b, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"created_at":"2024-06-01T12:00:00Z"`)) {
			t.Fatalf("encoded %s", b)
		}
	})
	t.Run("HTML characters are not escaped", func(t *testing.T) {
		e := valid()
		e.Task.ContentType = `text/html; a="<b>&c"`
		b, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"content_type":"text/html; a=\"<b>&c\""`)) {
			t.Fatalf("encoded %s", b)
		}
	})
	t.Run("a document of MaxBytes is written, one byte more is refused", func(t *testing.T) {
		withStack := func(n int) Envelope {
			e := valid()
			e.History = []rdq.Attempt{{Number: 1, Outcome: rdq.OutcomeRetryableFailure, ErrorType: "t", Stack: strings.Repeat("x", n)}}
			return e
		}
		b, err := Marshal(withStack(1))
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + MaxBytes - len(b)
		if b, err = Marshal(withStack(n)); err != nil || len(b) != MaxBytes {
			t.Fatalf("Marshal of a document of MaxBytes: %d bytes, %v", len(b), err)
		}
		if _, err := Marshal(withStack(n + 1)); !errors.Is(err, rdq.ErrInvalid) ||
			!strings.Contains(err.Error(), fmt.Sprintf("is %d bytes; the limit is %d", MaxBytes+1, MaxBytes)) {
			t.Fatalf("Marshal of a document one byte over MaxBytes: %v, want ErrInvalid naming its size", err)
		}
	})
	t.Run("MarshalJSON embeds", func(t *testing.T) {
		b, err := json.Marshal(map[string]any{"task": valid()})
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != `{"task":{"version":1,"queue":"q","handler":"h"}}` {
			t.Fatalf("encoded %s", b)
		}
	})
	id := rdq.NewID()
	bad := []struct {
		name   string
		modify func(*Envelope)
		want   string
	}{
		{"invalid queue", func(e *Envelope) { e.Task.Queue = "a b" }, "queue name"},
		{"no handler", func(e *Envelope) { e.Task.Handler = "" }, "handler name is empty"},
		{"bad status", func(e *Envelope) { e.Task.Status = "DONE" }, `status "DONE"`},
		{"negative attempts", func(e *Envelope) { e.Task.Attempts = -1 }, "attempts -1 is out of range"},
		{"negative life", func(e *Envelope) { e.Task.Life = -2 }, "life -2 is out of range"},
		{"huge token", func(e *Envelope) { e.Task.LeaseToken = 1 << 60 }, "lease_token"},
		{"negative delay", func(e *Envelope) { e.Delay = -time.Second }, "delay -1s is negative"},
		{"year 10000", func(e *Envelope) { e.Task.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "created_at has year 10000"},
		{"invalid header", func(e *Envelope) { e.Task.Headers = map[string]string{"k": "\xff"} }, `header "k" value`},
		{"foreign attempt", func(e *Envelope) {
			e.Task.ID = id
			e.History = []rdq.Attempt{{TaskID: rdq.NewID(), Number: 1, Outcome: rdq.OutcomeSuccess}}
		}, "history[0] belongs to task"},
		{"attempt number 0", func(e *Envelope) { e.History = []rdq.Attempt{{Number: 0, Outcome: rdq.OutcomeSuccess}} }, "history[0].number 0 is out of range"},
		{"attempts out of order", func(e *Envelope) {
			e.History = []rdq.Attempt{{Number: 1, Outcome: rdq.OutcomeSuccess}, {Number: 1, Outcome: rdq.OutcomeSuccess}}
		}, "history[1].number 1 does not follow 1"},
		{"bad outcome", func(e *Envelope) { e.History = []rdq.Attempt{{Number: 1, Outcome: "OK"}} }, `history[0].outcome "OK"`},
		{"attempt time", func(e *Envelope) {
			e.History = []rdq.Attempt{{Number: 1, Outcome: rdq.OutcomeSuccess, StartedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}
		}, "history[0].started_at has year -1"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			e := valid()
			c.modify(&e)
			b, err := Marshal(e)
			if err == nil {
				t.Fatalf("Marshal accepted it: %s", b)
			}
			if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want ErrInvalid containing %q", err, c.want)
			}
			if verr := e.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Fatalf("Validate = %v, want the same error as Marshal", verr)
			}
		})
	}
}

// TestEnvelopeRoundTripTask encodes a task as a store returns it (with a
// monotonic clock reading and a local zone) and checks the decoded task is
// the same instant by instant.
func TestEnvelopeRoundTripTask(t *testing.T) {
	now := time.Now()
	task := rdq.Task{
		ID: rdq.NewID(), Queue: "q", Handler: "h", Payload: []byte("x"), Status: rdq.StatusSucceeded,
		Attempts: 2, CreatedAt: now, UpdatedAt: now.Add(time.Second), FinishedAt: now.Add(time.Second),
	}
	b, err := Marshal(Envelope{Task: task})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got := e.Task
	if !got.CreatedAt.Equal(task.CreatedAt) || !got.UpdatedAt.Equal(task.UpdatedAt) || !got.FinishedAt.Equal(task.FinishedAt) {
		t.Fatalf("times changed: got %v %v %v", got.CreatedAt, got.UpdatedAt, got.FinishedAt)
	}
	got.CreatedAt, got.UpdatedAt, got.FinishedAt = task.CreatedAt, task.UpdatedAt, task.FinishedAt
	if !reflect.DeepEqual(got, task) {
		t.Fatalf("got %+v, want %+v", got, task)
	}
}

func FuzzUnmarshal(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(envelopeDir, "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatal("no seed files in " + envelopeDir)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Unmarshal(data)
		if err != nil {
			if !errors.Is(err, rdq.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// The decoder reads JSON itself: what it accepts must be JSON, and
		// an object whose known fields encoding/json reads the same way.
		if !json.Valid(data) {
			t.Fatalf("accepted a document encoding/json rejects: %q", data)
		}
		var std map[string]any
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("encoding/json rejects an accepted document: %v", err)
		}
		text := func(v any) string { s, _ := v.(string); return s }
		le, _ := std["last_error"].(map[string]any)
		if text(std["queue"]) != e.Task.Queue || text(std["handler"]) != e.Task.Handler || text(std["lease_owner"]) != e.Task.LeaseOwner || text(le["message"]) != e.Task.LastError.Message {
			t.Fatalf("encoding/json reads %v, the decoder %+v", std, e.Task)
		}
		out, err := Marshal(e)
		if err != nil {
			t.Fatalf("re-encoding a decoded envelope: %v", err)
		}
		again, err := Unmarshal(out)
		if err != nil {
			t.Fatalf("decoding a re-encoded envelope %s: %v", out, err)
		}
		if !reflect.DeepEqual(e, again) {
			t.Fatalf("round trip changed the envelope:\nfirst  %+v\nsecond %+v", e, again)
		}
		out2, err := Marshal(again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable: %v\n%s\n%s", err, out, out2)
		}
	})
}

// A history item may name its task, but only the envelope's own: one that
// names another task is refused, not re-assigned to the envelope's id.
func TestEnvelopeHistoryTaskID(t *testing.T) {
	const id, other = "0190a5b2-7c3e-7def-8a12-3456789abcde", "0190a5b2-7c3e-7def-8a12-3456789abcdf"
	doc := func(envID, taskID string) []byte {
		idField := ""
		if envID != "" {
			idField = `"id":"` + envID + `",`
		}
		return []byte(`{"version":1,` + idField + `"queue":"q","handler":"h","history":[{"task_id":"` + taskID + `","number":1,"outcome":"SUCCESS"}]}`)
	}
	e, err := Unmarshal(doc(id, id))
	if err != nil || e.History[0].TaskID.String() != id {
		t.Fatalf("history naming the envelope's own id: %v, %+v", err, e.History)
	}
	for _, c := range []struct{ envID, taskID, want string }{
		{id, other, "history[0].task_id " + other + " is not the envelope's id (" + id + ")"},
		{"", other, "history[0].task_id " + other + " is not the envelope's id (none)"},
		{id, "42", "history[0].task_id \"42\" is not a UUID"},
	} {
		_, err := Unmarshal(doc(c.envID, c.taskID))
		if !errors.Is(err, rdq.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("envelope id %q, history task_id %q: %v; want an error wrapping ErrInvalid saying %q", c.envID, c.taskID, err, c.want)
		}
	}
}
