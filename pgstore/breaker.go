package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// PauseHandler implements store.HandlerPauser: it pauses (p.Queue,
// p.Handler), holds its waiting tasks and writes a "pause_handler" audit
// entry, in one transaction. It returns an error wrapping rdq.ErrInvalid
// for an invalid queue or handler name.
func (s *Store) PauseHandler(ctx context.Context, p store.PauseHandlerParams) (bool, error) {
	if err := validPair(p.Queue, p.Handler); err != nil {
		return false, fmt.Errorf("pgstore: pause handler: %w", err)
	}
	var coolOff *int64
	if p.CoolOff > 0 {
		us := micros(p.CoolOff)
		coolOff = &us
	}
	changed := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var trips int32
		var row pgx.Row
		if p.Probe != nil {
			row = tx.QueryRow(ctx, s.q.reopenHandler, p.Queue, p.Handler, coolOff, clean(p.Actor), clean(p.Reason),
				clean(p.Fingerprint), p.Ratio, p.Now, [16]byte(p.Probe.ID), p.Probe.Token)
		} else {
			row = tx.QueryRow(ctx, s.q.pauseHandler, p.Queue, p.Handler, coolOff, clean(p.Actor), clean(p.Reason),
				clean(p.Fingerprint), p.Ratio, p.Now)
		}
		if err := row.Scan(&trips); err != nil {
			if err == pgx.ErrNoRows {
				return nil
			}
			return err
		}
		changed = true
		var held int64
		if err := tx.QueryRow(ctx, s.q.holdTasks, p.Queue, p.Handler).Scan(&held); err != nil {
			return fmt.Errorf("holding tasks: %w", err)
		}
		details := map[string]string{
			"handler": p.Handler,
			"trips":   strconv.Itoa(int(trips)),
		}
		if p.Fingerprint != "" {
			details["fingerprint"] = clean(p.Fingerprint)
		}
		if p.Ratio > 0 {
			details["ratio"] = strconv.FormatFloat(p.Ratio, 'f', 3, 64)
		}
		if p.CoolOff > 0 {
			details["cool_off"] = p.CoolOff.String()
		} else {
			details["cool_off"] = "until resumed"
		}
		return s.auditHandler(ctx, tx, p.Now, p.Actor, "pause_handler", p.Queue, p.Handler, held, p.Reason, details)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: pause handler %s/%s: %w", p.Queue, p.Handler, err)
	}
	return changed, nil
}

// ResumeHandler implements store.HandlerPauser: it deletes the pause of
// (p.Queue, p.Handler), then releases its held tasks (notifying the queue)
// and writes a "resume_handler" audit entry, in one transaction.
func (s *Store) ResumeHandler(ctx context.Context, p store.ResumeHandlerParams) (bool, error) {
	if err := validPair(p.Queue, p.Handler); err != nil {
		return false, fmt.Errorf("pgstore: resume handler: %w", err)
	}
	var probeID *[16]byte
	var probeToken int64
	if p.Probe != nil {
		id := [16]byte(p.Probe.ID)
		probeID, probeToken = &id, p.Probe.Token
	}
	changed := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var trips int32
		if err := tx.QueryRow(ctx, s.q.resumeHandler, p.Queue, p.Handler, probeID, probeToken).Scan(&trips); err != nil {
			if err == pgx.ErrNoRows {
				return nil
			}
			return err
		}
		changed = true
		// A later statement, so that it sees every task written by a
		// transaction that read the pause before the delete took it.
		var released int64
		if err := tx.QueryRow(ctx, s.q.unholdTasks, p.Queue, p.Handler, s.channel).Scan(&released); err != nil {
			return fmt.Errorf("releasing held tasks: %w", err)
		}
		details := map[string]string{"handler": p.Handler, "trips": strconv.Itoa(int(trips))}
		if p.Probe != nil {
			details["probe"] = p.Probe.ID.String()
		}
		return s.auditHandler(ctx, tx, p.Now, p.Actor, "resume_handler", p.Queue, p.Handler, released, p.Reason, details)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: resume handler %s/%s: %w", p.Queue, p.Handler, err)
	}
	return changed, nil
}

func (s *Store) auditHandler(ctx context.Context, tx pgx.Tx, now *time.Time, actor, action, queue, handler string, count int64, reason string, details map[string]string) error {
	filter, err := json.Marshal(map[string]string{"queue": queue, "handler": handler})
	if err != nil {
		return err
	}
	detailsJSON, err := json.Marshal(details)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, s.q.insertAudit, now, clean(actor), action, string(filter), [][16]byte{}, count,
		clean(reason), string(detailsJSON)); err != nil {
		return fmt.Errorf("writing the audit entry: %w", err)
	}
	return nil
}

// ClaimProbe implements store.HandlerPauser in one transaction of two
// statements: the first locks the handlers due a probe and holds their
// waiting tasks that a write concurrent with the pause left unheld, the
// second leases the probes.
func (s *Store) ClaimProbe(ctx context.Context, p store.ProbeParams) ([]store.Probe, error) {
	if len(p.Queues) == 0 {
		return nil, fmt.Errorf("pgstore: claim probe: %w: no queues", rdq.ErrInvalid)
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("pgstore: claim probe: %w: lease %s, want a positive duration", rdq.ErrInvalid, p.Lease)
	}
	var probes []store.Probe
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		probes = nil
		var strays int64
		if err := tx.QueryRow(ctx, s.q.holdStrays, p.Queues, p.Now).Scan(&strays); err != nil {
			return fmt.Errorf("holding waiting tasks: %w", err)
		}
		rows, err := tx.Query(ctx, s.q.claimProbe, p.Queues, micros(p.Lease), p.Now, clean(p.WorkerID), p.Handlers)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var hp store.HandlerPause
			dest := pauseDest(&hp)
			t, err := scanTask(rows, dest.targets()...)
			if err != nil {
				return err
			}
			dest.finish()
			probes = append(probes, store.Probe{Task: t, Pause: hp})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim probe: %w", err)
	}
	return probes, nil
}

// PausedHandlers implements store.HandlerPauser.
func (s *Store) PausedHandlers(ctx context.Context, queue string) ([]store.HandlerPause, error) {
	rows, err := s.pool.Query(ctx, s.q.pausedHandlers, queue)
	if err != nil {
		return nil, fmt.Errorf("pgstore: paused handlers: %w", err)
	}
	defer rows.Close()
	out := []store.HandlerPause{}
	for rows.Next() {
		var hp store.HandlerPause
		dest := pauseDest(&hp)
		if err := rows.Scan(dest.targets()...); err != nil {
			return nil, fmt.Errorf("pgstore: paused handlers: %w", err)
		}
		dest.finish()
		out = append(out, hp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: paused handlers: %w", err)
	}
	return out, nil
}

// pauseScan holds the scan destinations of pauseColumns.
type pauseScan struct {
	hp      *store.HandlerPause
	state   string
	probeAt pgtype.Timestamptz
	trips   int32
	probeID pgtype.UUID
}

func pauseDest(hp *store.HandlerPause) *pauseScan { return &pauseScan{hp: hp} }

func (d *pauseScan) targets() []any {
	return []any{&d.hp.Queue, &d.hp.Handler, &d.state, &d.hp.Since, &d.probeAt, &d.trips, &d.probeID,
		&d.hp.Probe.Token, &d.hp.Actor, &d.hp.Reason, &d.hp.Fingerprint, &d.hp.Ratio}
}

func (d *pauseScan) finish() {
	d.hp.State = store.HandlerState(d.state)
	d.hp.ProbeAt = timeOf(d.probeAt)
	d.hp.Trips = int(d.trips)
	if d.probeID.Valid {
		d.hp.Probe.ID = rdq.ID(d.probeID.Bytes)
	} else {
		d.hp.Probe = store.Lease{}
	}
}

func validPair(queue, handler string) error {
	if err := rdq.ValidateName("queue", queue); err != nil {
		return err
	}
	return rdq.ValidateName("handler", handler)
}

var _ store.HandlerPauser = (*Store)(nil)
