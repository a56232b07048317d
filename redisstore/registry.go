package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.WorkerRegistry = (*Store)(nil)

// list renders names as ",a,b," for the scripts' substring checks (names
// hold no comma).
func list(names []string) string {
	if len(names) == 0 {
		return ","
	}
	return "," + strings.Join(names, ",") + ","
}

func unlist(s string) []string {
	s = strings.Trim(s, ",")
	if s == "" {
		return nil
	}
	out := strings.Split(s, ",")
	slices.Sort(out)
	return out
}

// RegisterWorker implements store.WorkerRegistry.
func (s *Store) RegisterWorker(ctx context.Context, p store.RegisterWorkerParams) error {
	if err := store.ValidateRegistration(p); err != nil {
		return err
	}
	w := p.Worker
	for _, n := range slices.Concat(w.Queues, w.Handlers) {
		if err := rdq.ValidateName("queue or handler", n); err != nil {
			return fmt.Errorf("redisstore: register worker %s: %w", w.ID, err)
		}
	}
	_, err := s.runKey(ctx, scriptRegister, s.registry(), nowArg(p.Now), w.ID, w.Host, w.PID, w.Version, list(w.Queues), list(w.Handlers),
		w.Slots, w.InFlight, micros(p.StaleAfter), micros(p.ExpireAfter))
	if err != nil {
		return fmt.Errorf("redisstore: register worker %s: %w", w.ID, err)
	}
	return nil
}

// DeregisterWorker implements store.WorkerRegistry.
func (s *Store) DeregisterWorker(ctx context.Context, id string) error {
	if _, err := s.runKey(ctx, scriptDeregister, s.registry(), id); err != nil {
		return fmt.Errorf("redisstore: deregister worker %s: %w", id, err)
	}
	return nil
}

// workers reads the entries not expired at the store's now, ordered by ID.
func (s *Store) workers(ctx context.Context, now *time.Time) ([]store.WorkerInfo, error) {
	res, err := s.runKey(ctx, scriptWorkers, s.registry(), nowArg(now))
	if err != nil {
		return nil, err
	}
	rows, _ := res.([]any)
	if len(rows) == 0 {
		return nil, fmt.Errorf("unexpected empty reply")
	}
	at, _ := strconv.ParseInt(str(rows[0]), 10, 64)
	var out []store.WorkerInfo
	for _, r := range rows[1:] {
		v, _ := r.([]any)
		if len(v) < 1 || len(v)%2 != 1 {
			return nil, fmt.Errorf("malformed worker entry")
		}
		f := map[string]string{}
		for i := 1; i+1 < len(v); i += 2 {
			f[str(v[i])] = str(v[i+1])
		}
		seen, _ := strconv.ParseInt(f["seen"], 10, 64)
		stale, _ := strconv.ParseInt(f["stale"], 10, 64)
		expire, _ := strconv.ParseInt(f["expire"], 10, 64)
		if f["seen"] == "" || at-seen >= expire {
			continue
		}
		pid, _ := strconv.Atoi(f["pid"])
		slots, _ := strconv.Atoi(f["slots"])
		inflight, _ := strconv.Atoi(f["inflight"])
		out = append(out, store.WorkerInfo{
			ID: str(v[0]), Host: f["host"], PID: pid, Version: f["ver"], Queues: unlist(f["qs"]), Handlers: unlist(f["hs"]),
			Slots: slots, InFlight: inflight, StartedAt: microTime(f["started"]), LastSeen: microTime(f["seen"]),
			Stale: at-seen >= stale,
		})
	}
	slices.SortFunc(out, func(a, b store.WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Workers implements store.WorkerRegistry.
func (s *Store) Workers(ctx context.Context, p store.WorkersParams) ([]store.WorkerInfo, error) {
	ws, err := s.workers(ctx, p.Now)
	if err != nil {
		return nil, fmt.Errorf("redisstore: workers: %w", err)
	}
	if p.Queue == "" {
		return ws, nil
	}
	var out []store.WorkerInfo
	for _, w := range ws {
		if slices.Contains(w.Queues, p.Queue) {
			out = append(out, w)
		}
	}
	return out, nil
}

// UnservedHandlers implements store.WorkerRegistry. A queue's pairs come
// from the handlers whose tasks have waited in it, each counted on its
// sorted set of waiting tasks.
func (s *Store) UnservedHandlers(ctx context.Context, p store.UnservedParams) ([]store.UnservedHandler, error) {
	if p.DueOnly && len(p.Queues) == 0 {
		return nil, fmt.Errorf("%w: redisstore: unserved handlers with DueOnly needs at least one queue", rdq.ErrInvalid)
	}
	ws, err := s.workers(ctx, p.Now)
	if err != nil {
		return nil, fmt.Errorf("redisstore: unserved handlers: %w", err)
	}
	qs := p.Queues
	if len(qs) == 0 {
		if qs, err = s.allQueues(ctx); err != nil {
			return nil, fmt.Errorf("redisstore: unserved handlers: %w", err)
		}
	}
	var mu sync.Mutex
	var out []store.UnservedHandler
	err = parallel(ctx, qs, func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptUnserved, q, nowArg(p.Now), flag(p.DueOnly))
		if err != nil {
			return err
		}
		rows, _ := res.([]any)
		if len(rows) == 0 {
			return fmt.Errorf("unexpected empty reply")
		}
		now := microTime(str(rows[0]))
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows[1:] {
			v, _ := r.([]any)
			if len(v) != 3 {
				return fmt.Errorf("malformed reply")
			}
			h := str(v[0])
			if served(ws, q, h) {
				continue
			}
			n, _ := v[1].(int64)
			oldest := microTime(floatMicros(str(v[2])))
			u := store.UnservedHandler{Queue: q, Handler: h, Tasks: n, OldestDue: oldest}
			if !oldest.After(now) {
				u.Waiting = now.Sub(oldest)
			}
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: unserved handlers: %w", err)
	}
	slices.SortFunc(out, func(a, b store.UnservedHandler) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Handler, b.Handler))
	})
	return out, nil
}

// served reports whether a live (not stale) worker of ws serves handler h
// of queue q.
func served(ws []store.WorkerInfo, q, h string) bool {
	for _, w := range ws {
		if !w.Stale && slices.Contains(w.Queues, q) && slices.Contains(w.Handlers, h) {
			return true
		}
	}
	return false
}

// DeadLetterUnserved implements store.WorkerRegistry. The registry is
// read just before the queue's script runs (they are in different
// slots): a worker that registers for the pair in between does not stop
// this call.
func (s *Store) DeadLetterUnserved(ctx context.Context, p store.DeadLetterUnservedParams) (int64, error) {
	if err := rdq.ValidateName("queue", p.Queue); err != nil {
		return 0, fmt.Errorf("redisstore: dead-letter unserved: %w", err)
	}
	if err := rdq.ValidateName("handler", p.Handler); err != nil {
		return 0, fmt.Errorf("redisstore: dead-letter unserved: %w", err)
	}
	if p.Grace < 0 || p.Limit < 1 || p.Failure.Type == "" {
		return 0, fmt.Errorf("%w: redisstore: dead-letter unserved needs a grace of zero or more, a limit of at least 1 and a failure (got %s, %d, %q)", rdq.ErrInvalid, p.Grace, p.Limit, p.Failure.Type)
	}
	ws, err := s.workers(ctx, p.Now)
	if err != nil {
		return 0, fmt.Errorf("redisstore: dead-letter unserved: %w", err)
	}
	if served(ws, p.Queue, p.Handler) {
		return 0, nil
	}
	res, err := s.runAudited(ctx, scriptDeadLetterUnserved, p.Queue, nowArg(p.Now), p.Queue, p.Handler, micros(p.Grace), p.Limit, p.Actor,
		cut(p.Failure.Type), p.Failure.Message, cut(p.Failure.Fingerprint))
	if err != nil {
		return 0, fmt.Errorf("redisstore: dead-letter unserved: %w", err)
	}
	n, _ := res.(int64)
	return n, nil
}
