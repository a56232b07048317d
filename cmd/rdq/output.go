package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/store"
)

// The JSON shapes below are the command's scripting contract: field names
// are stable, times are RFC 3339 in UTC, unset times are omitted.

type jsonError struct {
	Type        string `json:"type"`
	Message     string `json:"message"`
	Fingerprint string `json:"fingerprint"`
}

type jsonTask struct {
	ID             string            `json:"id"`
	Queue          string            `json:"queue"`
	Handler        string            `json:"handler"`
	Status         string            `json:"status"`
	Life           int               `json:"life"`
	Attempts       int               `json:"attempts"`
	MaxAttempts    int               `json:"max_attempts,omitempty"`
	TimeoutMS      int64             `json:"timeout_ms,omitempty"`
	Snoozes        int               `json:"snoozes,omitempty"`
	ContentType    string            `json:"content_type"`
	PayloadBytes   int               `json:"payload_bytes"`
	PayloadSHA256  string            `json:"payload_sha256"`
	Payload        []byte            `json:"payload,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	FinishedAt     time.Time         `json:"finished_at,omitzero"`
	NextAttemptAt  time.Time         `json:"next_attempt_at,omitzero"`
	LeaseOwner     string            `json:"lease_owner,omitempty"`
	LeaseExpiresAt time.Time         `json:"lease_expires_at,omitzero"`
	LastError      *jsonError        `json:"last_error,omitempty"`
}

func toJSONTask(t *rdq.Task, withPayload bool) jsonTask {
	sum := sha256.Sum256(t.Payload)
	j := jsonTask{
		ID: t.ID.String(), Queue: t.Queue, Handler: t.Handler, Status: string(t.Status),
		Life: t.Life, Attempts: t.Attempts, ContentType: t.ContentType,
		PayloadBytes: len(t.Payload), PayloadSHA256: hex.EncodeToString(sum[:]),
		Headers: t.Headers, IdempotencyKey: t.IdempotencyKey,
		CreatedAt: utc(t.CreatedAt), UpdatedAt: utc(t.UpdatedAt), FinishedAt: utc(t.FinishedAt),
		LeaseOwner: t.LeaseOwner, LeaseExpiresAt: utc(t.LeaseExpiresAt),
		MaxAttempts: t.MaxAttempts, TimeoutMS: t.Timeout.Milliseconds(), Snoozes: t.Snoozes,
	}
	if t.Status == rdq.StatusPending {
		j.NextAttemptAt = utc(t.NextAttemptAt)
	}
	if withPayload {
		j.Payload = t.Payload
		if j.Payload == nil {
			j.Payload = []byte{}
		}
	}
	if !t.LastError.IsZero() {
		j.LastError = &jsonError{Type: t.LastError.Type, Message: t.LastError.Message, Fingerprint: t.LastError.Fingerprint}
	}
	return j
}

type jsonAttempt struct {
	Number     int       `json:"number"`
	Life       int       `json:"life"`
	Outcome    string    `json:"outcome"`
	ErrorType  string    `json:"error_type,omitempty"`
	Message    string    `json:"message,omitempty"`
	Stack      string    `json:"stack,omitempty"`
	WorkerID   string    `json:"worker_id"`
	LeaseToken int64     `json:"lease_token"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	DurationMS float64   `json:"duration_ms"`
}

func toJSONAttempt(a rdq.Attempt) jsonAttempt {
	return jsonAttempt{
		Number: a.Number, Life: a.Life, Outcome: string(a.Outcome), ErrorType: a.ErrorType,
		Message: a.Message, Stack: a.Stack, WorkerID: a.WorkerID, LeaseToken: a.LeaseToken,
		StartedAt: utc(a.StartedAt), FinishedAt: utc(a.FinishedAt),
		DurationMS: float64(a.FinishedAt.Sub(a.StartedAt).Microseconds()) / 1000,
	}
}

type jsonGroup struct {
	Fingerprint string    `json:"fingerprint"`
	ErrorType   string    `json:"error_type"`
	Message     string    `json:"message"`
	Count       int64     `json:"count"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	ExampleID   string    `json:"example_id"`
}

type jsonStats struct {
	Queue              string  `json:"queue"`
	Pending            int64   `json:"pending"`
	InFlight           int64   `json:"in_flight"`
	Dead               int64   `json:"dead"`
	Succeeded          int64   `json:"succeeded"`
	OldestDueAgeSecond float64 `json:"oldest_due_age_seconds"`
}

type jsonAudit struct {
	ID      int64             `json:"id"`
	At      time.Time         `json:"at"`
	Actor   string            `json:"actor"`
	Action  string            `json:"action"`
	Filter  json.RawMessage   `json:"filter,omitempty"`
	IDs     []string          `json:"ids,omitempty"`
	Count   int64             `json:"count"`
	Reason  string            `json:"reason"`
	Details map[string]string `json:"details,omitempty"`
}

func toJSONAudit(a store.AuditEntry) jsonAudit {
	j := jsonAudit{ID: a.ID, At: utc(a.At), Actor: a.Actor, Action: a.Action, Count: a.Count, Reason: a.Reason, Details: a.Details}
	if a.Filter != "" {
		if json.Valid([]byte(a.Filter)) {
			j.Filter = json.RawMessage(a.Filter)
		} else {
			j.Filter, _ = json.Marshal(a.Filter) // a string always marshals
		}
	}
	for _, id := range a.IDs {
		j.IDs = append(j.IDs, id.String())
	}
	return j
}

type jsonTaskError struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

type jsonRedrive struct {
	DryRun   bool            `json:"dry_run"`
	Matched  int64           `json:"matched"`
	Redriven int64           `json:"redriven"`
	AtLimit  int64           `json:"at_limit"`
	MaxLife  int             `json:"max_life"`
	Failed   []jsonTaskError `json:"failed"`
}

type jsonPurge struct {
	DryRun  bool  `json:"dry_run"`
	Matched int64 `json:"matched"`
	Purged  int64 `json:"purged"`
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// table writes aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row writes one row. Each cell is put on one line with its control
// characters escaped (see cell), so no text can break the table or reach
// the terminal raw.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(strings.ReplaceAll(c, "\t", " "))
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	return nil
}

// fmtTime formats a time for tables: UTC, to the second.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// fmtDuration formats a duration for people, to a sensible precision.
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Microsecond:
		return "<1µs"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// oneLine squeezes text onto one line and caps it at n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func fmtHeaders(h map[string]string) string {
	if len(h) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(h))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+h[k])
	}
	return strings.Join(parts, " ")
}

func fmtDetails(d map[string]string) string {
	if len(d) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(d))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := d[k]
		if strings.HasSuffix(k, "sha256") && len(v) > 12 {
			v = v[:12] + "…"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

func fmtAuditSelection(a store.AuditEntry) string {
	switch {
	case len(a.IDs) == 1:
		return a.IDs[0].String()
	case len(a.IDs) > 1:
		return fmt.Sprintf("%s +%d more", a.IDs[0], len(a.IDs)-1)
	case a.Filter != "":
		return oneLine(a.Filter, 80)
	}
	return "-"
}

func failedJSON(failed []dlq.TaskError) []jsonTaskError {
	out := make([]jsonTaskError, 0, len(failed))
	for _, f := range failed {
		out = append(out, jsonTaskError{ID: f.ID.String(), Error: f.Err.Error()})
	}
	return out
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
