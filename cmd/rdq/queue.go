package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/srjn45/rdq/store"
)

func init() {
	usages["queue ls"] = `
Usage: rdq queue ls

Lists the paused queues.
`
	usages["queue pause"] = `
Usage: rdq queue pause QUEUE --reason TEXT [--actor NAME]

Pauses a queue on every worker: tasks keep arriving and executions already
running finish, but no new execution starts until 'rdq queue resume'.
Pausing a paused queue changes nothing.
`
	usages["queue resume"] = `
Usage: rdq queue resume QUEUE --reason TEXT [--actor NAME]

Resumes a paused queue. Resuming a running queue changes nothing.
`
	usages["queue breakers"] = `
Usage: rdq queue breakers [QUEUE]

Lists the paused handlers (of QUEUE, or of every queue) and their circuit
breaker state: open (no execution; a probe runs once the cool-off ends),
half_open (one probe task is running), with when and by whom each was
paused, how many times it tripped in a row, the failure fingerprint and
ratio that tripped it. A handler that is not listed is closed (running).
`
	usages["queue open"] = `
Usage: rdq queue open QUEUE HANDLER --reason TEXT [--actor NAME] [--cool-off DURATION]

Forces the circuit breaker of one handler open: every worker stops starting
its tasks at once; they wait with their attempt budgets untouched. Without
--cool-off the handler stays paused until 'rdq queue close'; with it, a
worker with the breaker on probes it once the cool-off ends, as after a
trip. Opening an open handler changes nothing.
`
	usages["queue close"] = `
Usage: rdq queue close QUEUE HANDLER --reason TEXT [--actor NAME]

Forces the circuit breaker of one handler closed: its waiting tasks become
claimable at once, on every worker. Closing a closed handler changes
nothing.
`
}

// queue dispatches 'rdq queue ls|pause|resume'.
func (e *env) queue(args []string) error {
	if isHelp(args) {
		return e.groupHelp("queue")
	}
	if len(args) == 0 {
		return usageErrorf("queue needs a command: ls, pause, resume, breakers, open or close (see 'rdq help queue')")
	}
	switch args[0] {
	case "ls", "list":
		return e.queueLs(args[1:])
	case "pause":
		return e.queueSetPaused("queue pause", args[1:], true)
	case "resume":
		return e.queueSetPaused("queue resume", args[1:], false)
	case "breakers":
		return e.queueBreakers(args[1:])
	case "open":
		return e.queueSetBreaker("queue open", args[1:], true)
	case "close":
		return e.queueSetBreaker("queue close", args[1:], false)
	}
	return usageErrorf("unknown queue command %q: use ls, pause, resume, breakers, open or close", args[0])
}

// pauser opens the store and returns it as a store.Pauser.
func (e *env) pauser() (store.Pauser, *backend, error) {
	b, err := e.openBackend(false)
	if err != nil {
		return nil, nil, err
	}
	p, ok := store.PauserOf(b.Backend)
	if !ok {
		b.close()
		return nil, nil, fmt.Errorf("%s cannot pause queues", b.desc)
	}
	return p, b, nil
}

func (e *env) queueLs(args []string) error {
	fs := newFlagSet("queue ls", &e.g, e.stderr, usages["queue ls"])
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("queue ls takes no arguments (got %q)", pos[0])
	}
	p, b, err := e.pauser()
	if err != nil {
		return err
	}
	defer b.close()
	paused, err := p.PausedQueues(e.ctx)
	if err != nil {
		return err
	}
	if e.g.json {
		return writeJSON(e.stdout, map[string]any{"paused": paused})
	}
	if len(paused) == 0 {
		fmt.Fprintf(e.stdout, "no queue is paused in %s\n", e.where())
		return nil
	}
	fmt.Fprintln(e.stdout, "PAUSED QUEUE")
	for _, q := range paused {
		fmt.Fprintln(e.stdout, q)
	}
	return nil
}

func (e *env) queueSetPaused(name string, args []string, pause bool) error {
	fs := newFlagSet(name, &e.g, e.stderr, usages[name])
	var actor, reason string
	fs.StringVar(&actor, "actor", "", "who is making the change, for the audit log (default $USER)")
	fs.StringVar(&reason, "reason", "", "why, for the audit log; required")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageErrorf("%s takes one queue name (got %d arguments)", name, len(pos))
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
	p, b, err := e.pauser()
	if err != nil {
		return err
	}
	defer b.close()
	e.announce(b.desc)
	params := store.PauseParams{Queue: pos[0], Actor: actor, Reason: reason}
	verb := "paused"
	if pause {
		err = p.PauseQueue(e.ctx, params)
	} else {
		verb = "resumed"
		err = p.ResumeQueue(e.ctx, params)
	}
	if err != nil {
		return err
	}
	if e.g.json {
		return writeJSON(e.stdout, map[string]any{"queue": pos[0], "paused": pause})
	}
	fmt.Fprintf(e.stdout, "queue %s %s\n", pos[0], verb)
	return nil
}

// handlerPauser opens the store and returns it as a store.HandlerPauser.
func (e *env) handlerPauser() (store.HandlerPauser, *backend, error) {
	b, err := e.openBackend(false)
	if err != nil {
		return nil, nil, err
	}
	p, ok := store.HandlerPauserOf(b.Backend)
	if !ok {
		b.close()
		return nil, nil, fmt.Errorf("%s cannot pause handlers", b.desc)
	}
	return p, b, nil
}

type jsonBreaker struct {
	Queue       string    `json:"queue"`
	Handler     string    `json:"handler"`
	State       string    `json:"state"`
	Since       time.Time `json:"since"`
	ProbeAt     time.Time `json:"probe_at,omitzero"`
	Trips       int       `json:"trips"`
	ProbeTask   string    `json:"probe_task,omitempty"`
	Actor       string    `json:"actor"`
	Reason      string    `json:"reason"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Ratio       float64   `json:"ratio,omitempty"`
}

func (e *env) queueBreakers(args []string) error {
	fs := newFlagSet("queue breakers", &e.g, e.stderr, usages["queue breakers"])
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 1 {
		return usageErrorf("queue breakers takes at most one queue name (got %d arguments)", len(pos))
	}
	queue := ""
	if len(pos) == 1 {
		queue = pos[0]
	}
	p, b, err := e.handlerPauser()
	if err != nil {
		return err
	}
	defer b.close()
	paused, err := p.PausedHandlers(e.ctx, queue)
	if err != nil {
		return err
	}
	if e.g.json {
		out := make([]jsonBreaker, len(paused))
		for i, hp := range paused {
			out[i] = jsonBreaker{Queue: hp.Queue, Handler: hp.Handler, State: string(hp.State), Since: utc(hp.Since),
				ProbeAt: utc(hp.ProbeAt), Trips: hp.Trips, Actor: hp.Actor, Reason: hp.Reason,
				Fingerprint: hp.Fingerprint, Ratio: hp.Ratio}
			if !hp.Probe.ID.IsZero() {
				out[i].ProbeTask = hp.Probe.ID.String()
			}
		}
		return writeJSON(e.stdout, map[string]any{"paused_handlers": out})
	}
	if len(paused) == 0 {
		fmt.Fprintf(e.stdout, "no handler is paused in %s: every breaker is closed\n", e.where())
		return nil
	}
	t := newTable(e.stdout, "QUEUE", "HANDLER", "STATE", "SINCE", "PROBE AT", "TRIPS", "ACTOR", "FINGERPRINT", "RATIO", "REASON")
	for _, hp := range paused {
		probeAt := "until closed"
		if !hp.ProbeAt.IsZero() {
			probeAt = fmtTime(hp.ProbeAt)
		}
		ratio := "-"
		if hp.Ratio > 0 {
			ratio = strconv.FormatFloat(hp.Ratio, 'f', 2, 64)
		}
		t.row(hp.Queue, hp.Handler, string(hp.State), fmtTime(hp.Since), probeAt, strconv.Itoa(hp.Trips),
			dash(oneLine(hp.Actor, 30)), dash(hp.Fingerprint), ratio, dash(oneLine(hp.Reason, 60)))
	}
	return t.flush()
}

func (e *env) queueSetBreaker(name string, args []string, open bool) error {
	fs := newFlagSet(name, &e.g, e.stderr, usages[name])
	var actor, reason string
	var coolOff time.Duration
	fs.StringVar(&actor, "actor", "", "who is making the change, for the audit log (default $USER)")
	fs.StringVar(&reason, "reason", "", "why, for the audit log; required")
	if open {
		fs.DurationVar(&coolOff, "cool-off", 0, "probe once this long has passed (default: stay open until closed)")
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 2 {
		return usageErrorf("%s takes a queue and a handler name (got %d arguments)", name, len(pos))
	}
	if coolOff < 0 {
		return usageErrorf("--cool-off %s is negative", coolOff)
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
	p, b, err := e.handlerPauser()
	if err != nil {
		return err
	}
	defer b.close()
	e.announce(b.desc)
	var changed bool
	state := "closed"
	if open {
		state = "open"
		changed, err = p.PauseHandler(e.ctx, store.PauseHandlerParams{Queue: pos[0], Handler: pos[1], CoolOff: coolOff, Actor: actor, Reason: reason})
	} else {
		changed, err = p.ResumeHandler(e.ctx, store.ResumeHandlerParams{Queue: pos[0], Handler: pos[1], Actor: actor, Reason: reason})
	}
	if err != nil {
		return err
	}
	if e.g.json {
		return writeJSON(e.stdout, map[string]any{"queue": pos[0], "handler": pos[1], "state": state, "changed": changed})
	}
	if changed {
		fmt.Fprintf(e.stdout, "breaker of %s/%s forced %s\n", pos[0], pos[1], state)
	} else {
		fmt.Fprintf(e.stdout, "breaker of %s/%s was already %s\n", pos[0], pos[1], state)
	}
	return nil
}
