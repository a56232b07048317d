package pgstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/srjn45/rdq"
)

// uuids converts IDs to the [16]byte form pgx encodes as uuid[].
func uuids(ids []rdq.ID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// clean makes s storable in a PostgreSQL text column: bytes that are not
// UTF-8, and NUL characters, become U+FFFD. Text that is already storable
// is returned as is. Failure text comes from arbitrary errors (a binary
// response body, say), so everything written passes through clean.
func clean(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// cleanFailure returns f with every text field cleaned, and the indexed
// ones (type, fingerprint) cut to rdq.MaxErrorTypeLength.
func cleanFailure(f rdq.Failure) rdq.Failure {
	return rdq.Failure{
		Type:        rdq.Truncate(clean(f.Type), rdq.MaxErrorTypeLength),
		Message:     clean(f.Message),
		Stack:       clean(f.Stack),
		Fingerprint: rdq.Truncate(clean(f.Fingerprint), rdq.MaxErrorTypeLength),
	}
}

// timeOf returns the time of a nullable timestamp; zero when NULL.
func timeOf(ts pgtype.Timestamptz) time.Time {
	if !ts.Valid {
		return time.Time{}
	}
	return ts.Time
}

// scanTask reads the taskColumns of one row, then any extra destinations.
func scanTask(row pgx.Row, extra ...any) (*rdq.Task, error) {
	var ts taskScanner
	return ts.scan(row, extra...)
}

// taskScanner reads the taskColumns of rows into tasks. Its destinations
// are allocated once and reused for every row it scans, which matters for
// the hot path's statements that return hundreds of tasks.
type taskScanner struct {
	t                 rdq.Task
	id                [16]byte
	key               *string
	status            string
	headers           []byte // JSON; decoded only when not empty
	leaseExpires      pgtype.Timestamptz
	finished          pgtype.Timestamptz
	attempts, life    int32
	maxAttempts       int32
	timeoutUS         int64
	snoozes           int32
	contentType, hdlr string
	dest              []any
}

// scan reads one row, then any extra destinations, into a new task.
func (s *taskScanner) scan(row pgx.Row, extra ...any) (*rdq.Task, error) {
	if s.dest == nil {
		s.dest = append(make([]any, 0, 23+len(extra)),
			&s.id, &s.t.Queue, &s.hdlr, &s.t.Payload, &s.contentType, &s.headers,
			&s.key, &s.status, &s.attempts, &s.life, &s.t.NextAttemptAt,
			&s.t.LeaseToken, &s.leaseExpires, &s.t.LeaseOwner, &s.t.CreatedAt,
			&s.t.UpdatedAt, &s.finished, &s.t.LastError.Type, &s.t.LastError.Message,
			&s.t.LastError.Fingerprint, &s.maxAttempts, &s.timeoutUS, &s.snoozes)
		s.dest = append(s.dest, extra...)
	}
	// Every destination is written by Scan; those pgx may keep (byte
	// slices) are cleared so that rows never share memory.
	s.t, s.headers, s.key = rdq.Task{}, nil, nil
	if err := row.Scan(s.dest...); err != nil {
		return nil, err
	}
	t := s.t
	t.ID = s.id
	t.Handler = s.hdlr
	t.ContentType = s.contentType
	if len(s.headers) > 0 && string(s.headers) != "{}" {
		if err := json.Unmarshal(s.headers, &t.Headers); err != nil {
			return nil, fmt.Errorf("pgstore: task %s has headers that are not a JSON object of strings: %w", rdq.ID(s.id), err)
		}
		if len(t.Headers) == 0 {
			t.Headers = nil
		}
	}
	if s.key != nil {
		t.IdempotencyKey = *s.key
	}
	t.Status = rdq.Status(s.status)
	if !t.Status.Valid() {
		return nil, fmt.Errorf("pgstore: task %s has unknown status %q", t.ID, s.status)
	}
	t.Attempts = int(s.attempts)
	t.Life = int(s.life)
	t.MaxAttempts = int(s.maxAttempts)
	t.Timeout = time.Duration(s.timeoutUS) * time.Microsecond
	t.Snoozes = int(s.snoozes)
	t.LeaseExpiresAt = timeOf(s.leaseExpires)
	t.FinishedAt = timeOf(s.finished)
	return &t, nil
}

// scanAttempt reads the attemptColumns of one row.
func scanAttempt(row pgx.Row) (rdq.Attempt, error) {
	var (
		a            rdq.Attempt
		id           [16]byte
		number, life int32
		outcome      string
	)
	err := row.Scan(&id, &number, &life, &outcome, &a.ErrorType, &a.Message,
		&a.Stack, &a.WorkerID, &a.LeaseToken, &a.StartedAt, &a.FinishedAt)
	if err != nil {
		return rdq.Attempt{}, err
	}
	a.TaskID = id
	a.Number = int(number)
	a.Life = int(life)
	a.Outcome = rdq.Outcome(outcome)
	return a, nil
}
