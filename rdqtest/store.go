package rdqtest

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// Store is a throwaway rdq store for integration tests: a migrated SQLite
// database in the test's temporary directory. It is a *sqlitestore.Store,
// with every capability of one (store.Admin and the rest), that also
// remembers the tasks enqueued into it, for Submitted and
// RequireSubmitted.
type Store struct {
	*sqlitestore.Store

	mu  sync.Mutex
	ids []rdq.ID // enqueued, in order, duplicates left out
}

// NewStore opens a new, migrated store in tb.TempDir() and closes it when
// the test ends. It fails the test if the store cannot be opened.
func NewStore(tb TB) *Store {
	tb.Helper()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(tb.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		tb.Fatalf("rdqtest: opening the store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("rdqtest: closing the store: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		tb.Fatalf("rdqtest: migrating the store: %v", err)
	}
	return &Store{Store: s}
}

// Enqueue is sqlitestore's Enqueue, remembering the tasks it inserted.
func (s *Store) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	res, err := s.Store.Enqueue(ctx, p)
	if err != nil {
		return res, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range res {
		if !r.Duplicate && r.Task != nil {
			s.ids = append(s.ids, r.Task.ID)
		}
	}
	return res, nil
}

// Submitted returns, in submission order and as they are now, the tasks
// enqueued into queue (every queue if queue is empty) since the store was
// opened, each with its attempt history.
func (s *Store) Submitted(tb TB, queue string) []Submission {
	tb.Helper()
	s.mu.Lock()
	ids := append([]rdq.ID(nil), s.ids...)
	s.mu.Unlock()
	var out []Submission
	for _, id := range ids {
		t, attempts, err := s.Store.Get(context.Background(), id)
		if err != nil {
			tb.Fatalf("rdqtest: reading task %s: %v", id, err)
		}
		if queue == "" || t.Queue == queue {
			out = append(out, Submission{Task: t, Attempts: attempts})
		}
	}
	return out
}

// Submission is a submitted task and its attempt history.
type Submission struct {
	Task     *rdq.Task
	Attempts []rdq.Attempt
}

// RequireSubmitted returns the task submitted to queue with exactly this
// payload (the first, if several were), and fails the test, listing what
// was submitted to the queue, if there is none.
func (s *Store) RequireSubmitted(tb TB, queue string, payload []byte) Submission {
	tb.Helper()
	subs := s.Submitted(tb, queue)
	for _, sub := range subs {
		if bytes.Equal(sub.Task.Payload, payload) {
			return sub
		}
	}
	var seen []string
	for _, sub := range subs {
		seen = append(seen, string(sub.Task.Payload))
	}
	tb.Fatalf("rdqtest: no task with payload %q was submitted to queue %q; its %d submitted payloads: %q", payload, queue, len(subs), seen)
	return Submission{}
}

// RequireNotSubmitted fails the test if any task was submitted to queue.
func (s *Store) RequireNotSubmitted(tb TB, queue string) {
	tb.Helper()
	if subs := s.Submitted(tb, queue); len(subs) > 0 {
		tb.Fatalf("rdqtest: %d task(s) were submitted to queue %q, want none; the first: %s", len(subs), queue, subs[0].Task)
	}
}
