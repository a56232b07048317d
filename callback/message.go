package callback

import (
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/srjn45/rdq"
)

// MessageType is the "type" of every callback message.
const MessageType = "rdq.task"

// Message is the signed JSON body of a callback request, in the payload
// structure Standard Webhooks recommends:
//
//	{
//	  "type": "rdq.task",
//	  "timestamp": "2024-06-01T12:00:00Z",
//	  "data": {
//	    "id": "0190...",            the task's UUID, also the webhook-id header
//	    "queue": "orders",
//	    "handler": "charge",
//	    "attempt": 1,               this attempt's number in the task's life
//	    "life": 0,                  0, +1 per redrive
//	    "lease_token": 7,           the execution's fencing token
//	    "content_type": "application/json",
//	    "headers": {"tenant": "acme"},
//	    "payload": {"order": 42}    a JSON payload as it is, or
//	    "payload_base64": "..."     any other payload, standard base64
//	  }
//	}
//
// The task id with the lease token names one execution: a receiver can use
// the pair as an idempotency key, and refuse an execution older (a smaller
// lease token) than one it has seen. The payload is under "payload" when
// the content type is JSON (application/json or a +json type) and the
// payload is valid JSON, byte for byte as submitted; otherwise it is under
// "payload_base64". An empty payload has neither.
type Message struct {
	// Type is MessageType.
	Type string `json:"type"`
	// Timestamp is when the request was signed.
	Timestamp time.Time `json:"timestamp"`
	// Data is the task execution the callback asks for.
	Data Execution `json:"data"`
	// Raw is the signed body, as received (set by Verify).
	Raw []byte `json:"-"`
}

// Execution is one execution of a task, the Data of a Message.
type Execution struct {
	ID          string            `json:"id"`
	Queue       string            `json:"queue"`
	Handler     string            `json:"handler"`
	Attempt     int               `json:"attempt"`
	Life        int               `json:"life"`
	LeaseToken  int64             `json:"lease_token"`
	ContentType string            `json:"content_type,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// Payload holds a JSON payload as submitted; PayloadBase64 any other
	// payload, decoded. Use Body for either.
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 []byte          `json:"payload_base64,omitempty"`
}

// Body returns the task's payload, whichever member carried it.
func (e *Execution) Body() []byte {
	if len(e.Payload) > 0 {
		return e.Payload
	}
	return e.PayloadBase64
}

// isJSON reports whether content type ct names JSON.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// marshalMessage renders the callback body of attempt t at now. A JSON
// payload is spliced in as it is, so the receiver gets the submitted bytes.
func marshalMessage(t *rdq.Task, now time.Time) ([]byte, error) {
	data := Execution{
		ID:          t.ID.String(),
		Queue:       t.Queue,
		Handler:     t.Handler,
		Attempt:     t.NextAttempt(),
		Life:        t.Life,
		LeaseToken:  t.LeaseToken,
		ContentType: t.ContentType,
		Headers:     t.Headers,
	}
	inline := len(t.Payload) > 0 && isJSON(t.ContentType) && json.Valid(t.Payload)
	if !inline {
		data.PayloadBase64 = t.Payload
	}
	b, err := json.Marshal(Message{Type: MessageType, Timestamp: now.UTC().Truncate(time.Second), Data: data})
	if err != nil {
		return nil, fmt.Errorf("callback: encoding the message of task %s: %w", t.ID, err)
	}
	if !inline {
		return b, nil
	}
	// b ends with the closing braces of data and of the message.
	out := make([]byte, 0, len(b)+len(t.Payload)+16)
	out = append(out, b[:len(b)-2]...)
	out = append(out, `,"payload":`...)
	out = append(out, t.Payload...)
	out = append(out, "}}"...)
	return out, nil
}
