package rdq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Caps on what one attempt records. Longer text is cut at a UTF-8 boundary
// and ends with a visible mark saying how much was dropped.
const (
	MaxMessageBytes = 4 << 10
	MaxStackBytes   = 64 << 10
	// MaxErrorTypeLength caps an error type, in bytes. It is the one limit
	// for every text a store indexes: error types and fingerprints are
	// cut to it, and names (MaxNameLength) and idempotency keys
	// (MaxIdempotencyKeyLength) are refused beyond their smaller limits.
	// It matches the DLQ's filter limit (dlq.MaxErrorTypeLength), so every
	// recorded type can be filtered on, and it keeps index entries far
	// below PostgreSQL's B-tree row limit.
	MaxErrorTypeLength = 256
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
	_, ok := as[*permanentError](err)
	return ok
}

// RetryAfter marks err as retryable no sooner than d from now, overriding
// the policy's backoff for this attempt (a rate limit's Retry-After, say).
// Attempts still count: the failure is recorded, and when attempts are
// exhausted the task goes dead. To wait without failing, see Snooze.
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

// Snooze is a handler's "not yet": the task goes back to waiting and runs
// again no sooner than d from now, without spending an attempt (unlike
// RetryAfter, which records a failed attempt and counts it). Nothing is
// added to the task's history; its Snoozes count grows by one.
//
// A task may snooze Policy.MaxSnoozes times in one life (DefaultMaxSnoozes
// unless the queue's policy says otherwise; a redrive starts a new count).
// A snooze beyond that is recorded as a failed attempt of type "snoozed",
// retried after d, so a task that never stops snoozing still spends its
// attempts and reaches the dead-letter queue, where an operator sees it,
// instead of waiting forever unseen; it is not made a failure outright,
// because the handler asked for a wait, not reported an error. A store
// that cannot snooze (store.Snoozer) treats every snooze that way. A
// negative d is zero.
func Snooze(d time.Duration) error {
	return &SnoozeError{After: max(d, 0)}
}

// SnoozeError is what Snooze returns. When a snooze is recorded as an
// attempt (see Snooze), its type is "snoozed".
type SnoozeError struct {
	// After is how long the task waits before it runs again.
	After time.Duration
}

// Error says how long the task was snoozed for.
func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.After) }

// ErrorType implements the error-type contract: "snoozed".
func (e *SnoozeError) ErrorType() string { return "snoozed" }

// SnoozeOf returns the delay requested with Snooze anywhere in err's chain,
// and whether there was one.
func SnoozeOf(err error) (time.Duration, bool) {
	if s, ok := as[*SnoozeError](err); ok {
		return s.After, true
	}
	return 0, false
}

// RetryAfterOf returns the delay requested with RetryAfter anywhere in err's
// chain, and whether there was one.
func RetryAfterOf(err error) (time.Duration, bool) {
	if r, ok := as[*retryAfterError](err); ok {
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
// timeout, whatever it returned once it did (nil included). It is retryable
// like any other error.
type TimeoutError struct {
	// After is the timeout that was exceeded.
	After time.Duration
	// Ran, if set, is how long the handler ran before it returned, set by
	// the worker when that was well past After: the handler ignored its
	// context.
	Ran time.Duration
}

// Error states the timeout that was exceeded, and how long the handler ran
// if it ran on past it.
func (e *TimeoutError) Error() string {
	if e.Ran > e.After {
		return fmt.Sprintf("handler timed out after %s; it ignored its context and returned after %s", e.After, e.Ran)
	}
	return fmt.Sprintf("handler timed out after %s", e.After)
}

// RemoteError is a failure that a handler running in another process
// reported about its attempt, such as the Failure of a gRPC handler's
// answer: its error type, message and stack trace, recorded as it gave
// them (cleaned and capped like every failure's), except that a reserved
// error type (IsReservedErrorType) is recorded with RemoteTypePrefix.
type RemoteError struct {
	// Type groups the failure; empty reads as "error".
	Type string
	// Message is the failure's text.
	Message string
	// Stack is the handler's stack trace, if it sent one.
	Stack string
}

// Error returns the message, or names the type when the message is empty.
func (e *RemoteError) Error() string {
	if e.Message == "" {
		return "the handler failed with " + e.ErrorType() + " and no message"
	}
	return e.Message
}

// ErrorType implements the error-type contract: e.Type, or "error"; a
// reserved type (IsReservedErrorType) prefixed with RemoteTypePrefix, so
// that no handler's failure passes for an event rdq records itself.
func (e *RemoteError) ErrorType() string {
	switch {
	case e.Type == "":
		return "error"
	case IsReservedErrorType(e.Type):
		return RemoteTypePrefix + e.Type
	}
	return e.Type
}

// RemoteTypePrefix prefixes a reserved error type that a remote handler
// reports (see RemoteError): its "cancelled" is recorded as
// "remote_cancelled".
const RemoteTypePrefix = "remote_"

// reservedErrorTypes are the error types of failures rdq records for
// events outside any handler's execution: a lease that expired, an
// operator's cancel, a handler no worker serves.
var reservedErrorTypes = map[string]bool{
	"lease_expired":          true,
	CancelledErrorType:       true,
	UnservedHandlerErrorType: true,
}

// IsReservedErrorType reports whether t is the error type of a failure
// rdq records for an event outside any handler's execution:
// "lease_expired" (LeaseExpiredFailure), "cancelled" (CancelledFailure)
// or "unserved_handler" (UnservedHandlerFailure). The types of what a
// handler's execution can end with ("timeout", "panic", "snoozed",
// "error_method_panicked") are not reserved: a remote handler reports its
// own, as rdq's receivers and SDKs do.
func IsReservedErrorType(t string) bool {
	return reservedErrorTypes[t]
}

// MethodPanicError is the failure recorded when user code called to classify
// a failed attempt panicked: a method of the handler's error (Error,
// ErrorType, Unwrap, Is, As: a typed nil pointer returned as error is the
// usual cause) or the policy's Classify. The attempt fails with this error
// instead, retryable like any other, and records the panic's stack.
type MethodPanicError struct {
	// Type is the error type recorded: "error_method_panicked" or
	// "classify_panicked".
	Type string
	// ErrType is the Go type of the handler's error, such as "*main.MyErr".
	ErrType string
	// NilPointer reports that the handler's error was a nil pointer.
	NilPointer bool
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine stack at the panic.
	Stack []byte
}

// Error names what panicked and the panic's value.
func (e *MethodPanicError) Error() string {
	what := "a method of the handler's error"
	if e.Type == "classify_panicked" {
		what = "the policy's Classify"
	}
	msg := fmt.Sprintf("%s (%s) panicked: %v", what, e.ErrType, e.Value)
	if e.NilPointer {
		msg += "; the handler returned a nil " + e.ErrType + " as a non-nil error: return a plain nil on success"
	}
	return msg
}

// ErrorType implements the error-type contract: e.Type.
func (e *MethodPanicError) ErrorType() string { return e.Type }

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
	if typed, ok := as[interface{ ErrorType() string }](err); ok {
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
	t := reflect.TypeOf(err)
	return t == fmtWrapError || t == fmtWrapErrors
}

// The types of fmt.Errorf's errors with one %w and with several.
var (
	fmtWrapError  = reflect.TypeOf(fmt.Errorf("%w", errors.ErrUnsupported))
	fmtWrapErrors = reflect.TypeOf(fmt.Errorf("%w %w", errors.ErrUnsupported, errors.ErrUnsupported))
)

// as is errors.As with a target of type T, without reflection: it returns
// the first error in err's tree, in the order errors.As visits it, that is
// a T or whose As method sets a T.
func as[T any](err error) (T, bool) {
	for err != nil {
		if t, ok := err.(T); ok {
			return t, true
		}
		if x, ok := err.(interface{ As(any) bool }); ok {
			var t T
			if x.As(&t) {
				return t, true
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if t, ok := as[T](e); ok {
					return t, true
				}
			}
			err = nil
		default:
			err = nil
		}
	}
	var zero T
	return zero, false
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

// The regular expressions of the default normalisation. They use only
// ASCII character classes, greedy quantifiers and alternation, so that they
// match the same text in Go's RE2 and in Java's java.util.regex (and most
// other engines): no \b, \w, \s, look-around or case-insensitive flags.
// NormalizeMessage runs equivalent hand-written matchers (tokenEnd,
// isStatus, isUUID, isNumber, isHex); the tests hold them to these.
var (
	fpHTTPVersion = regexp.MustCompile(`http/[0-9][0-9.]*`)
	fpToken       = regexp.MustCompile(`[a-z0-9_]+(?:[-.+@][a-z0-9_]+)*`)
	fpStatus      = regexp.MustCompile(`^[1-5][0-9][0-9]$`)
	fpUUID        = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	fpNumber      = regexp.MustCompile(`^[0-9]+(?:\.[0-9]+)*$`)
	fpHex         = regexp.MustCompile(`^(?:0x[0-9a-f]+|[0-9a-f]{8,})$`)
	fpSpace       = regexp.MustCompile(`[\t\n\x0B\f\r ]+`)
)

// statusWords are the tokens after which a three-digit number from 100 to
// 599 is a status code and kept (rule 3a of NormalizeMessage).
var statusWords = map[string]bool{
	"status": true, "code": true, "http": true, "statuscode": true,
	"status_code": true, "returned": true, "response": true,
}

// letterPairCost is how unlike English text a pair of letters is: row r
// (the start of a word, then a to z) and column c (a to z, then the end of
// a word) hold, as one hexadecimal digit, -log2 of the probability that c
// follows r within a word, rounded and capped at 15, as measured over
// English prose, program identifiers and error messages. Rule 3g of
// NormalizeMessage reads it; every implementation carries the same table.
const letterPairCost = "" +
	"45444456487545548434556688f" +
	"8544875a5a7344a5a3436586695" +
	"4656467745a3784684464889593" +
	"375737645d445737955356997c3" +
	"5664377939b67756755757777a1" +
	"574366687b955375634476747a2" +
	"475543783f945636a45559887b3" +
	"576737754b96744694455889a92" +
	"377628984d86683795545a8a693" +
	"5645555a9a844235a544a5a7d65" +
	"386537795d876636d73739589d3" +
	"487626574c9665677746686a8a2" +
	"477526783d84873797555778593" +
	"357627894f865733985648998d3" +
	"484436385a6676479743669a7a3" +
	"6644756a6b654254d3544557ab4" +
	"385637765e746845934458887d3" +
	"666588988eb4778675581978972" +
	"486527684b665547954467896c3" +
	"575738754c667755764359785a2" +
	"486737843ea6784694455978592" +
	"545645694ca443748343aa96d95" +
	"365526774f96565366457867d84" +
	"376637843c86743684467988c82" +
	"453544874bb66864865375866a2" +
	"776858985c964473f644b768871" +
	"476719984be77847e6786765763"

// The letters-only id rule (3g of NormalizeMessage): a run of at least
// idMinLetters letters costs, on average per pair, at least
// idCostEighths/8; or a run of at least idMinVowelless letters has no
// vowel (a, e, i, o, u, y).
const (
	idMinLetters   = 8
	idCostEighths  = 39
	idMinVowelless = 6
)

// NormalizeMessage strips what varies between occurrences of one failure
// from an error message, so that the failures of one cause share a
// fingerprint while different causes (a 404 and a 503, say) do not. It is
// the default of every rdq implementation: testdata/fingerprints.json holds
// a golden table of messages, normalised forms and fingerprints that other
// implementations (the Java SDK) must reproduce. The steps, in order:
//
//  1. Fold case: the ASCII letters A–Z become a–z. No other character is
//     changed (Unicode case folding differs between languages).
//  2. Replace every match of http/[0-9][0-9.]* with "http", so that
//     "HTTP/1.1 503" reads "http 503".
//  3. Split the text into tokens: the successive non-overlapping matches,
//     left to right, of [a-z0-9_]+(?:[-.+@][a-z0-9_]+)* (runs of letters,
//     digits and underscores joined by single '-', '.', '+' or '@'). Text
//     between tokens is kept as it is; each token is replaced as the token
//     rules below say.
//  4. Replace every run of [\t\n\x0B\f\r ] with one space, then remove
//     a leading and a trailing space.
//  5. Quoted values: from left to right, a '"', '\” or '`' and the next
//     occurrence of the same character, with 1 to 64 bytes between them
//     and no space among them, are a quoted value (scanning goes on after
//     its closing quote; an opening quote without such a partner is plain
//     text). A quoted value whose text holds a mask ("<email>", "<uuid>",
//     "<n>", "<hex>" or "<id>") becomes "<v>" between its quotes, so that
//     "orders/ord_1" and "orders/ord_2/x" read alike.
//
// The token rules; the first that applies to the whole token (the regular
// expression matched against ^…$) wins:
//
//   - [1-5][0-9][0-9], when the previous token (as it reads after
//     steps 1 and 2, not its replacement; the first token has none) is one of status, code,
//     http, statuscode, status_code, returned or response: kept, so that
//     "status 404" and "status 503" stay apart;
//   - a token containing '@' becomes "<email>";
//   - [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} becomes
//     "<uuid>";
//   - [0-9]+(?:\.[0-9]+)* (numbers, decimals, IPv4 addresses, versions)
//     becomes "<n>";
//   - 0x[0-9a-f]+ or [0-9a-f]{8,} (hexadecimal ids and hashes, letter-only
//     ones such as "deadbeef" included) becomes "<hex>";
//   - any other token containing a digit (SKU and order codes such as
//     "ab-1234", "ord_8f7a6" or "user42", durations such as "1.5s",
//     Stripe-style ids, ULIDs, JWTs, Kubernetes pod names) becomes "<id>";
//   - a token with a run of letters (a maximal run of a–z) that reads
//     unlike English becomes "<id>": a run of n ≥ 8 letters whose n+1
//     letter pairs, the start of the run and its first letter and its last
//     letter and the end of the run included, cost in letterPairCost at
//     least 39/8 on average (8 × sum ≥ 39 × (n+1)), or a run of 6 or more
//     letters without a, e, i, o, u or y. So letter-only ids ("ordqwxyzabc",
//     base62 and base32 tokens without digits, "bcdfghjklm") are masked,
//     while words, error texts ("connection refused", "context deadline
//     exceeded", "service unavailable") and identifiers glued from words
//     ("nullpointerexception") are kept;
//   - any other token is kept.
func NormalizeMessage(msg string) string {
	msg = asciiLower(msg)
	if strings.Contains(msg, "http/") {
		msg = fpHTTPVersion.ReplaceAllString(msg, "http")
	}
	var b strings.Builder
	b.Grow(len(msg))
	prev, last := "", 0
	for start := 0; start < len(msg); {
		if !isTokenByte(msg[start]) {
			start++
			continue
		}
		end := tokenEnd(msg, start)
		tok := msg[start:end]
		b.WriteString(msg[last:start])
		b.WriteString(maskToken(tok, prev))
		prev, last, start = tok, end, end
	}
	b.WriteString(msg[last:])
	out := collapseSpace(b.String())
	if strings.ContainsAny(out, "\"'`") {
		out = maskQuoted(out)
	}
	return out
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHexDigit(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' }

// tokenEnd is the end of the token starting at s[start], a token byte:
// the longest match there of [a-z0-9_]+(?:[-.+@][a-z0-9_]+)*.
func tokenEnd(s string, start int) int {
	i := start
	for {
		for i < len(s) && isTokenByte(s[i]) {
			i++
		}
		if i+1 < len(s) && strings.IndexByte("-.+@", s[i]) >= 0 && isTokenByte(s[i+1]) {
			i++
			continue
		}
		return i
	}
}

// maskToken applies the token rules of NormalizeMessage to one token.
func maskToken(tok, prev string) string {
	switch {
	case isStatus(tok) && statusWords[prev]:
		return tok
	case strings.IndexByte(tok, '@') >= 0:
		return "<email>"
	case isUUID(tok):
		return "<uuid>"
	case isNumber(tok):
		return "<n>"
	case isHex(tok):
		return "<hex>"
	case strings.ContainsAny(tok, "0123456789"), hasIDLetters(tok):
		return "<id>"
	}
	return tok
}

// isStatus matches [1-5][0-9][0-9].
func isStatus(s string) bool {
	return len(s) == 3 && '1' <= s[0] && s[0] <= '5' && isDigit(s[1]) && isDigit(s[2])
}

// isUUID matches [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return false
			}
		} else if !isHexDigit(s[i]) {
			return false
		}
	}
	return true
}

// isNumber matches [0-9]+(?:\.[0-9]+)*.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	digits := false
	for i := 0; i < len(s); i++ {
		switch {
		case isDigit(s[i]):
			digits = true
		case s[i] == '.' && digits:
			digits = false
		default:
			return false
		}
	}
	return digits
}

// isHex matches 0x[0-9a-f]+ or [0-9a-f]{8,}.
func isHex(s string) bool {
	h := s
	if len(s) > 2 && s[0] == '0' && s[1] == 'x' {
		h = s[2:]
	} else if len(s) < 8 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !isHexDigit(h[i]) {
			return false
		}
	}
	return true
}

// hasIDLetters reports whether tok has a run of letters that reads unlike
// English (the letters-only id rule of NormalizeMessage).
func hasIDLetters(tok string) bool {
	if len(tok) < idMinVowelless {
		return false
	}
	for i := 0; i < len(tok); {
		if tok[i] < 'a' || tok[i] > 'z' {
			i++
			continue
		}
		j := i
		for j < len(tok) && 'a' <= tok[j] && tok[j] <= 'z' {
			j++
		}
		if lettersLookLikeID(tok[i:j]) {
			return true
		}
		i = j
	}
	return false
}

// lettersLookLikeID applies the letters-only id rule to run, a maximal
// run of a–z.
func lettersLookLikeID(run string) bool {
	n := len(run)
	if n < idMinVowelless {
		return false
	}
	if !strings.ContainsAny(run, "aeiouy") {
		return true
	}
	if n < idMinLetters {
		return false
	}
	cost, row := 0, 0 // row 0 is the start of the run
	for i := 0; i < n; i++ {
		col := int(run[i] - 'a')
		cost += pairCost(row, col)
		row = col + 1
	}
	cost += pairCost(row, 26) // column 26 is the end of the run
	return 8*cost >= idCostEighths*(n+1)
}

func pairCost(row, col int) int {
	c := letterPairCost[row*27+col]
	if c <= '9' {
		return int(c - '0')
	}
	return int(c-'a') + 10
}

// collapseSpace is step 4 of NormalizeMessage: every run of
// [\t\n\x0B\f\r ] becomes one space, and a leading and a trailing space
// are removed.
func collapseSpace(s string) string {
	clean := true
	for i := 0; i < len(s) && clean; i++ {
		if isSpaceByte(s[i]) && (s[i] != ' ' || i == 0 || i == len(s)-1 || isSpaceByte(s[i+1])) {
			clean = false
		}
	}
	if clean {
		return s
	}
	b := make([]byte, 0, len(s))
	space := false
	for i := 0; i < len(s); i++ {
		if isSpaceByte(s[i]) {
			space = true
			continue
		}
		if space && len(b) > 0 {
			b = append(b, ' ')
		}
		space = false
		b = append(b, s[i])
	}
	return string(b)
}

// masks are the replacements of the token rules.
var masks = []string{"<email>", "<uuid>", "<n>", "<hex>", "<id>"}

// maskQuoted is step 5 of NormalizeMessage.
func maskQuoted(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; i < len(s); i++ {
		q := s[i]
		if q != '"' && q != '\'' && q != '`' {
			continue
		}
		j := i + 1
		for j < len(s) && j-i-1 <= 64 && s[j] != q && s[j] != '/' && !isSpaceByte(s[j]) {
			j++
		}
		if j >= len(s) || s[j] != q || j == i+1 || j-i-1 > 64 {
			continue // not a quoted value: the quote is plain text
		}
		inner := s[i+1 : j]
		for _, m := range masks {
			if inner != m && strings.Contains(inner, m) {
				b.WriteString(s[last : i+1])
				b.WriteString("<v>")
				last = j
				break
			}
		}
		i = j // the closing quote closes; scanning goes on after it
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isSpaceByte(c byte) bool {
	return c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c == ' '
}

// asciiLower maps the ASCII letters A–Z to a–z and leaves every other byte
// as it is.
func asciiLower(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return 'A' <= r && r <= 'Z' })
	if i < 0 {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}

// Fingerprint returns a short, stable identifier of a failure's cause: the
// first 8 bytes, in lower-case hexadecimal (16 digits), of the SHA-256 of
// the UTF-8 bytes of errorType, a NUL byte and NormalizeMessage(message).
// Failures that differ only in ids, numbers and case share a fingerprint,
// so one bug's ten thousand victims group as one line in the DLQ.
//
// It is the default; a queue's Policy.Fingerprint replaces it.
func Fingerprint(errorType, message string) string {
	if len(errorType)+len(message) > fpCacheMaxBytes {
		return fingerprint(errorType, message)
	}
	var h maphash.Hash
	h.SetSeed(fpCacheSeed)
	h.WriteString(errorType)
	h.WriteByte(0)
	h.WriteString(message)
	slot := &fpCache[h.Sum64()%uint64(len(fpCache))]
	if e := slot.Load(); e != nil && e.errorType == errorType && e.message == message {
		return e.fingerprint
	}
	fp := fingerprint(errorType, message)
	slot.Store(&fpEntry{errorType: strings.Clone(errorType), message: strings.Clone(message), fingerprint: fp})
	return fp
}

func fingerprint(errorType, message string) string {
	return hashFingerprint(errorType + "\x00" + NormalizeMessage(message))
}

// A small cache of recent fingerprints: during an outage thousands of
// attempts fail with the same message, and normalizing it is most of the
// cost of describing a failure. Direct-mapped (a new entry replaces the one
// in its slot), safe for concurrent use, holding at most fpCacheMaxBytes of
// text per slot; the result is the same with or without it.
const fpCacheMaxBytes = 1 << 10

var (
	fpCache     [256]atomic.Pointer[fpEntry]
	fpCacheSeed = maphash.MakeSeed()
)

type fpEntry struct{ errorType, message, fingerprint string }

// hashFingerprint is the first 8 bytes of the SHA-256 of text, in
// lower-case hexadecimal.
func hashFingerprint(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}

// Failure is a classified error, ready to be recorded as an attempt.
type Failure struct {
	// Type is ErrorTypeOf the error, capped at MaxErrorTypeLength.
	Type string
	// Message is the error text, capped at MaxMessageBytes.
	Message string
	// Stack is a panic's stack or a RemoteError's, capped at
	// MaxStackBytes; empty otherwise.
	Stack string
	// Fingerprint is Fingerprint(Type, Message).
	Fingerprint string
}

// Describe turns err into a Failure: its type (capped at
// MaxErrorTypeLength), capped message, a panic's capped stack, and its
// fingerprint (rdq.Fingerprint). The text is made valid UTF-8 without NUL
// bytes (see the Failure fields), so every store can record it.
// Describe(nil) is the zero Failure. It is Policy{}.Describe.
//
// Describe calls err's methods (Error, ErrorType, Unwrap, As). If one of them
// panics, as a typed nil pointer's Error often does, Describe does not: it
// describes a *MethodPanicError of type "error_method_panicked" instead,
// with the panic's stack.
func Describe(err error) Failure {
	return Policy{}.Describe(err)
}

// Describe turns err into a Failure as the package-level Describe does,
// with the fingerprint computed by p.Fingerprint when it is set (see
// Policy.Fingerprint). Workers and clients describe every failure of a
// queue with its policy.
func (p Policy) Describe(err error) (f Failure) {
	if err == nil {
		return Failure{}
	}
	defer func() {
		if v := recover(); v != nil {
			f = p.describe(NewMethodPanicError("error_method_panicked", err, v))
		}
	}()
	return p.describe(err)
}

// NewMethodPanicError returns the *MethodPanicError for a panic with value v
// in user code called about err; typ is its error type. It does not call
// err's methods.
func NewMethodPanicError(typ string, err error, v any) *MethodPanicError {
	e := &MethodPanicError{Type: typ, Value: v, Stack: debug.Stack()}
	if err != nil {
		rv := reflect.ValueOf(err)
		e.ErrType = rv.Type().String()
		switch rv.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
			e.NilPointer = rv.IsNil()
		}
	}
	return e
}

func (p Policy) describe(err error) Failure {
	f := Failure{
		Type:    Truncate(cleanText(ErrorTypeOf(err)), MaxErrorTypeLength),
		Message: Truncate(cleanText(err.Error()), MaxMessageBytes),
	}
	if pe, ok := as[*PanicError](err); ok {
		f.Stack = Truncate(cleanText(string(pe.Stack)), MaxStackBytes)
	} else if mp, ok := as[*MethodPanicError](err); ok {
		f.Stack = Truncate(cleanText(string(mp.Stack)), MaxStackBytes)
	} else if re, ok := as[*RemoteError](err); ok {
		f.Stack = Truncate(cleanText(re.Stack), MaxStackBytes)
	}
	f.Fingerprint = p.fingerprint(f.Type, f.Message)
	return f
}

// fingerprint computes the fingerprint of a failure of p's queue: the hash
// of p.Fingerprint's text, or Fingerprint when p has none, returns "" or
// panics.
func (p Policy) fingerprint(errorType, message string) (fp string) {
	if p.Fingerprint == nil {
		return Fingerprint(errorType, message)
	}
	defer func() {
		if recover() != nil {
			fp = Fingerprint(errorType, message)
		}
	}()
	if text := p.Fingerprint(errorType, message); text != "" {
		return hashFingerprint(text)
	}
	return Fingerprint(errorType, message)
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

// CancelledErrorType is the error type of the attempt a store records when
// an operator cancels a task.
const CancelledErrorType = "cancelled"

// CancelledFailure describes the attempt a store records when an operator
// cancels a waiting task: type CancelledErrorType, the operator's reason
// as the message (capped and cleaned like any message; a fixed text when
// reason is empty), and one fingerprint for every cancellation whatever
// the reason, so the DLQ groups them together.
func CancelledFailure(reason string) Failure {
	msg := Truncate(cleanText(reason), MaxMessageBytes)
	if msg == "" {
		msg = "cancelled by an operator"
	}
	return Failure{Type: CancelledErrorType, Message: msg, Fingerprint: Fingerprint(CancelledErrorType, "")}
}

// UnservedHandlerErrorType is the error type of the attempt recorded when a
// task is dead-lettered because no running worker registered its handler
// for longer than its queue allows (worker.QueueConfig.DeadLetterUnserved).
const UnservedHandlerErrorType = "unserved_handler"

// UnservedHandlerFailure describes that attempt for tasks of handler in
// queue, unserved for at least grace; one fingerprint per (queue, handler).
func UnservedHandlerFailure(queue, handler string, grace time.Duration) Failure {
	msg := Truncate(cleanText(fmt.Sprintf("no running worker has registered handler %q of queue %q for %s; deploy a worker that handles it, then redrive", handler, queue, grace)), MaxMessageBytes)
	return Failure{Type: UnservedHandlerErrorType, Message: msg, Fingerprint: Fingerprint(UnservedHandlerErrorType, msg)}
}
