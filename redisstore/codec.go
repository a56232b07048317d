package redisstore

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srjn45/rdq"
)

// str returns a reply element as a string ("" for anything else).
func str(v any) string {
	s, _ := v.(string)
	return s
}

// microTime turns microseconds since the epoch into a time; "0" and ""
// are the zero time.
func microTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// appendNetstring appends s as "LEN:BYTES".
func appendNetstring(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// netstrings splits a sequence of netstrings.
func netstrings(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ':')
		if i < 0 {
			return nil, fmt.Errorf("malformed record: no length separator in %.20q", s)
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || i+1+n > len(s) {
			return nil, fmt.Errorf("malformed record: bad length %.20q", s[:i])
		}
		out = append(out, s[i+1:i+1+n])
		s = s[i+1+n:]
	}
	return out, nil
}

// encodeHeaders stores headers as netstrings of keys and values, in key
// order.
func encodeHeaders(h map[string]string) string {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(h)) {
		b = appendNetstring(b, k)
		b = appendNetstring(b, h[k])
	}
	return string(b)
}

func decodeHeaders(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	parts, err := netstrings(s)
	if err != nil || len(parts)%2 != 0 {
		return nil, fmt.Errorf("headers: %w", err)
	}
	h := make(map[string]string, len(parts)/2)
	for i := 0; i < len(parts); i += 2 {
		h[parts[i]] = parts[i+1]
	}
	return h, nil
}

// rowFields are the hash fields of a task's row, in the row's order (see
// the layout in scripts.go).
var rowFields = [...]string{"id", "q", "h", "p", "ct", "hd", "ik", "st", "at", "lf", "nx", "tk", "le", "lo",
	"cr", "up", "fi", "et", "em", "ef", "ma", "to", "sn"}

// rowLen is the length of a task's row.
const rowLen = len(rowFields)

// decodeTask reads a task from its hash's HGETALL reply, as the row of its
// fields.
func decodeTask(fields []any) (*rdq.Task, error) {
	if len(fields)%2 != 0 || len(fields) == 0 {
		return nil, fmt.Errorf("malformed task hash of %d elements", len(fields))
	}
	f := make(map[string]any, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		f[str(fields[i])] = fields[i+1]
	}
	row := make([]any, rowLen)
	for i, name := range rowFields {
		row[i] = f[name]
	}
	return decodeRow(row)
}

// decodeRow reads a task from its row (see the layout in scripts.go); a
// field the hash lacks is nil in the row and reads as empty.
func decodeRow(v []any) (*rdq.Task, error) {
	if len(v) != rowLen {
		return nil, fmt.Errorf("malformed task row of %d elements, want %d", len(v), rowLen)
	}
	id, err := rdq.ParseID(str(v[0]))
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	hd, err := decodeHeaders(str(v[5]))
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	tk, _ := strconv.ParseInt(str(v[11]), 10, 64)
	to, _ := strconv.ParseInt(str(v[21]), 10, 64)
	return &rdq.Task{
		ID:             id,
		Queue:          str(v[1]),
		Handler:        str(v[2]),
		Payload:        []byte(str(v[3])),
		ContentType:    str(v[4]),
		Headers:        hd,
		IdempotencyKey: str(v[6]),
		Status:         rdq.Status(str(v[7])),
		Attempts:       atoi(str(v[8])),
		Life:           atoi(str(v[9])),
		NextAttemptAt:  microTime(str(v[10])),
		LeaseToken:     tk,
		LeaseExpiresAt: microTime(str(v[12])),
		LeaseOwner:     str(v[13]),
		CreatedAt:      microTime(str(v[14])),
		UpdatedAt:      microTime(str(v[15])),
		FinishedAt:     microTime(str(v[16])),
		LastError:      rdq.ErrorSummary{Type: str(v[17]), Message: str(v[18]), Fingerprint: str(v[19])},
		MaxAttempts:    atoi(str(v[20])),
		Timeout:        time.Duration(to) * time.Microsecond,
		Snoozes:        atoi(str(v[22])),
	}, nil
}

// decodeRows reads a script's reply of task rows.
func decodeRows(res any) ([]*rdq.Task, error) { return decodeReply(res, decodeRow) }

// decodeTasks reads a script's reply of task hashes.
func decodeTasks(res any) ([]*rdq.Task, error) { return decodeReply(res, decodeTask) }

// decodeReply reads a script's reply of tasks, each decoded by decode.
func decodeReply(res any, decode func([]any) (*rdq.Task, error)) ([]*rdq.Task, error) {
	items, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstore: unexpected reply %T", res)
	}
	out := make([]*rdq.Task, 0, len(items))
	for _, r := range items {
		v, _ := r.([]any)
		t, err := decode(v)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// decodeAttempt reads an attempt record (see scripts.go).
func decodeAttempt(id rdq.ID, rec string) (rdq.Attempt, error) {
	p, err := netstrings(rec)
	if err != nil {
		return rdq.Attempt{}, fmt.Errorf("attempt: %w", err)
	}
	if len(p) != 10 {
		return rdq.Attempt{}, fmt.Errorf("attempt record of %d fields, want 10", len(p))
	}
	token, _ := strconv.ParseInt(p[2], 10, 64)
	return rdq.Attempt{
		TaskID:     id,
		Number:     atoi(p[0]),
		Life:       atoi(p[1]),
		LeaseToken: token,
		StartedAt:  microTime(p[3]),
		FinishedAt: microTime(p[4]),
		Outcome:    rdq.Outcome(p[5]),
		ErrorType:  p[6],
		Message:    p[7],
		Stack:      p[8],
		WorkerID:   p[9],
	}, nil
}
