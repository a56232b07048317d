package rdq

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// EnvelopeVersion is the version of the wire envelope this package writes
// and the only one it reads. It travels as the JSON number 1.
const EnvelopeVersion = 1

// MaxEnvelopeBytes bounds the raw JSON document UnmarshalEnvelope accepts,
// checked before any decoding, and the document MarshalEnvelope produces. It
// leaves room for a payload of MaxPayloadBytes in base64, full headers and a
// long attempt history.
const MaxEnvelopeBytes = 16 << 20

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
//	  "delay_ms": 30000,                      // submission: postpone the first attempt
//	  "next_attempt_at": "2024-06-01T12:00:00Z",
//	  "lease_token": 3,
//	  "lease_expires_at": "...",
//	  "lease_owner": "worker-1",
//	  "created_at": "...", "updated_at": "...", "finished_at": "...",
//	  "last_error": {"type": "...", "message": "...", "fingerprint": "..."},
//	  "history": [                            // attempt history, oldest first
//	    {"number": 1, "life": 0, "outcome": "RETRYABLE_FAILURE",
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
//   - Times are RFC 3339 strings; rdq writes them in UTC with as many
//     fractional-second digits as needed, and reads any offset.
//   - Integers are plain JSON integers, without fraction or exponent.
//     delay_ms is a non-negative whole number of milliseconds.
//   - attempts, life and history numbers fit a signed 32-bit integer;
//     lease tokens are at most 2^53 - 1.
//   - History attempts are listed by strictly increasing number, and each
//     has a number (from 1) and an outcome; their task is the envelope's id.
//   - The limits of Task.Validate apply: names, payload size after base64
//     decoding, content type, headers and idempotency key.
//   - The whole document is valid UTF-8 and at most MaxEnvelopeBytes.
type Envelope struct {
	// Task is the task, its submitter-controlled fields and its state.
	Task Task
	// History is the task's attempt history, oldest first; nil when the
	// document carries none. Each attempt's TaskID is Task.ID.
	History []Attempt
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
		return fmt.Errorf("%w: status %q is not one of PENDING, IN_FLIGHT, SUCCEEDED, DEAD; omit it when submitting", ErrInvalid, truncateForError(string(t.Status)))
	}
	if err := checkCount("attempts", int64(t.Attempts), 0); err != nil {
		return err
	}
	if err := checkCount("life", int64(t.Life), 0); err != nil {
		return err
	}
	if err := checkToken("lease_token", t.LeaseToken); err != nil {
		return err
	}
	if e.Delay < 0 {
		return fmt.Errorf("%w: delay %s is negative; use 0 to make the task due now", ErrInvalid, e.Delay)
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
		a := &e.History[i]
		where := fmt.Sprintf("history[%d]", i)
		if !a.TaskID.IsZero() && a.TaskID != t.ID {
			return fmt.Errorf("%w: %s belongs to task %s, not %s; an envelope carries one task's history", ErrInvalid, where, a.TaskID, t.ID)
		}
		if err := checkCount(where+".number", int64(a.Number), 1); err != nil {
			return err
		}
		if a.Number <= prev {
			return fmt.Errorf("%w: %s.number %d does not follow %d; list attempts by strictly increasing number", ErrInvalid, where, a.Number, prev)
		}
		prev = a.Number
		if err := checkCount(where+".life", int64(a.Life), 0); err != nil {
			return err
		}
		if !a.Outcome.Valid() {
			return fmt.Errorf("%w: %s.outcome %q is not one of SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED", ErrInvalid, where, truncateForError(string(a.Outcome)))
		}
		if err := checkToken(where+".lease_token", a.LeaseToken); err != nil {
			return err
		}
		if err := checkTime(where+".started_at", a.StartedAt); err != nil {
			return err
		}
		if err := checkTime(where+".finished_at", a.FinishedAt); err != nil {
			return err
		}
	}
	return nil
}

func checkCount(name string, v, min int64) error {
	if v < min || v > maxWireCount {
		return fmt.Errorf("%w: %s %d is out of range; use an integer from %d to %d", ErrInvalid, name, v, min, maxWireCount)
	}
	return nil
}

func checkToken(name string, v int64) error {
	if v < 0 || v > maxWireToken {
		return fmt.Errorf("%w: %s %d is out of range; use an integer from 0 to 2^53-1", ErrInvalid, name, v)
	}
	return nil
}

func checkTime(name string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%w: %s has year %d; RFC 3339 times need a year from 0 to 9999", ErrInvalid, name, y)
	}
	return nil
}

// MarshalEnvelope encodes e as a compact version-1 JSON document. It
// validates e first (see Envelope.Validate), so everything it writes
// UnmarshalEnvelope reads back to an equal Envelope, with two exceptions
// noted on the fields: Delay is rounded up to whole milliseconds, and times
// are written in UTC (an equal instant). Strings that are not valid UTF-8
// (outside the fields Task.Validate checks) are written with U+FFFD in place
// of the invalid bytes. Errors wrap ErrInvalid.
func MarshalEnvelope(e Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	t := &e.Task
	w := wireEnvelope{
		Version:        EnvelopeVersion,
		Queue:          t.Queue,
		Handler:        t.Handler,
		ContentType:    t.ContentType,
		IdempotencyKey: t.IdempotencyKey,
		Status:         string(t.Status),
		Attempts:       t.Attempts,
		Life:           t.Life,
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
	switch {
	case e.Delay > math.MaxInt64-time.Millisecond:
		w.DelayMS = maxDelayMS
	case e.Delay > 0:
		w.DelayMS = int64((e.Delay + time.Millisecond - 1) / time.Millisecond)
	}
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
	if len(out) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%w: envelope of task %s is %d bytes; the limit is %d: shorten its history", ErrInvalid, t.ID, len(out), MaxEnvelopeBytes)
	}
	return out, nil
}

// UnmarshalEnvelope decodes and validates a JSON envelope. It rejects a
// document larger than MaxEnvelopeBytes before decoding it, a document that
// is not valid UTF-8 or not a JSON object, a missing or unsupported version,
// a field of the wrong JSON type, invalid base64, an unknown status or
// outcome, a malformed id or time, and anything Envelope.Validate rejects
// (the limits of Task.Validate included). Unknown fields are ignored.
//
// Every error wraps ErrInvalid and names the offending field. The decoded
// Envelope is normalized: times are in UTC, and empty payload, headers and
// history are nil.
func UnmarshalEnvelope(data []byte) (Envelope, error) {
	var e Envelope
	if len(data) > MaxEnvelopeBytes {
		return e, fmt.Errorf("%w: envelope is %d bytes; the limit is %d: store large data elsewhere and submit a reference", ErrInvalid, len(data), MaxEnvelopeBytes)
	}
	if !utf8.Valid(data) {
		return e, fmt.Errorf("%w: envelope is not valid UTF-8; JSON documents must be UTF-8 (send binary data base64-encoded in payload)", ErrInvalid)
	}
	d := fieldDecoder{}
	obj, ok := d.object("envelope", data)
	if !ok {
		return e, d.err
	}
	if err := checkVersion(obj["version"]); err != nil {
		return e, err
	}
	t := &e.Task
	if s := d.str(obj, "id"); s != "" {
		id, err := ParseID(s)
		switch {
		case err != nil:
			d.fail("%w: id %q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx); omit it to have one assigned", ErrInvalid, truncateForError(s))
		case id.IsZero():
			d.fail("%w: id is the nil UUID; omit it to have one assigned", ErrInvalid)
		default:
			t.ID = id
		}
	}
	t.Queue = d.str(obj, "queue")
	t.Handler = d.str(obj, "handler")
	if s := d.str(obj, "payload"); s != "" {
		p, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			d.fail("%w: payload is not valid base64 (%v): encode the payload bytes with standard base64, RFC 4648 section 4, with padding", ErrInvalid, err)
		} else if len(p) > 0 {
			t.Payload = p
		}
	}
	t.ContentType = d.str(obj, "content_type")
	t.Headers = d.headers(obj, "headers")
	t.IdempotencyKey = d.str(obj, "idempotency_key")
	t.Status = Status(d.str(obj, "status"))
	if t.Status != "" && !t.Status.Valid() {
		d.fail("%w: status %q is not one of PENDING, IN_FLIGHT, SUCCEEDED, DEAD; omit it when submitting", ErrInvalid, truncateForError(string(t.Status)))
	}
	t.Attempts = int(d.integer(obj, "attempts", 0, maxWireCount))
	t.Life = int(d.integer(obj, "life", 0, maxWireCount))
	e.Delay = time.Duration(d.integer(obj, "delay_ms", 0, maxDelayMS)) * time.Millisecond
	t.NextAttemptAt = d.time(obj, "next_attempt_at")
	t.LeaseToken = d.integer(obj, "lease_token", 0, maxWireToken)
	t.LeaseExpiresAt = d.time(obj, "lease_expires_at")
	t.LeaseOwner = d.str(obj, "lease_owner")
	t.CreatedAt = d.time(obj, "created_at")
	t.UpdatedAt = d.time(obj, "updated_at")
	t.FinishedAt = d.time(obj, "finished_at")
	if raw := present(obj["last_error"]); raw != nil {
		if le, ok := d.object("last_error", raw); ok {
			d.prefix = "last_error."
			t.LastError = ErrorSummary{
				Type:        d.str(le, "type"),
				Message:     d.str(le, "message"),
				Fingerprint: d.str(le, "fingerprint"),
			}
			d.prefix = ""
		}
	}
	if raw := present(obj["history"]); raw != nil {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			d.fail("%w: history must be a JSON array of attempt objects, got %s", ErrInvalid, jsonKind(raw))
		}
		for i, item := range items {
			where := fmt.Sprintf("history[%d]", i)
			ao, ok := d.object(where, item)
			if !ok {
				break
			}
			d.prefix = where + "."
			a := Attempt{
				TaskID:     t.ID,
				Number:     int(d.integer(ao, "number", 1, maxWireCount)),
				Life:       int(d.integer(ao, "life", 0, maxWireCount)),
				Outcome:    Outcome(d.str(ao, "outcome")),
				ErrorType:  d.str(ao, "error_type"),
				Message:    d.str(ao, "message"),
				Stack:      d.str(ao, "stack"),
				WorkerID:   d.str(ao, "worker_id"),
				LeaseToken: d.integer(ao, "lease_token", 0, maxWireToken),
				StartedAt:  d.time(ao, "started_at"),
				FinishedAt: d.time(ao, "finished_at"),
			}
			if present(ao["number"]) == nil {
				d.fail("%w: %snumber is missing; every attempt has a number from 1", ErrInvalid, d.prefix)
			}
			if !a.Outcome.Valid() {
				d.fail("%w: %soutcome %q is not one of SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED", ErrInvalid, d.prefix, truncateForError(string(a.Outcome)))
			}
			d.prefix = ""
			e.History = append(e.History, a)
		}
	}
	if d.err != nil {
		return Envelope{}, d.err
	}
	if t.Queue == "" {
		return Envelope{}, fmt.Errorf("%w: envelope has no queue; set \"queue\" to the queue the task belongs to", ErrInvalid)
	}
	if t.Handler == "" {
		return Envelope{}, fmt.Errorf("%w: envelope has no handler; set \"handler\" to the name the task is executed by", ErrInvalid)
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// MarshalJSON implements json.Marshaler with MarshalEnvelope, so an Envelope
// can be embedded in larger JSON documents.
func (e Envelope) MarshalJSON() ([]byte, error) { return MarshalEnvelope(e) }

// UnmarshalJSON implements json.Unmarshaler with UnmarshalEnvelope. On error
// e is left unchanged.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	d, err := UnmarshalEnvelope(data)
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

func wireTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func checkVersion(raw json.RawMessage) error {
	raw = present(raw)
	switch {
	case raw == nil:
		return fmt.Errorf("%w: envelope has no version; set \"version\": %d", ErrInvalid, EnvelopeVersion)
	case string(raw) == "1":
		return nil
	case jsonKind(raw) == "a number":
		return fmt.Errorf("%w: unsupported envelope version %s; this decoder reads version %d, written as the JSON number %d: upgrade rdq to read newer envelopes", ErrInvalid, truncateForError(string(raw)), EnvelopeVersion, EnvelopeVersion)
	}
	return fmt.Errorf("%w: envelope version must be the JSON number %d, got %s", ErrInvalid, EnvelopeVersion, jsonKind(raw))
}

// fieldDecoder reads fields out of JSON objects, remembering the first
// error so that decoding reads as a straight list of fields.
type fieldDecoder struct {
	err    error
	prefix string // path of the object being read, e.g. "history[2]."
}

func (d *fieldDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

// object decodes raw as a JSON object with exact, case-sensitive keys.
func (d *fieldDecoder) object(name string, raw []byte) (map[string]json.RawMessage, bool) {
	if d.err != nil {
		return nil, false
	}
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if json.Valid(raw) {
			d.fail("%w: %s must be a JSON object, got %s", ErrInvalid, name, jsonKind(raw))
			return nil, false
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			d.fail("%w: %s is not valid JSON: %v (at byte %d)", ErrInvalid, name, err, syn.Offset)
		} else {
			d.fail("%w: %s is not valid JSON: %v", ErrInvalid, name, err)
		}
		return nil, false
	}
	return obj, true
}

// present returns raw, or nil if the field is absent or null.
func present(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func (d *fieldDecoder) str(obj map[string]json.RawMessage, key string) string {
	raw := present(obj[key])
	if raw == nil || d.err != nil {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.fail("%w: %s must be a JSON string, got %s", ErrInvalid, truncateForError(d.prefix+key), jsonKind(raw))
	}
	return s
}

func (d *fieldDecoder) integer(obj map[string]json.RawMessage, key string, min, max int64) int64 {
	raw := present(obj[key])
	if raw == nil || d.err != nil {
		return 0
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
			d.fail("%w: %s%s %s is not a whole number from %d to %d", ErrInvalid, d.prefix, key, truncateForError(string(raw)), min, max)
		} else {
			d.fail("%w: %s%s must be a JSON number, got %s", ErrInvalid, d.prefix, key, jsonKind(raw))
		}
		return 0
	}
	if n < min || n > max {
		d.fail("%w: %s%s %d is out of range; use a whole number from %d to %d", ErrInvalid, d.prefix, key, n, min, max)
		return 0
	}
	return n
}

func (d *fieldDecoder) time(obj map[string]json.RawMessage, key string) time.Time {
	s := d.str(obj, key)
	if s == "" || d.err != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.fail("%w: %s%s %q is not an RFC 3339 time such as 2024-06-01T12:00:00Z", ErrInvalid, d.prefix, key, truncateForError(s))
		return time.Time{}
	}
	return t.UTC()
}

func (d *fieldDecoder) headers(obj map[string]json.RawMessage, key string) map[string]string {
	raw := present(obj[key])
	if raw == nil || d.err != nil {
		return nil
	}
	fields, ok := d.object(key, raw)
	if !ok {
		return nil
	}
	if len(fields) == 0 {
		return nil
	}
	if len(fields) > MaxHeaders {
		d.fail("%w: %d headers; the limit is %d", ErrInvalid, len(fields), MaxHeaders)
		return nil
	}
	h := make(map[string]string, len(fields))
	d.prefix = key + "."
	for k := range fields {
		h[k] = d.str(fields, k)
	}
	d.prefix = ""
	return h
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
