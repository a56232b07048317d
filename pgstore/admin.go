package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Audit actions pgstore writes.
const (
	ActionRedrive     = "redrive"
	ActionEditPayload = "edit_payload"
	ActionPurge       = "purge"
	ActionRetention   = "retention"
	ActionPause       = "pause"
	ActionResume      = "resume"
)

// ListDead returns up to p.Limit DEAD tasks matching p.Filter, newest dead
// first (FinishedAt, then ID, descending), strictly after p.After when set.
// Each page is one index range scan: see sql.go for the index behind each
// filter field.
func (s *Store) ListDead(ctx context.Context, p store.ListDeadParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, errInvalid("list dead: limit %d, want at least 1", p.Limit)
	}
	query, args := s.listDeadQuery(p)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list dead: %w", err)
	}
	tasks, err := collectTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list dead: %w", err)
	}
	return tasks, nil
}

// listDeadQuery renders sqlListDead for p.
func (s *Store) listDeadQuery(p store.ListDeadParams) (string, []any) {
	st := newStmt()
	st.set("filter", st.deadFilter(p.Filter))
	st.set("after", "")
	if p.After != nil {
		st.set("after", sqlListDeadAfter)
		st.set("cursor_at", st.param(p.After.FinishedAt))
		st.set("cursor_id", st.param([16]byte(p.After.ID)))
	}
	st.set("limit", st.param(p.Limit))
	return st.render(s.q.listDead), st.args
}

// DeadGroups groups the DEAD tasks matching filter by failure fingerprint,
// largest group first (ties by fingerprint). Each group's example is its
// most recently dead task, whose error type and message describe the group.
//
// When filter uses no field but Queue, Handler, ErrorType and Fingerprint,
// the counts come from the maintained dead_counts summary and each group
// costs two index probes, however many tasks it holds; other filters
// aggregate the matching dead tasks.
func (s *Store) DeadGroups(ctx context.Context, filter store.DeadFilter) ([]store.Group, error) {
	query, args := s.deadGroupsQuery(filter)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: dead groups: %w", err)
	}
	defer rows.Close()
	var groups []store.Group
	for rows.Next() {
		var g store.Group
		var id [16]byte
		if err := rows.Scan(&g.Fingerprint, &g.Count, &g.FirstSeen, &g.LastSeen, &id, &g.ErrorType, &g.Message); err != nil {
			return nil, fmt.Errorf("pgstore: dead groups: %w", err)
		}
		g.ExampleID = id
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: dead groups: %w", err)
	}
	return groups, nil
}

// deadGroupsQuery renders sqlDeadGroupsSummary for a filter the summary
// can answer, else sqlDeadGroups.
func (s *Store) deadGroupsQuery(filter store.DeadFilter) (string, []any) {
	st := newStmt()
	if countable(filter) {
		tasks, counts := st.deadCountsFilter(filter)
		st.set("filter", tasks)
		st.set("counts_filter", counts)
		return st.render(s.q.deadGroupsSummary), st.args
	}
	st.set("filter", st.deadFilter(filter))
	return st.render(s.q.deadGroups), st.args
}

// CountDead counts the DEAD tasks matching filter. When filter uses no
// field but Queue, Handler, ErrorType and Fingerprint, it sums the
// maintained dead_counts summary instead of counting tasks.
func (s *Store) CountDead(ctx context.Context, filter store.DeadFilter) (int64, error) {
	query, args := s.countDeadQuery(filter)
	var n int64
	if err := s.pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: count dead: %w", err)
	}
	return n, nil
}

// countDeadQuery renders sqlCountDeadSummary for a filter the summary can
// answer, else sqlCountDead.
func (s *Store) countDeadQuery(filter store.DeadFilter) (string, []any) {
	st := newStmt()
	if countable(filter) {
		_, counts := st.deadCountsFilter(filter)
		st.set("counts_filter", counts)
		return st.render(s.q.countDeadSummary), st.args
	}
	st.set("filter", st.deadFilter(filter))
	return st.render(s.q.countDead), st.args
}

// RedriveDead redrives up to p.Limit DEAD tasks matching p.Filter, as
// Redrive does, in one statement that also writes the "redrive" audit entry
// (with the filter as JSON) when any task moved, and counts the matching
// tasks that p.MaxLife keeps dead. Tasks locked by a concurrent operation
// are skipped, so concurrent bulk redrives share the work. Call it until
// Redriven is zero to redrive everything.
func (s *Store) RedriveDead(ctx context.Context, p store.RedriveDeadParams) (store.RedriveDeadResult, error) {
	if p.Limit < 1 {
		return store.RedriveDeadResult{}, errInvalid("redrive dead: limit %d, want at least 1", p.Limit)
	}
	if p.Delay < 0 || p.Spread < 0 {
		return store.RedriveDeadResult{}, errInvalid("redrive dead: negative delay or spread")
	}
	query, args, err := s.redriveDeadQuery(p)
	if err != nil {
		return store.RedriveDeadResult{}, fmt.Errorf("pgstore: redrive dead: %w", err)
	}
	var res store.RedriveDeadResult
	var notified int64
	err = s.pool.QueryRow(ctx, query, args...).Scan(&res.Redriven, &res.AtLimit, &notified)
	if err != nil {
		return store.RedriveDeadResult{}, fmt.Errorf("pgstore: redrive dead: %w", err)
	}
	return res, nil
}

// redriveDeadQuery renders sqlRedriveDead for p.
func (s *Store) redriveDeadQuery(p store.RedriveDeadParams) (string, []any, error) {
	filterJSON, err := filterToJSON(p.Filter)
	if err != nil {
		return "", nil, err
	}
	details, err := json.Marshal(store.RedriveDetails(p))
	if err != nil {
		return "", nil, err
	}
	st := newStmt()
	st.set("filter", st.deadFilter(p.Filter))
	st.set("limit", st.param(p.Limit))
	st.set("now", st.param(p.Now))
	st.set("details", st.param(string(details)))
	st.set("delay", st.param(micros(p.Delay)))
	st.set("spread", st.param(micros(p.Spread)))
	st.set("actor", st.param(clean(p.Actor)))
	st.set("filter_json", st.param(filterJSON))
	st.set("reason", st.param(clean(p.Reason)))
	st.set("channel", st.param(s.channel))
	if p.MaxLife > 0 {
		st.set("max_life", st.param(p.MaxLife))
		st.set("life_limit", sqlRedriveDeadLifeLimit)
		st.set("at_limit", s.q.redriveDeadAtLimit)
	} else {
		st.set("life_limit", "")
		st.set("at_limit", "0::bigint")
	}
	return st.render(s.q.redriveDead), st.args, nil
}

// PurgeDead deletes up to p.Limit DEAD tasks matching p.Filter, with their
// attempts, in one statement that also writes the audit entry (p.Action,
// "purge" when empty, with the filter as JSON) when any were deleted. It
// returns how many it deleted.
func (s *Store) PurgeDead(ctx context.Context, p store.PurgeDeadParams) (int64, error) {
	if p.Limit < 1 {
		return 0, errInvalid("purge dead: limit %d, want at least 1", p.Limit)
	}
	query, args, err := s.purgeDeadQuery(p)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := s.pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: purge dead: %w", err)
	}
	return n, nil
}

// purgeDeadQuery validates p.Action and renders sqlPurgeDead for p.
func (s *Store) purgeDeadQuery(p store.PurgeDeadParams) (string, []any, error) {
	action := p.Action
	if action == "" {
		action = ActionPurge
	}
	if action != ActionPurge && action != ActionRetention {
		return "", nil, errInvalid("purge dead: action %q, want %q or %q", action, ActionPurge, ActionRetention)
	}
	filterJSON, err := filterToJSON(p.Filter)
	if err != nil {
		return "", nil, fmt.Errorf("pgstore: purge dead: %w", err)
	}
	st := newStmt()
	st.set("filter", st.deadFilter(p.Filter))
	st.set("limit", st.param(p.Limit))
	st.set("actor", st.param(clean(p.Actor)))
	st.set("action", st.param(action))
	st.set("filter_json", st.param(filterJSON))
	st.set("reason", st.param(clean(p.Reason)))
	if action == ActionRetention {
		st.set("keys", s.q.purgeDeadRetireKeys)
	} else {
		st.set("keys", s.q.purgeDeadDropKeys)
	}
	return st.render(s.q.purgeDead), st.args, nil
}

// RecountDead rebuilds the dead_counts summary, which CountDead, DeadGroups
// and Stats read, from the DEAD tasks. pgstore keeps the summary exact by
// itself; RecountDead is for after the tasks table was changed by other
// means: rows written by hand or by a bulk load, or writes of an rdq
// version older than schema version 3 made after the migration. It holds
// a lock that blocks every write to the tasks (claims and completions
// included) while it counts, which takes about a second per million dead
// tasks.
func (s *Store) RecountDead(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{s.q.recountDeadLock, s.q.recountDeadClear, s.q.recountDead} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: recount dead: %w", err)
	}
	return nil
}

// ListAudit returns up to p.Limit audit entries matching p, newest first
// (descending ID).
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]store.AuditEntry, error) {
	if p.Limit < 1 {
		return nil, errInvalid("list audit: limit %d, want at least 1", p.Limit)
	}
	st := newStmt()
	st.set("filter", st.auditFilter(p))
	st.set("limit", st.param(p.Limit))
	rows, err := s.pool.Query(ctx, st.render(s.q.listAudit), st.args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list audit: %w", err)
	}
	defer rows.Close()
	var entries []store.AuditEntry
	for rows.Next() {
		var (
			e       store.AuditEntry
			ids     [][16]byte
			details map[string]string
		)
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Filter, &ids, &e.Count, &e.Reason, &details, &e.Queues); err != nil {
			return nil, fmt.Errorf("pgstore: list audit: %w", err)
		}
		if len(e.Queues) == 0 {
			e.Queues = nil
		}
		for _, id := range ids {
			e.IDs = append(e.IDs, id)
		}
		if len(details) > 0 {
			e.Details = details
		}
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list audit: %w", err)
	}
	return entries, nil
}

// Stats returns per-queue counts, ordered by queue name, one entry per
// queue that has tasks. Succeeded counts tasks that finished within
// p.SucceededWindow (every retained one when the window is zero).
// OldestDueAge is measured from the due time of the longest-waiting due
// PENDING task, on the store's clock.
func (s *Store) Stats(ctx context.Context, p store.StatsParams) ([]store.QueueStats, error) {
	rows, err := s.pool.Query(ctx, s.q.stats, p.Now, micros(p.SucceededWindow))
	if err != nil {
		return nil, fmt.Errorf("pgstore: stats: %w", err)
	}
	defer rows.Close()
	var out []store.QueueStats
	for rows.Next() {
		var (
			queue, status string
			n             int64
			oldest        pgtype.Timestamptz
			now           time.Time
		)
		if err := rows.Scan(&queue, &status, &n, &oldest, &now); err != nil {
			return nil, fmt.Errorf("pgstore: stats: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Queue != queue {
			out = append(out, store.QueueStats{Queue: queue})
		}
		qs := &out[len(out)-1]
		switch rdq.Status(status) {
		case rdq.StatusPending:
			qs.Pending = n
			if oldest.Valid && !oldest.Time.After(now) {
				qs.OldestDueAge = now.Sub(oldest.Time)
			}
		case rdq.StatusInFlight:
			qs.InFlight = n
		case rdq.StatusDead:
			qs.Dead = n
		case rdq.StatusSucceeded:
			qs.Succeeded = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: stats: %w", err)
	}
	return out, nil
}

// filterToJSON renders f for the audit log (see store.DeadFilter.MarshalJSON).
func filterToJSON(f store.DeadFilter) (string, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encoding the filter: %w", err)
	}
	return string(b), nil
}
