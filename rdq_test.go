package rdq

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/prop"
)

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewIDFormat(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	id := NewID()
	after := time.Now()
	if id.IsZero() {
		t.Fatal("NewID returned the zero ID")
	}
	if v := id[6] >> 4; v != 7 {
		t.Errorf("version = %d, want 7", v)
	}
	if id[8]&0xc0 != 0x80 {
		t.Errorf("variant bits = %02b, want 10", id[8]>>6)
	}
	if !canonicalUUID.MatchString(id.String()) {
		t.Errorf("String() = %q is not a canonical lowercase UUIDv7", id)
	}
	if ts := id.Time(); ts.Before(before) || ts.After(after) {
		t.Errorf("Time() = %v, want within [%v, %v]", ts, before, after)
	}
}

func TestNewIDMonotonic(t *testing.T) {
	const n = 20000
	prev := NewID()
	seen := make(map[ID]bool, n)
	for i := 0; i < n; i++ {
		id := NewID()
		if bytes.Compare(id[:], prev[:]) <= 0 {
			t.Fatalf("call %d: %s does not sort after %s", i, id, prev)
		}
		if seen[id] {
			t.Fatalf("duplicate ID %s", id)
		}
		seen[id] = true
		prev = id
	}
}

// TestIDGeneratorWithinOneMillisecond drives the generator with a frozen
// clock, past the 12-bit counter's capacity, and with a clock that goes
// backwards: IDs stay strictly increasing and well-formed.
func TestIDGeneratorWithinOneMillisecond(t *testing.T) {
	var g idGenerator
	now := time.UnixMilli(1_717_243_200_000)
	prev := g.next(now)
	for i := 0; i < 3*4096; i++ {
		clock := now
		if i%1000 == 999 {
			clock = now.Add(-time.Second) // the wall clock stepped back
		}
		id := g.next(clock)
		if bytes.Compare(id[:], prev[:]) <= 0 {
			t.Fatalf("call %d: %s does not sort after %s", i, id, prev)
		}
		if id[6]>>4 != 7 || id[8]&0xc0 != 0x80 {
			t.Fatalf("call %d: bad version or variant in %s", i, id)
		}
		if id.Time().Before(now) {
			t.Fatalf("call %d: time %v went backwards", i, id.Time())
		}
		prev = id
	}
	// 3×4096 IDs in one millisecond overflow the counter: the generator
	// borrows the following milliseconds rather than repeating.
	if !prev.Time().After(now) {
		t.Errorf("after %d IDs in one millisecond the time is still %v", 3*4096, prev.Time())
	}
	// A later real millisecond restarts from the clock, not from a
	// borrowed one in the past.
	later := now.Add(time.Minute)
	if got := g.next(later).Time(); !got.Equal(later) {
		t.Errorf("Time() = %v, want %v", got, later)
	}
}

func TestIDStringParseRoundTrip(t *testing.T) {
	prop.Check(t, func(t *prop.T) {
		var id ID
		copy(id[:], t.Bytes(16))
		s := id.String()
		if len(s) != 36 || strings.ToLower(s) != s {
			t.Fatalf("String() = %q", s)
		}
		for _, form := range []string{s, strings.ToUpper(s)} {
			got, err := ParseID(form)
			if err != nil {
				t.Fatalf("ParseID(%q): %v", form, err)
			}
			if got != id {
				t.Fatalf("ParseID(%q) = %s, want %s", form, got, id)
			}
		}
		text, err := id.MarshalText()
		if err != nil || string(text) != s {
			t.Fatalf("MarshalText = %q, %v", text, err)
		}
		var back ID
		if err := back.UnmarshalText(text); err != nil || back != id {
			t.Fatalf("UnmarshalText = %s, %v", back, err)
		}
		if back.IsZero() != (id == ID{}) {
			t.Fatal("IsZero disagrees with the zero value")
		}
	})
}

func TestParseIDInvalid(t *testing.T) {
	long := strings.Repeat("z", 500)
	for _, s := range []string{
		"",
		"0190a5b2",
		"0190a5b27c3e7a418f003c1d2e4f5a6b",      // no dashes
		"0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6",   // short
		"0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6bb", // long
		"0190a5b2+7c3e-7a41-8f00-3c1d2e4f5a6b",  // wrong separator
		"0190a5b-27c3e-7a41-8f00-3c1d2e4f5a6b",  // dash out of place
		"0190a5g2-7c3e-7a41-8f00-3c1d2e4f5a6b",  // not hex
		"{0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b}",
		"urn:uuid:0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b",
		" 0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6",
		long,
	} {
		id, err := ParseID(s)
		if err == nil {
			t.Errorf("ParseID(%q) = %s, want an error", s, id)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseID(%q) error %v does not wrap ErrInvalid", s, err)
		}
		if !id.IsZero() {
			t.Errorf("ParseID(%q) returned a non-zero ID with its error", s)
		}
		if len(err.Error()) > 300 {
			t.Errorf("ParseID error for a %d-byte input is %d bytes; the input should be cut", len(s), len(err.Error()))
		}
	}
	var id ID
	if err := id.UnmarshalText([]byte("nope")); !errors.Is(err, ErrInvalid) {
		t.Errorf("UnmarshalText(nope) = %v", err)
	}
	if err := json.Unmarshal([]byte(`"nope"`), &id); !errors.Is(err, ErrInvalid) {
		t.Errorf("json.Unmarshal of a bad id = %v, want ErrInvalid", err)
	}
}

func TestMustParseID(t *testing.T) {
	const s = "0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b"
	if got := MustParseID(s).String(); got != s {
		t.Errorf("MustParseID(%q) = %s", s, got)
	}
	defer func() {
		r := recover()
		if err, ok := r.(error); !ok || !errors.Is(err, ErrInvalid) {
			t.Errorf("MustParseID(bad) panicked with %v, want an ErrInvalid error", r)
		}
	}()
	MustParseID("bad")
}

func TestIDTime(t *testing.T) {
	id := MustParseID("0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b")
	if got, want := id.Time(), time.UnixMilli(0x0190a5b27c3e); !got.Equal(want) {
		t.Errorf("Time() = %v, want %v", got, want)
	}
}

func TestIDJSON(t *testing.T) {
	id := NewID()
	b, err := json.Marshal(struct{ ID ID }{id})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"ID":"`+id.String()+`"}` {
		t.Errorf("json = %s", b)
	}
	var back struct{ ID ID }
	if err := json.Unmarshal(b, &back); err != nil || back.ID != id {
		t.Errorf("json round trip = %s, %v", back.ID, err)
	}
}

func TestIDScanValue(t *testing.T) {
	id := NewID()
	v, err := id.Value()
	if err != nil || v != id.String() {
		t.Fatalf("Value() = %v, %v", v, err)
	}
	for _, src := range []any{id.String(), []byte(id.String()), id[:], [16]byte(id), strings.ToUpper(id.String())} {
		var got ID
		if err := got.Scan(src); err != nil {
			t.Errorf("Scan(%T %v): %v", src, src, err)
			continue
		}
		if got != id {
			t.Errorf("Scan(%T) = %s, want %s", src, got, id)
		}
	}
	for _, src := range []any{nil, 42, "not-a-uuid", []byte("short"), time.Now()} {
		var got ID
		if err := got.Scan(src); err == nil {
			t.Errorf("Scan(%T %v) = %s, want an error", src, src, got)
		}
	}
}

func TestStatusAndOutcomeValid(t *testing.T) {
	for _, s := range []Status{StatusPending, StatusInFlight, StatusSucceeded, StatusDead} {
		if !s.Valid() {
			t.Errorf("%s is not valid", s)
		}
	}
	for _, s := range []Status{"", "pending", "RUNNING"} {
		if s.Valid() {
			t.Errorf("%q is valid", s)
		}
	}
	for _, o := range []Outcome{OutcomeSuccess, OutcomeRetryableFailure, OutcomePermanentFailure, OutcomeLeaseExpired} {
		if !o.Valid() {
			t.Errorf("%s is not valid", o)
		}
	}
	for _, o := range []Outcome{"", "success", "FAILED"} {
		if o.Valid() {
			t.Errorf("%q is valid", o)
		}
	}
}

func TestTaskHelpers(t *testing.T) {
	task := &Task{
		ID: MustParseID("0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b"), Queue: "emails", Handler: "send",
		Payload: []byte("secret-card-number"), Status: StatusPending, Attempts: 2,
	}
	if task.NextAttempt() != 3 {
		t.Errorf("NextAttempt = %d, want 3", task.NextAttempt())
	}
	s := task.String()
	if s != "task 0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b (queue emails, handler send, PENDING)" {
		t.Errorf("String() = %q", s)
	}
	if strings.Contains(s, "secret") {
		t.Error("String() shows the payload")
	}
	if !(ErrorSummary{}).IsZero() || (ErrorSummary{Type: "x"}).IsZero() {
		t.Error("ErrorSummary.IsZero is wrong")
	}
}
