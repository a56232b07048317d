package main

import (
	"fmt"

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
}

// queue dispatches 'rdq queue ls|pause|resume'.
func (e *env) queue(args []string) error {
	if isHelp(args) {
		return e.groupHelp("queue")
	}
	if len(args) == 0 {
		return usageErrorf("queue needs a command: ls, pause or resume (see 'rdq help queue')")
	}
	switch args[0] {
	case "ls", "list":
		return e.queueLs(args[1:])
	case "pause":
		return e.queueSetPaused("queue pause", args[1:], true)
	case "resume":
		return e.queueSetPaused("queue resume", args[1:], false)
	}
	return usageErrorf("unknown queue command %q: use ls, pause or resume", args[0])
}

// pauser opens the store and returns it as a store.Pauser.
func (e *env) pauser() (store.Pauser, *backend, error) {
	b, err := e.openBackend(false)
	if err != nil {
		return nil, nil, err
	}
	p, ok := b.Backend.(store.Pauser)
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
		fmt.Fprintln(e.stdout, "no queue is paused")
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
