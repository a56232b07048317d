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
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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

// dead is a dead task found by a scan: its task (mode "list") or its ID,
// and where it sorts (finish time, ID), newest first.
type dead struct {
	fi   int64
	id   string
	task *rdq.Task
}

func newestFirst(a, b dead) int { return cmp.Or(cmp.Compare(b.fi, a.fi), strings.Compare(b.id, a.id)) }

// scanQueues returns the queues a dead-letter read of f walks: its
// queue, or every queue.
func (s *Store) scanQueues(ctx context.Context, f store.DeadFilter) ([]string, error) {
	if f.Queue != "" {
		return []string{f.Queue}, nil
	}
	return s.allQueues(ctx)
}

// scan walks the dead-letter indexes of each queue f selects for tasks
// matching f after a cursor, in scripts of bounded cost, until limit
// matches were found in each (or all were counted, for mode "count"), and
// merges the queues' pages newest first: a page across queues costs one
// page per queue.
func (s *Store) scan(ctx context.Context, mode string, f store.DeadFilter, after *store.Cursor, limit int) ([]dead, int64, error) {
	qs, err := s.scanQueues(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	var mu sync.Mutex
	var out []dead
	var total int64
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		qf := f
		qf.Queue = q
		rows, n, err := s.scanQueue(ctx, q, mode, qf, after, limit)
		mu.Lock()
		defer mu.Unlock()
		out = append(out, rows...)
		total += n
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(out, newestFirst)
	if mode != "count" && len(out) > limit {
		out = out[:limit]
	}
	return out, total, nil
}

// scanQueue is scan of queue q.
func (s *Store) scanQueue(ctx context.Context, q, mode string, f store.DeadFilter, after *store.Cursor, limit int) ([]dead, int64, error) {
	cfi, cid := "", ""
	if after != nil {
		cfi, cid = strconv.FormatInt(after.FinishedAt.UnixMicro(), 10), after.ID.String()
	}
	var out []dead
	var total int64
	for {
		args := filterArgs([]any{mode, limit - len(out), scanBudget, cfi, cid}, f, false)
		res, err := s.runQ(ctx, scriptScanDead, q, args...)
		if err != nil {
			return nil, 0, err
		}
		r, ok := res.([]any)
		if !ok || len(r) < 4 {
			return nil, 0, fmt.Errorf("unexpected reply %T", res)
		}
		n, _ := r[3].(int64)
		total += n
		for _, row := range r[4:] {
			v, _ := row.([]any)
			switch mode {
			case "list":
				t, err := decodeTask(v)
				if err != nil {
					return nil, 0, err
				}
				out = append(out, dead{fi: t.FinishedAt.UnixMicro(), id: t.ID.String(), task: t})
			case "ids":
				if len(v) != 2 {
					return nil, 0, fmt.Errorf("malformed dead task ID reply")
				}
				fi, _ := strconv.ParseInt(floatMicros(str(v[1])), 10, 64)
				out = append(out, dead{fi: fi, id: str(v[0])})
			}
		}
		if r[0] == int64(1) || (mode != "count" && len(out) >= limit) || str(r[1]) == "" {
			return out, total, nil
		}
		cfi, cid = str(r[1]), str(r[2])
	}
}

func deadTasks(ds []dead) []*rdq.Task {
	out := make([]*rdq.Task, len(ds))
	for i, d := range ds {
		out[i] = d.task
	}
	return out
}

// ListDead implements store.Admin. In each queue, each filter is served
// by a sorted set of the queue's dead tasks by finish time: the
// fingerprint's, else the handler's, the error type's, or all of them. A
// page costs the entries it walks in that index of each queue the filter
// selects (its time bounds narrow the walk; a message or life condition
// is checked on each entry): without a queue, one page per queue, merged;
// never the size of the dead-letter queue.
func (s *Store) ListDead(ctx context.Context, p store.ListDeadParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: list dead needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	if len(p.Filter.IDs) > 0 {
		ds, err := s.deadByID(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("redisstore: list dead: %w", err)
		}
		return deadTasks(ds), nil
	}
	rows, _, err := s.scan(ctx, "list", p.Filter, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list dead: %w", err)
	}
	return deadTasks(rows), nil
}

// deadByID reads the dead tasks of p.Filter.IDs, one script per queue.
func (s *Store) deadByID(ctx context.Context, p store.ListDeadParams) ([]dead, error) {
	qs, err := s.queuesOf(ctx, p.Filter.IDs)
	if err != nil {
		return nil, err
	}
	order, idx := groups(qs)
	var mu sync.Mutex
	var out []dead
	err = parallel(ctx, order, func(ctx context.Context, q string) error {
		f := p.Filter
		f.IDs = nil
		for _, i := range idx[q] {
			f.IDs = append(f.IDs, p.Filter.IDs[i])
		}
		args := []any{p.Limit, "", ""}
		if p.After != nil {
			args = []any{p.Limit, strconv.FormatInt(p.After.FinishedAt.UnixMicro(), 10), p.After.ID.String()}
		}
		res, err := s.runQ(ctx, scriptDeadByID, q, filterArgs(args, f, true)...)
		if err != nil {
			return err
		}
		ts, err := decodeTasks(res)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, t := range ts {
			out = append(out, dead{fi: t.FinishedAt.UnixMicro(), id: t.ID.String(), task: t})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, newestFirst)
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// CountDead implements store.Admin: one count per queue the filter
// selects, summed.
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
			res, err := s.runQ(ctx, scriptCountDeadQueue, q, after, before, msg, max(f.LifeMin, 0), max(f.LifeBelow, 0), cfi, cid, countBudget)
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
	var ds []dead
	var err error
	if len(f.IDs) > 0 {
		ds, err = s.deadByID(ctx, store.ListDeadParams{Filter: f, Limit: limit})
	} else {
		ds, _, err = s.scan(ctx, "ids", f, nil, limit)
	}
	if err != nil {
		return nil, err
	}
	ids := make([]rdq.ID, 0, len(ds))
	for _, d := range ds {
		id, err := rdq.ParseID(d.id)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// DeadGroups implements store.Admin. With no filter, or a queue alone,
// the groups come from summaries each queue keeps as tasks go dead and
// leave its dead-letter queue (a count per fingerprint, and the
// fingerprint's dead tasks by finish time), at a cost of the number of
// groups of each queue, merged across queues; other filters group the
// matching tasks.
func (s *Store) DeadGroups(ctx context.Context, f store.DeadFilter) ([]store.Group, error) {
	if onlyQueue(f) {
		qs, err := s.scanQueues(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("redisstore: dead groups: %w", err)
		}
		var mu sync.Mutex
		merged := map[string]*store.Group{}
		err = parallel(ctx, qs, func(ctx context.Context, q string) error {
			res, err := s.runQ(ctx, scriptDeadGroups, q)
			if err != nil {
				return err
			}
			rows, _ := res.([]any)
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rows {
				g, _ := r.([]any)
				if len(g) != 7 {
					return fmt.Errorf("malformed reply")
				}
				id, err := rdq.ParseID(str(g[4]))
				if err != nil {
					return err
				}
				n, _ := strconv.ParseFloat(str(g[1]), 64)
				ng := store.Group{
					Fingerprint: str(g[0]), Count: int64(n), FirstSeen: microTime(floatMicros(str(g[2]))),
					LastSeen: microTime(floatMicros(str(g[3]))), ExampleID: id, ErrorType: str(g[5]), Message: str(g[6]),
				}
				m, ok := merged[ng.Fingerprint]
				if !ok {
					merged[ng.Fingerprint] = &ng
					continue
				}
				m.Count += ng.Count
				if ng.FirstSeen.Before(m.FirstSeen) {
					m.FirstSeen = ng.FirstSeen
				}
				if ng.LastSeen.After(m.LastSeen) || ng.LastSeen.Equal(m.LastSeen) && ng.ExampleID.String() > m.ExampleID.String() {
					m.LastSeen, m.ExampleID, m.ErrorType, m.Message = ng.LastSeen, ng.ExampleID, ng.ErrorType, ng.Message
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redisstore: dead groups: %w", err)
		}
		out := make([]store.Group, 0, len(merged))
		for _, g := range merged {
			out = append(out, *g)
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

// redrive redrives tasks by ID, one script per queue of theirs (each
// writing its part of one audit entry), and returns a code per task.
func (s *Store) redrive(ctx context.Context, ids []rdq.ID, spread time.Duration, auditFilter, action, details, guard string,
	payload []byte, maxLife int, delay time.Duration, actor, reason string, now *time.Time, f store.DeadFilter) ([]string, error) {
	qs, err := s.queuesOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("redisstore: redrive: %w", err)
	}
	codes := make([]string, len(ids))
	for i, q := range qs {
		if q == "" {
			codes[i] = "notfound"
		}
	}
	order, idx := groups(qs)
	aid, err := s.reserveAudit(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: redrive: %w", err)
	}
	err = parallel(ctx, order, func(ctx context.Context, q string) error {
		args := []any{nowArg(now), actor, reason, action, auditFilter, details, max(maxLife, 0), flag(payload != nil), payload, guard, micros(delay)}
		args = filterArgs(args, f, false)
		args = append(args, len(idx[q]))
		for _, i := range idx[q] {
			var extra time.Duration
			if spread > 0 {
				extra = rand.N(spread)
			}
			args = append(args, ids[i].String(), micros(extra))
		}
		res, err := s.runQ(ctx, scriptRedrive, q, append(args, aid)...)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q, err)
		}
		raw, _ := res.([]any)
		if len(raw) == 1 && str(raw[0]) == "changed" {
			for _, i := range idx[q] {
				codes[i] = "changed"
			}
			return nil
		}
		if len(raw) != len(idx[q]) {
			return fmt.Errorf("queue %s: %d results for %d tasks", q, len(raw), len(idx[q]))
		}
		for j, i := range idx[q] {
			codes[i] = str(raw[j])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: redrive: %w", err)
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
	qs, err := s.queuesOf(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge dead: %w", err)
	}
	order, idx := groups(qs)
	aid, err := s.reserveAudit(ctx)
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge dead: %w", err)
	}
	var n atomic.Int64
	err = parallel(ctx, order, func(ctx context.Context, q string) error {
		args := filterArgs([]any{"", p.Actor, p.Reason, p.Action, string(filter)}, p.Filter, false)
		args = append(args, len(idx[q]))
		for _, i := range idx[q] {
			args = append(args, ids[i].String())
		}
		res, err := s.runQ(ctx, scriptPurgeDead, q, append(args, aid)...)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q, err)
		}
		gone, _ := res.([]any)
		n.Add(int64(len(gone)))
		return s.unindex(ctx, gone)
	})
	if err != nil {
		return n.Load(), fmt.Errorf("redisstore: purge dead: %w", err)
	}
	return n.Load(), nil
}

// ListAudit implements store.Admin: each queue's entries (a sorted set
// by ID) are read newest first from BeforeID, and the queues' pages are
// merged: a page costs a page per queue. The parts of one mutation across
// queues share an ID and read as one entry (mergeAudit); each queue's
// page holds every part of the newest Limit IDs it has, so no entry of
// the page is missing a part.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]store.AuditEntry, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: list audit needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	qs, err := s.allQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list audit: %w", err)
	}
	var mu sync.Mutex
	var out []store.AuditEntry
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		es, err := s.queueAudit(ctx, q, p)
		mu.Lock()
		defer mu.Unlock()
		out = append(out, es...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: list audit: %w", err)
	}
	out = mergeAudit(out)
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// mergeAudit sorts entries newest first and merges those sharing an ID,
// the parts one mutation wrote in each queue it touched: their queues
// (sorted), task IDs and counts are added up, and the earliest time kept.
func mergeAudit(es []store.AuditEntry) []store.AuditEntry {
	slices.SortStableFunc(es, func(a, b store.AuditEntry) int { return cmp.Compare(b.ID, a.ID) })
	var out []store.AuditEntry
	for _, e := range es {
		if n := len(out); n > 0 && out[n-1].ID == e.ID {
			m := &out[n-1]
			m.Queues = append(m.Queues, e.Queues...)
			m.IDs = append(m.IDs, e.IDs...)
			m.Count += e.Count
			if e.At.Before(m.At) {
				m.At = e.At
			}
			continue
		}
		e.Queues = slices.Clone(e.Queues)
		e.IDs = slices.Clone(e.IDs)
		out = append(out, e)
	}
	for i := range out {
		slices.Sort(out[i].Queues)
		out[i].Queues = slices.Compact(out[i].Queues)
	}
	return out
}

// queueAudit reads up to p.Limit entries of queue q matching p, newest
// first.
func (s *Store) queueAudit(ctx context.Context, q string, p store.ListAuditParams) ([]store.AuditEntry, error) {
	const page = 500
	hi := "+inf"
	if p.BeforeID != 0 {
		hi = "(" + strconv.FormatInt(p.BeforeID, 10)
	}
	var out []store.AuditEntry
	for off := int64(0); ; off += page {
		recs, err := s.c.ZRevRangeByScore(ctx, s.prefix(q)+":audit", &redis.ZRangeBy{Max: hi, Min: "-inf", Offset: off, Count: page}).Result()
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			e, err := decodeAudit(r)
			if err != nil {
				return nil, err
			}
			if (p.Actor != "" && e.Actor != p.Actor) || (p.Action != "" && e.Action != p.Action) ||
				(!p.Since.IsZero() && e.At.Before(p.Since)) || (!p.Until.IsZero() && !e.At.Before(p.Until)) {
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

// Stats implements store.Admin: one script per queue. A SucceededWindow
// of zero or less counts every succeeded task kept.
func (s *Store) Stats(ctx context.Context, p store.StatsParams) ([]store.QueueStats, error) {
	qs, err := s.allQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: stats: %w", err)
	}
	var mu sync.Mutex
	out := make([]store.QueueStats, 0, len(qs))
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptStats, q, nowArg(p.Now), micros(p.SucceededWindow))
		if err != nil {
			return err
		}
		v, _ := res.([]any)
		if len(v) == 0 {
			return nil
		}
		if len(v) != 5 {
			return fmt.Errorf("malformed reply")
		}
		n := func(i int) int64 { x, _ := v[i].(int64); return x }
		age, _ := strconv.ParseInt(str(v[4]), 10, 64)
		mu.Lock()
		defer mu.Unlock()
		out = append(out, store.QueueStats{Queue: q, Pending: n(0), InFlight: n(1), Dead: n(2), Succeeded: n(3),
			OldestDueAge: time.Duration(age) * time.Microsecond})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: stats: %w", err)
	}
	slices.SortFunc(out, func(a, b store.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}
