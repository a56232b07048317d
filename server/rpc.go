package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
)

// rpcPolicy says, for one RPC, which role its caller needs, over which
// queues, and what the store must implement to serve it.
type rpcPolicy struct {
	role  Role
	scope scope
	needs capability
}

// rpcPolicies holds the policy of every RPC of the rdq.v1 service, by
// method name. A Service method runs only through serve, which refuses a
// method without a policy here; TestEveryRPCHasAPolicyAndARoute keeps it
// in step with the service descriptor.
var rpcPolicies = map[string]rpcPolicy{
	"Submit":       {RoleSubmitter, scopeEachTask, needsStore},
	"SubmitBatch":  {RoleSubmitter, scopeEachTask, needsStore},
	"GetTask":      {RoleSubmitter, scopeTask, needsStore},
	"ListDead":     {RoleOperator, scopeQueueOrAll, needsDLQ},
	"DeadGroups":   {RoleOperator, scopeQueueOrAll, needsDLQ},
	"ShowDead":     {RoleOperator, scopeTask, needsStore},
	"Redrive":      {RoleOperator, scopeTasks, needsDLQ},
	"Purge":        {RoleOperator, scopeTasks, needsDLQ},
	"ListAudit":    {RoleOperator, scopeAll, needsDLQ},
	"QueueStats":   {RoleOperator, scopeAny, needsDLQ},
	"PauseQueue":   {RoleAdmin, scopeQueue, needsPauser},
	"ResumeQueue":  {RoleAdmin, scopeQueue, needsPauser},
	"ListTasks":    {RoleOperator, scopeQueueOrAll, needsLiveTasks},
	"TaskByKey":    {RoleOperator, scopeQueue, needsLiveTasks},
	"RetryTasks":   {RoleOperator, scopeTasks, needsLiveTasks},
	"CancelTasks":  {RoleOperator, scopeTasks, needsLiveTasks},
	"ListBreakers": {RoleOperator, scopeQueueOrOwn, needsStore}, // without store.HandlerPauser, none to list
	"SetBreaker":   {RoleAdmin, scopeQueue, needsHandlerPauser},
	"ListWorkers":  {RoleOperator, scopeQueueOrOwn, needsRegistry},
	"GetSeries":    {RoleOperator, scopeQueueOrOwn, needsSeries},
}

// scope is where an RPC's caller needs the RPC's role.
type scope int

const (
	// scopeEachTask: in the queue of each submitted task. A task the
	// caller may not submit is refused; in a batch, that item alone.
	scopeEachTask scope = iota + 1
	// scopeTask: in the queue of the task the request names by ID. A
	// caller without any role there is told the task is not found, as for
	// one that does not exist, so that IDs reveal nothing of the queues
	// outside its grants; one with a lesser role is denied.
	scopeTask
	// scopeTasks: in the queue of each task the request names by ID that
	// exists, as for scopeTask, or in the queue of its filter (every
	// queue, when the filter names none). A named task of a queue where
	// the caller holds no role is answered exactly as a named ID of no
	// task is (a per-item not_found, say), never by failing the request.
	scopeTasks
	// scopeQueue: in the queue the request names, which it must name.
	scopeQueue
	// scopeQueueOrAll: in the queue the request names or, when it names
	// none, in every queue (a "*" grant).
	scopeQueueOrAll
	// scopeQueueOrOwn: in the queue the request names or, when it names
	// none, nowhere in particular: the response shows only the queues
	// where the caller holds the role.
	scopeQueueOrOwn
	// scopeAll: in every queue (a "*" grant).
	scopeAll
	// scopeAny: in at least one queue; the response shows only the queues
	// where the caller holds the role.
	scopeAny
)

// capability is a store interface an RPC needs beyond store.Store.
type capability int

const (
	needsStore         capability = iota // store.Store alone
	needsDLQ                             // store.Admin, for package dlq
	needsPauser                          // store.Pauser
	needsLiveTasks                       // store.LiveTasks, for package tasks
	needsHandlerPauser                   // store.HandlerPauser
	needsRegistry                        // store.WorkerRegistry
	needsSeries                          // store.SeriesReader
)

// provides returns nil if the store implements what c names, and an
// unimplemented error saying what it lacks if not.
func (s *Service) provides(c capability) error {
	switch c {
	case needsStore:
		return nil
	case needsDLQ:
		if s.dlq == nil {
			return errorf(CodeUnimplemented, "the store does not implement the dead-letter queue interface (store.Admin)")
		}
	case needsPauser:
		if s.pauser == nil {
			return errorf(CodeUnimplemented, "the store cannot pause queues (it does not implement store.Pauser)")
		}
	case needsLiveTasks:
		if s.live == nil {
			return errorf(CodeUnimplemented, "the store cannot list or change live tasks (it does not implement store.LiveTasks)")
		}
	case needsHandlerPauser:
		if s.handlers == nil {
			return errorf(CodeUnimplemented, "the store cannot pause handlers (it does not implement store.HandlerPauser)")
		}
	case needsRegistry:
		if s.registry == nil {
			return errorf(CodeUnimplemented, "the store keeps no worker registry (it does not implement store.WorkerRegistry)")
		}
	case needsSeries:
		if s.series == nil {
			return errorf(CodeUnimplemented, "the store keeps no series of attempts (it does not implement store.SeriesReader)")
		}
	default:
		return fmt.Errorf("server: unknown capability %d", c)
	}
	return nil
}

// call is one RPC being served: its name, its caller and its policy. Its
// methods check the caller's access to what the request names, under the
// RPC's policy.
type call struct {
	s      *Service
	method string
	p      *Principal
	policy rpcPolicy
}

// serve runs the RPC method: it takes the caller from ctx (unauthenticated
// without one), checks that the store provides what the method's policy
// needs (unimplemented if not), then runs fn, which validates the request,
// checks access through the call, and does the work. Whatever fn returns
// as an error leaves as an *Error (classify), internal ones logged.
func serve[Res any](ctx context.Context, s *Service, method string, fn func(c *call) (Res, error)) (Res, error) {
	var zero Res
	policy, ok := rpcPolicies[method]
	if !ok {
		return zero, s.fail(ctx, method, fmt.Errorf("server: RPC %s has no access policy", method))
	}
	p, err := s.principal(ctx)
	if err != nil {
		return zero, err
	}
	if err := s.provides(policy.needs); err != nil {
		return zero, s.fail(ctx, method, err)
	}
	res, err := fn(&call{s: s, method: method, p: p, policy: policy})
	if err != nil {
		return zero, s.fail(ctx, method, err)
	}
	return res, nil
}

func (s *Service) principal(ctx context.Context) (*Principal, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return nil, errorf(CodeUnauthenticated, "missing or invalid bearer token")
	}
	return p, nil
}

// misuse is the error of an RPC that checks access in a way its scope
// does not have: a defect of the server, never of the request.
func (c *call) misuse(check string) error {
	return fmt.Errorf("server: RPC %s checks access by %s, which its scope (%d) does not provide", c.method, check, c.policy.scope)
}

// queue checks the caller's role in queue, the queue the request names
// ("" for none), as the RPC's scope says. Validate the name first: the
// check does, for a scope that needs a queue, only as a safeguard.
func (c *call) queue(queue string) error {
	role := c.policy.role
	switch c.policy.scope {
	case scopeEachTask, scopeQueue:
		if err := rdq.ValidateName("queue", queue); err != nil {
			return err
		}
		if !c.p.Can(role, queue) {
			return denied(c.p, role, queue)
		}
	case scopeQueueOrAll, scopeTasks:
		return authzQueue(c.p, role, queue)
	case scopeAll:
		if queue != "" {
			return c.misuse("a queue")
		}
		return authzQueue(c.p, role, "")
	case scopeQueueOrOwn:
		if queue != "" && !c.p.Can(role, queue) {
			return denied(c.p, role, queue)
		}
	case scopeAny:
		if queue != "" {
			return c.misuse("a queue")
		}
		if !slices.ContainsFunc(c.p.Grants, func(g Grant) bool { return g.Role >= role }) {
			return errorf(CodePermissionDenied, fmt.Sprintf("%s needs the %s role on at least one queue", c.p.Name, role))
		}
	default:
		return c.misuse("a queue")
	}
	return nil
}

// sees reports whether the caller holds the RPC's role in queue: what a
// response of scope scopeQueueOrOwn or scopeAny may show.
func (c *call) sees(queue string) bool { return c.p.Can(c.policy.role, queue) }

// task returns the task rawID names, with its history, if the caller may
// see it (scopeTask).
func (c *call) task(ctx context.Context, rawID string) (*rdq.Task, []rdq.Attempt, error) {
	if c.policy.scope != scopeTask {
		return nil, nil, c.misuse("one task")
	}
	id, err := rdq.ParseID(rawID)
	if err != nil {
		return nil, nil, err
	}
	t, attempts, err := c.s.store.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, notFound(id, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("task %s: %w", id, err)
	}
	if err := authzTask(c.p, c.policy.role, t); err != nil {
		return nil, nil, err
	}
	return t, attempts, nil
}

// named is the tasks a request names by ID (scopeTasks), as the RPC acts
// on them: each task of a queue where the caller holds no role stands in
// as an ID that names no task, so that the request goes on exactly as for
// an ID that names no task, and every answer about it (status, per-item
// result, message, count) is the one a missing task gets.
type named struct {
	ids []rdq.ID // as the request names them
	act []rdq.ID // what the RPC acts on: ids, with the foreign ones replaced
}

// item is the per-item error of ids[i] for err, the error of act[i]: with a
// stand-in's ID written as the ID it replaces.
func (n named) item(i int, err error) *rdqv1.Error {
	e := errorProto(err)
	if n.act[i] != n.ids[i] {
		e.Message = strings.ReplaceAll(e.Message, n.act[i].String(), n.ids[i].String())
	}
	return e
}

// tasks checks the caller's role over the tasks ids names that exist
// (scopeTasks), and returns them as the RPC acts on them (named). A task
// of a queue where the caller holds a lesser role fails the request as
// denied; one of a queue where it holds none is answered as missing. Those
// of a dead-letter RPC are looked up a page of dead tasks at a time, the
// others (and the named tasks that are not dead) one by one.
func (c *call) tasks(ctx context.Context, ids []rdq.ID) (named, error) {
	n := named{ids: ids, act: ids}
	if c.policy.scope != scopeTasks {
		return n, c.misuse("task IDs")
	}
	role := c.policy.role
	if c.p.CanAll(role) {
		return n, nil
	}
	foreign := map[rdq.ID]bool{}
	check := func(t *rdq.Task) error {
		if !c.p.Can(RoleSubmitter, t.Queue) {
			foreign[t.ID] = true
			return nil
		}
		return authzTask(c.p, role, t)
	}
	seen := make(map[rdq.ID]bool, len(ids))
	if c.policy.needs == needsDLQ {
		f := dlq.Filter{IDs: ids}
		page, err := c.s.dlq.List(ctx, f, dlq.ListOptions{PageSize: dlq.MaxPageSize})
		for {
			if err != nil {
				return n, err
			}
			for _, t := range page.Tasks {
				if err := check(t); err != nil {
					return n, err
				}
				seen[t.ID] = true
			}
			if page.NextPageToken == "" {
				break
			}
			page, err = c.s.dlq.List(ctx, f, dlq.ListOptions{PageSize: dlq.MaxPageSize, PageToken: page.NextPageToken})
		}
	}
	// The per-item result of a task that does not qualify (not_found,
	// not_dead, not_pending) must not reveal tasks of other queues.
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		t, _, err := c.s.store.Get(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return n, err
		default:
			if err := check(t); err != nil {
				return n, err
			}
		}
	}
	if len(foreign) == 0 {
		return n, nil
	}
	standIn := make(map[rdq.ID]rdq.ID, len(foreign))
	n.act = make([]rdq.ID, len(ids))
	for i, id := range ids {
		n.act[i] = id
		if !foreign[id] {
			continue
		}
		sub, ok := standIn[id]
		if !ok {
			sub = rdq.NewID()
			standIn[id] = sub
			c.s.log.InfoContext(ctx, "rdq api: a task of a queue outside the caller's grants, answered as missing",
				"method", c.method, "principal", c.p.Name, "task", id.String())
		}
		n.act[i] = sub
	}
	return n, nil
}

func denied(p *Principal, role Role, queue string) *Error {
	if queue == "" {
		return errorf(CodePermissionDenied, fmt.Sprintf("%s needs the %s role on every queue (a \"*\" grant) for this; name a queue to narrow the request", p.Name, role))
	}
	return errorf(CodePermissionDenied, fmt.Sprintf("%s needs the %s role on queue %q", p.Name, role, queue))
}

// authzQueue checks role on queue, or on every queue when queue is empty.
func authzQueue(p *Principal, role Role, queue string) error {
	if queue == "" {
		if !p.CanAll(role) {
			return denied(p, role, "")
		}
		return nil
	}
	if !p.Can(role, queue) {
		return denied(p, role, queue)
	}
	return nil
}

// notFound is the error for task id that does not exist, or that the
// caller may not know about.
func notFound(id rdq.ID, cause error) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("task %s not found", id), Err: cause}
}

// authzTask checks that p holds role on t's queue. A caller without any
// role there gets not_found, exactly as for a task that does not exist, so
// that task IDs do not reveal which tasks (and queues) exist outside its
// grants; a caller with a lesser role gets permission_denied.
func authzTask(p *Principal, role Role, t *rdq.Task) error {
	if !p.Can(RoleSubmitter, t.Queue) {
		return notFound(t.ID, nil)
	}
	if !p.Can(role, t.Queue) {
		return denied(p, role, t.Queue)
	}
	return nil
}
