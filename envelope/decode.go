package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/srjn45/rdq"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
)

// maxSkipDepth bounds the nesting of unknown fields the decoder skips, as
// encoding/json bounds the nesting it accepts.
const maxSkipDepth = 10000

// historyCountAfter is the history length past which the decoder counts the
// remaining attempts (a syntax scan that allocates nothing) and sizes the
// history slice once, instead of letting append grow it step by step.
const historyCountAfter = 64

// Objects of the envelope, for error messages.
const (
	inEnvelope = iota
	inLastError
	inHeaders
	inAttempt
)

// envDecoder reads one envelope from a complete JSON document. It is a
// small validating JSON reader: it walks the bytes once, turns the values of
// known fields straight into the Envelope (strings without escapes are
// copied once, numbers and times parsed in place), checks each object's
// keys are distinct, and skips unknown values after checking their syntax.
// It stops at the first problem, which it keeps in err.
type envDecoder struct {
	data []byte
	pos  int
	err  error
	in   int // the object being read: inEnvelope, inLastError, ...
	item int // index of the attempt being read, when in == inAttempt
}

// fail records the first error and returns false, so that readers can
// `return d.fail(...)`.
func (d *envDecoder) fail(format string, args ...any) bool {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
	return false
}

// syntax records a JSON syntax error at d.pos. encoding/json describes the
// error when it finds one in the document; that is the case whenever this
// reader finds one, but the reader's own position is the fallback.
func (d *envDecoder) syntax() bool {
	var sink struct{}
	var syn *json.SyntaxError
	if err := json.Unmarshal(d.data, &sink); errors.As(err, &syn) {
		return d.fail("%w: envelope is not valid JSON: %v (at byte %d)", rdq.ErrInvalid, syn, syn.Offset)
	}
	return d.fail("%w: envelope is not valid JSON: unexpected character at byte %d", rdq.ErrInvalid, d.pos)
}

// object names the object being read, for error messages.
func (d *envDecoder) object() string {
	switch d.in {
	case inLastError:
		return "last_error"
	case inHeaders:
		return "headers"
	case inAttempt:
		return fmt.Sprintf("history[%d]", d.item)
	}
	return "the envelope"
}

// path names a field of the object being read, for error messages.
func (d *envDecoder) path(key string) string {
	switch d.in {
	case inEnvelope:
		return key
	case inAttempt:
		return fmt.Sprintf("history[%d].%s", d.item, key)
	}
	return d.object() + "." + key
}

func (d *envDecoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// at reports whether the next byte is c.
func (d *envDecoder) at(c byte) bool { return d.pos < len(d.data) && d.data[d.pos] == c }

func (d *envDecoder) literal(lit string) bool {
	if !bytes.HasPrefix(d.data[d.pos:], []byte(lit)) {
		return d.syntax()
	}
	d.pos += len(lit)
	return true
}

// scanString reads the string starting at d.pos (at its opening quote) and
// returns its raw content, between the quotes, and whether it holds escapes.
func (d *envDecoder) scanString() (raw []byte, escaped, ok bool) {
	data := d.data
	start := d.pos + 1
	for i := start; i < len(data); {
		switch c := data[i]; {
		case c == '"':
			d.pos = i + 1
			return data[start:i], escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				d.pos = len(data)
				return nil, false, d.syntax()
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || !isHex4(data[i+2:i+6]) {
					d.pos = i
					return nil, false, d.syntax()
				}
				i += 6
			default:
				d.pos = i
				return nil, false, d.syntax()
			}
		case c < 0x20:
			d.pos = i
			return nil, false, d.syntax()
		default:
			i++
		}
	}
	d.pos = len(data)
	return nil, false, d.syntax()
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unescape decodes the raw content of a JSON string that holds escapes, as
// encoding/json does: a UTF-16 surrogate that is not part of a pair becomes
// U+FFFD. The result is never longer than raw, so it is built in one
// allocation.
func unescape(raw []byte) string {
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				j = len(raw) - i
			}
			b.Write(raw[i : i+j])
			i += j
			continue
		}
		c := raw[i+1]
		i += 2
		switch c {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := hex4(raw[i : i+4])
			i += 4
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if pair := utf16.DecodeRune(r, hex4(raw[i+2:i+6])); pair != unicode.ReplacementChar {
						b.WriteRune(pair)
						i += 6
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			b.WriteRune(r)
		default: // '"', '\\', '/'
			b.WriteByte(c)
		}
	}
	return b.String()
}

// scanNumber reads the JSON number at d.pos and reports whether it is
// written as a whole number (no fraction, no exponent).
func (d *envDecoder) scanNumber() (whole, ok bool) {
	data, i := d.data, d.pos
	digits := func() bool {
		start := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		digits()
	default:
		d.pos = i
		return false, d.syntax()
	}
	whole = true
	if i < len(data) && data[i] == '.' {
		whole = false
		i++
		if !digits() {
			d.pos = i
			return false, d.syntax()
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		whole = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if !digits() {
			d.pos = i
			return false, d.syntax()
		}
	}
	d.pos = i
	return whole, true
}

func (d *envDecoder) atNumber() bool {
	return d.pos < len(d.data) && (d.data[d.pos] == '-' || '0' <= d.data[d.pos] && d.data[d.pos] <= '9')
}

// skip reads one JSON value of any kind, checking its syntax, without
// keeping it. It works without recursion, so deep nesting cannot exhaust
// the stack.
func (d *envDecoder) skip() bool {
	var small [32]byte
	open := small[:0] // the enclosing '{' and '[' of the value being read
	for {
		// A value.
		d.ws()
		if d.pos >= len(d.data) {
			return d.syntax()
		}
		switch c := d.data[d.pos]; {
		case c == '{' || c == '[':
			if len(open) >= maxSkipDepth {
				return d.fail("%w: envelope nests objects and arrays more than %d deep", rdq.ErrInvalid, maxSkipDepth)
			}
			d.pos++
			d.ws()
			if d.at(c + 2) { // '}' is '{'+2 and ']' is '['+2
				d.pos++
				break
			}
			open = append(open, c)
			if c == '{' && !d.memberKey() {
				return false
			}
			continue
		case c == '"':
			if _, _, ok := d.scanString(); !ok {
				return false
			}
		case c == 't':
			if !d.literal("true") {
				return false
			}
		case c == 'f':
			if !d.literal("false") {
				return false
			}
		case c == 'n':
			if !d.literal("null") {
				return false
			}
		default:
			if _, ok := d.scanNumber(); !ok {
				return false
			}
		}
		// After a value: close containers until one goes on.
		for {
			if len(open) == 0 {
				return true
			}
			d.ws()
			top := open[len(open)-1]
			if d.at(',') {
				d.pos++
				if top == '{' && !d.memberKey() {
					return false
				}
				break
			}
			if !d.at(top + 2) {
				return d.syntax()
			}
			d.pos++
			open = open[:len(open)-1]
		}
	}
}

// memberKey reads `"key":` of an object being skipped.
func (d *envDecoder) memberKey() bool {
	d.ws()
	if !d.at('"') {
		return d.syntax()
	}
	if _, _, ok := d.scanString(); !ok {
		return false
	}
	d.ws()
	if !d.at(':') {
		return d.syntax()
	}
	d.pos++
	return true
}

// members reads the object at d.pos, calling field with each key (escapes
// decoded) and d.pos at the member's value, which field must read. It
// rejects a key that appears twice.
func (d *envDecoder) members(field func(key []byte) bool) bool {
	d.pos++ // '{'
	d.ws()
	if d.at('}') {
		d.pos++
		return true
	}
	var small [16][]byte
	seen := small[:0]
	var many map[string]struct{}
	for {
		d.ws()
		if !d.at('"') {
			return d.syntax()
		}
		key, escaped, ok := d.scanString()
		if !ok {
			return false
		}
		if escaped {
			key = []byte(unescape(key))
		}
		dup := false
		if many == nil {
			for _, k := range seen {
				if bytes.Equal(k, key) {
					dup = true
					break
				}
			}
			if len(seen) < len(small) {
				seen = append(seen, key)
			} else {
				many = make(map[string]struct{}, 2*len(small))
				for _, k := range seen {
					many[string(k)] = struct{}{}
				}
			}
		} else {
			_, dup = many[string(key)]
		}
		if dup {
			return d.fail("%w: key %q appears twice in %s; an envelope must not repeat a key within an object", rdq.ErrInvalid, truncate(string(key)), d.object())
		}
		if many != nil {
			many[string(key)] = struct{}{}
		}
		d.ws()
		if !d.at(':') {
			return d.syntax()
		}
		d.pos++
		d.ws()
		if !field(key) {
			return false
		}
		d.ws()
		if d.at(',') {
			d.pos++
			continue
		}
		if d.at('}') {
			d.pos++
			return true
		}
		return d.syntax()
	}
}

// typeError reports that the value at d.pos (whose syntax it checks first)
// is not of the JSON type want.
func (d *envDecoder) typeError(key, want string) bool {
	start := d.pos
	if !d.skip() {
		return false
	}
	return d.fail("%w: %s must be %s, got %s", rdq.ErrInvalid, truncate(d.path(key)), want, jsonKind(d.data[start:d.pos]))
}

// rawString reads a string or null. It returns the raw content (nil for
// null) and whether it holds escapes.
func (d *envDecoder) rawString(key string) (raw []byte, escaped, ok bool) {
	switch {
	case d.at('"'):
		return d.scanString()
	case d.at('n'):
		return nil, false, d.literal("null")
	}
	return nil, false, d.typeError(key, "a JSON string")
}

// str reads a string value; null reads as "".
func (d *envDecoder) str(key string) (string, bool) {
	raw, escaped, ok := d.rawString(key)
	switch {
	case !ok || len(raw) == 0:
		return "", ok
	case escaped:
		return unescape(raw), true
	}
	return string(raw), true
}

// enum reads a string value that is usually one of the status or outcome
// names, which it returns without allocating.
func (d *envDecoder) enum(key string) (string, bool) {
	raw, escaped, ok := d.rawString(key)
	if !ok || escaped {
		if ok {
			return unescape(raw), true
		}
		return "", false
	}
	switch s := string(raw); s {
	case string(rdq.OutcomeSuccess), string(rdq.OutcomeRetryableFailure), string(rdq.OutcomePermanentFailure), string(rdq.OutcomeLeaseExpired),
		string(rdq.StatusPending), string(rdq.StatusInFlight), string(rdq.StatusSucceeded), string(rdq.StatusDead):
		return s, true
	}
	return string(raw), true
}

// integer reads a whole number from min to max; null reads as 0.
func (d *envDecoder) integer(key string, min, max int64) (int64, bool) {
	if d.at('n') {
		return 0, d.literal("null")
	}
	if !d.atNumber() {
		return 0, d.typeError(key, "a JSON number")
	}
	start := d.pos
	whole, ok := d.scanNumber()
	if !ok {
		return 0, false
	}
	raw := d.data[start:d.pos]
	var n int64
	var err error
	if whole {
		n, err = strconv.ParseInt(string(raw), 10, 64)
	}
	if !whole || err != nil {
		return 0, d.fail("%w: %s %s is not a whole number from %d to %d", rdq.ErrInvalid, d.path(key), truncate(string(raw)), min, max)
	}
	if n < min || n > max {
		return 0, d.fail("%w: %s %d is out of range; use a whole number from %d to %d", rdq.ErrInvalid, d.path(key), n, min, max)
	}
	return n, true
}

// time reads an RFC 3339 time; null or "" reads as the zero time.
func (d *envDecoder) time(key string) (time.Time, bool) {
	raw, escaped, ok := d.rawString(key)
	if !ok || len(raw) == 0 {
		return time.Time{}, ok
	}
	var s string
	if escaped {
		s = unescape(raw)
	} else {
		s = string(raw)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, d.fail("%w: %s %q is not an RFC 3339 time such as 2024-06-01T12:00:00Z", rdq.ErrInvalid, d.path(key), truncate(s))
	}
	return t.UTC(), true
}

// notObject reports that the value at d.pos, where an object belongs, is
// something else.
func (d *envDecoder) notObject(name string) bool {
	start := d.pos
	if !d.skip() {
		return false
	}
	return d.fail("%w: %s must be a JSON object, got %s", rdq.ErrInvalid, name, jsonKind(d.data[start:d.pos]))
}

// envelope reads the whole document.
func (d *envDecoder) envelope() (Envelope, bool) {
	var e Envelope
	t := &e.Task
	d.ws()
	if !d.at('{') {
		if d.pos >= len(d.data) {
			return e, d.syntax()
		}
		start := d.pos
		if !d.skip() {
			return e, false
		}
		if d.ws(); d.pos < len(d.data) {
			return e, d.syntax()
		}
		return e, d.fail("%w: envelope must be a JSON object, got %s", rdq.ErrInvalid, jsonKind(d.data[start:]))
	}
	version := false
	ok := d.members(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "version":
			version, ok = d.version()
		case "id":
			var s string
			if s, ok = d.str("id"); ok && s != "" {
				ok = d.id(t, s)
			}
		case "queue":
			t.Queue, ok = d.str("queue")
		case "handler":
			t.Handler, ok = d.str("handler")
		case "payload":
			ok = d.payload(t)
		case "content_type":
			t.ContentType, ok = d.str("content_type")
		case "headers":
			t.Headers, ok = d.headers()
		case "idempotency_key":
			t.IdempotencyKey, ok = d.str("idempotency_key")
		case "status":
			var s string
			if s, ok = d.enum("status"); ok {
				t.Status = rdq.Status(s)
				if t.Status != "" && !t.Status.Valid() {
					ok = d.fail("%w: status %q is not one of PENDING, IN_FLIGHT, SUCCEEDED, DEAD; omit it when submitting", rdq.ErrInvalid, truncate(s))
				}
			}
		case "attempts":
			var n int64
			n, ok = d.integer("attempts", 0, maxWireCount)
			t.Attempts = int(n)
		case "life":
			var n int64
			n, ok = d.integer("life", 0, maxWireCount)
			t.Life = int(n)
		case "delay_ms":
			var n int64
			n, ok = d.integer("delay_ms", 0, maxDelayMS)
			e.Delay = time.Duration(n) * time.Millisecond
		case "max_attempts":
			var n int64
			n, ok = d.integer("max_attempts", rdq.Unlimited, maxWireCount)
			t.MaxAttempts = int(n)
		case "timeout_ms":
			var n int64
			n, ok = d.integer("timeout_ms", 0, maxDelayMS)
			t.Timeout = time.Duration(n) * time.Millisecond
		case "snoozes":
			var n int64
			n, ok = d.integer("snoozes", 0, maxWireCount)
			t.Snoozes = int(n)
		case "next_attempt_at":
			t.NextAttemptAt, ok = d.time("next_attempt_at")
		case "lease_token":
			t.LeaseToken, ok = d.integer("lease_token", 0, maxWireToken)
		case "lease_expires_at":
			t.LeaseExpiresAt, ok = d.time("lease_expires_at")
		case "lease_owner":
			t.LeaseOwner, ok = d.str("lease_owner")
		case "created_at":
			t.CreatedAt, ok = d.time("created_at")
		case "updated_at":
			t.UpdatedAt, ok = d.time("updated_at")
		case "finished_at":
			t.FinishedAt, ok = d.time("finished_at")
		case "last_error":
			t.LastError, ok = d.lastError()
		case "history":
			e.History, ok = d.history()
		default:
			ok = d.skip()
		}
		return ok
	})
	if !ok {
		return e, false
	}
	if d.ws(); d.pos < len(d.data) {
		return e, d.syntax()
	}
	switch {
	case !version:
		return e, d.fail("%w: envelope has no version; set \"version\": %d", rdq.ErrInvalid, Version)
	case t.Queue == "":
		return e, d.fail("%w: envelope has no queue; set \"queue\" to the queue the task belongs to", rdq.ErrInvalid)
	case t.Handler == "":
		return e, d.fail("%w: envelope has no handler; set \"handler\" to the name the task is executed by", rdq.ErrInvalid)
	}
	for i := range e.History {
		a := &e.History[i]
		if !a.TaskID.IsZero() && a.TaskID != t.ID {
			return e, d.fail("%w: history[%d].task_id %s is not the envelope's id (%s); an envelope carries one task's history", rdq.ErrInvalid, i, a.TaskID, idOrNone(t.ID))
		}
		a.TaskID = t.ID
	}
	return e, true
}

// historyTaskID parses the task_id of the current history item.
func (d *envDecoder) historyTaskID(s string) (rdq.ID, bool) {
	id, err := rdq.ParseID(s)
	if err != nil {
		return rdq.ID{}, d.fail("%w: history[%d].task_id %q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx); omit it, an attempt's task is the envelope's id", rdq.ErrInvalid, d.item, truncate(s))
	}
	return id, true
}

// idOrNone is id as text, or "none" for the zero ID.
func idOrNone(id rdq.ID) string {
	if id.IsZero() {
		return "none"
	}
	return id.String()
}

// version reads the version field; it reports whether a version was given
// (null is none).
func (d *envDecoder) version() (given, ok bool) {
	switch {
	case d.at('n'):
		return false, d.literal("null")
	case d.atNumber():
		start := d.pos
		if _, ok := d.scanNumber(); !ok {
			return false, false
		}
		if raw := d.data[start:d.pos]; string(raw) != "1" {
			return false, d.fail("%w: unsupported envelope version %s; this decoder reads version %d, written as the JSON number %d: upgrade rdq to read newer envelopes", rdq.ErrInvalid, truncate(string(raw)), Version, Version)
		}
		return true, true
	}
	start := d.pos
	if !d.skip() {
		return false, false
	}
	return false, d.fail("%w: envelope version must be the JSON number %d, got %s", rdq.ErrInvalid, Version, jsonKind(d.data[start:d.pos]))
}

func (d *envDecoder) id(t *rdq.Task, s string) bool {
	id, err := rdq.ParseID(s)
	switch {
	case err != nil:
		return d.fail("%w: id %q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx); omit it to have one assigned", rdq.ErrInvalid, truncate(s))
	case id.IsZero():
		return d.fail("%w: id is the nil UUID; omit it to have one assigned", rdq.ErrInvalid)
	}
	t.ID = id
	return true
}

// payload reads the base64 payload, decoding it straight from the document.
// A payload over MaxPayloadBytes is rejected before it is decoded.
func (d *envDecoder) payload(t *rdq.Task) bool {
	raw, escaped, ok := d.rawString("payload")
	if !ok || len(raw) == 0 {
		return ok
	}
	if escaped { // e.g. "\/" for "/", as some encoders write it
		raw = []byte(unescape(raw))
	}
	if n := len(raw); n%4 == 0 {
		size := n / 4 * 3
		if raw[n-1] == '=' {
			size--
			if raw[n-2] == '=' {
				size--
			}
		}
		if size > rdq.MaxPayloadBytes {
			return d.fail("%w: payload is %d bytes; the limit is %d: store large data elsewhere and submit a reference", rdq.ErrInvalid, size, rdq.MaxPayloadBytes)
		}
	}
	p := make([]byte, base64.StdEncoding.DecodedLen(len(raw)))
	n, err := base64.StdEncoding.Strict().Decode(p, raw)
	if err != nil {
		return d.fail("%w: payload is not valid base64 (%v): encode the payload bytes with standard base64, RFC 4648 section 4, with padding", rdq.ErrInvalid, err)
	}
	if n > 0 {
		t.Payload = p[:n:n]
	}
	return true
}

func (d *envDecoder) headers() (map[string]string, bool) {
	if d.at('n') {
		return nil, d.literal("null")
	}
	if !d.at('{') {
		return nil, d.notObject("headers")
	}
	var h map[string]string
	d.in = inHeaders
	ok := d.members(func(key []byte) bool {
		if len(h) == rdq.MaxHeaders {
			return d.fail("%w: %d headers; the limit is %d", rdq.ErrInvalid, rdq.MaxHeaders+1, rdq.MaxHeaders)
		}
		k := string(key)
		v, ok := d.str(k)
		if h == nil {
			h = make(map[string]string, 4)
		}
		h[k] = v
		return ok
	})
	d.in = inEnvelope
	return h, ok
}

func (d *envDecoder) lastError() (rdq.ErrorSummary, bool) {
	var s rdq.ErrorSummary
	if d.at('n') {
		return s, d.literal("null")
	}
	if !d.at('{') {
		return s, d.notObject("last_error")
	}
	d.in = inLastError
	ok := d.members(func(key []byte) bool {
		switch string(key) {
		case "type":
			var ok bool
			s.Type, ok = d.str("type")
			return ok
		case "message":
			var ok bool
			s.Message, ok = d.str("message")
			return ok
		case "fingerprint":
			var ok bool
			s.Fingerprint, ok = d.str("fingerprint")
			return ok
		}
		return d.skip()
	})
	d.in = inEnvelope
	return s, ok
}

// history reads the attempt history, checking each attempt as it is read
// so that the first invalid one ends the decoding.
func (d *envDecoder) history() ([]rdq.Attempt, bool) {
	if d.at('n') {
		return nil, d.literal("null")
	}
	if !d.at('[') {
		start := d.pos
		if !d.skip() {
			return nil, false
		}
		return nil, d.fail("%w: history must be a JSON array of attempt objects, got %s", rdq.ErrInvalid, jsonKind(d.data[start:d.pos]))
	}
	d.pos++
	d.ws()
	if d.at(']') {
		d.pos++
		return nil, true
	}
	var h []rdq.Attempt
	prev := 0
	for i := 0; ; i++ {
		d.ws()
		if !d.at('{') {
			return nil, d.notObject(fmt.Sprintf("history[%d]", i))
		}
		if len(h) == cap(h) && len(h) >= historyCountAfter {
			if rest := d.countItems(); rest > 0 {
				h = append(make([]rdq.Attempt, 0, len(h)+rest), h...)
			}
		}
		d.in, d.item = inAttempt, i
		a, ok := d.attempt(prev)
		d.in = inEnvelope
		if !ok {
			return nil, false
		}
		prev = a.Number
		h = append(h, a)
		d.ws()
		if d.at(',') {
			d.pos++
			continue
		}
		if d.at(']') {
			d.pos++
			return h, true
		}
		return nil, d.syntax()
	}
}

// countItems counts the array elements from d.pos to the end of the array
// without decoding them or moving d.pos. It returns 0 if their syntax is
// broken, which the decoding then reports in document order.
func (d *envDecoder) countItems() int {
	probe := envDecoder{data: d.data, pos: d.pos}
	for n := 1; ; n++ {
		if !probe.skip() {
			return 0
		}
		probe.ws()
		switch {
		case probe.at(','):
			probe.pos++
		case probe.at(']'):
			return n
		default:
			return 0
		}
	}
}

// attempt reads one attempt object and checks it, prev being the number of
// the attempt before it.
func (d *envDecoder) attempt(prev int) (rdq.Attempt, bool) {
	var a rdq.Attempt
	numbered := false
	ok := d.members(func(key []byte) bool {
		var ok bool
		var n int64
		switch string(key) {
		case "task_id":
			var s string
			if s, ok = d.str("task_id"); ok && s != "" {
				if a.TaskID, ok = d.historyTaskID(s); ok && a.TaskID.IsZero() {
					ok = d.fail("%w: history[%d].task_id is the nil UUID; omit it (an attempt's task is the envelope's id)", rdq.ErrInvalid, d.item)
				}
			}
		case "number":
			n, ok = d.integer("number", 1, maxWireCount)
			a.Number, numbered = int(n), n != 0
		case "life":
			n, ok = d.integer("life", 0, maxWireCount)
			a.Life = int(n)
		case "outcome":
			var s string
			s, ok = d.enum("outcome")
			a.Outcome = rdq.Outcome(s)
		case "error_type":
			a.ErrorType, ok = d.str("error_type")
		case "message":
			a.Message, ok = d.str("message")
		case "stack":
			a.Stack, ok = d.str("stack")
		case "worker_id":
			a.WorkerID, ok = d.str("worker_id")
		case "lease_token":
			a.LeaseToken, ok = d.integer("lease_token", 0, maxWireToken)
		case "started_at":
			a.StartedAt, ok = d.time("started_at")
		case "finished_at":
			a.FinishedAt, ok = d.time("finished_at")
		default:
			ok = d.skip()
		}
		return ok
	})
	if !ok {
		return a, false
	}
	if !numbered {
		return a, d.fail("%w: history[%d].number is missing; every attempt has a number from 1", rdq.ErrInvalid, d.item)
	}
	if err := validateAttempt(d.item, &a, a.TaskID, prev); err != nil {
		d.err = err
		return a, false
	}
	return a, true
}

// truncate shortens s for an error message, as rdq's own validation errors
// do.
func truncate(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
