package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

func init() {
	usages["tasks ls"] = `
Usage: rdq tasks ls [--state pending|retrying|in-flight|succeeded] [filters] [--limit N] [--page TOKEN]

Lists tasks that are not dead, one page at a time: pending (waiting for
their first attempt; soonest due first), retrying (waiting for a retry after
a failure; soonest due first), in-flight (running; lease expiring soonest
first) or succeeded (still retained; newest first). When there is more, the
last line gives the --page token for the next page (same state and filters).

Filters (combine with AND): --queue --handler --error-type --fingerprint --grep
`
	usages["tasks show"] = `
Usage: rdq tasks show ID [--payload]

Shows a task in any state with its every attempt across lives.
`
	usages["tasks key"] = `
Usage: rdq tasks key QUEUE KEY [--payload]

Shows the task holding an idempotency key in a queue.
`
	usages["tasks retry"] = `
Usage: rdq tasks retry ID... --reason TEXT [--actor NAME]

Makes waiting tasks (pending or retrying) due now, keeping their attempts
and history. Written to the audit log (action retry_now).
`
	usages["tasks cancel"] = `
Usage: rdq tasks cancel ID... --reason TEXT [--actor NAME]

Cancels waiting tasks (pending or retrying): each goes to the dead-letter
queue with a CANCELLED attempt naming the actor and the reason, where it can
be inspected, redriven or purged like any dead task. Nothing is deleted.
Running tasks cannot be cancelled. Written to the audit log (action cancel).
`
}

// liveTasks dispatches 'rdq tasks ls|show|key|retry|cancel'.
func (e *env) liveTasks(args []string) error {
	if isHelp(args) {
		return e.groupHelp("tasks")
	}
	if len(args) == 0 {
		return usageErrorf("tasks needs a command: ls, show, key, retry or cancel (see 'rdq help tasks')")
	}
	switch args[0] {
	case "ls", "list":
		return e.tasksLs(args[1:])
	case "show":
		return e.tasksShow("tasks show", args[1:])
	case "key":
		return e.tasksShow("tasks key", args[1:])
	case "retry":
		return e.tasksChange("tasks retry", args[1:])
	case "cancel":
		return e.tasksChange("tasks cancel", args[1:])
	}
	return usageErrorf("unknown tasks command %q: use ls, show, key, retry or cancel", args[0])
}

// openTasks opens the store as tasks.Tasks.
func (e *env) openTasks() (*tasks.Tasks, *backend, error) {
	b, err := e.openBackend(false)
	if err != nil {
		return nil, nil, err
	}
	lt, err := tasks.New(b.Backend, tasks.Config{})
	if err != nil {
		b.close()
		return nil, nil, fmt.Errorf("%s cannot list or change live tasks: %w", b.desc, err)
	}
	return lt, b, nil
}

var states = map[string]store.TaskState{
	"pending": store.StatePending, "retrying": store.StateRetrying,
	"in-flight": store.StateInFlight, "in_flight": store.StateInFlight, "succeeded": store.StateSucceeded,
}

// otherStates names the --state values that list tasks other than state's,
// so an empty listing points to where the tasks might be.
func otherStates(state string) string {
	var out []string
	for _, name := range []string{"pending", "retrying", "in-flight", "succeeded"} {
		if states[name] != states[state] {
			out = append(out, "--state "+name)
		}
	}
	return strings.Join(out, ", ")
}

func (e *env) tasksLs(args []string) error {
	fs := newFlagSet("tasks ls", &e.g, e.stderr, usages["tasks ls"])
	state := fs.String("state", "pending", "which tasks: pending, retrying, in-flight or succeeded")
	var f tasks.Filter
	fs.StringVar(&f.Queue, "queue", "", "only tasks of this `queue`")
	fs.StringVar(&f.Handler, "handler", "", "only tasks of this `handler`")
	fs.StringVar(&f.ErrorType, "error-type", "", "only tasks whose last error has this `type`")
	fs.StringVar(&f.Fingerprint, "fingerprint", "", "only tasks whose last error has this `fingerprint`")
	fs.StringVar(&f.MessageContains, "grep", "", "only tasks whose last error message contains `TEXT` (case-insensitive)")
	limit := fs.Int("limit", tasks.DefaultPageSize, fmt.Sprintf("tasks per page (1 to %d)", tasks.MaxPageSize))
	page := fs.String("page", "", "continue a listing with the `TOKEN` the previous page printed")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("tasks ls takes no arguments (got %q); to see one task use 'rdq tasks show ID'", pos[0])
	}
	st, ok := states[*state]
	if !ok {
		return usageErrorf("--state %q: use pending, retrying, in-flight or succeeded", *state)
	}
	if *limit < 1 || *limit > tasks.MaxPageSize {
		return usageErrorf("--limit %d: use 1 to %d", *limit, tasks.MaxPageSize)
	}
	if err := f.Validate(); err != nil {
		return err
	}
	lt, b, err := e.openTasks()
	if err != nil {
		return err
	}
	defer b.close()
	p, err := lt.List(e.ctx, st, f, tasks.ListOptions{PageSize: *limit, PageToken: *page})
	if err != nil {
		return err
	}
	// Waiting tasks no live worker can run, for the listing's queue and
	// handler, when the store keeps a worker registry.
	var us []store.UnservedHandler
	if st == store.StatePending || st == store.StateRetrying {
		var queues []string
		if f.Queue != "" {
			queues = []string{f.Queue}
		}
		if us, _, err = e.unserved(b, queues...); err != nil {
			return err
		}
		us = slices.DeleteFunc(us, func(u store.UnservedHandler) bool { return f.Handler != "" && u.Handler != f.Handler })
	}
	if e.g.json {
		out := make([]jsonTask, 0, len(p.Tasks))
		for _, t := range p.Tasks {
			out = append(out, toJSONTask(t, false))
		}
		return writeJSON(e.stdout, map[string]any{"state": st, "tasks": out, "next_page_token": p.NextPageToken, "unserved": toJSONUnserved(us)})
	}
	if len(p.Tasks) == 0 {
		if *page != "" {
			fmt.Fprintf(e.stdout, "no more %s tasks in %s\n", *state, e.where())
		} else {
			fmt.Fprintf(e.stdout, "no %s tasks in %s; other states: %s\n", *state, e.where(), otherStates(*state))
		}
		printUnserved(e.stdout, us)
		return nil
	}
	timeHeader := map[store.TaskState]string{
		store.StatePending: "DUE AT", store.StateRetrying: "DUE AT", store.StateInFlight: "LEASE UNTIL", store.StateSucceeded: "SUCCEEDED AT",
	}[st]
	t := newTable(e.stdout, "ID", timeHeader, "QUEUE", "HANDLER", "LIFE", "ATTEMPTS", "KEY", "LAST ERROR")
	for _, task := range p.Tasks {
		at := store.TaskCursorOf(st, task).At
		lastErr := ""
		if !task.LastError.IsZero() && (task.Status != rdq.StatusSucceeded || task.Attempts > 1) {
			// A task that succeeded at the first attempt of its life
			// failed only in an earlier one: no error is current.
			lastErr = oneLine(task.LastError.Type+": "+task.LastError.Message, 50)
		}
		t.row(task.ID.String(), fmtTime(at), task.Queue, task.Handler, fmt.Sprint(task.Life), fmt.Sprint(task.Attempts),
			dash(oneLine(task.IdempotencyKey, 30)), dash(lastErr))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if p.NextPageToken != "" {
		fmt.Fprintf(e.stdout, "\nnext page: --page %s\n", p.NextPageToken)
	}
	printUnserved(e.stdout, us)
	return nil
}

// tasksShow shows one task, by ID ('tasks show') or by queue and key
// ('tasks key').
func (e *env) tasksShow(name string, args []string) error {
	fs := newFlagSet(name, &e.g, e.stderr, usages[name])
	payloadOnly := fs.Bool("payload", false, "print only the raw payload")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	byKey := name == "tasks key"
	switch {
	case byKey && len(pos) != 2:
		return usageErrorf("tasks key takes a queue and a key (got %d arguments)", len(pos))
	case !byKey && len(pos) != 1:
		return usageErrorf("tasks show takes one task id (got %d arguments)", len(pos))
	}
	var id rdq.ID
	if !byKey {
		ids, err := parseIDs(pos)
		if err != nil {
			return err
		}
		id = ids[0]
	}
	lt, b, err := e.openTasks()
	if err != nil {
		return err
	}
	defer b.close()
	if byKey {
		t, err := lt.ByKey(e.ctx, pos[0], pos[1])
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w (no task holds it now; a task purged by retention keeps its key for a while without being shown)", err)
			}
			return err
		}
		id = t.ID
	}
	d, err := lt.Show(e.ctx, id)
	if err != nil {
		return notFoundHint(err)
	}
	if *payloadOnly {
		return e.writePayload(d.Task.Payload)
	}
	if e.g.json {
		attempts := make([]jsonAttempt, 0, len(d.Attempts))
		for _, a := range d.Attempts {
			attempts = append(attempts, toJSONAttempt(a))
		}
		return writeJSON(e.stdout, map[string]any{"task": toJSONTask(d.Task, true), "attempts": attempts})
	}
	return writeDetail(e.stdout, d)
}

// tasksChange runs 'tasks retry' or 'tasks cancel' on the ids given.
func (e *env) tasksChange(name string, args []string) error {
	fs := newFlagSet(name, &e.g, e.stderr, usages[name])
	var actor, reason string
	fs.StringVar(&actor, "actor", "", "who is making the change, for the audit log (default $USER)")
	fs.StringVar(&reason, "reason", "", "why, for the audit log; required")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) == 0 {
		return usageErrorf("%s takes one or more task ids (find them with 'rdq tasks ls')", name)
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	if actor == "" {
		actor = e.getenv("USER")
	}
	if actor == "" {
		return usageErrorf("pass --actor NAME: every change is attributed to someone, and $USER is not set")
	}
	if reason == "" {
		return usageErrorf("pass --reason TEXT: the audit log records why")
	}
	lt, b, err := e.openTasks()
	if err != nil {
		return err
	}
	defer b.close()
	e.announce(b.desc)
	change := tasks.Change{Actor: actor, Reason: reason}
	verb := "cancelled"
	var errs []error
	if name == "tasks retry" {
		verb = "made due now"
		errs, err = lt.RetryNow(e.ctx, ids, change)
	} else {
		errs, err = lt.Cancel(e.ctx, ids, change)
	}
	if err != nil {
		return err
	}
	var failed []jsonTaskError
	var first error
	done := 0
	for i, err := range errs {
		if err == nil {
			done++
			continue
		}
		if first == nil {
			first = err
		}
		failed = append(failed, jsonTaskError{ID: ids[i].String(), Error: err.Error()})
	}
	if e.g.json {
		if err := writeJSON(e.stdout, map[string]any{"changed": done, "failed": failed}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%d of %d %s %s\n", done, len(ids), plural(int64(len(ids)), "task", "tasks"), verb)
		for _, f := range failed {
			fmt.Fprintf(e.stdout, "  %s: %s\n", f.ID, f.Error)
		}
	}
	if first != nil {
		return &codedError{code: exitCode(first), err: fmt.Errorf("%d of %d tasks not %s: %w", len(failed), len(ids), verb, first)}
	}
	return nil
}
