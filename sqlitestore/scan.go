package sqlitestore

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/srjn45/rdq"
)

// micros converts a duration to whole microseconds, the store's time unit,
// clamping negative durations to zero.
func micros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return d.Microseconds()
}

// fromMicros converts unix microseconds to a UTC time.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// fromNullMicros converts a nullable time column; NULL is the zero time.
func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// idArg is the stored form of a task ID: its 16 bytes.
func idArg(id rdq.ID) []byte { return id[:] }

// idsHexJSON encodes IDs as a JSON array of 32-digit hex strings, the form
// deadFilterIDs unhexes.
func idsHexJSON(ids []rdq.ID) (string, error) {
	hs := make([]string, len(ids))
	for i, id := range ids {
		hs[i] = hex.EncodeToString(id[:])
	}
	b, err := json.Marshal(hs)
	return string(b), err
}

// scanID reads a 16-byte ID column.
func scanID(b []byte) (rdq.ID, error) {
	var id rdq.ID
	if len(b) != len(id) {
		return id, fmt.Errorf("stored task id has %d bytes, want %d", len(b), len(id))
	}
	copy(id[:], b)
	return id, nil
}

// headersArg encodes headers as a JSON object, or NULL when there are none.
func headersArg(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encoding headers: %w", err)
	}
	return string(b), nil
}

// nullString is s as a nullable parameter: NULL for "".
func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

type rowScanner interface {
	Scan(dest ...any) error
}

// scanTask reads one row of taskColumns.
func scanTask(r rowScanner) (*rdq.Task, error) {
	var (
		t                                   rdq.Task
		id, payload                         []byte
		headers, key                        sql.NullString
		status                              string
		next, created, updated              int64
		leaseExpires, finished              sql.NullInt64
		errType, errMessage, errFingerprint string
		timeoutUS                           int64
	)
	err := r.Scan(&id, &t.Queue, &t.Handler, &payload, &t.ContentType, &headers, &key, &status,
		&t.Attempts, &t.Life, &next, &t.LeaseToken, &leaseExpires, &t.LeaseOwner,
		&created, &updated, &finished, &errType, &errMessage, &errFingerprint,
		&t.MaxAttempts, &timeoutUS, &t.Snoozes)
	if err != nil {
		return nil, err
	}
	if t.ID, err = scanID(id); err != nil {
		return nil, err
	}
	t.Payload = payload
	if t.Payload == nil {
		t.Payload = []byte{}
	}
	if headers.Valid && headers.String != "" {
		if err := json.Unmarshal([]byte(headers.String), &t.Headers); err != nil {
			return nil, fmt.Errorf("decoding headers of task %s: %w", t.ID, err)
		}
	}
	t.IdempotencyKey = key.String
	t.Status = rdq.Status(status)
	t.NextAttemptAt = fromMicros(next)
	t.LeaseExpiresAt = fromNullMicros(leaseExpires)
	t.CreatedAt = fromMicros(created)
	t.UpdatedAt = fromMicros(updated)
	t.FinishedAt = fromNullMicros(finished)
	t.LastError = rdq.ErrorSummary{Type: errType, Message: errMessage, Fingerprint: errFingerprint}
	t.Timeout = time.Duration(timeoutUS) * time.Microsecond
	return &t, nil
}

// scanTasks reads all rows of taskColumns and closes rows.
func scanTasks(rows *sql.Rows) ([]*rdq.Task, error) {
	defer rows.Close()
	var tasks []*rdq.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return tasks, rows.Close()
}

// scanAttempt reads one row of sqlGetAttempts.
func scanAttempt(r rowScanner) (rdq.Attempt, error) {
	var (
		a                 rdq.Attempt
		id                []byte
		outcome           string
		started, finished int64
	)
	err := r.Scan(&id, &a.Number, &a.Life, &outcome, &a.ErrorType, &a.Message, &a.Stack, &a.WorkerID,
		&a.LeaseToken, &started, &finished)
	if err != nil {
		return a, err
	}
	if a.TaskID, err = scanID(id); err != nil {
		return a, err
	}
	a.Outcome = rdq.Outcome(outcome)
	a.StartedAt = fromMicros(started)
	a.FinishedAt = fromMicros(finished)
	return a, nil
}
