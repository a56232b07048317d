package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// containsFoldFunc is the SQL function behind DeadFilter.MessageContains:
// a case-insensitive substring test with Go's Unicode case mapping
// (SQLite's own lower() folds ASCII only).
const containsFoldFunc = "rdq_contains_fold"

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(containsFoldFunc, 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		h, n := textArg(args[0]), textArg(args[1])
		if strings.Contains(strings.ToLower(h), strings.ToLower(n)) {
			return int64(1), nil
		}
		return int64(0), nil
	})
}

func textArg(v driver.Value) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// sqlLimit ends a selection with its page or chunk size.
const sqlLimit = ` LIMIT ?`

// selection is a WHERE clause over rdq_tasks assembled from the constant
// fragments of sql.go, with its parameters in order.
type selection struct {
	where strings.Builder
	args  []any
}

func (s *selection) add(fragment string, args ...any) {
	s.where.WriteString(fragment)
	s.args = append(s.args, args...)
}

// deadSelection selects the DEAD tasks f matches.
func deadSelection(f store.DeadFilter) (*selection, error) {
	s := &selection{}
	s.add(deadWhere)
	if err := s.filter(f); err != nil {
		return nil, err
	}
	return s, nil
}

// filter adds the conditions of f's set fields.
func (s *selection) filter(f store.DeadFilter) error {
	if len(f.IDs) > 0 {
		ids, err := idsHexJSON(f.IDs)
		if err != nil {
			return fmt.Errorf("encoding the ID filter: %w", err)
		}
		s.add(deadFilterIDs, ids)
	}
	if f.Queue != "" {
		s.add(deadFilterQueue, f.Queue)
	}
	if f.Handler != "" {
		s.add(deadFilterHandler, f.Handler)
	}
	if f.ErrorType != "" {
		s.add(deadFilterErrorType, f.ErrorType)
	}
	if f.Fingerprint != "" {
		s.add(deadFilterFingerprint, f.Fingerprint)
	}
	if !f.DeadAfter.IsZero() {
		s.add(deadFilterAfter, f.DeadAfter.UnixMicro())
	}
	if !f.DeadBefore.IsZero() {
		s.add(deadFilterBefore, f.DeadBefore.UnixMicro())
	}
	if f.MessageContains != "" {
		s.add(deadFilterMessage, f.MessageContains)
	}
	if f.LifeMin > 0 {
		s.add(deadFilterAtLife, f.LifeMin)
	}
	if f.LifeBelow > 0 {
		s.add(deadFilterBelowLife, f.LifeBelow)
	}
	return nil
}

// encodeFilter renders f for the audit log (see store.DeadFilter.MarshalJSON).
func encodeFilter(f store.DeadFilter) (string, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encoding the audit filter: %w", err)
	}
	return string(b), nil
}

// ListDead implements store.Admin.
func (s *Store) ListDead(ctx context.Context, p store.ListDeadParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("sqlitestore: list dead: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	query, args, err := listDeadQuery(p)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list dead: %w", err)
	}
	var tasks []*rdq.Task
	err = s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		tasks, err = scanTasks(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list dead: %w", err)
	}
	if tasks == nil {
		tasks = []*rdq.Task{}
	}
	return tasks, nil
}

// listDeadQuery is the statement and parameters of one ListDead page.
func listDeadQuery(p store.ListDeadParams) (string, []any, error) {
	sel, err := deadSelection(p.Filter)
	if err != nil {
		return "", nil, err
	}
	if p.After != nil {
		sel.add(deadFilterCursor, p.After.FinishedAt.UnixMicro(), idArg(p.After.ID))
	}
	sel.add(deadNewestFirst)
	sel.add(sqlLimit, p.Limit)
	return sqlListDead + sel.where.String(), sel.args, nil
}

// CountDead implements store.Admin.
func (s *Store) CountDead(ctx context.Context, filter store.DeadFilter) (int64, error) {
	sel, err := deadSelection(filter)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: count dead: %w", err)
	}
	var n int64
	err = s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, sqlCountDead+sel.where.String(), sel.args...).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: count dead: %w", err)
	}
	return n, nil
}

// DeadGroups implements store.Admin. Groups are ordered by size, largest
// first, then by fingerprint.
func (s *Store) DeadGroups(ctx context.Context, filter store.DeadFilter) ([]store.Group, error) {
	sel, err := deadSelection(filter)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: dead groups: %w", err)
	}
	var groups []store.Group
	err = s.read(ctx, func(tx *sql.Tx) error {
		groups = nil
		rows, err := tx.QueryContext(ctx, sqlDeadGroups+sel.where.String()+sqlDeadGroupsTail, sel.args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				g           store.Group
				first, last int64
			)
			if err := rows.Scan(&g.Fingerprint, &g.Count, &first, &last); err != nil {
				return errors.Join(err, rows.Close())
			}
			g.FirstSeen, g.LastSeen = fromMicros(first), fromMicros(last)
			groups = append(groups, g)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		example := sqlDeadGroupExample + sel.where.String() + deadFilterFingerprint + deadNewestFirst + sqlLimit
		for i := range groups {
			g := &groups[i]
			args := append(append([]any(nil), sel.args...), g.Fingerprint, 1)
			var id []byte
			if err := tx.QueryRowContext(ctx, example, args...).Scan(&id, &g.ErrorType, &g.Message); err != nil {
				return fmt.Errorf("reading the example of group %s: %w", g.Fingerprint, err)
			}
			if g.ExampleID, err = scanID(id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: dead groups: %w", err)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Fingerprint < b.Fingerprint
	})
	if groups == nil {
		groups = []store.Group{}
	}
	return groups, nil
}

// RedriveDead implements store.Admin: one chunk is one transaction that
// picks the chunk through the index serving the selection, updates the
// picked rows by row id and writes the audit entry.
func (s *Store) RedriveDead(ctx context.Context, p store.RedriveDeadParams) (store.RedriveDeadResult, error) {
	var res store.RedriveDeadResult
	if p.Limit < 1 {
		return res, fmt.Errorf("sqlitestore: redrive dead: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	sel, err := deadSelection(p.Filter)
	if err != nil {
		return res, fmt.Errorf("sqlitestore: redrive dead: %w", err)
	}
	filter, err := encodeFilter(p.Filter)
	if err != nil {
		return res, fmt.Errorf("sqlitestore: redrive dead: %w", err)
	}
	pick := &selection{}
	pick.add(sqlRedriveDeadPickHead)
	pick.add(sel.where.String(), sel.args...)
	if p.MaxLife > 0 {
		pick.add(deadFilterBelowLife, p.MaxLife)
	}
	pick.add(deadNewestFirst)
	pick.add(sqlLimit, p.Limit)
	pick.add(sqlRedriveDeadPickTail)
	atLimit := sqlCountDead + sel.where.String() + deadFilterAtLife
	scale := float64(micros(p.Spread)) / spreadPrime

	err = s.writeAt(ctx, p.Now, func(tx *sql.Tx, now int64) error {
		res = store.RedriveDeadResult{}
		return withBulkCache(ctx, tx, func() error {
			var (
				picked int64
				rowids string
			)
			if err := tx.QueryRowContext(ctx, pick.where.String(), pick.args...).Scan(&picked, &rowids); err != nil {
				return fmt.Errorf("selecting the tasks: %w", err)
			}
			if picked > 0 {
				r, err := tx.ExecContext(ctx, sqlRedriveDeadRows, now+micros(p.Delay), now, rowids,
					rand.Int64N(spreadPrime), 1+rand.Int64N(spreadPrime-1), rand.Int64N(spreadPrime), scale)
				if err != nil {
					return fmt.Errorf("redriving: %w", err)
				}
				if res.Redriven, err = r.RowsAffected(); err != nil {
					return fmt.Errorf("reading rows affected: %w", err)
				}
				if res.Redriven != picked {
					return fmt.Errorf("redriving: redrove %d of the %d tasks picked", res.Redriven, picked)
				}
			}
			if p.MaxLife > 0 {
				countArgs := append(append([]any(nil), sel.args...), p.MaxLife)
				if err := tx.QueryRowContext(ctx, atLimit, countArgs...).Scan(&res.AtLimit); err != nil {
					return fmt.Errorf("counting tasks at the redrive limit: %w", err)
				}
			}
			if res.Redriven == 0 {
				return nil
			}
			queues, err := s.queuesOfRows(ctx, tx, rowids)
			if err != nil {
				return err
			}
			return s.audit(ctx, tx, now, auditRecord{
				actor: p.Actor, action: "redrive", filter: filter, count: res.Redriven, reason: p.Reason,
				details: store.RedriveDetails(p), queues: queues,
			})
		})
	})
	if err != nil {
		return store.RedriveDeadResult{}, fmt.Errorf("sqlitestore: redrive dead: %w", err)
	}
	return res, nil
}

// queuesOfRows returns the queues of the tasks rowids (a JSON array of row
// ids), for the audit entry of a redrive by filter.
func (s *Store) queuesOfRows(ctx context.Context, tx *sql.Tx, rowids string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, sqlRedriveDeadQueues, rowids)
	if err != nil {
		return nil, fmt.Errorf("reading the redriven queues: %w", err)
	}
	var queues []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, errors.Join(fmt.Errorf("reading the redriven queues: %w", err), rows.Close())
		}
		queues = append(queues, q)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("reading the redriven queues: %w", err)
	}
	return queues, nil
}

// BulkChunkSize implements store.BulkChunker. Each RedriveDead or
// PurgeDead call holds the database's write lock and rewrites every page it
// touches, in the table and in each index, whatever the number of tasks on
// the page: fewer, larger calls touch each page fewer times. A call of this
// size holds the write lock for a few seconds.
func (s *Store) BulkChunkSize() int { return bulkChunkSize }

// bulkChunkSize is the Store's BulkChunkSize.
const bulkChunkSize = 50_000

// withBulkCache runs fn, one call of a bulk mutation in tx, with the write
// connection's page cache raised to 256 MiB (sqlBulkCache), and lowers it
// back to 64 MiB (sqlWriteCache) before the transaction commits. A chunk of
// bulkChunkSize tasks then changes its pages in memory, rather than writing
// them to the WAL and reading them back each time the cache fills up, and
// the Store keeps no more than 64 MiB of cache between bulk mutations.
func withBulkCache(ctx context.Context, tx *sql.Tx, fn func() error) error {
	if _, err := tx.ExecContext(ctx, sqlBulkCache); err != nil {
		return fmt.Errorf("raising the page cache: %w", err)
	}
	err := fn()
	if _, rerr := tx.ExecContext(ctx, sqlWriteCache); rerr != nil {
		err = errors.Join(err, fmt.Errorf("restoring the page cache: %w", rerr))
	}
	return err
}

// spreadPrime is the modulus of the map sqlRedriveDeadRows draws each
// task's share of the spread with: 2^31 - 1, a prime.
const spreadPrime = 2147483647

// PurgeDead implements store.Admin: one chunk is one DELETE over the
// selection, with its audit entry, in one transaction.
func (s *Store) PurgeDead(ctx context.Context, p store.PurgeDeadParams) (int64, error) {
	if p.Limit < 1 {
		return 0, fmt.Errorf("sqlitestore: purge dead: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	action := p.Action
	switch action {
	case "":
		action = "purge"
	case "purge", "retention":
	default:
		return 0, fmt.Errorf("sqlitestore: purge dead: %w: action %q, want purge or retention", rdq.ErrInvalid, p.Action)
	}
	sel, err := deadSelection(p.Filter)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: purge dead: %w", err)
	}
	filter, err := encodeFilter(p.Filter)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: purge dead: %w", err)
	}
	del := sqlPurgeDeadHead + sel.where.String() + deadNewestFirst + sqlPurgeDeadTail
	args := append(append([]any(nil), sel.args...), p.Limit)
	var n int64
	err = s.write(ctx, func(tx *sql.Tx, now int64) error {
		n = 0
		return withBulkCache(ctx, tx, func() error {
			rows, err := tx.QueryContext(ctx, del, args...)
			if err != nil {
				return fmt.Errorf("deleting: %w", err)
			}
			ids, queues, err := s.forgetKeys(ctx, tx, rows, action == "retention", now)
			if err != nil {
				return fmt.Errorf("deleting: %w", err)
			}
			n = int64(len(ids))
			if n == 0 {
				return nil
			}
			rec := auditRecord{actor: p.Actor, action: action, filter: filter, count: n, reason: p.Reason, queues: queues}
			if len(p.Filter.IDs) > 0 {
				sort.Slice(ids, func(i, j int) bool { return compareID(ids[i], ids[j]) < 0 })
				rec.ids = ids
			}
			return s.audit(ctx, tx, now, rec)
		})
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: purge dead: %w", err)
	}
	return n, nil
}

func compareID(a, b rdq.ID) int { return bytes.Compare(a[:], b[:]) }

// ListAudit implements store.Admin.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]store.AuditEntry, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("sqlitestore: list audit: %w: limit %d, want at least 1", rdq.ErrInvalid, p.Limit)
	}
	sel := &selection{}
	sel.add(sqlListAudit)
	if p.Actor != "" {
		sel.add(auditFilterActor, p.Actor)
	}
	if p.Action != "" {
		sel.add(auditFilterAction, p.Action)
	}
	if !p.Since.IsZero() {
		sel.add(auditFilterSince, p.Since.UnixMicro())
	}
	if !p.Until.IsZero() {
		sel.add(auditFilterUntil, p.Until.UnixMicro())
	}
	if p.BeforeID > 0 {
		sel.add(auditFilterBeforeID, p.BeforeID)
	}
	sel.add(sqlListAuditTail, p.Limit)
	var entries []store.AuditEntry
	err := s.read(ctx, func(tx *sql.Tx) error {
		entries = []store.AuditEntry{}
		rows, err := tx.QueryContext(ctx, sel.where.String(), sel.args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e                    store.AuditEntry
				at                   int64
				ids, details, queues string
			)
			if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Filter, &ids, &e.Count, &e.Reason, &details, &queues); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(queues), &e.Queues); err != nil {
				return fmt.Errorf("decoding the queues of audit entry %d: %w", e.ID, err)
			}
			if len(e.Queues) == 0 {
				e.Queues = nil
			}
			e.At = fromMicros(at)
			var idStrings []string
			if err := json.Unmarshal([]byte(ids), &idStrings); err != nil {
				return fmt.Errorf("decoding the ids of audit entry %d: %w", e.ID, err)
			}
			for _, str := range idStrings {
				id, err := rdq.ParseID(str)
				if err != nil {
					return fmt.Errorf("decoding the ids of audit entry %d: %w", e.ID, err)
				}
				e.IDs = append(e.IDs, id)
			}
			if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
				return fmt.Errorf("decoding the details of audit entry %d: %w", e.ID, err)
			}
			if len(e.Details) == 0 {
				e.Details = nil
			}
			entries = append(entries, e)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list audit: %w", err)
	}
	return entries, nil
}

// Stats implements store.Admin. A SucceededWindow of zero or less counts
// every retained succeeded task.
func (s *Store) Stats(ctx context.Context, p store.StatsParams) ([]store.QueueStats, error) {
	now := clock(p.Now)
	since := int64(-1 << 63)
	if p.SucceededWindow > 0 {
		since = now - micros(p.SucceededWindow)
	}
	var stats []store.QueueStats
	err := s.read(ctx, func(tx *sql.Tx) error {
		stats = []store.QueueStats{}
		rows, err := tx.QueryContext(ctx, sqlStats, now, since)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				q          store.QueueStats
				oldestDue  sql.NullInt64
				succeeded  sql.NullInt64
				pend, infl sql.NullInt64
				dead       sql.NullInt64
			)
			if err := rows.Scan(&q.Queue, &pend, &infl, &dead, &succeeded, &oldestDue); err != nil {
				return err
			}
			q.Pending, q.InFlight, q.Dead, q.Succeeded = pend.Int64, infl.Int64, dead.Int64, succeeded.Int64
			if oldestDue.Valid && oldestDue.Int64 <= now {
				q.OldestDueAge = time.Duration(now-oldestDue.Int64) * time.Microsecond
			}
			stats = append(stats, q)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: stats: %w", err)
	}
	return stats, nil
}
