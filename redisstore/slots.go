package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
)

// prefix returns queue q's key prefix N:{q}: the KEYS[1] of its scripts,
// which routes them to the queue's slot.
func (s *Store) prefix(q string) string { return s.ns + ":{" + q + "}" }

// clustered reports whether the store is on Redis Cluster, where a
// script reaches one slot only. On one server, the hot path's scripts
// (enqueue, claim, finish) take a batch across queues whole.
func (s *Store) clustered() bool {
	_, ok := s.c.(*redis.ClusterClient)
	return ok
}

// registry returns the prefix of the worker registry's keys, N:{~}: a
// hash tag no queue name can be (names start with a letter or digit).
func (s *Store) registry() string { return s.ns + ":{~}" }

func (s *Store) idKey(id string) string { return s.ns + ":id:" + id }

// runQ runs a script of queue q: its keys are the queue's, and its first
// argument the namespace.
func (s *Store) runQ(ctx context.Context, sc *redis.Script, q string, args ...any) (any, error) {
	return s.runKey(ctx, sc, s.prefix(q), args...)
}

// runKey runs a script routed by key, with the namespace as its first
// argument; with Config.WaitReplicas, on the master of key's slot,
// followed by WAIT on the same connection.
func (s *Store) runKey(ctx context.Context, sc *redis.Script, key string, args ...any) (any, error) {
	argv := append([]any{s.ns}, args...)
	if s.waitReplicas == 0 {
		return sc.Run(ctx, s.c, []string{key}, argv...).Result()
	}
	node, err := s.master(ctx, key)
	if err != nil {
		return nil, err
	}
	var ev *redis.Cmd
	err = s.pipeWait(ctx, node, func(p redis.Pipeliner) { ev = sc.EvalSha(ctx, p, []string{key}, argv...) })
	if ev.Err() != nil && redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") {
		if err := sc.Load(ctx, node).Err(); err != nil {
			return nil, fmt.Errorf("loading a script: %w", err)
		}
		err = s.pipeWait(ctx, node, func(p redis.Pipeliner) { ev = sc.EvalSha(ctx, p, []string{key}, argv...) })
	}
	if ev.Err() != nil {
		return nil, ev.Err()
	}
	if err != nil {
		return nil, err
	}
	return ev.Val(), nil
}

// master returns the client of the master that holds key's slot (the
// store's client itself on a standalone server).
func (s *Store) master(ctx context.Context, key string) (redis.UniversalClient, error) {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return s.c, nil
	}
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("finding the master of %s: %w", key, err)
	}
	return m, nil
}

// pipeWait runs write's commands in one pipeline on node, then WAIT for
// Config.WaitReplicas replicas on the same connection. Errors of the
// commands are theirs to report (go-redis keeps each on its command); the
// error returned is the wait's.
func (s *Store) pipeWait(ctx context.Context, node redis.UniversalClient, write func(p redis.Pipeliner)) error {
	var w *redis.Cmd
	cmds, _ := node.Pipelined(ctx, func(p redis.Pipeliner) error { //nolint:errcheck // each command's error is read from it
		write(p)
		w = p.Do(ctx, "WAIT", s.waitReplicas, s.waitTimeout.Milliseconds())
		return nil
	})
	s.reloadOnMove(ctx, cmds)
	n, err := w.Int64()
	if err != nil {
		return fmt.Errorf("waiting for the replicas (WAIT): %w", err)
	}
	if n < int64(s.waitReplicas) {
		return fmt.Errorf("%w: %d of %d within %s", ErrNotReplicated, n, s.waitReplicas, s.waitTimeout)
	}
	return nil
}

// reloadOnMove makes a cluster client read the cluster's slots again when
// a command sent to a master the store chose itself (MasterForKey) failed
// as a command does when that node is gone or no longer holds the slot:
// the client's own retries, which reload the slots, are not in that path.
func (s *Store) reloadOnMove(ctx context.Context, cmds []redis.Cmder) {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return
	}
	for _, c := range cmds {
		err := c.Err()
		if err == nil || errors.Is(err, redis.Nil) {
			continue
		}
		var rerr redis.Error
		if !errors.As(err, &rerr) || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") ||
			redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "READONLY") {
			cc.ReloadState(ctx)
			return
		}
	}
}

// pipeline runs write(p, i) for each of keys (the key command i writes)
// in pipelines; with Config.WaitReplicas, one per master node, each
// followed by WAIT on its connection. Each command keeps its own error;
// the error returned is a pipeline's or a wait's, redis.Nil aside.
func (s *Store) pipeline(ctx context.Context, keys []string, write func(p redis.Pipeliner, i int)) error {
	if len(keys) == 0 {
		return nil
	}
	if s.waitReplicas == 0 {
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range keys {
				write(p, i)
			}
			return nil
		})
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	}
	type group struct {
		node redis.UniversalClient
		idx  []int
	}
	var groups []*group
	byNode := map[redis.UniversalClient]*group{}
	for i, k := range keys {
		node, err := s.master(ctx, k)
		if err != nil {
			return err
		}
		g, ok := byNode[node]
		if !ok {
			g = &group{node: node}
			byNode[node] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	var errs []error
	for _, g := range groups {
		errs = append(errs, s.pipeWait(ctx, g.node, func(p redis.Pipeliner) {
			for _, i := range g.idx {
				write(p, i)
			}
		}))
	}
	return errors.Join(errs...)
}

// runAudited reserves an audit entry ID (reserveAudit) and runs a script
// of queue q with it as the script's last argument.
func (s *Store) runAudited(ctx context.Context, sc *redis.Script, q string, args ...any) (any, error) {
	id, err := s.reserveAudit(ctx)
	if err != nil {
		return nil, err
	}
	return s.runQ(ctx, sc, q, append(args, id)...)
}

// reserveAudit reserves an audit entry ID (INCR N:auditseq). A mutation
// across queues reserves one and passes it to each queue's script, whose
// entries ListAudit merges into one. A reservation that fails changes
// nothing; a reserved ID no script uses is a gap in the IDs.
func (s *Store) reserveAudit(ctx context.Context) (int64, error) {
	var incr *redis.IntCmd
	err := s.pipeline(ctx, []string{s.ns + ":auditseq"}, func(p redis.Pipeliner, _ int) { incr = p.Incr(ctx, s.ns+":auditseq") })
	id, ierr := incr.Result()
	if err := errors.Join(ierr, err); err != nil {
		return 0, fmt.Errorf("reserving an audit entry ID: %w", err)
	}
	return id, nil
}

// addQueues records queues in N:queues, before the first script that
// writes a key of theirs: a queue listed there without keys reads as
// empty. Queues this store recorded already are skipped.
func (s *Store) addQueues(ctx context.Context, qs ...string) error {
	var add []any
	for _, q := range qs {
		if _, ok := s.known.Load(q); !ok {
			add = append(add, q)
		}
	}
	if len(add) == 0 {
		return nil
	}
	var sadd *redis.IntCmd
	err := s.pipeline(ctx, []string{s.ns + ":queues"}, func(p redis.Pipeliner, _ int) { sadd = p.SAdd(ctx, s.ns+":queues", add...) })
	if err := errors.Join(sadd.Err(), err); err != nil {
		return fmt.Errorf("recording queues: %w", err)
	}
	for _, q := range add {
		s.known.Store(q, struct{}{})
	}
	return nil
}

// allQueues returns every queue of the namespace, sorted: a cross-queue
// read costs one script per queue.
func (s *Store) allQueues(ctx context.Context) ([]string, error) {
	qs, err := s.c.SMembers(ctx, s.ns+":queues").Result()
	if err != nil {
		return nil, fmt.Errorf("reading the queues: %w", err)
	}
	slices.Sort(qs)
	return qs, nil
}

// queuesOf reads the queue of each task ID from the index (N:id:ID), in
// one pipeline: "" where there is none.
func (s *Store) queuesOf(ctx context.Context, ids []rdq.ID) ([]string, error) {
	out := make([]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Get(ctx, s.idKey(id.String()))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading the tasks' queues: %w", err)
	}
	for i, c := range cmds {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the queue of task %s: %w", ids[i], err)
		}
		out[i] = v
	}
	return out, nil
}

// queuesOfLeased is queuesOf for leases: the queue this store claimed a
// task in is known without the index (take forgets it).
func (s *Store) queuesOfLeased(ctx context.Context, ids []rdq.ID, take bool) ([]string, error) {
	out := make([]string, len(ids))
	var missing []rdq.ID
	var at []int
	for i, id := range ids {
		if take {
			out[i] = s.leased.take(id)
		} else {
			out[i] = s.leased.peek(id)
		}
		if out[i] == "" {
			missing = append(missing, id)
			at = append(at, i)
		}
	}
	qs, err := s.queuesOf(ctx, missing)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = qs[j]
	}
	return out, nil
}

// groups returns the distinct queues of items (sorted, "" left out) and
// the indexes of each queue's items, in order.
func groups(queues []string) ([]string, map[string][]int) {
	idx := map[string][]int{}
	var order []string
	for i, q := range queues {
		if q == "" {
			continue
		}
		if _, ok := idx[q]; !ok {
			order = append(order, q)
		}
		idx[q] = append(idx[q], i)
	}
	slices.Sort(order)
	return order, idx
}

// maxParallel bounds the scripts a cross-queue operation runs at once.
const maxParallel = 16

// parallel runs f for each queue, at most maxParallel at once, and joins
// their errors.
func parallel(ctx context.Context, qs []string, f func(ctx context.Context, q string) error) error {
	if len(qs) == 1 {
		return f(ctx, qs[0])
	}
	var wg sync.WaitGroup
	errs := make([]error, len(qs))
	sem := make(chan struct{}, maxParallel)
	for i, q := range qs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(ctx, q)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// scored is a task ID with its sort key in a sorted set, and its queue.
type scored struct {
	at    int64
	id, q string
}

func byScore(a, b scored) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id)) }
