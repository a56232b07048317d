package rdq

import (
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"
)

// Limits enforced on every task at the edge (client, envelope decoding,
// server intake). Exceeding one is an error wrapping ErrInvalid; nothing is
// truncated silently.
const (
	// MaxNameLength bounds queue and handler names, in bytes.
	MaxNameLength = 128
	// MaxPayloadBytes bounds a task's payload.
	MaxPayloadBytes = 1 << 20
	// MaxHeaders bounds the number of headers on a task.
	MaxHeaders = 64
	// MaxHeaderKeyLength and MaxHeaderValueLength bound each header, in bytes.
	MaxHeaderKeyLength   = 128
	MaxHeaderValueLength = 4 << 10
	// MaxIdempotencyKeyLength bounds an idempotency key, in bytes.
	MaxIdempotencyKeyLength = 255
	// MaxContentTypeLength bounds a content type, in bytes.
	MaxContentTypeLength = 255
)

// ValidateName checks a queue or handler name: 1 to MaxNameLength bytes of
// ASCII letters, digits and . _ - : / starting with a letter or digit. what
// names the field in the error ("queue", "handler").
func ValidateName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s name is empty", ErrInvalid, what)
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("%w: %s name is %d bytes; the limit is %d", ErrInvalid, what, len(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("%w: %s name %q must start with a letter or digit", ErrInvalid, what, truncateForError(name))
		}
		if !alnum && c != '.' && c != '_' && c != '-' && c != ':' && c != '/' {
			return fmt.Errorf("%w: %s name %q contains %q; use letters, digits and . _ - : /", ErrInvalid, what, truncateForError(name), rune(c))
		}
	}
	return nil
}

// Validate checks the fields a submitter controls: queue and handler names,
// payload size, content type, headers and idempotency key. It returns the
// first problem found as an error wrapping ErrInvalid.
func (t *Task) Validate() error {
	if err := ValidateName("queue", t.Queue); err != nil {
		return err
	}
	if err := ValidateName("handler", t.Handler); err != nil {
		return err
	}
	if len(t.Payload) > MaxPayloadBytes {
		return fmt.Errorf("%w: payload is %d bytes; the limit is %d: store large data elsewhere and submit a reference", ErrInvalid, len(t.Payload), MaxPayloadBytes)
	}
	if len(t.ContentType) > MaxContentTypeLength {
		return fmt.Errorf("%w: content type is %d bytes; the limit is %d", ErrInvalid, len(t.ContentType), MaxContentTypeLength)
	}
	if len(t.IdempotencyKey) > MaxIdempotencyKeyLength {
		return fmt.Errorf("%w: idempotency key is %d bytes; the limit is %d", ErrInvalid, len(t.IdempotencyKey), MaxIdempotencyKeyLength)
	}
	if !utf8.ValidString(t.IdempotencyKey) || strings.IndexByte(t.IdempotencyKey, 0) >= 0 {
		return fmt.Errorf("%w: idempotency key must be UTF-8 text without NUL bytes", ErrInvalid)
	}
	if err := validateContentType(t.ContentType); err != nil {
		return err
	}
	if len(t.Headers) > MaxHeaders {
		return fmt.Errorf("%w: %d headers; the limit is %d", ErrInvalid, len(t.Headers), MaxHeaders)
	}
	for k, v := range t.Headers {
		if k == "" || len(k) > MaxHeaderKeyLength || !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
			return fmt.Errorf("%w: header name %q must be 1 to %d bytes of UTF-8 text without NUL bytes", ErrInvalid, truncateForError(k), MaxHeaderKeyLength)
		}
		if len(v) > MaxHeaderValueLength || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: header %q value must be at most %d bytes of UTF-8 text without NUL bytes", ErrInvalid, truncateForError(k), MaxHeaderValueLength)
		}
	}
	return nil
}

// validateContentType accepts an empty content type or a media type as
// mime.ParseMediaType reads it ("type/subtype" with optional parameters),
// without control characters: the content type travels to handlers, and
// to HTTP callbacks, where a CR or LF would break every request.
func validateContentType(ct string) error {
	if ct == "" {
		return nil
	}
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("%w: content type %q contains the control character %U; use a media type such as application/json", ErrInvalid, truncateForError(ct), rune(c))
		}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return fmt.Errorf("%w: content type %q is not a media type such as application/json or text/plain; charset=utf-8", ErrInvalid, truncateForError(ct))
	}
	return nil
}
