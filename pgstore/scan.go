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
	var (
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
	)
	dest := []any{
		&id, &t.Queue, &hdlr, &t.Payload, &contentType, &headers,
		&key, &status, &attempts, &life, &t.NextAttemptAt,
		&t.LeaseToken, &leaseExpires, &t.LeaseOwner, &t.CreatedAt,
		&t.UpdatedAt, &finished, &t.LastError.Type, &t.LastError.Message,
		&t.LastError.Fingerprint, &maxAttempts, &timeoutUS, &snoozes,
	}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	t.ID = id
	t.Handler = hdlr
	t.ContentType = contentType
	if len(headers) > 0 && string(headers) != "{}" {
		if err := json.Unmarshal(headers, &t.Headers); err != nil {
			return nil, fmt.Errorf("pgstore: task %s has headers that are not a JSON object of strings: %w", rdq.ID(id), err)
		}
		if len(t.Headers) == 0 {
			t.Headers = nil
		}
	}
	if key != nil {
		t.IdempotencyKey = *key
	}
	t.Status = rdq.Status(status)
	if !t.Status.Valid() {
		return nil, fmt.Errorf("pgstore: task %s has unknown status %q", t.ID, status)
	}
	t.Attempts = int(attempts)
	t.Life = int(life)
	t.MaxAttempts = int(maxAttempts)
	t.Timeout = time.Duration(timeoutUS) * time.Microsecond
	t.Snoozes = int(snoozes)
	t.LeaseExpiresAt = timeOf(leaseExpires)
	t.FinishedAt = timeOf(finished)
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
