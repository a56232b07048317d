package redisstore

import (
	"cmp"
	"context"
	"crypto/sha1" //nolint:gosec // a guard against a concurrent payload change, matched by the script's redis.sha1hex
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.Admin = (*Store)(nil)

// scanBudget bounds the index entries one script examines, so a filter
// no index serves (a message substring, a life) never holds the server
// for long: the store continues from where the script stopped.
const scanBudget = 2000

// filterArgs appends a filter's script arguments (see readfilter in
// scripts.go).
func filterArgs(args []any, f store.DeadFilter, withIDs bool) []any {
	after, before := "", ""
	if !f.DeadAfter.IsZero() {
		after = strconv.FormatInt(f.DeadAfter.UnixMicro(), 10)
	}
	if !f.DeadBefore.IsZero() {
		before = strconv.FormatInt(f.DeadBefore.UnixMicro(), 10)
	}
	args = append(args, f.Queue, f.Handler, f.ErrorType, f.Fingerprint, after, before, asciiLower(f.MessageContains),
		max(f.LifeMin, 0), max(f.LifeBelow, 0))
	if !withIDs {
		return append(args, 0)
	}
	args = append(args, len(f.IDs))
	for _, id := range f.IDs {
		args = append(args, id.String())
	}
	return args
}

// asciiLower lowers ASCII letters only, as the scripts do.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// scan walks the dead-letter indexes for tasks matching f after a cursor,
// in scripts of bounded cost, until limit matches were found (or all were
// counted, for mode "count"). It returns the scripts' results.
func (s *Store) scan(ctx context.Context, mode string, f store.DeadFilter, after *store.Cursor, limit int) ([]any, int64, error) {
	cfi, cid := "", ""
	if after != nil {
		cfi, cid = strconv.FormatInt(after.FinishedAt.UnixMicro(), 10), after.ID.String()
	}
	var out []any
	var total int64
	for {
		args := filterArgs([]any{mode, limit - len(out), scanBudget, cfi, cid}, f, false)
		res, err := s.run(ctx, scriptScanDead, args...)
		if err != nil {
			return nil, 0, err
		}
		r, ok := res.([]any)
		if !ok || len(r) < 4 {
			return nil, 0, fmt.Errorf("unexpected reply %T", res)
		}
		n, _ := r[3].(int64)
		total += n
		out = append(out, r[4:]...)
		if r[0] == int64(1) || (mode != "count" && len(out) >= limit) || str(r[1]) == "" {
			return out, total, nil
		}
		cfi, cid = str(r[1]), str(r[2])
	}
}

// ListDead implements store.Admin. Each filter is served by a sorted set
// of dead tasks by finish time: the fingerprint's (of the queue, when a
// queue is named too), else the queue's, the handler's, the error type's,
// or all dead tasks'. A page costs the entries it walks in that index
// (its time bounds narrow the walk; a message or life condition is
// checked on each entry), never the size of the dead-letter queue.
func (s *Store) ListDead(ctx context.Context, p store.ListDeadParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: list dead needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	if len(p.Filter.IDs) > 0 {
		args := []any{p.Limit, "", ""}
		if p.After != nil {
			args = []any{p.Limit, strconv.FormatInt(p.After.FinishedAt.UnixMicro(), 10), p.After.ID.String()}
		}
		res, err := s.run(ctx, scriptDeadByID, filterArgs(args, p.Filter, true)...)
		if err != nil {
			return nil, fmt.Errorf("redisstore: list dead: %w", err)
		}
		return decodeTasks(res)
	}
	rows, _, err := s.scan(ctx, "list", p.Filter, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list dead: %w", err)
	}
	return decodeTasks(rows)
}

// CountDead implements store.Admin.
func (s *Store) CountDead(ctx context.Context, f store.DeadFilter) (int64, error) {
	if len(f.IDs) > 0 {
		ts, err := s.ListDead(ctx, store.ListDeadParams{Filter: f, Limit: len(f.IDs)})
		if err != nil {
			return 0, err
		}
		return int64(len(ts)), nil
	}
	if (f.MessageContains != "" || f.LifeMin > 0 || f.LifeBelow > 0) && f.Handler == "" && f.ErrorType == "" && f.Fingerprint == "" {
		n, err := s.countByRecord(ctx, f)
		if err != nil {
			return 0, fmt.Errorf("redisstore: count dead: %w", err)
		}
		return n, nil
	}
	_, n, err := s.scan(ctx, "count", f, nil, 1)
	if err != nil {
		return 0, fmt.Errorf("redisstore: count dead: %w", err)
	}
	return n, nil
}

// countBudget bounds the entries one scriptCountDeadQueue call examines
// (a variable for the tests).
var countBudget = 20000

// countByRecord counts the dead tasks matching a filter of a message or
// life, a queue and time bounds (no handler, error type or fingerprint):
// per queue (f.Queue, or every queue), a walk of the queue's dead tasks in
// the time bounds reading their P:dm records a thousand at a time. It is
// exact and costs O(dead tasks in the bounds), as the general walk does,
// but two commands per thousand tasks instead of two per task: about
// walking the index itself.
func (s *Store) countByRecord(ctx context.Context, f store.DeadFilter) (int64, error) {
	queues := []string{f.Queue}
	if f.Queue == "" {
		var err error
		if queues, err = s.c.SMembers(ctx, s.ns+":queues").Result(); err != nil {
			return 0, fmt.Errorf("queues: %w", err)
		}
	}
	after, before := "", ""
	if !f.DeadAfter.IsZero() {
		after = strconv.FormatInt(f.DeadAfter.UnixMicro(), 10)
	}
	if !f.DeadBefore.IsZero() {
		before = strconv.FormatInt(f.DeadBefore.UnixMicro(), 10)
	}
	msg := asciiLower(f.MessageContains)
	var total int64
	for _, q := range queues {
		cfi, cid := "", ""
		for {
			res, err := s.run(ctx, scriptCountDeadQueue, q, after, before, msg, max(f.LifeMin, 0), max(f.LifeBelow, 0), cfi, cid, countBudget)
			if err != nil {
				return 0, fmt.Errorf("queue %s: %w", q, err)
			}
			r, _ := res.([]any)
			if len(r) != 3 {
				return 0, fmt.Errorf("queue %s: unexpected reply %T", q, res)
			}
			n, _ := r[0].(int64)
			total += n
			if cfi, cid = str(r[1]), str(r[2]); cfi == "" {
				break
			}
		}
	}
	return total, nil
}

// deadIDs returns up to limit IDs of dead tasks matching f.
func (s *Store) deadIDs(ctx context.Context, f store.DeadFilter, limit int) ([]rdq.ID, error) {
	if len(f.IDs) > 0 {
		ts, err := s.ListDead(ctx, store.ListDeadParams{Filter: f, Limit: limit})
		if err != nil {
			return nil, err
		}
		ids := make([]rdq.ID, len(ts))
		for i, t := range ts {
			ids[i] = t.ID
		}
		return ids, nil
	}
	rows, _, err := s.scan(ctx, "ids", f, nil, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]rdq.ID, 0, len(rows))
	for _, r := range rows {
		id, err := rdq.ParseID(str(r))
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// DeadGroups implements store.Admin. With no filter, or a queue alone,
// the groups come from summaries kept as tasks go dead and leave the
// dead-letter queue (a count per fingerprint, and the fingerprint's dead
// tasks by finish time), at a cost of the number of groups; other filters
// group the matching tasks.
func (s *Store) DeadGroups(ctx context.Context, f store.DeadFilter) ([]store.Group, error) {
	if onlyQueue(f) {
		res, err := s.run(ctx, scriptDeadGroups, f.Queue)
		if err != nil {
			return nil, fmt.Errorf("redisstore: dead groups: %w", err)
		}
		rows, _ := res.([]any)
		out := make([]store.Group, 0, len(rows))
		for _, r := range rows {
			g, _ := r.([]any)
			if len(g) != 7 {
				return nil, fmt.Errorf("redisstore: dead groups: malformed reply")
			}
			id, err := rdq.ParseID(str(g[4]))
			if err != nil {
				return nil, fmt.Errorf("redisstore: dead groups: %w", err)
			}
			n, _ := strconv.ParseFloat(str(g[1]), 64)
			out = append(out, store.Group{
				Fingerprint: str(g[0]), Count: int64(n), FirstSeen: microTime(floatMicros(str(g[2]))),
				LastSeen: microTime(floatMicros(str(g[3]))), ExampleID: id, ErrorType: str(g[5]), Message: str(g[6]),
			})
		}
		sortGroups(out)
		return out, nil
	}
	var tasks []*rdq.Task
	var after *store.Cursor
	for {
		page, err := s.ListDead(ctx, store.ListDeadParams{Filter: f, After: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("redisstore: dead groups: %w", err)
		}
		tasks = append(tasks, page...)
		if len(page) < 1000 {
			break
		}
		c := store.CursorOf(page[len(page)-1])
		after = &c
	}
	idx := map[string]int{}
	var out []store.Group
	for _, t := range tasks { // newest first
		i, ok := idx[t.LastError.Fingerprint]
		if !ok {
			i = len(out)
			idx[t.LastError.Fingerprint] = i
			out = append(out, store.Group{Fingerprint: t.LastError.Fingerprint, ErrorType: t.LastError.Type,
				Message: t.LastError.Message, LastSeen: t.FinishedAt, ExampleID: t.ID})
		}
		out[i].Count++
		out[i].FirstSeen = t.FinishedAt
	}
	sortGroups(out)
	return out, nil
}

// onlyQueue reports whether f selects by queue alone, or not at all.
func onlyQueue(f store.DeadFilter) bool {
	f.Queue = ""
	return len(f.IDs) == 0 && f.Handler == "" && f.ErrorType == "" && f.Fingerprint == "" && f.DeadAfter.IsZero() &&
		f.DeadBefore.IsZero() && f.MessageContains == "" && f.LifeMin <= 0 && f.LifeBelow <= 0
}

// floatMicros turns a sorted-set score (an integer number of
// microseconds, possibly written as a float) into decimal microseconds.
func floatMicros(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(int64(f), 10)
}

func sortGroups(gs []store.Group) {
	slices.SortStableFunc(gs, func(a, b store.Group) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Fingerprint, b.Fingerprint)
	})
}

// Redrive implements store.Admin: one script checks every task, writes
// the audit entry ("redrive" with the redriven IDs, or "edit_payload"
// with the old and new payload's SHA-256 in details old_sha256 and
// new_sha256) and moves the tasks.
func (s *Store) Redrive(ctx context.Context, p store.RedriveParams) ([]error, error) {
	if p.Payload != nil && len(p.IDs) != 1 {
		return nil, fmt.Errorf("%w: redisstore: a redrive with a payload edit names exactly one task, got %d", rdq.ErrInvalid, len(p.IDs))
	}
	if len(p.Payload) > rdq.MaxPayloadBytes {
		return nil, fmt.Errorf("%w: redisstore: redrive payload is %d bytes; the limit is %d", rdq.ErrInvalid, len(p.Payload), rdq.MaxPayloadBytes)
	}
	if p.Delay < 0 || p.Spread < 0 {
		return nil, fmt.Errorf("%w: redisstore: redrive with a negative delay or spread", rdq.ErrInvalid)
	}
	if len(p.IDs) == 0 {
		return nil, nil
	}
	action, details, guard := "redrive", "", ""
	if p.Payload != nil {
		for {
			old, _, err := s.Get(ctx, p.IDs[0])
			if err != nil {
				break // the script reports a missing task
			}
			action = "edit_payload"
			details = encodeHeaders(map[string]string{"old_sha256": sha256Hex(old.Payload), "new_sha256": sha256Hex(p.Payload)})
			sum := sha1.Sum(old.Payload) //nolint:gosec // see the import
			guard = hex.EncodeToString(sum[:])
			codes, err := s.redrive(ctx, p.IDs, p.Spread, "", action, details, guard, p.Payload, p.MaxLife, p.Delay, p.Actor, p.Reason, p.Now, store.DeadFilter{})
			if err != nil {
				return nil, err
			}
			if len(codes) == 1 && codes[0] == "changed" {
				continue // the payload changed since it was read: read it again
			}
			return redriveErrs(p.IDs, codes)
		}
	}
	codes, err := s.redrive(ctx, p.IDs, p.Spread, "", action, details, guard, nil, p.MaxLife, p.Delay, p.Actor, p.Reason, p.Now, store.DeadFilter{})
	if err != nil {
		return nil, err
	}
	return redriveErrs(p.IDs, codes)
}

func (s *Store) redrive(ctx context.Context, ids []rdq.ID, spread time.Duration, auditFilter, action, details, guard string,
	payload []byte, maxLife int, delay time.Duration, actor, reason string, now *time.Time, f store.DeadFilter) ([]string, error) {
	args := []any{nowArg(now), actor, reason, action, auditFilter, details, max(maxLife, 0), flag(payload != nil), payload, guard, micros(delay)}
	args = filterArgs(args, f, false)
	args = append(args, len(ids))
	for _, id := range ids {
		var extra time.Duration
		if spread > 0 {
			extra = rand.N(spread)
		}
		args = append(args, id.String(), micros(extra))
	}
	res, err := s.run(ctx, scriptRedrive, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: redrive: %w", err)
	}
	raw, _ := res.([]any)
	codes := make([]string, len(raw))
	for i, r := range raw {
		codes[i] = str(r)
	}
	return codes, nil
}

func redriveErrs(ids []rdq.ID, codes []string) ([]error, error) {
	if len(codes) != len(ids) {
		return nil, fmt.Errorf("redisstore: redrive: %d results for %d tasks", len(codes), len(ids))
	}
	errs := make([]error, len(ids))
	for i, c := range codes {
		switch c {
		case "ok":
		case "notfound":
			errs[i] = fmt.Errorf("redisstore: redrive %s: %w", ids[i], store.ErrNotFound)
		case "notdead", "nomatch":
			errs[i] = fmt.Errorf("redisstore: redrive %s: %w", ids[i], store.ErrNotDead)
		case "limit":
			errs[i] = fmt.Errorf("redisstore: redrive %s: %w", ids[i], store.ErrRedriveLimit)
		default:
			return nil, fmt.Errorf("redisstore: redrive %s: unexpected result %q", ids[i], c)
		}
	}
	return errs, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RedriveDead implements store.Admin: it finds up to p.Limit matching
// tasks below the life limit, then redrives them in one script that
// checks each again against the filter and writes the audit entry.
func (s *Store) RedriveDead(ctx context.Context, p store.RedriveDeadParams) (store.RedriveDeadResult, error) {
	if p.Limit < 1 {
		return store.RedriveDeadResult{}, fmt.Errorf("%w: redisstore: redrive dead needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	if p.Delay < 0 || p.Spread < 0 {
		return store.RedriveDeadResult{}, fmt.Errorf("%w: redisstore: redrive with a negative delay or spread", rdq.ErrInvalid)
	}
	var res store.RedriveDeadResult
	eligible := p.Filter
	if p.MaxLife > 0 {
		if eligible.LifeBelow == 0 || eligible.LifeBelow > p.MaxLife {
			eligible.LifeBelow = p.MaxLife
		}
		atLimit := p.Filter
		atLimit.LifeMin = max(atLimit.LifeMin, p.MaxLife)
		n, err := s.CountDead(ctx, atLimit)
		if err != nil {
			return res, err
		}
		res.AtLimit = n
	}
	ids, err := s.deadIDs(ctx, eligible, p.Limit)
	if err != nil {
		return res, fmt.Errorf("redisstore: redrive dead: %w", err)
	}
	if len(ids) == 0 {
		return res, nil
	}
	filter, err := json.Marshal(p.Filter)
	if err != nil {
		return res, fmt.Errorf("redisstore: redrive dead: %w", err)
	}
	details := encodeHeaders(store.RedriveDetails(p))
	codes, err := s.redrive(ctx, ids, p.Spread, string(filter), "redrive", details, "", nil, p.MaxLife, p.Delay, p.Actor, p.Reason, p.Now, eligible)
	if err != nil {
		return res, err
	}
	for _, c := range codes {
		if c == "ok" {
			res.Redriven++
		}
	}
	return res, nil
}

// PurgeDead implements store.Admin. An empty Action is "purge".
func (s *Store) PurgeDead(ctx context.Context, p store.PurgeDeadParams) (int64, error) {
	if p.Limit < 1 {
		return 0, fmt.Errorf("%w: redisstore: purge dead needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	switch p.Action {
	case "":
		p.Action = "purge"
	case "purge", "retention":
	default:
		return 0, fmt.Errorf("%w: redisstore: purge dead action %q; want purge or retention", rdq.ErrInvalid, p.Action)
	}
	ids, err := s.deadIDs(ctx, p.Filter, p.Limit)
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge dead: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	filter, err := json.Marshal(p.Filter)
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge dead: %w", err)
	}
	args := filterArgs([]any{"", p.Actor, p.Reason, p.Action, string(filter)}, p.Filter, false)
	args = append(args, len(ids))
	for _, id := range ids {
		args = append(args, id.String())
	}
	res, err := s.run(ctx, scriptPurgeDead, args...)
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge dead: %w", err)
	}
	n, _ := res.(int64)
	return n, nil
}

// ListAudit implements store.Admin, reading the audit list newest first.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]store.AuditEntry, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: list audit needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	const page = 500
	var out []store.AuditEntry
	for start := int64(0); ; start += page {
		recs, err := s.c.LRange(ctx, s.ns+":audit", start, start+page-1).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: list audit: %w", err)
		}
		for _, r := range recs {
			e, err := decodeAudit(r)
			if err != nil {
				return nil, fmt.Errorf("redisstore: list audit: %w", err)
			}
			if (p.Actor != "" && e.Actor != p.Actor) || (p.Action != "" && e.Action != p.Action) ||
				(!p.Since.IsZero() && e.At.Before(p.Since)) || (!p.Until.IsZero() && !e.At.Before(p.Until)) ||
				(p.BeforeID != 0 && e.ID >= p.BeforeID) {
				continue
			}
			out = append(out, e)
			if len(out) == p.Limit {
				return out, nil
			}
		}
		if len(recs) < page {
			return out, nil
		}
	}
}

func decodeAudit(rec string) (store.AuditEntry, error) {
	f, err := netstrings(rec)
	if err != nil || len(f) != 9 && len(f) != 10 {
		return store.AuditEntry{}, fmt.Errorf("malformed audit entry (%d fields): %v", len(f), err)
	}
	id, _ := strconv.ParseInt(f[0], 10, 64)
	count, _ := strconv.ParseInt(f[6], 10, 64)
	e := store.AuditEntry{ID: id, At: microTime(f[1]), Actor: f[2], Action: f[3], Filter: f[4], Count: count, Reason: f[7]}
	if f[5] != "" {
		for _, s := range strings.Split(f[5], ",") {
			tid, err := rdq.ParseID(s)
			if err != nil {
				return store.AuditEntry{}, err
			}
			e.IDs = append(e.IDs, tid)
		}
	}
	if f[8] != "" {
		d, err := decodeHeaders(f[8])
		if err != nil {
			return store.AuditEntry{}, err
		}
		e.Details = d
	}
	if len(f) == 10 && f[9] != "" {
		e.Queues = strings.Split(f[9], ",")
	}
	return e, nil
}

// Stats implements store.Admin. A SucceededWindow of zero or less counts
// every succeeded task kept.
func (s *Store) Stats(ctx context.Context, p store.StatsParams) ([]store.QueueStats, error) {
	res, err := s.run(ctx, scriptStats, nowArg(p.Now), micros(p.SucceededWindow))
	if err != nil {
		return nil, fmt.Errorf("redisstore: stats: %w", err)
	}
	rows, _ := res.([]any)
	out := make([]store.QueueStats, 0, len(rows))
	for _, r := range rows {
		v, _ := r.([]any)
		if len(v) != 6 {
			return nil, fmt.Errorf("redisstore: stats: malformed reply")
		}
		n := func(i int) int64 { x, _ := v[i].(int64); return x }
		age, _ := strconv.ParseInt(str(v[5]), 10, 64)
		out = append(out, store.QueueStats{Queue: str(v[0]), Pending: n(1), InFlight: n(2), Dead: n(3), Succeeded: n(4),
			OldestDueAge: time.Duration(age) * time.Microsecond})
	}
	return out, nil
}
