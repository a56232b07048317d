package dlq

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Limits on a Filter, enforced by Filter.Validate.
const (
	// MaxErrorTypeLength bounds Filter.ErrorType, in bytes: the cap on
	// recorded error types, so every recorded type can be filtered on.
	MaxErrorTypeLength = rdq.MaxErrorTypeLength
	// MaxFingerprintLength bounds Filter.Fingerprint, in hexadecimal digits.
	MaxFingerprintLength = 64
	// MaxMessageFilterLength bounds Filter.MessageContains, in bytes.
	MaxMessageFilterLength = 1024
	// MaxFilterIDs bounds Filter.IDs.
	MaxFilterIDs = 10000
	// MaxFilterLife bounds Filter.LifeMin and Filter.LifeBelow: a store
	// keeps the life as a 32-bit integer.
	MaxFilterLife = math.MaxInt32
)

// Bounds of a sane dead-time range: dead times are set by a store's clock,
// so a bound outside these years is a mistake (an unset year, a typo).
var (
	minFilterTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxFilterTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// Filter selects dead tasks. Zero fields match everything; set fields
// combine with AND. The zero Filter selects the whole dead-letter queue,
// which bulk mutations accept only when asked explicitly (see
// RedriveOptions.All and PurgeOptions.All).
type Filter struct {
	// IDs, if not empty, limits the selection to these tasks.
	IDs []rdq.ID
	// Queue and Handler match the task's queue and handler name exactly.
	Queue   string
	Handler string
	// ErrorType matches the type of the task's last error exactly, e.g.
	// "timeout", "panic" or "*net.OpError".
	ErrorType string
	// Fingerprint matches the fingerprint of the task's last error (see
	// rdq.Fingerprint), as shown by Groups. Hexadecimal; case does not
	// matter.
	Fingerprint string
	// DeadAfter and DeadBefore bound when the task went dead: at or after
	// DeadAfter, strictly before DeadBefore. Zero means unbounded.
	DeadAfter  time.Time
	DeadBefore time.Time
	// MessageContains matches a case-insensitive substring of the task's
	// last error message.
	MessageContains string
	// LifeMin and LifeBelow bound the task's life (rdq.Task.Life, how many
	// times it was redriven): at least LifeMin, strictly below LifeBelow.
	// Zero means unbounded. LifeMin 1 finds redrive loops, tasks that died
	// again after a redrive; LifeBelow 1 finds tasks never redriven;
	// LifeMin n with LifeBelow n+1 selects life n exactly.
	LifeMin   int
	LifeBelow int
}

// IsEmpty reports whether f selects every dead task.
func (f Filter) IsEmpty() bool {
	return len(f.IDs) == 0 && f.Queue == "" && f.Handler == "" && f.ErrorType == "" &&
		f.Fingerprint == "" && f.DeadAfter.IsZero() && f.DeadBefore.IsZero() && f.MessageContains == "" &&
		f.LifeMin == 0 && f.LifeBelow == 0
}

// Validate checks f at the edge, before it reaches a store: names follow
// rdq.ValidateName, the error type and message text are bounded UTF-8
// without control characters, the fingerprint is hexadecimal, the time
// range is within sane years and not empty, the life range is within 0 to
// MaxFilterLife and not empty, and IDs are valid and at most MaxFilterIDs. Every error wraps rdq.ErrInvalid and says which field is
// wrong.
func (f Filter) Validate() error {
	if f.Queue != "" {
		if err := rdq.ValidateName("queue", f.Queue); err != nil {
			return fmt.Errorf("filter: %w", err)
		}
	}
	if f.Handler != "" {
		if err := rdq.ValidateName("handler", f.Handler); err != nil {
			return fmt.Errorf("filter: %w", err)
		}
	}
	if err := validateText("error type", f.ErrorType, MaxErrorTypeLength); err != nil {
		return err
	}
	if f.Fingerprint != "" {
		if len(f.Fingerprint) > MaxFingerprintLength {
			return fmt.Errorf("%w: filter: fingerprint is %d characters; the limit is %d", rdq.ErrInvalid, len(f.Fingerprint), MaxFingerprintLength)
		}
		for i := 0; i < len(f.Fingerprint); i++ {
			if !isHex(f.Fingerprint[i]) {
				return fmt.Errorf("%w: filter: fingerprint %q is not hexadecimal (copy it from the groups view)", rdq.ErrInvalid, clip(f.Fingerprint))
			}
		}
	}
	if err := validateText("message text", f.MessageContains, MaxMessageFilterLength); err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		t    time.Time
	}{{"dead-after time", f.DeadAfter}, {"dead-before time", f.DeadBefore}} {
		if !b.t.IsZero() && (b.t.Before(minFilterTime) || b.t.After(maxFilterTime)) {
			return fmt.Errorf("%w: filter: %s %s is outside the years 1970 to 9999", rdq.ErrInvalid, b.name, b.t.Format(time.RFC3339))
		}
	}
	if !f.DeadAfter.IsZero() && !f.DeadBefore.IsZero() && !f.DeadAfter.Before(f.DeadBefore) {
		return fmt.Errorf("%w: filter: dead-after %s is not before dead-before %s: the range is empty (swap the bounds?)",
			rdq.ErrInvalid, f.DeadAfter.UTC().Format(time.RFC3339Nano), f.DeadBefore.UTC().Format(time.RFC3339Nano))
	}
	for _, b := range []struct {
		name string
		n    int
	}{{"life minimum", f.LifeMin}, {"life upper bound", f.LifeBelow}} {
		if b.n < 0 || b.n > MaxFilterLife {
			return fmt.Errorf("%w: filter: %s %d is outside 0 to %d (a task's life counts its redrives)", rdq.ErrInvalid, b.name, b.n, MaxFilterLife)
		}
	}
	if f.LifeBelow > 0 && f.LifeBelow <= f.LifeMin {
		return fmt.Errorf("%w: filter: life below %d and at least %d is an empty range (for exactly life %d, use below %d)",
			rdq.ErrInvalid, f.LifeBelow, f.LifeMin, f.LifeMin, f.LifeMin+1)
	}
	if len(f.IDs) > MaxFilterIDs {
		return fmt.Errorf("%w: filter: %d task ids; the limit is %d (select by another field, or split the list)", rdq.ErrInvalid, len(f.IDs), MaxFilterIDs)
	}
	for _, id := range f.IDs {
		if id.IsZero() {
			return fmt.Errorf("%w: filter: the zero task id is not a task", rdq.ErrInvalid)
		}
	}
	return nil
}

// toStore converts a validated filter to the store's form, normalizing the
// fingerprint to lower case.
func (f Filter) toStore() store.DeadFilter {
	var ids []rdq.ID
	if len(f.IDs) > 0 {
		ids = slices.Clone(f.IDs)
	}
	return store.DeadFilter{
		IDs:             ids,
		Queue:           f.Queue,
		Handler:         f.Handler,
		ErrorType:       f.ErrorType,
		Fingerprint:     strings.ToLower(f.Fingerprint),
		DeadAfter:       f.DeadAfter,
		DeadBefore:      f.DeadBefore,
		MessageContains: f.MessageContains,
		LifeMin:         f.LifeMin,
		LifeBelow:       f.LifeBelow,
	}
}

// Matches reports whether t, a task as a store returns it, is selected by
// f: it is DEAD and every set field matches. It is the reference semantics
// of a filter, evaluated in memory.
func (f Filter) Matches(t *rdq.Task) bool {
	if t.Status != rdq.StatusDead {
		return false
	}
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, t.ID) {
		return false
	}
	switch {
	case f.Queue != "" && t.Queue != f.Queue,
		f.Handler != "" && t.Handler != f.Handler,
		f.ErrorType != "" && t.LastError.Type != f.ErrorType,
		f.Fingerprint != "" && t.LastError.Fingerprint != strings.ToLower(f.Fingerprint),
		!f.DeadAfter.IsZero() && t.FinishedAt.Before(f.DeadAfter),
		!f.DeadBefore.IsZero() && !t.FinishedAt.Before(f.DeadBefore),
		f.LifeMin > 0 && t.Life < f.LifeMin,
		f.LifeBelow > 0 && t.Life >= f.LifeBelow:
		return false
	}
	if f.MessageContains != "" && !strings.Contains(strings.ToLower(t.LastError.Message), strings.ToLower(f.MessageContains)) {
		return false
	}
	return true
}

// String describes f for people, e.g. `queue=emails error_type=timeout`,
// or "all dead tasks" for the empty filter.
func (f Filter) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+quoteIfNeeded(v))
		}
	}
	if len(f.IDs) == 1 {
		add("id", f.IDs[0].String())
	} else if len(f.IDs) > 1 {
		parts = append(parts, fmt.Sprintf("ids=(%d)", len(f.IDs)))
	}
	add("queue", f.Queue)
	add("handler", f.Handler)
	add("error_type", f.ErrorType)
	add("fingerprint", strings.ToLower(f.Fingerprint))
	if !f.DeadAfter.IsZero() {
		add("dead_after", f.DeadAfter.UTC().Format(time.RFC3339))
	}
	if !f.DeadBefore.IsZero() {
		add("dead_before", f.DeadBefore.UTC().Format(time.RFC3339))
	}
	add("message", f.MessageContains)
	switch {
	case f.LifeBelow > 0 && f.LifeBelow == f.LifeMin+1:
		add("life", fmt.Sprint(f.LifeMin))
	default:
		if f.LifeMin > 0 {
			parts = append(parts, fmt.Sprintf("life>=%d", f.LifeMin))
		}
		if f.LifeBelow > 0 {
			parts = append(parts, fmt.Sprintf("life<%d", f.LifeBelow))
		}
	}
	if len(parts) == 0 {
		return "all dead tasks"
	}
	return strings.Join(parts, " ")
}

// digest is a short hash of the filter's canonical form; page tokens carry
// it so a token is only accepted with the filter it was issued for.
func (f Filter) digest() uint64 {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	ids := slices.Clone(f.IDs)
	slices.SortFunc(ids, func(a, b rdq.ID) int { return strings.Compare(string(a[:]), string(b[:])) })
	ids = slices.Compact(ids)
	for _, id := range ids {
		field(string(id[:]))
	}
	field(f.Queue)
	field(f.Handler)
	field(f.ErrorType)
	field(strings.ToLower(f.Fingerprint))
	field(timeKey(f.DeadAfter))
	field(timeKey(f.DeadBefore))
	field(f.MessageContains)
	// The life bounds join the digest only when set, so tokens issued
	// before they existed stay valid for the filters they were issued for.
	if f.LifeMin != 0 || f.LifeBelow != 0 {
		field(fmt.Sprint(f.LifeMin))
		field(fmt.Sprint(f.LifeBelow))
	}
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

func timeKey(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprint(t.UnixNano())
}

func validateText(what, s string, limit int) error {
	if s == "" {
		return nil
	}
	if len(s) > limit {
		return fmt.Errorf("%w: filter: %s is %d bytes; the limit is %d", rdq.ErrInvalid, what, len(s), limit)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: filter: %s is not valid UTF-8", rdq.ErrInvalid, what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: filter: %s %q contains the control character %U", rdq.ErrInvalid, what, clip(s), r)
		}
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func quoteIfNeeded(s string) string {
	if strings.ContainsAny(s, " \t\"'=") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

func clip(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
