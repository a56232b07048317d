package rdq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/srjn45/rdq/internal/prop"
)

type codedError struct{ code string }

func (e *codedError) Error() string     { return "coded: " + e.code }
func (e *codedError) ErrorType() string { return e.code }

type valueError struct{}

func (valueError) Error() string { return "value error" }

func TestPermanent(t *testing.T) {
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
	base := &fs.PathError{Op: "open", Path: "config.yaml", Err: fs.ErrNotExist}
	err := Permanent(base)
	if err.Error() != base.Error() {
		t.Errorf("Error() = %q, want the wrapped error's text %q", err.Error(), base.Error())
	}
	if !IsPermanent(err) {
		t.Error("IsPermanent(Permanent(err)) = false")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("errors.Is does not see through Permanent")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe != base {
		t.Error("errors.As does not find the wrapped *fs.PathError")
	}
	wrapped := fmt.Errorf("loading: %w", err)
	if !IsPermanent(wrapped) {
		t.Error("IsPermanent does not look through fmt.Errorf %w")
	}
	if IsPermanent(base) || IsPermanent(nil) || IsPermanent(fmt.Errorf("x: %v", err)) {
		t.Error("IsPermanent true for an error not marked, or marked and then formatted as text")
	}
	joined := errors.Join(io.EOF, Permanent(io.ErrUnexpectedEOF))
	if !IsPermanent(joined) {
		t.Error("IsPermanent does not look into errors.Join")
	}
}

func TestRetryAfter(t *testing.T) {
	if RetryAfter(time.Second, nil) != nil {
		t.Fatal("RetryAfter(d, nil) is not nil")
	}
	base := errors.New("429 too many requests")
	err := RetryAfter(90*time.Second, base)
	if err.Error() != base.Error() || !errors.Is(err, base) {
		t.Errorf("RetryAfter changed the error text or hid the wrapped error: %v", err)
	}
	if d, ok := RetryAfterOf(err); !ok || d != 90*time.Second {
		t.Errorf("RetryAfterOf = %s, %v; want 1m30s, true", d, ok)
	}
	if d, ok := RetryAfterOf(fmt.Errorf("calling api: %w", err)); !ok || d != 90*time.Second {
		t.Errorf("RetryAfterOf through fmt.Errorf = %s, %v", d, ok)
	}
	if d, ok := RetryAfterOf(RetryAfter(-time.Second, base)); !ok || d != 0 {
		t.Errorf("negative RetryAfter = %s, %v; want 0, true", d, ok)
	}
	if _, ok := RetryAfterOf(base); ok {
		t.Error("RetryAfterOf found a delay in a plain error")
	}
	if _, ok := RetryAfterOf(nil); ok {
		t.Error("RetryAfterOf(nil) found a delay")
	}
	if IsPermanent(err) {
		t.Error("RetryAfter made the error permanent")
	}
	both := Permanent(RetryAfter(time.Minute, base))
	if d, ok := RetryAfterOf(both); !IsPermanent(both) || !ok || d != time.Minute {
		t.Error("Permanent(RetryAfter(...)) lost one of its marks")
	}
}

func TestPanicError(t *testing.T) {
	p := &PanicError{Value: "boom", Stack: []byte("goroutine 1 [running]:")}
	if p.Error() != "panic: boom" {
		t.Errorf("Error() = %q", p.Error())
	}
	if p.Unwrap() != nil {
		t.Error("Unwrap of a non-error panic value is not nil")
	}
	if got := ErrorTypeOf(p); got != "panic" {
		t.Errorf("ErrorTypeOf = %q, want panic", got)
	}
	pe := &PanicError{Value: io.ErrUnexpectedEOF}
	if !errors.Is(pe, io.ErrUnexpectedEOF) {
		t.Error("errors.Is does not see a panic's error value")
	}
	if pe.Error() != "panic: "+io.ErrUnexpectedEOF.Error() {
		t.Errorf("Error() = %q", pe.Error())
	}
	// A panic with a typed error value is still of type "panic": the
	// PanicError is found first.
	if got := ErrorTypeOf(&PanicError{Value: &codedError{"card_declined"}}); got != "panic" {
		t.Errorf("ErrorTypeOf(panic of a typed error) = %q, want panic", got)
	}
}

// A remote handler's failure keeps its type, message and stack, cleaned and
// capped like any other, through the wrappers of the outcome contract.
func TestRemoteError(t *testing.T) {
	stack := "at Handler.run (handler.ts:12)\x00\n" + strings.Repeat("s", 2*MaxStackBytes)
	err := Permanent(&RemoteError{Type: "ValueError", Message: "no such order\xff", Stack: stack})
	f := Describe(err)
	if f.Type != "ValueError" || f.Message != "no such order\uFFFD" {
		t.Errorf("Describe = %q %q, want the remote type and the cleaned message", f.Type, f.Message)
	}
	if !strings.HasPrefix(f.Stack, "at Handler.run (handler.ts:12)") || strings.ContainsRune(f.Stack, 0) || len(f.Stack) > MaxStackBytes || !strings.Contains(f.Stack, "truncated") {
		t.Errorf("stack not cleaned and capped: %d bytes, starts %q", len(f.Stack), f.Stack[:min(len(f.Stack), 40)])
	}
	if got := Describe(RetryAfter(time.Second, &RemoteError{})); got.Type != "error" || got.Message == "" || got.Stack != "" {
		t.Errorf("empty remote failure = %+v, want type error, a message and no stack", got)
	}
}

// A remote handler cannot record a failure as one of rdq's own events: a
// reserved type gets RemoteTypePrefix; the types of what an execution can
// end with, timeout included, are kept.
func TestRemoteErrorReservedTypes(t *testing.T) {
	for typ, want := range map[string]string{
		"lease_expired":            "remote_lease_expired",
		CancelledErrorType:         "remote_cancelled",
		UnservedHandlerErrorType:   "remote_unserved_handler",
		"timeout":                  "timeout",
		"panic":                    "panic",
		"snoozed":                  "snoozed",
		"error_method_panicked":    "error_method_panicked",
		"Cancelled":                "Cancelled",
		"remote_cancelled":         "remote_cancelled",
		"lease_expired_downstream": "lease_expired_downstream",
	} {
		if got := Describe(Permanent(&RemoteError{Type: typ, Message: "m"})).Type; got != want {
			t.Errorf("remote type %q recorded as %q, want %q", typ, got, want)
		}
	}
	// rdq's own failures keep their types.
	for _, f := range []Failure{LeaseExpiredFailure(), CancelledFailure("r"), UnservedHandlerFailure("q", "h", time.Minute)} {
		if !IsReservedErrorType(f.Type) {
			t.Errorf("%q is not reserved", f.Type)
		}
	}
}

func TestTimeoutError(t *testing.T) {
	err := &TimeoutError{After: 30 * time.Second}
	if err.Error() != "handler timed out after 30s" {
		t.Errorf("Error() = %q", err.Error())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("TimeoutError is not context.DeadlineExceeded")
	}
	if !errors.Is(fmt.Errorf("send: %w", err), context.DeadlineExceeded) {
		t.Error("wrapped TimeoutError is not context.DeadlineExceeded")
	}
	if errors.Is(err, context.Canceled) {
		t.Error("TimeoutError is context.Canceled")
	}
	if got := ErrorTypeOf(err); got != "timeout" {
		t.Errorf("ErrorTypeOf = %q, want timeout", got)
	}
	if IsPermanent(err) {
		t.Error("a timeout is permanent")
	}
}

func TestErrorTypeOf(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"errors.New", errors.New("x"), "*errors.errorString"},
		{"fmt.Errorf without %w", fmt.Errorf("x %d", 1), "*errors.errorString"},
		{"fmt.Errorf %w unwraps to the cause", fmt.Errorf("reading: %w", io.EOF), "*errors.errorString"},
		{"nested %w", fmt.Errorf("a: %w", fmt.Errorf("b: %w", pathErr)), "*fs.PathError"},
		{"multiple %w takes the first", fmt.Errorf("a: %w, b: %w", pathErr, io.EOF), "*fs.PathError"},
		{"multiple %w, nested", fmt.Errorf("a: %w, b: %w", fmt.Errorf("c: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("refused")}), pathErr), "*net.OpError"},
		{"Permanent is transparent", Permanent(pathErr), "*fs.PathError"},
		{"RetryAfter is transparent", RetryAfter(time.Second, pathErr), "*fs.PathError"},
		{"wrappers stacked", fmt.Errorf("x: %w", Permanent(RetryAfter(time.Second, fmt.Errorf("y: %w", pathErr)))), "*fs.PathError"},
		{"non-wrapper wrapper is its own type", pathErr, "*fs.PathError"},
		{"value type", valueError{}, "rdq.valueError"},
		{"ErrorType method", &codedError{"card_declined"}, "card_declined"},
		{"ErrorType method below wrappers", Permanent(fmt.Errorf("x: %w", &codedError{"card_declined"})), "card_declined"},
		{"ErrorType method below a non-wrapper", &fs.PathError{Err: &codedError{"quota"}}, "quota"},
		{"empty ErrorType falls back to the Go type", &codedError{""}, "*rdq.codedError"},
		{"context deadline", context.DeadlineExceeded, "context.deadlineExceededError"},
		{"context canceled", fmt.Errorf("stopped: %w", context.Canceled), "*errors.errorString"},
		{"errors.Join is its own type", errors.Join(io.EOF, pathErr), "*errors.joinError"},
		{"timeout", &TimeoutError{}, "timeout"},
		{"panic", &PanicError{Value: 1}, "panic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ErrorTypeOf(c.err); got != c.want {
				t.Errorf("ErrorTypeOf(%v) = %q, want %q", c.err, got, c.want)
			}
		})
	}
}

var markRE = regexp.MustCompile(`…\[truncated (\d+) bytes\]$`)

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate of a short string = %q", got)
	}
	if got := Truncate("exactly10!", 10); got != "exactly10!" {
		t.Errorf("Truncate at the limit = %q", got)
	}
	s := strings.Repeat("a", 5000)
	got := Truncate(s, MaxMessageBytes)
	if len(got) > MaxMessageBytes {
		t.Errorf("len = %d, over the limit %d", len(got), MaxMessageBytes)
	}
	m := markRE.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no truncation mark at the end of %q", got[len(got)-40:])
	}
	kept := strings.TrimSuffix(got, m[0])
	if n, _ := strconv.Atoi(m[1]); n != len(s)-len(kept) {
		t.Errorf("mark says %d bytes dropped; %d were", n, len(s)-len(kept))
	}
	// Multi-byte text is cut at a rune boundary, and the mark still
	// counts exactly.
	s = strings.Repeat("é", 3000)
	got = Truncate(s, MaxMessageBytes)
	if !utf8.ValidString(got) || len(got) > MaxMessageBytes {
		t.Errorf("cut of multi-byte text: valid=%v len=%d", utf8.ValidString(got), len(got))
	}
	m = markRE.FindStringSubmatch(got)
	kept = strings.TrimSuffix(got, m[0])
	if n, _ := strconv.Atoi(m[1]); n != len(s)-len(kept) {
		t.Errorf("mark says %d bytes dropped; %d were", n, len(s)-len(kept))
	}
	// A limit too small for the mark yields the mark alone; a negative
	// limit does not panic.
	for _, limit := range []int{0, 5, -3} {
		got := Truncate("hello, world", limit)
		if got != "…[truncated 12 bytes]" {
			t.Errorf("Truncate(limit %d) = %q", limit, got)
		}
	}
}

func TestTruncateProperties(t *testing.T) {
	prop.Check(t, func(t *prop.T) {
		var s string
		switch t.IntRange(0, 2) {
		case 0:
			s = t.String(40)
		case 1:
			s = t.String(600)
		default:
			s = t.StringOf("aé€𝄞", 0, 400)
		}
		limit := t.IntRange(-5, 300)
		got := Truncate(s, limit)
		if len(s) <= limit {
			if got != s {
				t.Fatalf("changed a string within the limit: %q", got)
			}
			return
		}
		m := markRE.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("no truncation mark in %q", got)
		}
		kept := strings.TrimSuffix(got, m[0])
		if !strings.HasPrefix(s, kept) {
			t.Fatalf("kept text %q is not a prefix of the input", kept)
		}
		if n, _ := strconv.Atoi(m[1]); n != len(s)-len(kept) {
			t.Fatalf("mark says %d bytes dropped; %d were", n, len(s)-len(kept))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("cut inside a rune: %q", got)
		}
		if len(got) > limit && kept != "" {
			t.Fatalf("len %d is over the limit %d although text was kept", len(got), limit)
		}
		// It keeps as much as fits: at most one rune (4 bytes) is lost
		// to the boundary, besides the mark's own room.
		if room := limit - len(m[0]); room > 0 && len(kept) < room-utf8.UTFMax {
			t.Fatalf("kept %d bytes; %d would fit", len(kept), room)
		}
	})
}

func TestNormalizeMessage(t *testing.T) {
	cases := []struct{ in, want string }{
		{"user 12345 not found", "user <n> not found"},
		{"task 0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b failed", "task <uuid> failed"},
		{"TASK 0190A5B2-7C3E-7A41-8F00-3C1D2E4F5A6B failed", "task <uuid> failed"},
		{"commit 3f9a2b7c1d not found", "commit <hex> not found"},
		{"took 1.25s", "took <id>"},
		{"dial tcp 10.0.0.5:5432: connection refused", "dial tcp <n>:<n>: connection refused"},
		{"  many \t spaces\n\nand lines  ", "many spaces and lines"},
		{"cafe1 is a word", "<id> is a word"},
		{"no variable parts", "no variable parts"},
	}
	for _, c := range cases {
		if got := NormalizeMessage(c.in); got != c.want {
			t.Errorf("NormalizeMessage(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	fp := Fingerprint("*net.OpError", "dial tcp 10.0.0.5:5432: connection refused")
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(fp) {
		t.Fatalf("fingerprint %q is not 16 hex digits", fp)
	}
	same := [][2]string{
		{"order 1234 failed: upstream 0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b returned 503", "order 98 failed: upstream 0190a5b2-0000-7a41-8f00-ffffffffffff returned 503"},
		{"dial tcp 10.0.0.5:5432: connection refused", "dial tcp 10.0.0.7:5433: connection refused"},
		{"object deadbeef42 missing", "object 00c0ffee17 missing"},
		{"retry  in 3s", "retry in 45s"},
	}
	for _, p := range same {
		if Fingerprint("T", p[0]) != Fingerprint("T", p[1]) {
			t.Errorf("%q and %q do not share a fingerprint", p[0], p[1])
		}
	}
	if Fingerprint("A", "boom") == Fingerprint("B", "boom") {
		t.Error("different error types share a fingerprint")
	}
	if Fingerprint("T", "card declined") == Fingerprint("T", "card expired") {
		t.Error("different messages share a fingerprint")
	}
	if Fingerprint("T", "upstream returned 503") == Fingerprint("T", "upstream returned 502") {
		t.Error("different status codes share a fingerprint")
	}
	// The separator keeps type and message apart.
	if Fingerprint("ab", "c") == Fingerprint("a", "bc") {
		t.Error("type/message boundary is ambiguous")
	}
	if a, b := Fingerprint("T", "x"), Fingerprint("T", "x"); a != b {
		t.Error("fingerprint is not deterministic")
	}
}

func TestDescribe(t *testing.T) {
	if Describe(nil) != (Failure{}) {
		t.Error("Describe(nil) is not the zero Failure")
	}
	err := Permanent(fmt.Errorf("charging order 42: %w", &codedError{"card_declined"}))
	f := Describe(err)
	want := Failure{
		Type:        "card_declined",
		Message:     "charging order 42: coded: card_declined",
		Fingerprint: Fingerprint("card_declined", "charging order 42: coded: card_declined"),
	}
	if f != want {
		t.Errorf("Describe = %+v, want %+v", f, want)
	}

	long := errors.New(strings.Repeat("x", MaxMessageBytes*2))
	f = Describe(long)
	if len(f.Message) > MaxMessageBytes || !markRE.MatchString(f.Message) {
		t.Errorf("long message not capped with a mark: len %d", len(f.Message))
	}
	if f.Fingerprint != Fingerprint(f.Type, f.Message) {
		t.Error("fingerprint is not of the capped message")
	}

	stack := strings.Repeat("frame\n", MaxStackBytes)
	f = Describe(fmt.Errorf("handler: %w", &PanicError{Value: "boom", Stack: []byte(stack)}))
	if f.Type != "panic" || f.Message != "handler: panic: boom" {
		t.Errorf("Describe(panic) = %q, %q", f.Type, f.Message)
	}
	if len(f.Stack) > MaxStackBytes || !strings.HasPrefix(f.Stack, "frame\n") || !markRE.MatchString(f.Stack) {
		t.Errorf("panic stack not kept and capped: len %d", len(f.Stack))
	}
	if Describe(errors.New("plain")).Stack != "" {
		t.Error("a plain error has a stack")
	}
}

func TestLeaseExpiredFailure(t *testing.T) {
	f := LeaseExpiredFailure()
	if f.Type != "lease_expired" || f.Message == "" || f.Stack != "" {
		t.Errorf("LeaseExpiredFailure = %+v", f)
	}
	if f.Fingerprint != Fingerprint(f.Type, f.Message) {
		t.Error("fingerprint does not match type and message")
	}
	if LeaseExpiredFailure() != f {
		t.Error("LeaseExpiredFailure is not stable")
	}
}

// TestErrorTypeOfOSErrors pins the names of common standard-library errors
// users will see in the DLQ.
func TestErrorTypeOfOSErrors(t *testing.T) {
	_, err := os.Open("does-not-exist.txt")
	if got := ErrorTypeOf(fmt.Errorf("loading: %w", err)); got != "*fs.PathError" {
		t.Errorf("ErrorTypeOf(open error) = %q", got)
	}
	_, err = strconv.Atoi("x")
	if got := ErrorTypeOf(err); got != "*strconv.NumError" {
		t.Errorf("ErrorTypeOf(Atoi error) = %q", got)
	}
}

func TestDescribeMakesTextStorable(t *testing.T) {
	err := &PanicError{Value: "bad \x00 body \xff\xfe", Stack: []byte("goroutine 1 \x00\xc3")}
	f := Describe(err)
	for name, s := range map[string]string{"message": f.Message, "stack": f.Stack} {
		if !utf8.ValidString(s) {
			t.Errorf("%s %q is not valid UTF-8", name, s)
		}
		if strings.IndexByte(s, 0) >= 0 {
			t.Errorf("%s %q contains a NUL byte", name, s)
		}
	}
	if want := `panic: bad \x00 body ` + "\uFFFD"; f.Message != want {
		t.Errorf("message = %q, want %q", f.Message, want)
	}
}

// derefErr's Error dereferences its receiver, so a nil *derefErr panics.
type derefErr struct{ msg string }

func (e *derefErr) Error() string { return e.msg }

type typeBomb struct{}

func (typeBomb) Error() string     { return "fine" }
func (typeBomb) ErrorType() string { panic("ErrorType exploded") }

func TestDescribeSurvivesPanickingErrorMethods(t *testing.T) {
	var typedNil *derefErr
	for name, err := range map[string]error{"typed nil": typedNil, "ErrorType panics": typeBomb{}} {
		f := Describe(err)
		if f.Type != "error_method_panicked" || f.Stack == "" || f.Fingerprint == "" {
			t.Errorf("%s: described as %+v, want type error_method_panicked with a stack", name, f)
		}
	}
	if f := Describe(typedNil); !strings.Contains(f.Message, "nil *rdq.derefErr") {
		t.Errorf("typed nil message %q does not name the nil pointer", f.Message)
	}
}

func TestDescribeCapsErrorType(t *testing.T) {
	f := Describe(typedErrT{typ: strings.Repeat("é", 1<<20), msg: "m"})
	if len(f.Type) > MaxErrorTypeLength || !utf8.ValidString(f.Type) || !strings.HasPrefix(f.Type, "éé") {
		t.Errorf("a 2 MiB type became %d bytes: %.40q", len(f.Type), f.Type)
	}
	if f.Fingerprint != Fingerprint(f.Type, f.Message) {
		t.Errorf("fingerprint is not of the capped type")
	}
}

func TestTimeoutErrorSaysWhenTheHandlerRanOn(t *testing.T) {
	if got := (&TimeoutError{After: time.Second}).Error(); got != "handler timed out after 1s" {
		t.Errorf("got %q", got)
	}
	if got := (&TimeoutError{After: time.Second, Ran: 3 * time.Second}).Error(); !strings.Contains(got, "ignored its context and returned after 3s") {
		t.Errorf("got %q", got)
	}
}

type typedErrT struct{ typ, msg string }

func (e typedErrT) Error() string     { return e.msg }
func (e typedErrT) ErrorType() string { return e.typ }
