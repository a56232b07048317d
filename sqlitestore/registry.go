package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.WorkerRegistry = (*Store)(nil)

// RegisterWorker inserts or refreshes p.Worker's entry and removes expired
// entries (store.WorkerRegistry).
func (s *Store) RegisterWorker(ctx context.Context, p store.RegisterWorkerParams) error {
	if err := store.ValidateRegistration(p); err != nil {
		return fmt.Errorf("sqlitestore: register worker: %w", err)
	}
	w := p.Worker
	queues, err := namesJSON(w.Queues)
	if err != nil {
		return fmt.Errorf("sqlitestore: register worker %s: %w", w.ID, err)
	}
	handlers, err := namesJSON(w.Handlers)
	if err != nil {
		return fmt.Errorf("sqlitestore: register worker %s: %w", w.ID, err)
	}
	err = s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		if _, err := tx.ExecContext(ctx, sqlExpireWorkers, now, w.ID); err != nil {
			return fmt.Errorf("removing expired workers: %w", err)
		}
		_, err := tx.ExecContext(ctx, sqlRegisterWorker, w.ID, w.Host, w.PID, w.Version, queues, handlers,
			w.Slots, w.InFlight, now, micros(p.StaleAfter), micros(p.ExpireAfter))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: register worker %s: %w", w.ID, err)
	}
	return nil
}

// DeregisterWorker removes worker id's entry (store.WorkerRegistry).
func (s *Store) DeregisterWorker(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *sql.Tx, _ int64) error {
		_, err := tx.ExecContext(ctx, sqlDeregisterWorker, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: deregister worker %s: %w", id, err)
	}
	return nil
}

// Workers lists the registered workers (store.WorkerRegistry).
func (s *Store) Workers(ctx context.Context, p store.WorkersParams) ([]store.WorkerInfo, error) {
	now := clock(p.Now)
	var out []store.WorkerInfo
	err := s.read(ctx, func(tx *sql.Tx) error {
		out = []store.WorkerInfo{}
		rows, err := tx.QueryContext(ctx, sqlWorkers, now, p.Queue)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				w                 store.WorkerInfo
				queues, handlers  string
				started, lastSeen int64
			)
			if err := rows.Scan(&w.ID, &w.Host, &w.PID, &w.Version, &queues, &handlers, &w.Slots, &w.InFlight,
				&started, &lastSeen, &w.Stale); err != nil {
				return errors.Join(err, rows.Close())
			}
			if err := errors.Join(json.Unmarshal([]byte(queues), &w.Queues), json.Unmarshal([]byte(handlers), &w.Handlers)); err != nil {
				return errors.Join(fmt.Errorf("worker %s: %w", w.ID, err), rows.Close())
			}
			w.StartedAt, w.LastSeen = fromMicros(started), fromMicros(lastSeen)
			out = append(out, w)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: workers: %w", err)
	}
	return out, nil
}

// UnservedHandlers reports the waiting tasks no live worker serves
// (store.WorkerRegistry).
func (s *Store) UnservedHandlers(ctx context.Context, p store.UnservedParams) ([]store.UnservedHandler, error) {
	now := clock(p.Now)
	queues, err := namesJSON(p.Queues)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: unserved handlers: %w", err)
	}
	if p.DueOnly && len(p.Queues) == 0 {
		return nil, fmt.Errorf("sqlitestore: unserved handlers: %w: DueOnly needs at least one queue", rdq.ErrInvalid)
	}
	dueOnly := 0
	if p.DueOnly {
		dueOnly = 1
	}
	var out []store.UnservedHandler
	err = s.read(ctx, func(tx *sql.Tx) error {
		out = []store.UnservedHandler{}
		rows, err := tx.QueryContext(ctx, sqlUnservedHandlers, now, queues, dueOnly)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				u      store.UnservedHandler
				oldest int64
			)
			if err := rows.Scan(&u.Queue, &u.Handler, &u.Tasks, &oldest); err != nil {
				return errors.Join(err, rows.Close())
			}
			u.OldestDue = fromMicros(oldest)
			u.Waiting = max(fromMicros(now).Sub(u.OldestDue), 0)
			out = append(out, u)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: unserved handlers: %w", err)
	}
	return out, nil
}

// DeadLetterUnserved dead-letters the tasks of a handler no live worker has
// served for p.Grace (store.WorkerRegistry).
func (s *Store) DeadLetterUnserved(ctx context.Context, p store.DeadLetterUnservedParams) (int64, error) {
	if err := store.ValidateDeadLetterUnserved(p); err != nil {
		return 0, fmt.Errorf("sqlitestore: dead-letter unserved: %w", err)
	}
	filter, err := json.Marshal(map[string]string{"queue": p.Queue, "handler": p.Handler})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: dead-letter unserved: %w", err)
	}
	f := p.Failure
	rec := &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: f, WorkerID: p.Actor}
	var moved []rdq.ID
	err = s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		moved = nil
		rows, err := tx.QueryContext(ctx, sqlUnservedCandidates, now-micros(p.Grace), p.Queue, p.Handler, p.Limit, now)
		if err != nil {
			return fmt.Errorf("selecting tasks: %w", err)
		}
		var ids []rdq.ID
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return errors.Join(err, rows.Close())
			}
			id, err := scanID(b)
			if err != nil {
				return errors.Join(err, rows.Close())
			}
			ids = append(ids, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("selecting tasks: %w", err)
		}
		for _, id := range ids {
			if err := s.applyOne(ctx, tx, sqlCancel, now, f.Type, f.Message, f.Fingerprint, idArg(id)); err != nil {
				return fmt.Errorf("task %s: %w", id, err)
			}
			if err := s.insertAttempt(ctx, tx, id, rec, 0, now); err != nil {
				return err
			}
		}
		moved = ids
		if len(ids) == 0 {
			return nil
		}
		return s.audit(ctx, tx, now, auditRecord{actor: p.Actor, action: "dead_letter_unserved", filter: string(filter),
			ids: ids, count: int64(len(ids)), reason: f.Message, queues: []string{p.Queue}})
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: dead-letter unserved tasks of %s in %s: %w", p.Handler, p.Queue, err)
	}
	return int64(len(moved)), nil
}

// namesJSON encodes names, sorted and without duplicates, as a JSON array.
func namesJSON(names []string) (string, error) {
	list := slices.Compact(slices.Sorted(slices.Values(names)))
	if list == nil {
		list = []string{}
	}
	b, err := json.Marshal(list)
	return string(b), err
}
