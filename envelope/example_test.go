package envelope_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/envelope"
)

// A submission travels as a JSON envelope: the payload is base64 bytes with
// a content type, never a language-specific encoding.
func ExampleMarshal() {
	b, err := envelope.Marshal(envelope.Envelope{
		Task: rdq.Task{
			Queue:          "emails",
			Handler:        "send_welcome",
			Payload:        []byte(`{"user_id":42}`),
			ContentType:    "application/json",
			IdempotencyKey: "signup-42",
		},
		Delay: 30 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"version":1,"queue":"emails","handler":"send_welcome","payload":"eyJ1c2VyX2lkIjo0Mn0=","content_type":"application/json","idempotency_key":"signup-42","delay_ms":30000}
}

// Decoding validates the document and every limit; errors wrap
// rdq.ErrInvalid and say what to fix.
func ExampleUnmarshal() {
	e, err := envelope.Unmarshal([]byte(`{
		"version": 1,
		"queue": "emails",
		"handler": "send_welcome",
		"payload": "eyJ1c2VyX2lkIjo0Mn0=",
		"content_type": "application/json",
		"delay_ms": 30000,
		"added_by_a_newer_sender": true
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Task.Queue, e.Task.Handler, string(e.Task.Payload), e.Delay)

	_, err = envelope.Unmarshal([]byte(`{"version": 1, "queue": "emails", "handler": "send welcome"}`))
	fmt.Println(errors.Is(err, rdq.ErrInvalid))
	fmt.Println(err)
	// Output:
	// emails send_welcome {"user_id":42} 30s
	// true
	// rdq: invalid input: handler name "send welcome" contains ' '; use letters, digits and . _ - : /
}
