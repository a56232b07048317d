package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func init() {
	usages["workers"] = `
Usage: rdq workers [--queue QUEUE]

Lists the workers registered in the store (every worker refreshes its entry
on an interval and removes it when it stops): id, host, pid, rdq version,
queues, handlers, execution slots, executions in flight, when it started and
when it was last seen. A worker that missed three refreshes is marked stale
(crashed, hung or cut off from the database) and no longer counts as serving
its handlers; its entry goes an hour later.

Then, for every queue and handler whose tasks wait with no live worker that
registered the handler, one line: how many tasks, and how long the oldest
has been due. Workers that do not register (other SDKs, older builds) are
not listed.
`
}

type jsonWorker struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	Queues    []string  `json:"queues"`
	Handlers  []string  `json:"handlers"`
	Slots     int       `json:"slots"`
	InFlight  int       `json:"in_flight"`
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"`
	Stale     bool      `json:"stale"`
}

type jsonUnserved struct {
	Queue          string    `json:"queue"`
	Handler        string    `json:"handler"`
	Tasks          int64     `json:"tasks"`
	OldestDue      time.Time `json:"oldest_due"`
	WaitingSeconds float64   `json:"waiting_seconds"`
}

func toJSONUnserved(us []store.UnservedHandler) []jsonUnserved {
	out := make([]jsonUnserved, 0, len(us))
	for _, u := range us {
		out = append(out, jsonUnserved{Queue: u.Queue, Handler: u.Handler, Tasks: u.Tasks,
			OldestDue: utc(u.OldestDue), WaitingSeconds: u.Waiting.Seconds()})
	}
	return out
}

// unservedLine says that u's tasks wait for a handler no live worker has.
func unservedLine(u store.UnservedHandler) string {
	oldest := "none due yet"
	if u.Waiting > 0 {
		oldest = "oldest " + fmtAge(u.Waiting) + " ago"
	}
	return fmt.Sprintf("%s %s of handler `%s` in queue `%s`, %s, no worker has registered it",
		fmtCount(u.Tasks), plural(u.Tasks, "task", "tasks"), cell(u.Handler), cell(u.Queue), oldest)
}

// fmtAge is d in its largest whole unit: 42s, 4m, 5h, 3d.
func fmtAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int64(d/time.Second), 1))
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dd", d/(24*time.Hour))
}

// printUnserved writes a line per unserved handler, after a blank line.
func printUnserved(w io.Writer, us []store.UnservedHandler) {
	if len(us) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, u := range us {
		fmt.Fprintln(w, unservedLine(u))
	}
}

// unserved returns the unserved handlers of queues (every queue when
// empty) and ok, or ok false when the store keeps no worker registry.
func (e *env) unserved(b *backend, queues ...string) ([]store.UnservedHandler, bool, error) {
	reg, ok := store.RegistryOf(b.Backend)
	if !ok {
		return nil, false, nil
	}
	us, err := reg.UnservedHandlers(e.ctx, store.UnservedParams{Queues: queues})
	if err != nil {
		return nil, false, err
	}
	return us, true, nil
}

func (e *env) workers(args []string) error {
	fs := newFlagSet("workers", &e.g, e.stderr, usages["workers"])
	queue := fs.String("queue", "", "only workers serving this `queue`")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("workers takes no arguments (got %q); to list the workers of a queue use --queue", pos[0])
	}
	if *queue != "" {
		if err := rdq.ValidateName("queue", *queue); err != nil {
			return err
		}
	}
	b, err := e.openBackend(false)
	if err != nil {
		return err
	}
	defer b.close()
	reg, ok := store.RegistryOf(b.Backend)
	if !ok {
		return fmt.Errorf("%s keeps no worker registry", b.desc)
	}
	ws, err := reg.Workers(e.ctx, store.WorkersParams{Queue: *queue})
	if err != nil {
		return err
	}
	var queues []string
	if *queue != "" {
		queues = []string{*queue}
	}
	us, err := reg.UnservedHandlers(e.ctx, store.UnservedParams{Queues: queues})
	if err != nil {
		return err
	}
	if e.g.json {
		out := make([]jsonWorker, 0, len(ws))
		for _, w := range ws {
			out = append(out, jsonWorker{ID: w.ID, Host: w.Host, PID: w.PID, Version: w.Version, Queues: w.Queues,
				Handlers: w.Handlers, Slots: w.Slots, InFlight: w.InFlight, StartedAt: utc(w.StartedAt),
				LastSeen: utc(w.LastSeen), Stale: w.Stale})
		}
		return writeJSON(e.stdout, map[string]any{"workers": out, "unserved": toJSONUnserved(us)})
	}
	if len(ws) == 0 {
		if *queue != "" {
			fmt.Fprintf(e.stdout, "no worker serving queue %s is registered in %s\n", cell(*queue), e.desc)
		} else {
			fmt.Fprintf(e.stdout, "no worker is registered in %s\n", e.desc)
		}
	} else {
		t := newTable(e.stdout, "ID", "STATE", "HOST", "PID", "VERSION", "QUEUES", "HANDLERS", "SLOTS", "IN FLIGHT", "STARTED", "LAST SEEN")
		for _, w := range ws {
			state := "live"
			if w.Stale {
				state = "STALE"
			}
			t.row(w.ID, state, dash(w.Host), strconv.Itoa(w.PID), dash(w.Version), oneLine(strings.Join(w.Queues, ","), 40),
				oneLine(strings.Join(w.Handlers, ","), 60), strconv.Itoa(w.Slots), strconv.Itoa(w.InFlight),
				fmtTime(w.StartedAt), fmtTime(w.LastSeen))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	printUnserved(e.stdout, us)
	return nil
}
