package rdq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Caps on what one attempt records. Longer text is cut at a UTF-8 boundary
// and ends with a visible mark saying how much was dropped.
const (
	MaxMessageBytes = 4 << 10
	MaxStackBytes   = 64 << 10
)

// Permanent marks err as a failure that retrying cannot fix: the task goes to
// the dead-letter queue at once, whatever attempts remain. Permanent(nil)
// returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryAfter marks err as retryable no sooner than d from now, overriding
// the policy's backoff for this attempt (a rate limit's Retry-After, say).
// Attempts still count: when they are exhausted the task goes dead.
// RetryAfter(d, nil) returns nil.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		d = 0
	}
	return &retryAfterError{after: d, err: err}
}

type retryAfterError struct {
	after time.Duration
	err   error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfterOf returns the delay requested with RetryAfter anywhere in err's
// chain, and whether there was one.
func RetryAfterOf(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

// PanicError is the failure of a handler that panicked. Its stack is the
// panicking goroutine's, recorded in the attempt.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine stack at the panic.
	Stack []byte
}

// Error describes the panic by its value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// ErrorType implements the error-type contract: a panic's type is "panic".
func (e *PanicError) ErrorType() string { return "panic" }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// TimeoutError is the failure of a handler that did not return within its
// timeout. It is retryable like any other error.
type TimeoutError struct {
	// After is the timeout that was exceeded.
	After time.Duration
}

// Error states the timeout that was exceeded.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("handler timed out after %s", e.After)
}

// ErrorType implements the error-type contract: a timeout's type is "timeout".
func (e *TimeoutError) ErrorType() string { return "timeout" }

// Is makes errors.Is(err, context.DeadlineExceeded) true for a timeout.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// ErrorTypeOf names the type of a failure for grouping and filtering:
//
//   - the result of an ErrorType() string method, if err or any error it
//     wraps has one (the first found in errors.As order);
//   - otherwise the Go type of the first error in the chain that is not a
//     plain wrapper (fmt.Errorf's %w, Permanent, RetryAfter), such as
//     "*net.OpError" or "*errors.errorString".
//
// It returns "" for a nil error.
func ErrorTypeOf(err error) string {
	if err == nil {
		return ""
	}
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) {
		if t := typed.ErrorType(); t != "" {
			return t
		}
	}
	e := err
	for isPlainWrapper(e) {
		var next error
		switch w := e.(type) {
		case interface{ Unwrap() error }:
			next = w.Unwrap()
		case interface{ Unwrap() []error }:
			// fmt.Errorf with several %w: the first wrapped error,
			// as errors.As would visit it.
			if errs := w.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			break
		}
		e = next
	}
	return reflect.TypeOf(e).String()
}

func isPlainWrapper(err error) bool {
	switch err.(type) {
	case *permanentError, *retryAfterError:
		return true
	}
	switch reflect.TypeOf(err).String() {
	case "*fmt.wrapError", "*fmt.wrapErrors":
		return true
	}
	return false
}

// Truncate caps s at limit bytes, cutting at a UTF-8 boundary and appending a
// mark such as "…[truncated 1234 bytes]" so a reader knows text is missing;
// the mark states exactly how many bytes were dropped. The result, mark
// included, is at most limit bytes when limit leaves room for the mark;
// otherwise it is the mark alone.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// Keep as much as fits beside a mark that states exactly how many
	// bytes were dropped. Shrinking the kept part can lengthen the mark by
	// a digit, and the cut moves back to a rune boundary, so iterate until
	// kept text and mark fit together; keep strictly decreases, so this
	// ends.
	keep := max(limit, 0)
	for {
		room := max(limit-len(truncationMark(len(s)-keep)), 0)
		if keep <= room {
			return s[:keep] + truncationMark(len(s)-keep)
		}
		keep = room
		for keep > 0 && !utf8.RuneStart(s[keep]) {
			keep--
		}
	}
}

func truncationMark(dropped int) string {
	return fmt.Sprintf("…[truncated %d bytes]", dropped)
}

var (
	fpUUID   = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	fpHex0x  = regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`)
	fpHex    = regexp.MustCompile(`(?i)\b(?:0x)?[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b(?:0x)?[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b`)
	fpNumber = regexp.MustCompile(`\d+(?:\.\d+)?`)
	fpSpace  = regexp.MustCompile(`\s+`)
)

// NormalizeMessage strips what varies between occurrences of one failure
// from an error message: UUIDs become "<id>", 0x-prefixed hexadecimal and
// hexadecimal tokens of six or more characters mixing digits and letters
// "<hex>", numbers "<n>", and runs of white space one space.
func NormalizeMessage(msg string) string {
	msg = fpUUID.ReplaceAllString(msg, "<id>")
	msg = fpHex0x.ReplaceAllString(msg, "<hex>")
	msg = fpHex.ReplaceAllStringFunc(msg, func(tok string) string {
		if len(tok) < 6 { // short words like "cafe1" are more likely words
			return tok
		}
		return "<hex>"
	})
	msg = fpNumber.ReplaceAllString(msg, "<n>")
	return strings.TrimSpace(fpSpace.ReplaceAllString(msg, " "))
}

// Fingerprint returns a short, stable identifier of a failure's cause: a hash
// of its error type and normalized message (see NormalizeMessage). Failures
// that differ only in ids and numbers share a fingerprint, so one bug's ten
// thousand victims group as one line in the DLQ.
func Fingerprint(errorType, message string) string {
	h := sha256.New()
	h.Write([]byte(errorType))
	h.Write([]byte{0})
	h.Write([]byte(NormalizeMessage(message)))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Failure is a classified error, ready to be recorded as an attempt.
type Failure struct {
	// Type is ErrorTypeOf the error.
	Type string
	// Message is the error text, capped at MaxMessageBytes.
	Message string
	// Stack is a panic's stack, capped at MaxStackBytes; empty otherwise.
	Stack string
	// Fingerprint is Fingerprint(Type, Message).
	Fingerprint string
}

// Describe turns err into a Failure: its type, capped message, a panic's
// capped stack, and its fingerprint. The text is made valid UTF-8 without NUL
// bytes (see the Failure fields), so every store can record it.
// Describe(nil) is the zero Failure.
func Describe(err error) Failure {
	if err == nil {
		return Failure{}
	}
	f := Failure{
		Type:    cleanText(ErrorTypeOf(err)),
		Message: Truncate(cleanText(err.Error()), MaxMessageBytes),
	}
	var p *PanicError
	if errors.As(err, &p) {
		f.Stack = Truncate(cleanText(string(p.Stack)), MaxStackBytes)
	}
	f.Fingerprint = Fingerprint(f.Type, f.Message)
	return f
}

// cleanText makes s storable as text by any backend: invalid UTF-8 becomes
// U+FFFD and NUL bytes become the visible escape "\x00". Error text often
// quotes binary data (a response body, a corrupt record); it must never make
// the attempt that records it fail.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", `\x00`)
	}
	return s
}

// LeaseExpiredFailure describes the synthetic failure a store records when it
// reclaims a task whose lease expired.
func LeaseExpiredFailure() Failure {
	const typ, msg = "lease_expired", "lease expired before the worker finished; the execution was lost"
	return Failure{Type: typ, Message: msg, Fingerprint: Fingerprint(typ, msg)}
}
