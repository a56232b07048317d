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
// chaos) are checked for sensitivity on the SQLite store with a defect laid
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
)

// sqliteBugParts are the parts of the kit each defect must fail.
var sqliteBugParts = map[sqliteBug]string{
	bugRetryNowNoop:     "Live",
	bugProbeEarly:       "PauseHandlers",
	bugProbePausedQueue: "ProbeInPausedQueue",
	bugOwnerLost:        "Chaos",
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

// sqliteHarness runs the kit on SQLite files with bug laid over the store,
// in the test process and in chaos worker processes alike.
func sqliteHarness(bug sqliteBug) Harness {
	return Harness{
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
		Capabilities: Capabilities{Admin: true, Pause: true, Live: true, PauseHandlers: true},
	}
}

// runSQLitePart runs one part of the kit that the reference store lacks.
func runSQLitePart(t *testing.T, h Harness, part string) {
	switch part {
	case "Live":
		t.Run(part, func(t *testing.T) { runLive(t, h) })
	case "PauseHandlers":
		t.Run(part, func(t *testing.T) { testHandlerPause(t, h) })
	case "ProbeInPausedQueue":
		t.Run(part, func(t *testing.T) { testProbeInPausedQueue(t, h) })
	case "Chaos":
		t.Run(part, func(t *testing.T) { runChaos(t, h) })
	default:
		t.Fatalf("no part %q", part)
	}
}
