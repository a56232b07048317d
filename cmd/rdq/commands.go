package main

import (
	"bufio"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/store"
)

var usages = map[string]string{
	"migrate": `
Usage: rdq migrate

Creates rdq's tables, or upgrades them to this version. Safe to run
concurrently and repeatedly.
`,
	"stats": `
Usage: rdq stats [--window 24h]

Per queue: pending, in flight, dead, succeeded within the window, and how
long the longest-waiting due task has been due. Then, when the store keeps
a worker registry, a line for every handler whose tasks wait with no live
worker that registered it (see 'rdq help workers').
`,
	"dlq ls": `
Usage: rdq dlq ls [filters] [--limit N] [--page TOKEN]

Lists dead tasks, newest dead first, one page at a time. When there is more,
the last line gives the --page token for the next page (same filters).

Filters (combine with AND): --queue --handler --error-type --fingerprint
--since --until --grep
`,
	"dlq count": `
Usage: rdq dlq count [filters]

Prints how many dead tasks match the filters.
`,
	"dlq show": `
Usage: rdq dlq show ID [--payload]

Shows a task (dead or not) with its every attempt across lives: outcome,
error, worker, times and stack traces. --payload prints only the raw
payload, e.g. to edit it and redrive with --payload-file:

  rdq dlq show ID --payload > task.json
`,
	"dlq groups": `
Usage: rdq dlq groups [filters]

Groups dead tasks by failure fingerprint (error type plus the message with
ids and numbers stripped), largest first: one bug's many victims are one
line. Redrive or purge a group with --fingerprint.
`,
	"dlq redrive": `
Usage: rdq dlq redrive ID... [--payload-file FILE] --reason TEXT [flags]
       rdq dlq redrive [filters] | --all  --reason TEXT [flags]

Puts dead tasks back to PENDING with the retry policy reset (attempts 0,
life + 1), keeping their history. Name tasks by id, or select them with
filters (--fingerprint for a group from 'rdq dlq groups'); --all selects the
whole dead-letter queue. A redrive by filter runs in chunks, asks for
confirmation on a terminal unless --yes, and shows progress on a terminal.
Every redrive is written to the audit log with --actor and --reason.

--payload-file replaces the payload of a single task before redriving it
(audit action edit_payload with the old and new SHA-256); "-" reads stdin.
`,
	"dlq purge": `
Usage: rdq dlq purge ID... --reason TEXT [flags]
       rdq dlq purge [filters] | --all  --reason TEXT [flags]

Deletes dead tasks and their history for good. Only DEAD tasks are ever
deleted. Asks for confirmation on a terminal unless --yes; on a script
(stdin not a terminal) it refuses without --yes. Written to the audit log.
`,
	"dlq retention": `
Usage: rdq dlq retention --older-than AGE [filters] [flags]

Deletes dead tasks that went dead more than AGE ago (e.g. 720h or 30d),
with audit action "retention". rdq never expires dead tasks by itself; this
command is the explicit retention. Asks for confirmation unless --yes.
`,
	"audit ls": `
Usage: rdq audit ls [--actor NAME] [--action ACTION] [--since TIME] [--until TIME] [--limit N] [--before-id ID]

Lists audit entries, newest first: who redrove, purged, edited, paused or
resumed what, when, and why. Actions: redrive, edit_payload, purge,
retention (dead-letter queue changes), pause, resume (queue pauses).
`,
}

func (e *env) migrate(args []string) error {
	fs := newFlagSet("migrate", &e.g, e.stderr, usages["migrate"])
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("migrate takes no arguments (got %q)", pos[0])
	}
	b, err := e.openBackend(true) // migrates
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	defer b.close()
	if e.g.json {
		return writeJSON(e.stdout, map[string]any{"migrated": true, "database": b.desc})
	}
	fmt.Fprintf(e.stdout, "migrated %s\n", b.desc)
	return nil
}

func (e *env) stats(args []string) error {
	fs := newFlagSet("stats", &e.g, e.stderr, usages["stats"])
	window := dlq.DefaultSucceededWindow
	fs.Var(durationFlag{&window}, "window", "count tasks that succeeded within this `window`")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("stats takes no arguments (got %q)", pos[0])
	}
	if window <= 0 {
		return usageErrorf("--window must be positive")
	}
	q, b, err := e.openDLQBackend(dlq.Config{})
	if err != nil {
		return err
	}
	defer b.close()
	stats, err := q.Stats(e.ctx, window)
	if err != nil {
		return err
	}
	us, _, err := e.unserved(b)
	if err != nil {
		return err
	}
	if e.g.json {
		out := make([]jsonStats, 0, len(stats))
		for _, s := range stats {
			out = append(out, jsonStats{Queue: s.Queue, Pending: s.Pending, InFlight: s.InFlight, Dead: s.Dead,
				Succeeded: s.Succeeded, OldestDueAgeSecond: s.OldestDueAge.Seconds()})
		}
		return writeJSON(e.stdout, map[string]any{"window_seconds": window.Seconds(), "queues": out, "unserved": toJSONUnserved(us)})
	}
	if len(stats) == 0 {
		fmt.Fprintf(e.stdout, "no tasks in %s\n", e.where())
		return nil
	}
	t := newTable(e.stdout, "QUEUE", "PENDING", "IN FLIGHT", "DEAD", fmt.Sprintf("SUCCEEDED (%s)", fmtWindow(window)), "OLDEST DUE")
	for _, s := range stats {
		oldest := "-"
		if s.OldestDueAge > 0 {
			oldest = fmtDuration(s.OldestDueAge)
		}
		t.row(s.Queue, fmtCount(s.Pending), fmtCount(s.InFlight), fmtCount(s.Dead), fmtCount(s.Succeeded), oldest)
	}
	if err := t.flush(); err != nil {
		return err
	}
	printUnserved(e.stdout, us)
	return nil
}

func fmtWindow(d time.Duration) string {
	if d%(24*time.Hour) == 0 && d >= 48*time.Hour {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}

func (e *env) dlqLs(args []string) error {
	fs := newFlagSet("dlq ls", &e.g, e.stderr, usages["dlq ls"])
	var ff filterFlags
	ff.register(fs)
	limit := fs.Int("limit", dlq.DefaultPageSize, fmt.Sprintf("tasks per page (1 to %d)", dlq.MaxPageSize))
	page := fs.String("page", "", "continue a listing with the `TOKEN` the previous page printed")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("dlq ls takes no arguments (got %q); to see one task use 'rdq dlq show ID'", pos[0])
	}
	if *limit < 1 || *limit > dlq.MaxPageSize {
		return usageErrorf("--limit %d: use 1 to %d", *limit, dlq.MaxPageSize)
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	q, closeFn, err := e.openDLQ()
	if err != nil {
		return err
	}
	defer closeFn()
	p, err := q.List(e.ctx, f, dlq.ListOptions{PageSize: *limit, PageToken: *page})
	if err != nil {
		return err
	}
	if e.g.json {
		tasks := make([]jsonTask, 0, len(p.Tasks))
		for _, t := range p.Tasks {
			tasks = append(tasks, toJSONTask(t, false))
		}
		return writeJSON(e.stdout, map[string]any{"tasks": tasks, "next_page_token": p.NextPageToken})
	}
	if len(p.Tasks) == 0 {
		switch {
		case *page != "":
			fmt.Fprintf(e.stdout, "no more dead tasks in %s\n", e.where())
		case f.IsEmpty():
			fmt.Fprintf(e.stdout, "no dead tasks in %s\n", e.where())
		default:
			fmt.Fprintf(e.stdout, "no dead tasks match %s in %s\n", f, e.where())
		}
		return nil
	}
	t := newTable(e.stdout, "ID", "DEAD AT", "QUEUE", "HANDLER", "LIFE", "ATTEMPTS", "ERROR TYPE", "MESSAGE")
	for _, task := range p.Tasks {
		t.row(task.ID.String(), fmtTime(task.FinishedAt), task.Queue, task.Handler,
			fmt.Sprint(task.Life), fmt.Sprint(task.Attempts), dash(task.LastError.Type), dash(oneLine(task.LastError.Message, 60)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if p.NextPageToken != "" {
		fmt.Fprintf(e.stdout, "\nnext page: --page %s\n", p.NextPageToken)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// filterOnly parses the flags of a command that takes a dead-task filter and
// nothing else, and opens the DLQ. The caller calls closeFn when done.
func (e *env) filterOnly(name string, args []string) (dlq.Filter, *dlq.DLQ, func(), error) {
	fs := newFlagSet(name, &e.g, e.stderr, usages[name])
	var ff filterFlags
	ff.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return dlq.Filter{}, nil, nil, flagErr(err)
	}
	if len(pos) > 0 {
		return dlq.Filter{}, nil, nil, usageErrorf("%s takes no arguments (got %q)", name, pos[0])
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return dlq.Filter{}, nil, nil, err
	}
	q, closeFn, err := e.openDLQ()
	if err != nil {
		return dlq.Filter{}, nil, nil, err
	}
	return f, q, closeFn, nil
}

func (e *env) dlqCount(args []string) error {
	f, q, closeFn, err := e.filterOnly("dlq count", args)
	if err != nil {
		return err
	}
	defer closeFn()
	n, err := q.Count(e.ctx, f)
	if err != nil {
		return err
	}
	if e.g.json {
		return writeJSON(e.stdout, map[string]any{"count": n})
	}
	fmt.Fprintln(e.stdout, n)
	return nil
}

func (e *env) dlqShow(args []string) error {
	fs := newFlagSet("dlq show", &e.g, e.stderr, usages["dlq show"])
	payloadOnly := fs.Bool("payload", false, "print only the raw payload")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageErrorf("dlq show takes one task id (got %d arguments)", len(pos))
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	q, closeFn, err := e.openDLQ()
	if err != nil {
		return err
	}
	defer closeFn()
	d, err := q.Show(e.ctx, ids[0])
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

// writePayload writes a task's payload: the raw bytes to a file or pipe,
// escaped on a terminal, where they are for reading.
func (e *env) writePayload(p []byte) error {
	w := e.rawStdout
	if isTerminal(e.rawStdout) {
		w = e.stdout
	}
	if _, err := w.Write(p); err != nil {
		return fmt.Errorf("writing payload: %w", err)
	}
	return nil
}

func notFoundHint(err error) error {
	if exitCode(err) == exitNotFound {
		return fmt.Errorf("%w (it never existed, or was purged; find tasks with 'rdq dlq ls')", err)
	}
	return err
}

func writeDetail(w io.Writer, d dlq.Detail) error {
	t := d.Task
	kv := newTable(w)
	row := func(k, v string) { kv.row(k+":", v) }
	row("id", t.ID.String())
	row("queue", t.Queue)
	row("handler", t.Handler)
	row("status", string(t.Status))
	if t.Life == 0 {
		row("life", "0 (never redriven)")
	} else {
		row("life", fmt.Sprintf("%d (redriven %d %s)", t.Life, t.Life, plural(int64(t.Life), "time", "times")))
	}
	row("attempts", fmt.Sprintf("%d in this life, %d in all", t.Attempts, len(d.Attempts)))
	switch {
	case t.MaxAttempts == rdq.Unlimited:
		row("max attempts", "unlimited (the task's own, within the queue's limit)")
	case t.MaxAttempts > 0:
		row("max attempts", fmt.Sprintf("%d (the task's own, within the queue's limit)", t.MaxAttempts))
	}
	if t.Timeout > 0 {
		row("timeout", fmtDuration(t.Timeout)+" (the task's own, within the queue's limit)")
	}
	if t.Snoozes > 0 {
		row("snoozes", fmt.Sprintf("%d in this life (no attempt spent)", t.Snoozes))
	}
	row("created", fmtTime(t.CreatedAt))
	row("updated", fmtTime(t.UpdatedAt))
	switch t.Status {
	case rdq.StatusDead:
		row("dead at", fmtTime(t.FinishedAt))
	case rdq.StatusSucceeded:
		row("succeeded at", fmtTime(t.FinishedAt))
	case rdq.StatusPending:
		row("next attempt", fmtTime(t.NextAttemptAt))
	case rdq.StatusInFlight:
		row("lease", fmt.Sprintf("%s until %s (token %d)", t.LeaseOwner, fmtTime(t.LeaseExpiresAt), t.LeaseToken))
	}
	sum := sha256Hex(t.Payload)
	row("payload", fmt.Sprintf("%d bytes, %s, sha256 %s", len(t.Payload), dash(t.ContentType), sum[:16]))
	row("headers", fmtHeaders(t.Headers))
	if t.IdempotencyKey != "" {
		row("idempotency key", t.IdempotencyKey)
	}
	if !t.LastError.IsZero() {
		last := oneLine(t.LastError.Type+": "+t.LastError.Message, 200)
		if life, ok := lastFailedLife(d.Attempts); ok && life < t.Life {
			last += fmt.Sprintf(" (in life %d, before the task was redriven)", life)
		}
		row("last error", last)
		row("fingerprint", t.LastError.Fingerprint)
	}
	if err := kv.flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nhistory (%d %s):\n", len(d.Attempts), plural(int64(len(d.Attempts)), "attempt", "attempts"))
	for _, a := range d.Attempts {
		if a.Outcome == rdq.OutcomeCancelled {
			// Nothing ran: WorkerID names who cancelled the task.
			fmt.Fprintf(w, "\n#%d  life %d  %s  by %s  %s\n", a.Number, a.Life, a.Outcome, dash(a.WorkerID), fmtTime(a.StartedAt))
		} else {
			fmt.Fprintf(w, "\n#%d  life %d  %s  worker %s  %s  took %s\n", a.Number, a.Life, a.Outcome,
				dash(a.WorkerID), fmtTime(a.StartedAt), fmtDuration(a.FinishedAt.Sub(a.StartedAt)))
		}
		if a.ErrorType != "" || a.Message != "" {
			fmt.Fprintf(w, "    %s: %s\n", dash(a.ErrorType), indent(a.Message, "    "))
		}
		if a.Stack != "" {
			fmt.Fprintf(w, "    stack:\n      %s\n", indent(strings.TrimRight(a.Stack, "\n"), "      "))
		}
	}
	return nil
}

// lastFailedLife returns the life of the latest failed attempt in history.
func lastFailedLife(history []rdq.Attempt) (int, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Outcome != rdq.OutcomeSuccess {
			return history[i].Life, true
		}
	}
	return 0, false
}

func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func (e *env) dlqGroups(args []string) error {
	f, q, closeFn, err := e.filterOnly("dlq groups", args)
	if err != nil {
		return err
	}
	defer closeFn()
	groups, err := q.Groups(e.ctx, f)
	if err != nil {
		return err
	}
	if e.g.json {
		out := make([]jsonGroup, 0, len(groups))
		for _, g := range groups {
			out = append(out, jsonGroup{Fingerprint: g.Fingerprint, ErrorType: g.ErrorType, Message: g.Message,
				Count: g.Count, FirstSeen: utc(g.FirstSeen), LastSeen: utc(g.LastSeen), ExampleID: g.ExampleID.String()})
		}
		return writeJSON(e.stdout, map[string]any{"groups": out})
	}
	if len(groups) == 0 {
		if f.IsEmpty() {
			fmt.Fprintf(e.stdout, "no dead tasks in %s\n", e.where())
		} else {
			fmt.Fprintf(e.stdout, "no dead tasks match %s in %s\n", f, e.where())
		}
		return nil
	}
	t := newTable(e.stdout, "COUNT", "FINGERPRINT", "ERROR TYPE", "FIRST SEEN", "LAST SEEN", "EXAMPLE", "MESSAGE")
	for _, g := range groups {
		t.row(fmtCount(g.Count), dash(g.Fingerprint), dash(g.ErrorType), fmtTime(g.FirstSeen), fmtTime(g.LastSeen),
			g.ExampleID.String(), dash(oneLine(g.Message, 60)))
	}
	return t.flush()
}

// mutationFlags are shared by redrive, purge and retention.
type mutationFlags struct {
	actor, reason string
	yes, dryRun   bool
	chunk         int
	parallel      int
	getenv        func(string) string
}

func (e *env) registerMutation(fs *flag.FlagSet, m *mutationFlags) {
	m.getenv = e.getenv
	fs.StringVar(&m.actor, "actor", "", "who is making the change, for the audit log (default $USER)")
	fs.StringVar(&m.reason, "reason", "", "why, for the audit log (a ticket, an incident, the fix deployed); required")
	fs.BoolVar(&m.yes, "yes", false, "do not ask for confirmation")
	fs.BoolVar(&m.dryRun, "dry-run", false, "count what would change, change nothing")
	fs.IntVar(&m.chunk, "chunk-size", 0, "tasks per transaction in a bulk change (default: the database's own, 50000 on SQLite, else 5000)")
	fs.IntVar(&m.parallel, "parallelism", dlq.DefaultParallelism, "transactions of a bulk change running at once")
}

func (m *mutationFlags) config() dlq.Config {
	return dlq.Config{ChunkSize: m.chunk, Parallelism: m.parallel}
}

func (m *mutationFlags) check() error {
	if m.chunk < 0 || m.chunk > dlq.MaxChunkSize {
		return usageErrorf("--chunk-size %d: use 1 to %d, or 0 for the database's own", m.chunk, dlq.MaxChunkSize)
	}
	if m.parallel < 1 || m.parallel > dlq.MaxParallelism {
		return usageErrorf("--parallelism %d: use 1 to %d", m.parallel, dlq.MaxParallelism)
	}
	if m.actor == "" {
		m.actor = m.getenv("USER")
	}
	if m.dryRun {
		return nil
	}
	if m.actor == "" {
		return usageErrorf("pass --actor NAME: every change is attributed to someone, and $USER is not set")
	}
	if m.reason == "" {
		return usageErrorf("pass --reason TEXT: the audit log records why (a ticket, an incident, the fix deployed)")
	}
	return nil
}

func (e *env) dlqRedrive(args []string) error {
	fs := newFlagSet("dlq redrive", &e.g, e.stderr, usages["dlq redrive"])
	var ff filterFlags
	ff.register(fs)
	var m mutationFlags
	e.registerMutation(fs, &m)
	all := fs.Bool("all", false, "select the whole dead-letter queue")
	maxN := fs.Int64("max", 0, "redrive at most `N` tasks (0: no limit)")
	maxLife := fs.Int("max-life", 0, "leave dead the tasks already redriven `N` times (0: no cap)")
	var delay, spread time.Duration
	fs.Var(durationFlag{&delay}, "delay", "postpone the first attempt by this `duration`")
	fs.Var(durationFlag{&spread}, "spread", "spread the tasks' first attempts at random over this `window` (e.g. 10m)")
	payloadFile := fs.String("payload-file", "", "replace the payload of the single task named with this `FILE`'s content (- for stdin)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if err := m.check(); err != nil {
		return err
	}
	if *maxN < 0 {
		return usageErrorf("--max %d is negative", *maxN)
	}
	if *maxLife < 0 {
		return usageErrorf("--max-life %d is negative", *maxLife)
	}
	opts := dlq.RedriveOptions{
		Actor: m.actor, Reason: m.reason, DryRun: m.dryRun, All: *all, Max: *maxN,
		Delay: delay, Spread: spread, MaxLife: *maxLife,
	}
	if *maxLife == 0 {
		opts.MaxLife = -1
	}
	if len(pos) > 0 {
		if ff.set() || *all {
			return usageErrorf("name tasks by id or select them with filters, not both")
		}
		if *maxN != 0 {
			return usageErrorf("--max applies to a redrive by filter, not to tasks named by id")
		}
		ids, err := parseIDs(pos)
		if err != nil {
			return err
		}
		var payload []byte
		if *payloadFile != "" {
			if len(ids) != 1 {
				return usageErrorf("--payload-file edits one task: name exactly one id (got %d)", len(ids))
			}
			if payload, err = e.readPayload(*payloadFile); err != nil {
				return err
			}
		}
		return e.redriveIDs(ids, payload, m, opts)
	}
	if *payloadFile != "" {
		return usageErrorf("--payload-file edits one task: name it by id")
	}
	if !ff.set() && !*all {
		return usageErrorf("select what to redrive: task ids, a filter (--queue, --handler, --error-type, --fingerprint, --since, --until, --grep), or --all")
	}
	if ff.set() && *all {
		return usageErrorf("--all selects every dead task: drop it, or drop the filters")
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	q, b, err := e.openDLQBackend(m.config())
	if err != nil {
		return err
	}
	defer b.close()
	if m.dryRun {
		res, err := q.Redrive(e.ctx, f, opts)
		if err != nil {
			return err
		}
		return e.printRedrive(res, selectionOf(f), nil)
	}
	e.announce(b.desc)
	n, err := q.Count(e.ctx, f)
	if err != nil {
		return err
	}
	if n == 0 {
		return e.printRedrive(dlq.RedriveResult{MaxLife: max(opts.MaxLife, 0)}, selectionOf(f), nil)
	}
	what := fmt.Sprintf("%s dead %s %s", fmtCount(capN(n, *maxN)), plural(capN(n, *maxN), "task", "tasks"), selectionOf(f))
	if err := e.confirm("redrive", what, m.yes); err != nil {
		return err
	}
	opts.Progress = e.progress("redriven")
	res, err := q.Redrive(e.ctx, f, opts)
	e.endProgress(opts.Progress)
	if err != nil {
		return err
	}
	return e.printRedrive(res, selectionOf(f), nil)
}

// selectionOf describes a selection after "N dead tasks".
func selectionOf(f dlq.Filter) string {
	if f.IsEmpty() {
		return "in the whole dead-letter queue"
	}
	return "matching " + f.String()
}

func capN(n, limit int64) int64 {
	if limit > 0 && n > limit {
		return limit
	}
	return n
}

func (e *env) readPayload(path string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = e.stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageErrorf("--payload-file: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, rdq.MaxPayloadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading --payload-file: %w", err)
	}
	if len(b) > rdq.MaxPayloadBytes {
		return nil, usageErrorf("--payload-file is over the payload limit of %d bytes", rdq.MaxPayloadBytes)
	}
	return b, nil
}

func (e *env) redriveIDs(ids []rdq.ID, payload []byte, m mutationFlags, opts dlq.RedriveOptions) error {
	q, b, err := e.openDLQBackend(m.config())
	if err != nil {
		return err
	}
	defer b.close()
	var res dlq.RedriveResult
	if payload != nil {
		err = q.EditAndRedrive(e.ctx, ids[0], payload, opts)
		var te dlq.TaskError
		switch {
		case err == nil:
			res = dlq.RedriveResult{DryRun: opts.DryRun, Matched: 1, Redriven: 1, MaxLife: max(opts.MaxLife, 0)}
		case errors.As(err, &te):
			res = dlq.RedriveResult{DryRun: opts.DryRun, MaxLife: max(opts.MaxLife, 0), Failed: []dlq.TaskError{te}}
		default:
			return err
		}
	} else {
		res, err = q.RedriveTasks(e.ctx, ids, opts)
		if err != nil {
			return err
		}
	}
	if !m.dryRun && res.Redriven > 0 {
		e.announce(b.desc) // the database changed
	}
	if !e.g.json && !res.DryRun && len(ids) == 1 && len(res.Failed) == 1 {
		// One task named, not redriven: one line says why.
		f := res.Failed[0]
		return &codedError{code: exitCode(f.Err), err: errors.New(e.redriveFailure(f, b))}
	}
	if err := e.printRedrive(res, "", b); err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return &codedError{code: exitCode(res.Failed[0].Err), err: fmt.Errorf("%d of %d %s not redriven", len(res.Failed), len(ids), plural(int64(len(ids)), "task", "tasks"))}
	}
	return nil
}

// redriveFailure says in one line why the task of f was not redriven,
// without the chain of wrapped errors behind it.
func (e *env) redriveFailure(f dlq.TaskError, b *backend) string {
	switch {
	case errors.Is(f.Err, store.ErrNotFound):
		return fmt.Sprintf("task %s not found in %s", f.ID, e.where())
	case errors.Is(f.Err, store.ErrNotDead):
		status := "not dead"
		if t, _, err := b.Get(e.ctx, f.ID); err == nil {
			status = fmt.Sprintf("%s, not dead", t.Status)
		}
		return fmt.Sprintf("task %s in %s is %s: only a dead task can be redriven", f.ID, e.where(), status)
	case errors.Is(f.Err, store.ErrRedriveLimit):
		return fmt.Sprintf("task %s reached its redrive limit and stays dead", f.ID)
	}
	return f.Error()
}

// printRedrive reports res; b, if not nil, is asked why a task failed.
func (e *env) printRedrive(res dlq.RedriveResult, selection string, b *backend) error {
	if e.g.json {
		return writeJSON(e.stdout, jsonRedrive{DryRun: res.DryRun, Matched: res.Matched, Redriven: res.Redriven,
			AtLimit: res.AtLimit, MaxLife: res.MaxLife, Failed: failedJSON(res.Failed)})
	}
	for _, f := range res.Failed {
		why := f.Error()
		if b != nil {
			why = e.redriveFailure(f, b)
		}
		fmt.Fprintf(e.stderr, "rdq: not redriven: %s\n", why)
	}
	limit := ""
	if res.AtLimit > 0 {
		limit = fmt.Sprintf("; %s stayed dead at the redrive limit (redriven %d times already)", fmtCount(res.AtLimit), res.MaxLife)
	}
	sel := ""
	if selection != "" {
		sel = " " + selection
	}
	if res.DryRun {
		fmt.Fprintf(e.stdout, "dry run: would redrive %s of %s dead %s%s%s; nothing was changed\n",
			fmtCount(res.Redriven), fmtCount(res.Matched), plural(res.Matched, "task", "tasks"), sel, limit)
		return nil
	}
	if res.Matched == 0 && len(res.Failed) == 0 {
		fmt.Fprintf(e.stdout, "no dead tasks%s in %s; nothing was changed\n", sel, e.where())
		return nil
	}
	if res.Matched == 0 {
		return nil // every named task failed, each reported above
	}
	fmt.Fprintf(e.stdout, "redrove %s of %s dead %s%s%s\n", fmtCount(res.Redriven), fmtCount(res.Matched),
		plural(res.Matched, "task", "tasks"), sel, limit)
	return nil
}

func (e *env) dlqPurge(args []string) error {
	fs := newFlagSet("dlq purge", &e.g, e.stderr, usages["dlq purge"])
	var ff filterFlags
	ff.register(fs)
	var m mutationFlags
	e.registerMutation(fs, &m)
	all := fs.Bool("all", false, "select the whole dead-letter queue")
	maxN := fs.Int64("max", 0, "purge at most `N` tasks (0: no limit)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if err := m.check(); err != nil {
		return err
	}
	if *maxN < 0 {
		return usageErrorf("--max %d is negative", *maxN)
	}
	var f dlq.Filter
	switch {
	case len(pos) > 0:
		if ff.set() || *all {
			return usageErrorf("name tasks by id or select them with filters, not both")
		}
		if f.IDs, err = parseIDs(pos); err != nil {
			return err
		}
	case !ff.set() && !*all:
		return usageErrorf("select what to purge: task ids, a filter (--queue, --handler, --error-type, --fingerprint, --since, --until, --grep), or --all")
	case ff.set() && *all:
		return usageErrorf("--all selects every dead task: drop it, or drop the filters")
	default:
		if f, err = ff.filter(time.Now()); err != nil {
			return err
		}
	}
	q, b, err := e.openDLQBackend(m.config())
	if err != nil {
		return err
	}
	defer b.close()
	opts := dlq.PurgeOptions{Actor: m.actor, Reason: m.reason, DryRun: true, All: *all, Max: *maxN}
	count, err := q.Purge(e.ctx, f, opts)
	if err != nil {
		return err
	}
	if m.dryRun || count.Purged == 0 {
		return e.printPurge("purge", count, selectionOf(f))
	}
	e.announce(b.desc)
	what := fmt.Sprintf("%s dead %s %s", fmtCount(count.Purged), plural(count.Purged, "task", "tasks"), selectionOf(f))
	if err := e.confirm("permanently delete", what, m.yes); err != nil {
		return err
	}
	opts.DryRun = false
	opts.Progress = e.progress("purged")
	res, err := q.Purge(e.ctx, f, opts)
	e.endProgress(opts.Progress)
	if err != nil {
		return err
	}
	return e.printPurge("purge", res, selectionOf(f))
}

func (e *env) dlqRetention(args []string) error {
	fs := newFlagSet("dlq retention", &e.g, e.stderr, usages["dlq retention"])
	var ff filterFlags
	ff.register(fs)
	var m mutationFlags
	e.registerMutation(fs, &m)
	var olderThan time.Duration
	fs.Var(durationFlag{&olderThan}, "older-than", "delete tasks dead for longer than this `age` (e.g. 720h or 30d); required")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("dlq retention takes no arguments (got %q)", pos[0])
	}
	if olderThan <= 0 {
		return usageErrorf("pass --older-than AGE (e.g. 30d): how long dead tasks are kept")
	}
	if ff.until != "" {
		return usageErrorf("--until does not apply: --older-than sets the cut-off")
	}
	if m.reason == "" {
		m.reason = fmt.Sprintf("dead for longer than %s", olderThan)
	}
	if err := m.check(); err != nil {
		return err
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	q, b, err := e.openDLQBackend(m.config())
	if err != nil {
		return err
	}
	defer b.close()
	opts := dlq.RetentionOptions{OlderThan: olderThan, Filter: f, Actor: m.actor, Reason: m.reason, DryRun: true}
	count, err := q.Retention(e.ctx, opts)
	if err != nil {
		return err
	}
	sel := fmt.Sprintf("that went dead more than %s ago", olderThan)
	if !f.IsEmpty() {
		sel = "matching " + f.String() + " " + sel
	}
	if m.dryRun || count.Purged == 0 {
		return e.printPurge("retention", count, sel)
	}
	e.announce(b.desc)
	if err := e.confirm("permanently delete", fmt.Sprintf("%s dead %s %s", fmtCount(count.Purged), plural(count.Purged, "task", "tasks"), sel), m.yes); err != nil {
		return err
	}
	opts.DryRun = false
	opts.Progress = e.progress("deleted")
	res, err := q.Retention(e.ctx, opts)
	e.endProgress(opts.Progress)
	if err != nil {
		return err
	}
	return e.printPurge("retention", res, sel)
}

func (e *env) printPurge(action string, res dlq.PurgeResult, selection string) error {
	if e.g.json {
		return writeJSON(e.stdout, jsonPurge{DryRun: res.DryRun, Matched: res.Matched, Purged: res.Purged})
	}
	switch {
	case res.Matched == 0:
		fmt.Fprintf(e.stdout, "no dead tasks %s in %s; nothing was changed\n", selection, e.where())
	case res.DryRun:
		fmt.Fprintf(e.stdout, "dry run: %s would delete %s of %s dead %s %s; nothing was changed\n",
			action, fmtCount(res.Purged), fmtCount(res.Matched), plural(res.Matched, "task", "tasks"), selection)
	default:
		fmt.Fprintf(e.stdout, "deleted %s of %s dead %s %s\n", fmtCount(res.Purged), fmtCount(res.Matched),
			plural(res.Matched, "task", "tasks"), selection)
	}
	return nil
}

func (e *env) auditLs(args []string) error {
	fs := newFlagSet("audit ls", &e.g, e.stderr, usages["audit ls"])
	actor := fs.String("actor", "", "only entries by this `actor`")
	action := fs.String("action", "", "only entries of this `action` (redrive, edit_payload, purge, retention, pause, resume)")
	since := fs.String("since", "", "only entries at or after `TIME` (RFC 3339, a date, or an age like 2h or 7d)")
	until := fs.String("until", "", "only entries before `TIME`")
	limit := fs.Int("limit", dlq.DefaultPageSize, fmt.Sprintf("entries to show (1 to %d)", dlq.MaxPageSize))
	beforeID := fs.Int64("before-id", 0, "continue a listing below this entry `ID`")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("audit ls takes no arguments (got %q)", pos[0])
	}
	if *limit < 1 || *limit > dlq.MaxPageSize {
		return usageErrorf("--limit %d: use 1 to %d", *limit, dlq.MaxPageSize)
	}
	now := time.Now()
	aq := dlq.AuditQuery{Actor: *actor, Action: *action, BeforeID: *beforeID, Limit: *limit}
	if aq.Since, err = parseTime("--since", *since, now); err != nil {
		return err
	}
	if aq.Until, err = parseTime("--until", *until, now); err != nil {
		return err
	}
	q, closeFn, err := e.openDLQ()
	if err != nil {
		return err
	}
	defer closeFn()
	entries, err := q.Audit(e.ctx, aq)
	if err != nil {
		return err
	}
	if e.g.json {
		out := make([]jsonAudit, 0, len(entries))
		for _, a := range entries {
			out = append(out, toJSONAudit(a))
		}
		return writeJSON(e.stdout, map[string]any{"entries": out})
	}
	if len(entries) == 0 {
		fmt.Fprintf(e.stdout, "no audit entries match in %s\n", e.where())
		return nil
	}
	t := newTable(e.stdout, "ID", "AT", "ACTOR", "ACTION", "COUNT", "SELECTION", "REASON", "DETAILS")
	for _, a := range entries {
		t.row(fmt.Sprint(a.ID), fmtTime(a.At), dash(a.Actor), a.Action, fmtCount(a.Count), fmtAuditSelection(a),
			dash(oneLine(a.Reason, 60)), fmtDetails(a.Details))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(entries) == *limit {
		fmt.Fprintf(e.stdout, "\nolder entries: --before-id %d\n", entries[len(entries)-1].ID)
	}
	return nil
}

// openDLQ opens the backend and a DLQ on it.
func (e *env) openDLQ() (*dlq.DLQ, func(), error) {
	q, b, err := e.openDLQBackend(dlq.Config{})
	if err != nil {
		return nil, nil, err
	}
	return q, b.close, nil
}

func (e *env) openDLQBackend(cfg dlq.Config) (*dlq.DLQ, *backend, error) {
	b, err := e.openBackend(false)
	if err != nil {
		return nil, nil, err
	}
	// The store itself, not the wrapper: dlq looks for its optional
	// interfaces (its bulk chunk size).
	q, err := dlq.New(b.Backend, cfg)
	if err != nil {
		b.close()
		return nil, nil, err
	}
	return q, b, nil
}

// where names the store the command opened, without secrets, for messages
// that report finding nothing.
func (e *env) where() string { return cmp.Or(e.desc, "the database") }

// announce says on stderr which database a mutation is about to change.
func (e *env) announce(desc string) {
	fmt.Fprintf(e.stderr, "rdq: database: %s\n", desc)
}

// confirm asks before a bulk change. Without --yes it needs an answer on a
// terminal; a script must pass --yes.
func (e *env) confirm(verb, what string, yes bool) error {
	if yes {
		return nil
	}
	if !isTerminal(e.stdin) {
		return usageErrorf("refusing to %s %s without confirmation: stdin is not a terminal; pass --yes to confirm (try --dry-run first)", verb, what)
	}
	fmt.Fprintf(e.stderr, "%s %s? [y/N] ", capitalize(verb), what)
	if e.in == nil {
		e.in = bufio.NewReader(e.stdin)
	}
	line, err := e.in.ReadString('\n')
	if err != nil && line == "" {
		return usageErrorf("no answer on stdin: pass --yes to confirm without a prompt")
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return &codedError{code: exitError, err: errors.New("aborted; nothing was changed")}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// progress returns a progress callback drawing on stderr when it is a
// terminal, or nil.
func (e *env) progress(verb string) func(done, total int64) {
	if !isTerminal(e.rawStderr) {
		return nil
	}
	// The progress line redraws itself with a CR, so it goes to the raw
	// stream; it holds only the fixed verb and numbers.
	return func(done, total int64) {
		fmt.Fprintf(e.rawStderr, "\r%s %s / %s", verb, fmtCount(done), fmtCount(total))
	}
}

func (e *env) endProgress(fn func(done, total int64)) {
	if fn != nil {
		fmt.Fprintln(e.rawStderr)
	}
}
