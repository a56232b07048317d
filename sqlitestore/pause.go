package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// PauseQueue pauses p.Queue: Claim returns none of its tasks until it is
// resumed, for every process using the file, across restarts. Pausing a
// paused queue changes nothing and writes no audit entry; otherwise a
// "pause" entry is written in the same transaction. It returns an error
// wrapping rdq.ErrInvalid for an invalid queue name.
func (s *Store) PauseQueue(ctx context.Context, p store.PauseParams) error {
	return s.setPaused(ctx, "pause", p, func(tx *sql.Tx, now int64) (sql.Result, error) {
		return tx.ExecContext(ctx, sqlPauseQueue, p.Queue, now, p.Actor, p.Reason)
	})
}

// ResumeQueue resumes p.Queue. Resuming a queue that is not paused changes
// nothing and writes no audit entry; otherwise a "resume" entry is written
// in the same transaction.
func (s *Store) ResumeQueue(ctx context.Context, p store.PauseParams) error {
	return s.setPaused(ctx, "resume", p, func(tx *sql.Tx, _ int64) (sql.Result, error) {
		return tx.ExecContext(ctx, sqlResumeQueue, p.Queue)
	})
}

func (s *Store) setPaused(ctx context.Context, action string, p store.PauseParams, change func(*sql.Tx, int64) (sql.Result, error)) error {
	if err := rdq.ValidateName("queue", p.Queue); err != nil {
		return fmt.Errorf("sqlitestore: %s queue: %w", action, err)
	}
	filter, err := json.Marshal(map[string]string{"queue": p.Queue})
	if err != nil {
		return fmt.Errorf("sqlitestore: %s queue: %w", action, err)
	}
	err = s.write(ctx, func(tx *sql.Tx, now int64) error {
		res, err := change(tx, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		return s.audit(ctx, tx, now, auditRecord{actor: p.Actor, action: action, filter: string(filter), reason: p.Reason, queues: []string{p.Queue}})
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: %s queue %s: %w", action, p.Queue, err)
	}
	return nil
}

// PausedQueues returns the names of the paused queues, sorted.
func (s *Store) PausedQueues(ctx context.Context) ([]string, error) {
	queues := []string{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		queues = queues[:0]
		rows, err := tx.QueryContext(ctx, sqlPausedQueues)
		if err != nil {
			return err
		}
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				return errors.Join(err, rows.Close())
			}
			queues = append(queues, q)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: paused queues: %w", err)
	}
	return queues, nil
}

var _ store.Pauser = (*Store)(nil)
