package callback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
)

// A receiver verifies each callback before acting on it; the caller turns
// the receiver's answer into the attempt's outcome.
func Example() {
	secret := []byte("whsec_c2hhcmVkLXNlY3JldC1vZi1hdC1sZWFzdC0xNi1ieXRlcw==")

	// The receiving service: VerifyHandler admits only signed, fresh
	// requests and hands over the verified message.
	receiver := httptest.NewServer(callback.VerifyHandler(secret, time.Minute,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m, _ := callback.MessageFrom(r.Context())
			fmt.Printf("received %s for task in queue %s, attempt %d\n", m.Data.Body(), m.Data.Queue, m.Data.Attempt)
			if strings.Contains(string(m.Data.Body()), "bad") {
				http.Error(w, "order has no lines", http.StatusUnprocessableEntity)
			}
		})))
	defer receiver.Close()

	// The rdq side: a handler a worker would register. The receiver runs
	// on the loopback interface, which callbacks may reach only when
	// AllowAddrs says so.
	caller, err := callback.New(callback.Config{Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
	if err != nil {
		panic(err)
	}
	defer caller.Close()
	handle, err := caller.Handler(callback.Target{URL: receiver.URL + "/hooks/orders", Secret: secret})
	if err != nil {
		panic(err)
	}

	task := &rdq.Task{ID: rdq.NewID(), Queue: "orders", Handler: "charge", ContentType: "application/json", Payload: []byte(`{"order":42}`)}
	fmt.Println("error:", handle(context.Background(), task))

	task.Payload = []byte(`{"order":"bad"}`)
	err = handle(context.Background(), task)
	fmt.Println("permanent:", rdq.IsPermanent(err), "type:", rdq.ErrorTypeOf(err))
	// Output:
	// received {"order":42} for task in queue orders, attempt 1
	// error: <nil>
	// received {"order":"bad"} for task in queue orders, attempt 1
	// permanent: true type: http_422
}

// Sign computes the webhook-signature header of the Standard Webhooks
// scheme, which any Standard Webhooks library checks. The same value comes
// from
//
//	printf 'msg_1.1700000000.{"order":42}' | openssl dgst -sha256 -hmac 'shared-secret-of-at-least-16-bytes' -binary | base64
func ExampleSign() {
	fmt.Println(callback.Sign([]byte("shared-secret-of-at-least-16-bytes"), "msg_1", 1700000000, []byte(`{"order":42}`)))
	// Output:
	// v1,B3xrJyFRMDuk2tjw1GGgLY4ueRqySJ+yELT6/37wcn8=
}

// A Receiver verifies each callback and answers with the outcome its
// function returns, which the caller records as the attempt's.
func ExampleReceiver() {
	secret := []byte("whsec_c2hhcmVkLXNlY3JldC1vZi1hdC1sZWFzdC0xNi1ieXRlcw==")
	receiver := httptest.NewServer(callback.Receiver(secret, callback.DefaultMaxSkew,
		func(ctx context.Context, m *callback.Message) error {
			var order struct{ Lines int }
			if err := json.Unmarshal(m.Data.Body(), &order); err != nil || order.Lines == 0 {
				return rdq.Permanent(orderError{"empty_order", "the order has no lines"})
			}
			if order.Lines > 100 {
				return rdq.RetryAfter(time.Minute, orderError{"night_shift", "large orders wait for the night shift"})
			}
			return nil
		}))
	defer receiver.Close()

	caller, err := callback.New(callback.Config{Secret: secret, Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
	if err != nil {
		panic(err)
	}
	defer caller.Close()
	handle, err := caller.Handler(callback.Target{URL: receiver.URL + "/hooks/orders"})
	if err != nil {
		panic(err)
	}
	for _, payload := range []string{`{"lines": 3}`, `{"lines": 0}`, `{"lines": 500}`} {
		task := &rdq.Task{ID: rdq.NewID(), Queue: "orders", Handler: "charge", ContentType: "application/json", Payload: []byte(payload)}
		err := handle(context.Background(), task)
		// The attempt records what the receiver's function returned.
		f := rdq.Describe(err)
		after, _ := rdq.RetryAfterOf(err)
		fmt.Printf("%s: error type %q, message %q, permanent %t, retry after %s\n", payload, f.Type, f.Message, rdq.IsPermanent(err), after)
	}
	// Output:
	// {"lines": 3}: error type "", message "", permanent false, retry after 0s
	// {"lines": 0}: error type "empty_order", message "the order has no lines", permanent true, retry after 0s
	// {"lines": 500}: error type "night_shift", message "large orders wait for the night shift", permanent false, retry after 1m0s
}

// orderError is a failure with an error type of its own, which a Receiver
// sends and a Caller records.
type orderError struct{ kind, msg string }

func (e orderError) Error() string     { return e.msg }
func (e orderError) ErrorType() string { return e.kind }

// A handler behind VerifyHandler that writes its own responses answers a
// failure with WriteFailure, and the attempt records its type and message.
func ExampleWriteFailure() {
	secret := []byte("whsec_c2hhcmVkLXNlY3JldC1vZi1hdC1sZWFzdC0xNi1ieXRlcw==")
	receiver := httptest.NewServer(callback.VerifyHandler(secret, callback.DefaultMaxSkew,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m, _ := callback.MessageFrom(r.Context())
			if m.Data.Attempt < 3 {
				callback.WriteFailure(w, orderError{"ledger_busy", "the ledger is busy"})
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})))
	defer receiver.Close()

	caller, err := callback.New(callback.Config{Secret: secret, Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
	if err != nil {
		panic(err)
	}
	defer caller.Close()
	handle, err := caller.Handler(callback.Target{URL: receiver.URL + "/hooks/orders"})
	if err != nil {
		panic(err)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		task := &rdq.Task{ID: rdq.NewID(), Queue: "orders", Handler: "charge", Attempts: attempt - 1} // the callback carries attempt number Attempts+1
		f := rdq.Describe(handle(context.Background(), task))
		fmt.Printf("attempt %d: error type %q, message %q\n", attempt, f.Type, f.Message)
	}
	// Output:
	// attempt 1: error type "ledger_busy", message "the ledger is busy"
	// attempt 2: error type "ledger_busy", message "the ledger is busy"
	// attempt 3: error type "", message ""
}
