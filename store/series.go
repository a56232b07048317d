package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/srjn45/rdq"
)

// SeriesLag is how long after a minute ends a store may fix that minute's
// counts for good. An attempt is stamped with the store's clock when the
// statement recording it starts, and becomes visible when its transaction
// commits; a minute is rolled up only once every transaction stamped
// within it has had SeriesLag to commit. Minutes closer to now than that
// are counted afresh on every read.
const SeriesLag = 2 * time.Minute

// SeriesRetention is how far back a series reaches: older minutes are
// dropped from a store's counters when it rolls up new ones.
const SeriesRetention = 8 * 24 * time.Hour

// MaxSeriesBuckets bounds SeriesParams.Buckets.
const MaxSeriesBuckets = 1440

// SeriesReader is implemented by stores that count attempts and their
// outcomes over time, per queue and handler: how an incident started, how
// fast tasks fail and whether it is getting better. It is optional: find it
// with SeriesReaderOf.
//
// The counts come from the attempt history a store keeps anyway; keeping
// them costs the statements that claim and finish tasks nothing. A store
// rolls complete minutes (older than SeriesLag) up into counter rows when a
// series is read, each minute once however many readers race, and counts
// the minutes since then from the history on every read. A store may
// bound the work of one read, rolling up a few minutes per read: the
// minutes it has not reached yet are then left out, and
// Series.PartialUntil says up to when. Once rolled up, a
// minute's counts stay as they were for SeriesRetention, even after its
// tasks are purged; a minute rolled up after its tasks were purged misses
// them.
type SeriesReader interface {
	// Series counts the attempts that finished in p.Buckets consecutive
	// intervals of p.Width ending with the one holding now (p.Now, or the
	// store's clock): bucket i covers [Start + i·Width, Start + (i+1)·Width).
	// It returns one line per (queue, handler) with any count in the
	// window, matching p.Queue and p.Handler when set, ordered by queue
	// then handler. Invalid parameters fail with an error wrapping
	// rdq.ErrInvalid (see ValidateSeries).
	Series(ctx context.Context, p SeriesParams) (Series, error)
}

// SeriesParams is the input of SeriesReader.Series.
type SeriesParams struct {
	// Width is time.Minute or time.Hour.
	Width time.Duration
	// Buckets is how many intervals of Width, from 1 to MaxSeriesBuckets,
	// reaching no further back than SeriesRetention.
	Buckets int
	// Queue and Handler, when set, limit the lines to that queue and
	// handler (exact match).
	Queue   string
	Handler string
	// Now overrides the store's clock; nil in production.
	Now *time.Time
}

// Series is the result of SeriesReader.Series.
type Series struct {
	// Start is the start of the first bucket: the store's now truncated
	// to Width, less Buckets-1 widths.
	Start time.Time
	Width time.Duration
	// Lines holds a line per (queue, handler) with any count.
	Lines []SeriesLine
	// PartialUntil, when not zero, is where the counts become complete:
	// attempts that finished before it may be missing, because the store
	// rolls up a bounded part of its history per read and has not reached
	// them yet (the first reads after an upgrade or a long spell without
	// reads). Later reads fill them in.
	PartialUntil time.Time
}

// SeriesLine is the series of one queue and handler: Counts has one
// element per bucket.
type SeriesLine struct {
	Queue   string
	Handler string
	Counts  []SeriesCounts
}

// SeriesCounts counts what happened in one bucket.
type SeriesCounts struct {
	// Attempts counts executions that finished: successes and failures,
	// including the executions lost with their lease (LEASE_EXPIRED).
	// Cancellations are not executions and are not counted here.
	Attempts int64
	// Successes counts attempts with outcome SUCCESS.
	Successes int64
	// Retryable counts failed attempts with outcome RETRYABLE_FAILURE or
	// LEASE_EXPIRED; Permanent those with PERMANENT_FAILURE.
	Retryable int64
	Permanent int64
	// DeadLettered counts the tasks that went to the dead-letter queue:
	// each life that ended DEAD counts once, at its last attempt (a
	// cancellation included), whether or not the task was redriven or is
	// still dead.
	DeadLettered int64
}

// Add returns the sum of c and o.
func (c SeriesCounts) Add(o SeriesCounts) SeriesCounts {
	return SeriesCounts{
		Attempts:     c.Attempts + o.Attempts,
		Successes:    c.Successes + o.Successes,
		Retryable:    c.Retryable + o.Retryable,
		Permanent:    c.Permanent + o.Permanent,
		DeadLettered: c.DeadLettered + o.DeadLettered,
	}
}

// IsZero reports whether every count is zero.
func (c SeriesCounts) IsZero() bool { return c == SeriesCounts{} }

// SeriesStart returns the start of the first bucket of a series of p read
// at now.
func SeriesStart(p SeriesParams, now time.Time) time.Time {
	return now.Truncate(p.Width).Add(-time.Duration(p.Buckets-1) * p.Width)
}

// ValidateSeries checks p for Series; the error wraps rdq.ErrInvalid and
// says what to change.
func ValidateSeries(p SeriesParams) error {
	if p.Width != time.Minute && p.Width != time.Hour {
		return fmt.Errorf("%w: series: width %s: use one minute or one hour", rdq.ErrInvalid, p.Width)
	}
	if p.Buckets < 1 || p.Buckets > MaxSeriesBuckets {
		return fmt.Errorf("%w: series: %d buckets: use 1 to %d", rdq.ErrInvalid, p.Buckets, MaxSeriesBuckets)
	}
	if span := time.Duration(p.Buckets) * p.Width; span > SeriesRetention {
		return fmt.Errorf("%w: series: %d buckets of %s reach back %s, past the %s kept: use fewer buckets",
			rdq.ErrInvalid, p.Buckets, p.Width, span, SeriesRetention)
	}
	return nil
}

// SeriesWindow returns the SeriesParams (Queue and Handler left empty) of a
// series of width whose first bucket holds since and whose last holds
// until, or now when until is zero. until is passed as Now when it is
// set; it may not be after now. The error wraps rdq.ErrInvalid and says
// what to change.
func SeriesWindow(width time.Duration, since, until, now time.Time) (SeriesParams, error) {
	if width != time.Minute && width != time.Hour {
		return SeriesParams{}, fmt.Errorf("%w: series: resolution %s: use minute or hour", rdq.ErrInvalid, width)
	}
	p := SeriesParams{Width: width}
	end := now
	if !until.IsZero() {
		if until.After(now) {
			return SeriesParams{}, fmt.Errorf("%w: series: until %s is in the future: leave it out to read up to now",
				rdq.ErrInvalid, until.UTC().Format(time.RFC3339))
		}
		end = until
		p.Now = &end
	}
	if since.IsZero() || !since.Before(end) {
		return SeriesParams{}, fmt.Errorf("%w: series: since %s must be set and before %s", rdq.ErrInvalid,
			since.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	}
	if end.Sub(since) > SeriesRetention {
		return SeriesParams{}, fmt.Errorf("%w: series: since %s is more than %s before %s, past the counts kept: start later",
			rdq.ErrInvalid, since.UTC().Format(time.RFC3339), SeriesRetention, end.UTC().Format(time.RFC3339))
	}
	last := end.Truncate(width)
	p.Buckets = int((last.Sub(since)+width-1)/width) + 1
	if p.Buckets > MaxSeriesBuckets {
		return SeriesParams{}, fmt.Errorf("%w: series: %d buckets of %s from %s: the limit is %d; read hours, or a shorter span",
			rdq.ErrInvalid, p.Buckets, width, since.UTC().Format(time.RFC3339), MaxSeriesBuckets)
	}
	if err := ValidateSeries(p); err != nil {
		// One bucket more than the retention when since is just inside it.
		p.Buckets--
		if err := ValidateSeries(p); err != nil {
			return SeriesParams{}, err
		}
	}
	return p, nil
}

// SortSeriesLines sorts lines by queue, then handler (byte order).
func SortSeriesLines(lines []SeriesLine) {
	slices.SortFunc(lines, func(a, b SeriesLine) int {
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return strings.Compare(a.Handler, b.Handler)
	})
}

// SeriesPlan is how a store that rolls counts up (as SeriesReader
// describes) serves one Series call: which minutes and hours to roll up
// and where to read each part of the window from. It is for store
// implementations.
type SeriesPlan struct {
	// Start and End bound the window: [Start, End).
	Start, End time.Time
	// Minutes from MinutesFrom to Rolled are complete: rolled up (if not
	// yet) and read from the minute counters; [Rolled, End) is counted
	// from the history. MinutesFrom is Start, or Keep when Start is older.
	MinutesFrom, Rolled time.Time
	// The complete hours of [HoursFrom, HoursTo) are rolled up from the
	// minute counters (if not yet) and read from the hour counters; the
	// minutes of [MinutesFrom, HoursFrom) and [HoursTo, Rolled) are read
	// from the minute counters. HoursFrom equals HoursTo when no hour is
	// read whole (a window of minutes).
	HoursFrom, HoursTo time.Time
	// Keep is the retention: counters before it are dropped.
	Keep time.Time
}

// PlanSeries returns the plan of a Series call with p at now (the store's
// clock).
func PlanSeries(p SeriesParams, now time.Time) SeriesPlan {
	pl := SeriesPlan{Start: SeriesStart(p, now), Keep: now.Add(-SeriesRetention).Truncate(time.Minute)}
	pl.End = pl.Start.Add(time.Duration(p.Buckets) * p.Width)
	pl.MinutesFrom = pl.Start
	if pl.MinutesFrom.Before(pl.Keep) {
		pl.MinutesFrom = pl.Keep
	}
	pl.Rolled = now.Add(-SeriesLag).Truncate(time.Minute)
	if pl.Rolled.Before(pl.MinutesFrom) {
		pl.Rolled = pl.MinutesFrom
	}
	pl.HoursFrom, pl.HoursTo = pl.MinutesFrom, pl.MinutesFrom
	if p.Width == time.Hour {
		if pl.HoursFrom = pl.MinutesFrom.Truncate(time.Hour); pl.HoursFrom.Before(pl.MinutesFrom) {
			pl.HoursFrom = pl.HoursFrom.Add(time.Hour)
		}
		if pl.HoursTo = pl.Rolled.Truncate(time.Hour); pl.HoursTo.Before(pl.HoursFrom) {
			pl.HoursTo = pl.HoursFrom
		}
	}
	return pl
}
