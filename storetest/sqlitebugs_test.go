package storetest

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// The kit's parts beyond the reference store (live tasks, handler pauses,
// snoozes, the console's reads, chaos) are checked for sensitivity on the SQLite store with a defect laid
// over it: buggyStore keeps every interface of the store and breaks one
// rule, named by sqliteBug.
type sqliteBug string

const (
	// RetryNow reports success and changes nothing.
	bugRetryNowNoop sqliteBug = "retry-now-noop"
	// ClaimProbe leases a probe an hour before the cool-off ends.
	bugProbeEarly sqliteBug = "probe-early"
	// ClaimProbe probes a handler of a paused queue.
	bugProbePausedQueue sqliteBug = "probe-paused-queue"
	// Claims record one lease owner for every worker, so the execution a
	// killed worker lost is recorded under a worker that did not run it.
	bugOwnerLost sqliteBug = "owner-lost"
	// NotDueCounts ignores the Now override and counts by the real clock.
	bugNotDueRealClock sqliteBug = "not-due-real-clock"
	// DeadHistogram's buckets start one bucket early.
	bugHistogramEarly sqliteBug = "histogram-early"
	// DeadGroupKeys reports one (queue, handler) pair per fingerprint.
	bugGroupKeysFirstOnly sqliteBug = "group-keys-first-only"
	// Series ignores the Now override and reads by the real clock.
	bugSeriesRealClock sqliteBug = "series-real-clock"
	// Series ignores its queue and handler filters.
	bugSeriesNoFilter sqliteBug = "series-no-filter"
	// Series counts no dead-lettering.
	bugSeriesNoDead sqliteBug = "series-no-dead"
	// Series counts a retryable failure as permanent.
	bugSeriesRetryPermanent sqliteBug = "series-retry-permanent"
	// Snooze is a retry: it spends an attempt and records it.
	bugSnoozeSpendsAttempt sqliteBug = "snooze-spends-attempt"
	// WaitingCounts counts held tasks as scheduled.
	bugWaitingHeldScheduled sqliteBug = "waiting-held-scheduled"
	// GroupOrigins reports a group's first dead time.
	bugOriginIsDeath sqliteBug = "origin-is-death"
	// A correct store whose harness leaves out one of its capabilities.
	bugUndeclaredWaiting   sqliteBug = "undeclared-waiting-counts"
	bugUndeclaredOrigins   sqliteBug = "undeclared-group-origins"
	bugUndeclaredNotDue    sqliteBug = "undeclared-not-due-counts"
	bugUndeclaredHistogram sqliteBug = "undeclared-dead-histogram"
	bugUndeclaredGroupKeys sqliteBug = "undeclared-dead-group-keys"
	bugUndeclaredSeries    sqliteBug = "undeclared-series"
)

// sqliteBugParts are the parts of the kit each defect must fail.
var sqliteBugParts = map[sqliteBug]string{
	bugRetryNowNoop:        "Live",
	bugProbeEarly:          "PauseHandlers",
	bugProbePausedQueue:    "ProbeInPausedQueue",
	bugOwnerLost:           "Chaos",
	bugNotDueRealClock:     "NotDueCounts",
	bugHistogramEarly:      "DeadHistogram",
	bugGroupKeysFirstOnly:  "DeadGroupKeys",
	bugSnoozeSpendsAttempt: "Snooze",
	bugUndeclaredNotDue:    "Capabilities",

	bugWaitingHeldScheduled: "WaitingCounts",
	bugOriginIsDeath:        "GroupOrigins",
	bugUndeclaredWaiting:    "Capabilities",
	bugUndeclaredOrigins:    "Capabilities",
	bugUndeclaredHistogram:  "Capabilities",
	bugUndeclaredGroupKeys:  "Capabilities",

	bugSeriesRealClock:      "Series",
	bugSeriesNoFilter:       "Series",
	bugSeriesNoDead:         "Series",
	bugSeriesRetryPermanent: "Series",
	bugUndeclaredSeries:     "Capabilities",

	bugInPlaceTokenKept:           "RetryInPlace",
	bugInPlaceNotCounted:          "RetryInPlace",
	bugInPlaceIgnoresHandlerPause: "RetryInPlace",
	bugInPlaceAcceptsStale:        "RetryInPlace",
	bugUndeclaredInPlace:          "Capabilities",
}

type buggyStore struct {
	*sqlitestore.Store
	bug sqliteBug
}

func (b *buggyStore) RetryNow(ctx context.Context, p store.RetryNowParams) ([]error, error) {
	if b.bug == bugRetryNowNoop {
		return make([]error, len(p.IDs)), nil
	}
	return b.Store.RetryNow(ctx, p)
}

func (b *buggyStore) ClaimProbe(ctx context.Context, p store.ProbeParams) ([]store.Probe, error) {
	switch b.bug {
	case bugProbeEarly:
		now := time.Now()
		if p.Now != nil {
			now = *p.Now
		}
		now = now.Add(time.Hour)
		p.Now = &now
	case bugProbePausedQueue:
		paused, err := b.PausedQueues(ctx)
		if err != nil {
			return nil, err
		}
		var resumed []string
		for _, q := range p.Queues {
			if slices.Contains(paused, q) {
				if err := b.ResumeQueue(ctx, store.PauseParams{Queue: q, Actor: "bug"}); err != nil {
					return nil, err
				}
				resumed = append(resumed, q)
			}
		}
		probes, err := b.Store.ClaimProbe(ctx, p)
		for _, q := range resumed {
			err = errors.Join(err, b.PauseQueue(ctx, store.PauseParams{Queue: q, Actor: "bug"}))
		}
		return probes, err
	}
	return b.Store.ClaimProbe(ctx, p)
}

func (b *buggyStore) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	if b.bug == bugOwnerLost {
		p.WorkerID = "worker"
	}
	return b.Store.Claim(ctx, p)
}

func (b *buggyStore) Snooze(ctx context.Context, p store.SnoozeParams) ([]error, error) {
	if b.bug != bugSnoozeSpendsAttempt {
		return b.Store.Snooze(ctx, p)
	}
	seen := map[store.Lease]bool{}
	var (
		comps []store.Completion
		at    []int
	)
	errs := make([]error, len(p.Snoozes))
	for i, sn := range p.Snoozes {
		if seen[sn.Lease] {
			errs[i] = store.ErrLeaseLost
			continue
		}
		seen[sn.Lease] = true
		comps = append(comps, store.Completion{Lease: sn.Lease, Status: rdq.StatusPending, RetryIn: max(sn.Delay, 0),
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, Failure: failure("snoozed"), WorkerID: "worker"}})
		at = append(at, i)
	}
	ferrs, err := b.Finish(ctx, store.FinishParams{Completions: comps, Now: p.Now})
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		errs[i] = ferrs[j]
	}
	return errs, nil
}

func (b *buggyStore) NotDueCounts(ctx context.Context, now *time.Time) (map[string]int64, error) {
	if b.bug == bugNotDueRealClock {
		now = nil
	}
	return b.Store.NotDueCounts(ctx, now)
}

func (b *buggyStore) WaitingCounts(ctx context.Context, now *time.Time) (map[string]store.WaitingCounts, error) {
	got, err := b.Store.WaitingCounts(ctx, now)
	if b.bug == bugWaitingHeldScheduled {
		for q, c := range got {
			c.Scheduled, c.Held = c.Scheduled+c.Held, 0
			got[q] = c
		}
	}
	return got, err
}

func (b *buggyStore) GroupOrigins(ctx context.Context, fingerprints []string) (map[string]time.Time, error) {
	if b.bug != bugOriginIsDeath {
		return b.Store.GroupOrigins(ctx, fingerprints)
	}
	out := map[string]time.Time{}
	for _, f := range fingerprints {
		groups, err := b.Store.DeadGroups(ctx, store.DeadFilter{Fingerprint: f})
		if err != nil {
			return nil, err
		}
		if len(groups) == 1 {
			out[f] = groups[0].FirstSeen
		}
	}
	return out, nil
}

func (b *buggyStore) DeadHistogram(ctx context.Context, since time.Time, width time.Duration, buckets int, fingerprints []string) (map[string][]int64, error) {
	if b.bug == bugHistogramEarly {
		since = since.Add(-width)
	}
	return b.Store.DeadHistogram(ctx, since, width, buckets, fingerprints)
}

func (b *buggyStore) Series(ctx context.Context, p store.SeriesParams) (store.Series, error) {
	switch b.bug {
	case bugSeriesRealClock:
		p.Now = nil
	case bugSeriesNoFilter:
		p.Queue, p.Handler = "", ""
	}
	out, err := b.Store.Series(ctx, p)
	for _, l := range out.Lines {
		for i, c := range l.Counts {
			switch b.bug {
			case bugSeriesNoDead:
				c.DeadLettered = 0
			case bugSeriesRetryPermanent:
				c.Permanent, c.Retryable = c.Permanent+c.Retryable, 0
			}
			l.Counts[i] = c
		}
	}
	return out, err
}

func (b *buggyStore) DeadGroupKeys(ctx context.Context, fingerprints []string) (map[string][][2]string, error) {
	keys, err := b.Store.DeadGroupKeys(ctx, fingerprints)
	if b.bug == bugGroupKeysFirstOnly {
		for fp, pairs := range keys {
			keys[fp] = pairs[:1]
		}
	}
	return keys, err
}

// sqliteHarness runs the kit on SQLite files with bug laid over the store,
// in the test process and in chaos worker processes alike.
func sqliteHarness(bug sqliteBug) Harness {
	h := Harness{
		NewStore: func(t testing.TB) (store.Store, string) {
			path := filepath.Join(t.TempDir(), "rdq.db")
			s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			})
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return &buggyStore{Store: s, bug: bug}, path
		},
		Open: func(ctx context.Context, path string) (store.Store, func() error, error) {
			s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
			if err != nil {
				return nil, nil, err
			}
			return &buggyStore{Store: s, bug: bug}, s.Close, nil
		},
		Capabilities: Capabilities{
			Admin: true, Pause: true, Live: true, PauseHandlers: true, Registry: true, Snooze: true, RetryInPlace: true,
			NotDueCounts: true, WaitingCounts: true, GroupOrigins: true, DeadHistogram: true, DeadGroupKeys: true, Series: true,
		},
	}
	switch bug {
	case bugUndeclaredWaiting:
		h.Capabilities.WaitingCounts = false
	case bugUndeclaredOrigins:
		h.Capabilities.GroupOrigins = false
	case bugUndeclaredNotDue:
		h.Capabilities.NotDueCounts = false
	case bugUndeclaredHistogram:
		h.Capabilities.DeadHistogram = false
	case bugUndeclaredGroupKeys:
		h.Capabilities.DeadGroupKeys = false
	case bugUndeclaredSeries:
		h.Capabilities.Series = false
	case bugUndeclaredInPlace:
		h.Capabilities.RetryInPlace = false
	}
	return h
}

// TestSQLiteHarness checks that the harness of the defects declares what
// its store implements, so that only the undeclared-* defects fail there.
func TestSQLiteHarness(t *testing.T) {
	checkCapabilities(t, sqliteHarness(""))
}

// runSQLitePart runs one part of the kit that the reference store lacks.
func runSQLitePart(t *testing.T, h Harness, part string) {
	switch part {
	case "Capabilities":
		t.Run(part, func(t *testing.T) { checkCapabilities(t, h) })
	case "Live":
		t.Run(part, func(t *testing.T) { runLive(t, h) })
	case "PauseHandlers":
		t.Run(part, func(t *testing.T) { testHandlerPause(t, h) })
	case "ProbeInPausedQueue":
		t.Run(part, func(t *testing.T) { testProbeInPausedQueue(t, h) })
	case "Chaos":
		t.Run(part, func(t *testing.T) { runChaos(t, h) })
	case "NotDueCounts":
		t.Run(part, func(t *testing.T) { testNotDueCounts(t, h) })
	case "WaitingCounts":
		t.Run(part, func(t *testing.T) { testWaitingCounts(t, h) })
	case "GroupOrigins":
		t.Run(part, func(t *testing.T) { testGroupOrigins(t, h) })
	case "DeadHistogram":
		t.Run(part, func(t *testing.T) { testDeadHistogram(t, h) })
	case "DeadGroupKeys":
		t.Run(part, func(t *testing.T) { testDeadGroupKeys(t, h) })
	case "RetryInPlace":
		t.Run(part, func(t *testing.T) { runRetryInPlace(t, h) })
	case "Snooze":
		t.Run(part, func(t *testing.T) { testSnooze(t, h) })
	case "Series":
		t.Run(part, func(t *testing.T) { testSeries(t, h) })
	default:
		t.Fatalf("no part %q", part)
	}
}
