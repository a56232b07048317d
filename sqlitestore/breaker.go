package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// PauseHandler implements store.HandlerPauser: it pauses (p.Queue,
// p.Handler), holds its waiting tasks and writes a "pause_handler" audit
// entry, in one transaction. It returns an error wrapping rdq.ErrInvalid
// for an invalid queue or handler name.
func (s *Store) PauseHandler(ctx context.Context, p store.PauseHandlerParams) (bool, error) {
	if err := validPair(p.Queue, p.Handler); err != nil {
		return false, fmt.Errorf("sqlitestore: pause handler: %w", err)
	}
	changed := false
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		changed = false
		var probeAt any // NULL: until resumed
		if p.CoolOff > 0 {
			probeAt = now + micros(p.CoolOff)
		}
		var row *sql.Row
		if p.Probe != nil {
			row = tx.QueryRowContext(ctx, sqlReopenHandler, p.Queue, p.Handler, probeAt, p.Actor, p.Reason,
				p.Fingerprint, p.Ratio, idArg(p.Probe.ID), p.Probe.Token)
		} else {
			row = tx.QueryRowContext(ctx, sqlPauseHandler, p.Queue, p.Handler, now, probeAt, p.Actor, p.Reason,
				p.Fingerprint, p.Ratio)
		}
		var trips int
		if err := row.Scan(&trips); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return err
		}
		changed = true
		res, err := tx.ExecContext(ctx, sqlHoldTasks, p.Queue, p.Handler)
		if err != nil {
			return fmt.Errorf("holding tasks: %w", err)
		}
		held, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("holding tasks: %w", err)
		}
		details := map[string]string{"handler": p.Handler, "trips": strconv.Itoa(trips)}
		if p.Fingerprint != "" {
			details["fingerprint"] = p.Fingerprint
		}
		if p.Ratio > 0 {
			details["ratio"] = strconv.FormatFloat(p.Ratio, 'f', 3, 64)
		}
		if p.CoolOff > 0 {
			details["cool_off"] = p.CoolOff.String()
		} else {
			details["cool_off"] = "until resumed"
		}
		return s.auditHandler(ctx, tx, now, p.Actor, "pause_handler", p.Queue, p.Handler, held, p.Reason, details)
	})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: pause handler %s/%s: %w", p.Queue, p.Handler, err)
	}
	return changed, nil
}

// ResumeHandler implements store.HandlerPauser: it deletes the pause of
// (p.Queue, p.Handler), releases its held tasks and writes a
// "resume_handler" audit entry, in one transaction.
func (s *Store) ResumeHandler(ctx context.Context, p store.ResumeHandlerParams) (bool, error) {
	if err := validPair(p.Queue, p.Handler); err != nil {
		return false, fmt.Errorf("sqlitestore: resume handler: %w", err)
	}
	var probeID any
	var probeToken int64
	if p.Probe != nil {
		probeID, probeToken = idArg(p.Probe.ID), p.Probe.Token
	}
	changed := false
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		changed = false
		var trips int
		if err := tx.QueryRowContext(ctx, sqlResumeHandler, p.Queue, p.Handler, probeID, probeToken).Scan(&trips); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return err
		}
		changed = true
		res, err := tx.ExecContext(ctx, sqlUnholdTasks, p.Queue, p.Handler)
		if err != nil {
			return fmt.Errorf("releasing held tasks: %w", err)
		}
		released, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("releasing held tasks: %w", err)
		}
		details := map[string]string{"handler": p.Handler, "trips": strconv.Itoa(trips)}
		if p.Probe != nil {
			details["probe"] = p.Probe.ID.String()
		}
		return s.auditHandler(ctx, tx, now, p.Actor, "resume_handler", p.Queue, p.Handler, released, p.Reason, details)
	})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: resume handler %s/%s: %w", p.Queue, p.Handler, err)
	}
	return changed, nil
}

func (s *Store) auditHandler(ctx context.Context, tx *sql.Tx, now int64, actor, action, queue, handler string, count int64, reason string, details map[string]string) error {
	filter, err := json.Marshal(map[string]string{"queue": queue, "handler": handler})
	if err != nil {
		return err
	}
	return s.audit(ctx, tx, now, auditRecord{actor: actor, action: action, filter: string(filter), reason: reason, count: count, details: details, queues: []string{queue}})
}

// ClaimProbe implements store.HandlerPauser. Under the write lock it finds
// the handlers due a probe and leases each one's waiting task with the
// fewest attempts.
func (s *Store) ClaimProbe(ctx context.Context, p store.ProbeParams) ([]store.Probe, error) {
	if len(p.Queues) == 0 {
		return nil, fmt.Errorf("sqlitestore: claim probe: %w: no queues", rdq.ErrInvalid)
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("sqlitestore: claim probe: %w: lease %s, want a positive duration", rdq.ErrInvalid, p.Lease)
	}
	var probes []store.Probe
	err := s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		probes = nil
		for _, q := range dedupe(p.Queues) {
			handlers, err := probeDue(ctx, tx, q, now)
			if err != nil {
				return err
			}
			for _, h := range handlers {
				if len(p.Handlers) > 0 && !slices.Contains(p.Handlers, h) {
					continue // a probe only of a handler the claimant runs
				}
				var rowid int64
				err := tx.QueryRowContext(ctx, sqlProbeTask, q, h, now).Scan(&rowid)
				if errors.Is(err, sql.ErrNoRows) {
					continue // nothing due to probe with
				}
				if err != nil {
					return fmt.Errorf("picking a probe task: %w", err)
				}
				rows, err := s.query(ctx, tx, sqlClaimTasks, now+micros(p.Lease), p.WorkerID, now, now, "["+strconv.FormatInt(rowid, 10)+"]")
				if err != nil {
					return fmt.Errorf("leasing the probe: %w", err)
				}
				claimed, err := scanTasks(rows)
				if err != nil {
					return fmt.Errorf("leasing the probe: %w", err)
				}
				if len(claimed) != 1 {
					return fmt.Errorf("leasing the probe: leased %d tasks", len(claimed))
				}
				t := claimed[0]
				hp, err := scanPause(tx.QueryRowContext(ctx, sqlProbeStart, q, h, idArg(t.ID), t.LeaseToken, now+micros(p.Lease)))
				if err != nil {
					return fmt.Errorf("marking the probe: %w", err)
				}
				probes = append(probes, store.Probe{Task: t, Pause: hp})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim probe: %w", err)
	}
	return probes, nil
}

func probeDue(ctx context.Context, tx *sql.Tx, queue string, now int64) ([]string, error) {
	rows, err := tx.QueryContext(ctx, sqlProbeDue, now, queue)
	if err != nil {
		return nil, fmt.Errorf("finding handlers due a probe: %w", err)
	}
	var handlers []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		handlers = append(handlers, h)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("finding handlers due a probe: %w", err)
	}
	return handlers, nil
}

// PausedHandlers implements store.HandlerPauser.
func (s *Store) PausedHandlers(ctx context.Context, queue string) ([]store.HandlerPause, error) {
	out := []store.HandlerPause{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, sqlPausedHandlers, queue)
		if err != nil {
			return err
		}
		for rows.Next() {
			hp, err := scanPause(rows)
			if err != nil {
				return errors.Join(err, rows.Close())
			}
			out = append(out, hp)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: paused handlers: %w", err)
	}
	return out, nil
}

// scanPause reads one row of pauseColumns.
func scanPause(r rowScanner) (store.HandlerPause, error) {
	var (
		hp             store.HandlerPause
		state          string
		since          int64
		probeAt        sql.NullInt64
		probeID        []byte
		actor, reason  string
		fingerprint    string
		ratio          float64
		trips          int
		probeToken     int64
		queue, handler string
	)
	if err := r.Scan(&queue, &handler, &state, &since, &probeAt, &trips, &probeID, &probeToken, &actor, &reason, &fingerprint, &ratio); err != nil {
		return hp, err
	}
	hp = store.HandlerPause{
		Queue: queue, Handler: handler, State: store.HandlerState(state), Since: fromMicros(since),
		ProbeAt: fromNullMicros(probeAt), Trips: trips, Actor: actor, Reason: reason,
		Fingerprint: fingerprint, Ratio: ratio,
	}
	if len(probeID) > 0 {
		id, err := scanID(probeID)
		if err != nil {
			return hp, err
		}
		hp.Probe = store.Lease{ID: id, Token: probeToken}
	}
	return hp, nil
}

func validPair(queue, handler string) error {
	if err := rdq.ValidateName("queue", queue); err != nil {
		return err
	}
	return rdq.ValidateName("handler", handler)
}

var _ store.HandlerPauser = (*Store)(nil)
