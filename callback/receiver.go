package callback

import (
	"context"
	"errors"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/srjn45/rdq"
)

// ReceiverFunc does the work of one callback: m is the verified message
// and ctx the request's context, which ends when the caller gives up. Its
// error is the attempt's outcome, in the terms of package rdq (see
// Receiver).
type ReceiverFunc func(ctx context.Context, m *Message) error

// Receiver returns the handler of a callback receiver: it admits only the
// requests that pass Verify with secret and maxSkew, refusing the others
// as VerifyHandler does, runs handle with each verified message, and
// answers with the status that makes a Caller record handle's outcome:
//
//	nil                      204 No Content: the attempt succeeded
//	rdq.Permanent(err)       422 Unprocessable Entity: the task is dead-lettered at once
//	rdq.RetryAfter(d, err)   503 Service Unavailable, Retry-After d (rounded up to seconds)
//	rdq.Snooze(d)            the same (callbacks have no snooze: it is a failed attempt)
//	any other error          500 Internal Server Error: retried by the queue's policy
//	a panic                  500, an rdq.PanicError: type "panic", its value and stack
//
// The body of a failure is the structured failure body (see
// FailureContentType) of the error as rdq.Describe sees it: its error
// type (rdq.ErrorTypeOf), text and, for a panic, stack, which the Caller
// records as the attempt's. It is visible to the operators of the queue:
// it must hold nothing they may not see.
func Receiver(secret []byte, maxSkew time.Duration, handle ReceiverFunc) http.Handler {
	return VerifyHandler(secret, maxSkew, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := MessageFrom(r.Context())
		if !ok {
			http.Error(w, "callback: no verified message", http.StatusInternalServerError)
			return
		}
		err := runReceiver(r.Context(), handle, m)
		if err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		WriteFailure(w, err)
	}))
}

// WriteFailure answers a failed callback with err as Receiver does: the
// status of its class (422 for rdq.Permanent, 503 and Retry-After for
// rdq.RetryAfter and rdq.Snooze, 500 otherwise) and the structured failure
// body of err as rdq.Describe sees it. Handlers behind VerifyHandler that
// write their own responses answer failures with it. A nil err is a bug
// of the caller: it is answered as a retryable failure saying so.
func WriteFailure(w http.ResponseWriter, err error) {
	if err == nil {
		err = errors.New("callback: WriteFailure was called with a nil error")
	}
	status := http.StatusInternalServerError
	if rdq.IsPermanent(err) {
		status = http.StatusUnprocessableEntity
	} else if d, ok := delayOf(err); ok {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((max(d, 0)+time.Second-1)/time.Second), 10))
		status = http.StatusServiceUnavailable
	}
	writeFailure(w, status, err)
}

// runReceiver runs handle, turning a panic into an error.
func runReceiver(ctx context.Context, handle ReceiverFunc, m *Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			err = &rdq.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return handle(ctx, m)
}

// delayOf returns the delay err asks for with rdq.RetryAfter or
// rdq.Snooze.
func delayOf(err error) (time.Duration, bool) {
	if d, ok := rdq.RetryAfterOf(err); ok {
		return d, true
	}
	return rdq.SnoozeOf(err)
}
