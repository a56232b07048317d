package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// PauseQueue pauses p.Queue: Claim returns none of its tasks until it is
// resumed, on every worker, across restarts. Pausing a paused queue changes
// nothing and writes no audit entry; otherwise a "pause" entry is written in
// the same statement. It returns an error wrapping rdq.ErrInvalid for an
// invalid queue name.
func (s *Store) PauseQueue(ctx context.Context, p store.PauseParams) error {
	return s.setPaused(ctx, s.q.pauseQueue, "pause", p, false)
}

// ResumeQueue resumes p.Queue and wakes listening workers. Resuming a queue
// that is not paused changes nothing and writes no audit entry; otherwise a
// "resume" entry is written in the same statement.
func (s *Store) ResumeQueue(ctx context.Context, p store.PauseParams) error {
	return s.setPaused(ctx, s.q.resumeQueue, "resume", p, true)
}

func (s *Store) setPaused(ctx context.Context, query, verb string, p store.PauseParams, notify bool) error {
	if err := rdq.ValidateName("queue", p.Queue); err != nil {
		return fmt.Errorf("pgstore: %s queue: %w", verb, err)
	}
	filter, err := json.Marshal(map[string]string{"queue": p.Queue})
	if err != nil {
		return fmt.Errorf("pgstore: %s queue: %w", verb, err)
	}
	args := []any{p.Queue, clean(p.Actor), clean(p.Reason), string(filter)}
	if notify {
		args = append(args, s.channel)
	}
	var n int64
	if err := s.pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return fmt.Errorf("pgstore: %s queue %s: %w", verb, p.Queue, err)
	}
	return nil
}

// PausedQueues returns the names of the paused queues, sorted.
func (s *Store) PausedQueues(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.q.pausedQueues)
	if err != nil {
		return nil, fmt.Errorf("pgstore: paused queues: %w", err)
	}
	queues := []string{}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: paused queues: %w", err)
		}
		queues = append(queues, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: paused queues: %w", err)
	}
	return queues, nil
}

var _ store.Pauser = (*Store)(nil)
