package rdq_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/srjn45/rdq"
)

// A handler returns Permanent for a failure that retrying cannot fix: the
// task goes to the dead-letter queue at once.
func ExamplePermanent() {
	err := rdq.Permanent(fmt.Errorf("card number %q fails the checksum", "4111-xxxx"))
	fmt.Println(rdq.IsPermanent(err))

	d := rdq.Policy{MaxAttempts: 10}.Decide(1, err, 0)
	fmt.Println(d.Outcome, d.Dead)
	// Output:
	// true
	// PERMANENT_FAILURE true
}

// A handler that was rate limited asks for its next attempt no sooner than
// the server's Retry-After, whatever the backoff schedule says.
func ExampleRetryAfter() {
	errRateLimited := errors.New("429 Too Many Requests")
	err := rdq.RetryAfter(90*time.Second, errRateLimited)

	d := rdq.Policy{}.Decide(1, err, 0.5)
	fmt.Println(d.Outcome, d.Dead, d.RetryIn)
	fmt.Println(errors.Is(err, errRateLimited))
	// Output:
	// RETRYABLE_FAILURE false 1m30s
	// true
}

// A handler that is not ready yet returns Snooze: the task waits a minute
// without spending an attempt. (RetryAfter, above, records a failed one.)
func ExampleSnooze() {
	err := rdq.Snooze(time.Minute)
	d, ok := rdq.SnoozeOf(err)
	fmt.Println(ok, d, rdq.ErrorTypeOf(err))
	fmt.Println(rdq.Policy{}.CanSnooze(rdq.DefaultMaxSnoozes-1), rdq.Policy{MaxSnoozes: 3}.CanSnooze(3))
	// Output:
	// true 1m0s snoozed
	// true false
}

// Delay is a pure function of the attempt number: the schedule can be
// printed, tested and reasoned about before anything fails.
func ExamplePolicy_Delay() {
	p := rdq.Policy{
		MaxAttempts:    8,
		InitialBackoff: time.Second,
		Multiplier:     2,
		MaxBackoff:     time.Minute,
	}
	for n := 1; n < p.MaxAttempts; n++ {
		fmt.Printf("after attempt %d: retry in %s\n", n, p.Delay(n))
	}
	fmt.Println("after attempt 8: dead:", p.Exhausted(8))
	// Output:
	// after attempt 1: retry in 1s
	// after attempt 2: retry in 2s
	// after attempt 3: retry in 4s
	// after attempt 4: retry in 8s
	// after attempt 5: retry in 16s
	// after attempt 6: retry in 32s
	// after attempt 7: retry in 1m0s
	// after attempt 8: dead: true
}

// The jittered delay lies between Delay(n)×(1-Jitter) and Delay(n); the
// caller supplies the random draw u, which keeps the function pure.
func ExamplePolicy_JitteredDelay() {
	p := rdq.Policy{InitialBackoff: 10 * time.Second, Jitter: 0.5}
	for _, u := range []float64{0, 0.5, 0.99} {
		fmt.Println(p.JitteredDelay(1, u))
	}
	// Output:
	// 10s
	// 7.5s
	// 5.05s
}

// Failures that differ only in ids, numbers and case share a fingerprint,
// so the dead-letter queue groups them as one cause; status codes stay
// apart.
func ExampleFingerprint() {
	a := "order 1042 failed: upstream 0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b returned 503"
	b := "Order 77 failed: upstream 0190a5b3-1111-7a41-8f00-000000000000 returned 503"
	c := "order 1042 failed: upstream 0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b returned 404"
	fmt.Println(rdq.NormalizeMessage(a))
	fmt.Println(rdq.Fingerprint("*api.Error", a) == rdq.Fingerprint("*api.Error", b))
	fmt.Println(rdq.Fingerprint("*api.Error", a) == rdq.Fingerprint("*api.Error", c))
	// Output:
	// order <n> failed: upstream <uuid> returned 503
	// true
	// false
}

// A queue's policy can group failures its own way; here by the tenant
// named at the start of the message, whatever follows.
func ExamplePolicy_Describe() {
	p := rdq.Policy{Fingerprint: func(errorType, message string) string {
		tenant, _, _ := strings.Cut(message, ":")
		return errorType + "/" + tenant
	}}
	a := p.Describe(errors.New("acme: order 1 failed"))
	b := p.Describe(errors.New("acme: quota exceeded"))
	c := p.Describe(errors.New("globex: order 1 failed"))
	fmt.Println(a.Fingerprint == b.Fingerprint, a.Fingerprint == c.Fingerprint)
	// Output: true false
}

type declinedError struct{}

func (declinedError) Error() string     { return "card declined" }
func (declinedError) ErrorType() string { return "card_declined" }

// ErrorTypeOf names a failure for grouping and filtering: an ErrorType
// method wins; otherwise the Go type under the plain wrappers.
func ExampleErrorTypeOf() {
	pathErr := &fs.PathError{Op: "open", Path: "rates.csv", Err: fs.ErrNotExist}
	fmt.Println(rdq.ErrorTypeOf(fmt.Errorf("loading rates: %w", pathErr)))
	fmt.Println(rdq.ErrorTypeOf(rdq.Permanent(declinedError{})))
	fmt.Println(rdq.ErrorTypeOf(errors.New("boom")))
	fmt.Println(rdq.ErrorTypeOf(&rdq.TimeoutError{After: time.Minute}))
	// Output:
	// *fs.PathError
	// card_declined
	// *errors.errorString
	// timeout
}

// Truncate caps text at a byte limit and says how much it dropped.
func ExampleTruncate() {
	fmt.Println(rdq.Truncate("connection reset by peer while reading the response body", 40))
	// Output:
	// connection reset …[truncated 39 bytes]
}
