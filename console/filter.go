package console

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
)

// The query-string (and form) names of a dead-task filter, so a view can
// be bookmarked and shared.
const (
	qQueue       = "queue"
	qHandler     = "handler"
	qErrorType   = "error_type"
	qFingerprint = "fingerprint"
	qMessage     = "message"
	qDeadAfter   = "dead_after"
	qDeadBefore  = "dead_before"
	qLifeMin     = "life_min"
	qLifeBelow   = "life_below"
	// qID names a selected task; repeated for each one.
	qID = "id"
)

// timeLayouts are the accepted forms of a time in a filter, all UTC unless
// the text says otherwise: RFC 3339, what an <input type="datetime-local">
// sends, and a date.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"}

func parseTime(now time.Time, field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := parseAgo(s); ok {
		return now.UTC().Add(-d).Truncate(time.Second), nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: %s %q is not a time: use 2006-01-02T15:04 (UTC), RFC 3339, or how long ago (15m, 1h, 1d)", rdq.ErrInvalid, field, clip(s))
}

// parseAgo reads how long ago as the CLI writes it: a whole number and a
// unit, s, m, h or d (days of 24 hours).
func parseAgo(s string) (time.Duration, bool) {
	if len(s) < 2 {
		return 0, false
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	n, err := strconv.Atoi(s[:len(s)-1])
	if unit == 0 || err != nil || n < 0 || s[0] == '+' || s[0] == '-' || int64(n) > int64(100*365*24*time.Hour/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// parseFilter reads a filter from a query string or form and validates it;
// times said as how long ago count back from now.
func parseFilter(now time.Time, v url.Values) (dlq.Filter, error) {
	f := dlq.Filter{
		Queue:           strings.TrimSpace(v.Get(qQueue)),
		Handler:         strings.TrimSpace(v.Get(qHandler)),
		ErrorType:       strings.TrimSpace(v.Get(qErrorType)),
		Fingerprint:     strings.ToLower(strings.TrimSpace(v.Get(qFingerprint))),
		MessageContains: v.Get(qMessage),
	}
	for _, s := range v[qID] {
		id, err := rdq.ParseID(strings.TrimSpace(s))
		if err != nil {
			return f, fmt.Errorf("%w: selected task %q is not a task id", rdq.ErrInvalid, clip(s))
		}
		if !slices.Contains(f.IDs, id) {
			f.IDs = append(f.IDs, id)
		}
	}
	var err error
	if f.DeadAfter, err = parseTime(now, "dead after", v.Get(qDeadAfter)); err != nil {
		return f, err
	}
	if f.DeadBefore, err = parseTime(now, "dead before", v.Get(qDeadBefore)); err != nil {
		return f, err
	}
	if f.LifeMin, err = parseLife("life at least", v.Get(qLifeMin)); err != nil {
		return f, err
	}
	if f.LifeBelow, err = parseLife("life below", v.Get(qLifeBelow)); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// parseLife reads a life bound: empty for none, else a whole number that
// Filter.Validate then bounds.
func parseLife(field, s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a whole number of redrives (0, 1, 2…)", rdq.ErrInvalid, field, clip(s))
	}
	return n, nil
}

// filterValues is the query string of f, the selected tasks included.
func filterValues(f dlq.Filter) url.Values {
	v := url.Values{}
	for _, id := range f.IDs {
		v.Add(qID, id.String())
	}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set(qQueue, f.Queue)
	set(qHandler, f.Handler)
	set(qErrorType, f.ErrorType)
	set(qFingerprint, f.Fingerprint)
	set(qMessage, f.MessageContains)
	if !f.DeadAfter.IsZero() {
		v.Set(qDeadAfter, f.DeadAfter.UTC().Format(time.RFC3339))
	}
	if !f.DeadBefore.IsZero() {
		v.Set(qDeadBefore, f.DeadBefore.UTC().Format(time.RFC3339))
	}
	if f.LifeMin != 0 {
		v.Set(qLifeMin, strconv.Itoa(f.LifeMin))
	}
	if f.LifeBelow != 0 {
		v.Set(qLifeBelow, strconv.Itoa(f.LifeBelow))
	}
	return v
}

// countable reports whether the dead-task summary answers a count of f
// without reading the tasks: only queue, handler, error type and
// fingerprint are set.
func countable(f dlq.Filter) bool {
	return len(f.IDs) == 0 && f.DeadAfter.IsZero() && f.DeadBefore.IsZero() && f.MessageContains == "" &&
		f.LifeMin == 0 && f.LifeBelow == 0
}

// clip shortens untrusted text quoted in an error message.
func clip(s string) string {
	const limit = 64
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit]) + "…"
}
