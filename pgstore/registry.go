package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.WorkerRegistry = (*Store)(nil)

// RegisterWorker inserts or refreshes p.Worker's entry and removes expired
// entries (store.WorkerRegistry).
func (s *Store) RegisterWorker(ctx context.Context, p store.RegisterWorkerParams) error {
	if err := store.ValidateRegistration(p); err != nil {
		return fmt.Errorf("pgstore: register worker: %w", err)
	}
	w := p.Worker
	queues, handlers := sortedClean(w.Queues), sortedClean(w.Handlers)
	_, err := s.pool.Exec(ctx, s.q.registerWorker, clean(w.ID), clean(w.Host), w.PID, clean(w.Version),
		queues, handlers, w.Slots, w.InFlight, micros(p.StaleAfter), micros(p.ExpireAfter), p.Now)
	if err != nil {
		return fmt.Errorf("pgstore: register worker %s: %w", w.ID, err)
	}
	return nil
}

// DeregisterWorker removes worker id's entry (store.WorkerRegistry).
func (s *Store) DeregisterWorker(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, s.q.deregisterWorker, clean(id)); err != nil {
		return fmt.Errorf("pgstore: deregister worker %s: %w", id, err)
	}
	return nil
}

// Workers lists the registered workers (store.WorkerRegistry).
func (s *Store) Workers(ctx context.Context, p store.WorkersParams) ([]store.WorkerInfo, error) {
	rows, err := s.pool.Query(ctx, s.q.workers, p.Queue, p.Now)
	if err != nil {
		return nil, fmt.Errorf("pgstore: workers: %w", err)
	}
	defer rows.Close()
	out := []store.WorkerInfo{}
	for rows.Next() {
		var w store.WorkerInfo
		if err := rows.Scan(&w.ID, &w.Host, &w.PID, &w.Version, &w.Queues, &w.Handlers, &w.Slots,
			&w.InFlight, &w.StartedAt, &w.LastSeen, &w.Stale); err != nil {
			return nil, fmt.Errorf("pgstore: workers: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: workers: %w", err)
	}
	return out, nil
}

// UnservedHandlers reports the waiting tasks no live worker serves
// (store.WorkerRegistry).
func (s *Store) UnservedHandlers(ctx context.Context, p store.UnservedParams) ([]store.UnservedHandler, error) {
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	query := s.q.unservedHandlers
	if p.DueOnly {
		if len(queues) == 0 {
			return nil, fmt.Errorf("pgstore: unserved handlers: %w: DueOnly needs at least one queue", rdq.ErrInvalid)
		}
		query = s.q.unservedDue
	}
	rows, err := s.pool.Query(ctx, query, queues, p.Now)
	if err != nil {
		return nil, fmt.Errorf("pgstore: unserved handlers: %w", err)
	}
	defer rows.Close()
	out := []store.UnservedHandler{}
	for rows.Next() {
		var (
			u      store.UnservedHandler
			oldest pgtype.Timestamptz
			now    time.Time
		)
		if err := rows.Scan(&u.Queue, &u.Handler, &u.Tasks, &oldest, &now); err != nil {
			return nil, fmt.Errorf("pgstore: unserved handlers: %w", err)
		}
		if oldest.Valid {
			u.OldestDue = oldest.Time
			u.Waiting = max(now.Sub(oldest.Time), 0)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: unserved handlers: %w", err)
	}
	return out, nil
}

// DeadLetterUnserved dead-letters the tasks of a handler no live worker has
// served for p.Grace (store.WorkerRegistry).
func (s *Store) DeadLetterUnserved(ctx context.Context, p store.DeadLetterUnservedParams) (int64, error) {
	if err := store.ValidateDeadLetterUnserved(p); err != nil {
		return 0, fmt.Errorf("pgstore: dead-letter unserved: %w", err)
	}
	filter, err := json.Marshal(map[string]string{"queue": p.Queue, "handler": p.Handler})
	if err != nil {
		return 0, fmt.Errorf("pgstore: dead-letter unserved: %w", err)
	}
	f := cleanFailure(p.Failure)
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.deadLetterUnserved, p.Queue, p.Handler, p.Now, micros(p.Grace), p.Limit,
		f.Type, f.Message, f.Fingerprint, clean(p.Actor), string(filter)).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: dead-letter unserved tasks of %s in %s: %w", p.Handler, p.Queue, err)
	}
	return n, nil
}

// sortedClean returns a sorted, cleaned copy of list, never nil.
func sortedClean(list []string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, clean(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
