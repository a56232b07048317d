package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/srjn45/rdq"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Version is the version of the wire envelope this package writes
// and the only one it reads. It travels as the JSON number 1.
const Version = 1

// MaxBytes bounds the raw JSON document Unmarshal accepts,
// checked before any decoding, and the document Marshal produces. It
// leaves room for a payload of MaxPayloadBytes in base64, full headers and a
// long attempt history.
const MaxBytes = 16 << 20

// Numeric bounds of the wire format, chosen so that every value fits the
// integer types of common languages: counts fit a signed 32-bit integer, and
// tokens fit the integers a JSON number represents exactly (2^53 - 1).
const (
	maxWireCount = math.MaxInt32
	maxWireToken = 1<<53 - 1
	maxDelayMS   = math.MaxInt64 / int64(time.Millisecond)
)

// Envelope is the language-neutral, versioned wire shape of a task, shared by
// the client SDKs, the server API and store plugins. One JSON object serves
// both directions:
//
//   - a submission carries version, queue, handler and optionally payload,
//     content_type, headers, idempotency_key and delay_ms; the receiver
//     assigns the id unless the submitter chose one;
//   - a task document (what a store or the server returns) carries the
//     task's state as well, and optionally its attempt history.
//
// # Wire format, version 1
//
//	{
//	  "version": 1,                           // required, the JSON number 1
//	  "id": "0190a5b2-...-...",               // UUID, lowercase canonical form
//	  "queue": "emails",                      // required, see ValidateName
//	  "handler": "send_welcome",              // required, see ValidateName
//	  "payload": "eyJ1c2VyIjo0Mn0=",          // standard base64 (RFC 4648 §4, padded)
//	  "content_type": "application/json",
//	  "headers": {"traceparent": "00-..."},   // string to string
//	  "idempotency_key": "signup-42",
//	  "status": "DEAD",                       // PENDING, IN_FLIGHT, SUCCEEDED, DEAD
//	  "attempts": 3,                          // attempts in the current life
//	  "life": 0,                              // +1 per redrive
//	  "max_attempts": 5,                      // the task's own budget; -1 unlimited
//	  "timeout_ms": 60000,                    // the task's own execution timeout
//	  "snoozes": 2,                           // snoozes in the current life
//	  "delay_ms": 30000,                      // submission: postpone the first attempt
//	  "next_attempt_at": "2024-06-01T12:00:00Z",
//	  "lease_token": 3,
//	  "lease_expires_at": "...",
//	  "lease_owner": "worker-1",
//	  "created_at": "...", "updated_at": "...", "finished_at": "...",
//	  "last_error": {"type": "...", "message": "...", "fingerprint": "..."},
//	  "history": [                            // attempt history, oldest first
//	    {"task_id": "0190a5b2-...", "number": 1,  // task_id optional: the id above
//	     "life": 0, "outcome": "RETRYABLE_FAILURE",
//	     "error_type": "...", "message": "...", "stack": "...",
//	     "worker_id": "...", "lease_token": 1,
//	     "started_at": "...", "finished_at": "..."}
//	  ]
//	}
//
// Rules a reader and writer in any language keep:
//
//   - Every field but version, queue and handler is optional. An absent
//     field, or null, means the zero value (empty, 0, no time); writers omit
//     zero values.
//   - Unknown fields are ignored, so later versions can add fields. Field
//     names match exactly (case-sensitive).
//   - No object repeats a key, known or unknown, at any level (the envelope,
//     headers, last_error, each attempt); keys are compared after their
//     escapes are decoded, so "queue" and "\u0071ueue" are the same key. A
//     document that repeats one is rejected, because JSON readers disagree
//     on which of the two wins.
//   - Times are RFC 3339 strings; rdq writes them in UTC with as many
//     fractional-second digits as needed, and reads any offset.
//   - Integers are plain JSON integers, without fraction or exponent.
//     delay_ms and timeout_ms are non-negative whole numbers of
//     milliseconds (a finer duration is rounded up).
//   - attempts, life, max_attempts (-1 for rdq.Unlimited), snoozes and
//     history numbers fit a signed 32-bit integer;
//     lease tokens are at most 2^53 - 1.
//   - History attempts are listed by strictly increasing number, and each
//     has a number (from 1) and an outcome; their task is the envelope's id.
//     An attempt may name its task_id; one that names another task (or
//     names one when the envelope has no id) is rejected, not re-assigned.
//   - The limits of Task.Validate apply: names, payload size after base64
//     decoding, content type, headers and idempotency key.
//   - The whole document is valid UTF-8 and at most MaxBytes.
//   - A reader may check fields in document order and report the first
//     problem it meets, so writers put version first.
type Envelope struct {
	// Task is the task, its submitter-controlled fields and its state.
	Task rdq.Task
	// History is the task's attempt history, oldest first; nil when the
	// document carries none. Each attempt's TaskID is Task.ID.
	History []rdq.Attempt
	// Delay postpones the first attempt of a submitted task. It travels
	// as whole milliseconds (delay_ms); a finer delay is rounded up.
	Delay time.Duration
}

// Validate checks everything the wire format requires of e, the limits of
// Task.Validate included. It returns the first problem as an error wrapping
// ErrInvalid.
func (e *Envelope) Validate() error {
	if err := e.Task.Validate(); err != nil {
		return err
	}
	t := &e.Task
	if t.Status != "" && !t.Status.Valid() {
		return fmt.Errorf("%w: status %q is not one of PENDING, IN_FLIGHT, SUCCEEDED, DEAD; omit it when submitting", rdq.ErrInvalid, truncate(string(t.Status)))
	}
	if err := checkCount("attempts", int64(t.Attempts), 0); err != nil {
		return err
	}
	if err := checkCount("life", int64(t.Life), 0); err != nil {
		return err
	}
	if err := checkCount("max_attempts", int64(t.MaxAttempts), rdq.Unlimited); err != nil {
		return err
	}
	if t.Timeout < 0 {
		return fmt.Errorf("%w: timeout %s is negative; omit it for the queue's timeout", rdq.ErrInvalid, t.Timeout)
	}
	if err := checkCount("snoozes", int64(t.Snoozes), 0); err != nil {
		return err
	}
	if err := checkToken("lease_token", t.LeaseToken); err != nil {
		return err
	}
	if e.Delay < 0 {
		return fmt.Errorf("%w: delay %s is negative; use 0 to make the task due now", rdq.ErrInvalid, e.Delay)
	}
	for _, ts := range []struct {
		name string
		t    time.Time
	}{
		{"next_attempt_at", t.NextAttemptAt},
		{"lease_expires_at", t.LeaseExpiresAt},
		{"created_at", t.CreatedAt},
		{"updated_at", t.UpdatedAt},
		{"finished_at", t.FinishedAt},
	} {
		if err := checkTime(ts.name, ts.t); err != nil {
			return err
		}
	}
	prev := 0
	for i := range e.History {
		if err := validateAttempt(i, &e.History[i], t.ID, prev); err != nil {
			return err
		}
		prev = e.History[i].Number
	}
	return nil
}

// validateAttempt checks attempt i of the history of task id, prev being
// the number of the attempt before it. It formats nothing unless the
// attempt is invalid, so checking a long history allocates nothing.
func validateAttempt(i int, a *rdq.Attempt, id rdq.ID, prev int) error {
	if (a.TaskID.IsZero() || a.TaskID == id) && a.Number > prev && a.Number <= maxWireCount &&
		a.Life >= 0 && a.Life <= maxWireCount && a.Outcome.Valid() &&
		a.LeaseToken >= 0 && a.LeaseToken <= maxWireToken && validYear(a.StartedAt) && validYear(a.FinishedAt) {
		return nil
	}
	where := fmt.Sprintf("history[%d]", i)
	if !a.TaskID.IsZero() && a.TaskID != id {
		return fmt.Errorf("%w: %s belongs to task %s, not %s; an envelope carries one task's history", rdq.ErrInvalid, where, a.TaskID, id)
	}
	if err := checkCount(where+".number", int64(a.Number), 1); err != nil {
		return err
	}
	if a.Number <= prev {
		return fmt.Errorf("%w: %s.number %d does not follow %d; list attempts by strictly increasing number", rdq.ErrInvalid, where, a.Number, prev)
	}
	if err := checkCount(where+".life", int64(a.Life), 0); err != nil {
		return err
	}
	if !a.Outcome.Valid() {
		return fmt.Errorf("%w: %s.outcome %q is not one of SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED", rdq.ErrInvalid, where, truncate(string(a.Outcome)))
	}
	if err := checkToken(where+".lease_token", a.LeaseToken); err != nil {
		return err
	}
	if err := checkTime(where+".started_at", a.StartedAt); err != nil {
		return err
	}
	return checkTime(where+".finished_at", a.FinishedAt)
}

func checkCount(name string, v, min int64) error {
	if v < min || v > maxWireCount {
		return fmt.Errorf("%w: %s %d is out of range; use an integer from %d to %d", rdq.ErrInvalid, name, v, min, maxWireCount)
	}
	return nil
}

func checkToken(name string, v int64) error {
	if v < 0 || v > maxWireToken {
		return fmt.Errorf("%w: %s %d is out of range; use an integer from 0 to 2^53-1", rdq.ErrInvalid, name, v)
	}
	return nil
}

// validYear reports whether t is zero or has a year RFC 3339 can write.
func validYear(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

func checkTime(name string, t time.Time) error {
	if !validYear(t) {
		y := t.UTC().Year()
		return fmt.Errorf("%w: %s has year %d; RFC 3339 times need a year from 0 to 9999", rdq.ErrInvalid, name, y)
	}
	return nil
}

// Marshal encodes e as a compact version-1 JSON document. It
// validates e first (see Envelope.Validate), so everything it writes
// Unmarshal reads back to an equal Envelope, with two exceptions
// noted on the fields: Delay is rounded up to whole milliseconds, and times
// are written in UTC (an equal instant). Strings that are not valid UTF-8
// (outside the fields Task.Validate checks) are written with U+FFFD in place
// of the invalid bytes. Errors wrap ErrInvalid.
func Marshal(e Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	t := &e.Task
	w := wireEnvelope{
		Version:        Version,
		Queue:          t.Queue,
		Handler:        t.Handler,
		ContentType:    t.ContentType,
		IdempotencyKey: t.IdempotencyKey,
		Status:         string(t.Status),
		Attempts:       t.Attempts,
		Life:           t.Life,
		MaxAttempts:    t.MaxAttempts,
		TimeoutMS:      wireMillis(t.Timeout),
		Snoozes:        t.Snoozes,
		NextAttemptAt:  wireTime(t.NextAttemptAt),
		LeaseToken:     t.LeaseToken,
		LeaseExpiresAt: wireTime(t.LeaseExpiresAt),
		LeaseOwner:     t.LeaseOwner,
		CreatedAt:      wireTime(t.CreatedAt),
		UpdatedAt:      wireTime(t.UpdatedAt),
		FinishedAt:     wireTime(t.FinishedAt),
	}
	if !t.ID.IsZero() {
		w.ID = t.ID.String()
	}
	if len(t.Payload) > 0 {
		w.Payload = base64.StdEncoding.EncodeToString(t.Payload)
	}
	if len(t.Headers) > 0 {
		w.Headers = t.Headers
	}
	w.DelayMS = wireMillis(e.Delay)
	if !t.LastError.IsZero() {
		w.LastError = &wireError{Type: t.LastError.Type, Message: t.LastError.Message, Fingerprint: t.LastError.Fingerprint}
	}
	for _, a := range e.History {
		w.History = append(w.History, wireAttempt{
			Number:     a.Number,
			Life:       a.Life,
			Outcome:    string(a.Outcome),
			ErrorType:  a.ErrorType,
			Message:    a.Message,
			Stack:      a.Stack,
			WorkerID:   a.WorkerID,
			LeaseToken: a.LeaseToken,
			StartedAt:  wireTime(a.StartedAt),
			FinishedAt: wireTime(a.FinishedAt),
		})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, fmt.Errorf("rdq: encoding envelope of task %s: %w", t.ID, err)
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(out) > MaxBytes {
		return nil, fmt.Errorf("%w: envelope of task %s is %d bytes; the limit is %d: shorten its history", rdq.ErrInvalid, t.ID, len(out), MaxBytes)
	}
	return out, nil
}

// Unmarshal decodes and validates a JSON envelope. It rejects a
// document larger than MaxBytes before decoding it, a document that
// is not valid UTF-8 or not a JSON object, a missing or unsupported version,
// a key repeated within an object, a field of the wrong JSON type, invalid
// base64, an unknown status or outcome, a malformed id or time, and anything
// Envelope.Validate rejects (the limits of Task.Validate included). Unknown
// fields are ignored.
//
// The document is read in one pass, in document order, without building an
// intermediate tree: decoding stops at the first problem (a bad second
// attempt of a long history is rejected without reading the rest), and a
// valid document allocates little more than the decoded Envelope itself.
//
// Every error wraps ErrInvalid and names the offending field. The decoded
// Envelope is normalized: times are in UTC, and empty payload, headers and
// history are nil.
func Unmarshal(data []byte) (Envelope, error) {
	if len(data) > MaxBytes {
		return Envelope{}, fmt.Errorf("%w: envelope is %d bytes; the limit is %d: store large data elsewhere and submit a reference", rdq.ErrInvalid, len(data), MaxBytes)
	}
	if !utf8.Valid(data) {
		return Envelope{}, fmt.Errorf("%w: envelope is not valid UTF-8; JSON documents must be UTF-8 (send binary data base64-encoded in payload)", rdq.ErrInvalid)
	}
	d := envDecoder{data: data}
	e, ok := d.envelope()
	if !ok {
		return Envelope{}, d.err
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// MarshalJSON implements json.Marshaler with Marshal, so an Envelope
// can be embedded in larger JSON documents.
func (e Envelope) MarshalJSON() ([]byte, error) { return Marshal(e) }

// UnmarshalJSON implements json.Unmarshaler with Unmarshal. On error
// e is left unchanged.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	d, err := Unmarshal(data)
	if err != nil {
		return err
	}
	*e = d
	return nil
}

type wireEnvelope struct {
	Version        int               `json:"version"`
	ID             string            `json:"id,omitempty"`
	Queue          string            `json:"queue"`
	Handler        string            `json:"handler"`
	Payload        string            `json:"payload,omitempty"`
	ContentType    string            `json:"content_type,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Status         string            `json:"status,omitempty"`
	Attempts       int               `json:"attempts,omitempty"`
	Life           int               `json:"life,omitempty"`
	MaxAttempts    int               `json:"max_attempts,omitempty"`
	TimeoutMS      int64             `json:"timeout_ms,omitempty"`
	Snoozes        int               `json:"snoozes,omitempty"`
	DelayMS        int64             `json:"delay_ms,omitempty"`
	NextAttemptAt  string            `json:"next_attempt_at,omitempty"`
	LeaseToken     int64             `json:"lease_token,omitempty"`
	LeaseExpiresAt string            `json:"lease_expires_at,omitempty"`
	LeaseOwner     string            `json:"lease_owner,omitempty"`
	CreatedAt      string            `json:"created_at,omitempty"`
	UpdatedAt      string            `json:"updated_at,omitempty"`
	FinishedAt     string            `json:"finished_at,omitempty"`
	LastError      *wireError        `json:"last_error,omitempty"`
	History        []wireAttempt     `json:"history,omitempty"`
}

type wireError struct {
	Type        string `json:"type,omitempty"`
	Message     string `json:"message,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

type wireAttempt struct {
	Number     int    `json:"number"`
	Life       int    `json:"life,omitempty"`
	Outcome    string `json:"outcome"`
	ErrorType  string `json:"error_type,omitempty"`
	Message    string `json:"message,omitempty"`
	Stack      string `json:"stack,omitempty"`
	WorkerID   string `json:"worker_id,omitempty"`
	LeaseToken int64  `json:"lease_token,omitempty"`
	StartedAt  string `json:"started_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
}

// wireMillis is d in whole milliseconds, rounded up; 0 for d <= 0.
func wireMillis(d time.Duration) int64 {
	switch {
	case d > math.MaxInt64-time.Millisecond:
		return maxDelayMS
	case d > 0:
		return int64((d + time.Millisecond - 1) / time.Millisecond)
	}
	return 0
}

func wireTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if strings.ContainsRune("-0123456789", rune(raw[0])) {
		return "a number"
	}
	return "invalid JSON"
}
