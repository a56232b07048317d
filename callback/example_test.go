package callback_test

import (
	"context"
	"fmt"
	"io"
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
	secret := []byte("shared-secret-of-at-least-16-bytes")

	// The receiving service.
	receiver := httptest.NewServer(callback.VerifyHandler(secret, time.Minute,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Printf("received %s for task in queue %s, attempt %s\n",
				body, r.Header.Get(callback.HeaderQueue), r.Header.Get(callback.HeaderAttempt))
			if strings.Contains(string(body), "bad") {
				http.Error(w, "order has no lines", http.StatusUnprocessableEntity)
			}
		})))
	defer receiver.Close()

	// The rdq side: a handler a worker would register.
	caller, err := callback.New(callback.Config{Secret: secret, Allow: []string{"127.0.0.1"}})
	if err != nil {
		panic(err)
	}
	defer caller.Close()
	handle, err := caller.Handler(receiver.URL + "/hooks/orders")
	if err != nil {
		panic(err)
	}

	task := &rdq.Task{ID: rdq.NewID(), Queue: "orders", Handler: "charge", Payload: []byte(`{"order":42}`)}
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

// Sign computes the signature header a receiver checks with Verify. Any
// language can check it; the same value comes from
//
//	printf '1700000000.{"order":42}' | openssl dgst -sha256 -hmac 'shared-secret-of-at-least-16-bytes'
func ExampleSign() {
	fmt.Println(callback.Sign([]byte("shared-secret-of-at-least-16-bytes"), 1700000000, []byte(`{"order":42}`)))
	// Output:
	// v1=00c668ad92158c67bf57e79664aeef053d7723c6e8ca635ed8260a145889cb15
}
