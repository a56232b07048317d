package main

import (
	"fmt"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func init() {
	usages["series"] = `
Usage: rdq series [--queue QUEUE] [--handler HANDLER] [--since AGE|TIME] [--by minute|hour]

Counts the attempts that finished per minute or hour, with their outcomes:
attempts, successes, retryable failures (retried, or a lease lost),
permanent failures, and the tasks dead-lettered. It reads the counts the
store keeps for the console's charts, over every queue and handler (or the
one --queue and --handler name), summed into one line per minute or hour;
quiet ones are left out and counted at the end. --json prints every bucket
of every queue and handler instead.

--since is an age (15m, 1h, 1d) or a time (RFC 3339, or a date); the
default is 1h. --by defaults to minute for up to 6 hours, hour beyond; a
series holds at most 1,440 buckets and reaches back at most 8 days.
`
}

// seriesAutoMinutes is the longest span --by defaults to minutes for.
const seriesAutoMinutes = 6 * time.Hour

type jsonSeriesCounts struct {
	Start        time.Time `json:"start"`
	Attempts     int64     `json:"attempts"`
	Successes    int64     `json:"successes"`
	Retryable    int64     `json:"retryable"`
	Permanent    int64     `json:"permanent"`
	DeadLettered int64     `json:"dead_lettered"`
}

type jsonSeriesLine struct {
	Queue   string             `json:"queue"`
	Handler string             `json:"handler"`
	Buckets []jsonSeriesCounts `json:"buckets"`
}

func (e *env) series(args []string) error {
	fs := newFlagSet("series", &e.g, e.stderr, usages["series"])
	queue := fs.String("queue", "", "only this `queue`")
	handler := fs.String("handler", "", "only this `handler`")
	since := fs.String("since", "1h", "from this `AGE or TIME` (15m, 1h, 1d, RFC 3339, a date)")
	by := fs.String("by", "", "bucket `width`: minute or hour (default: minute up to 6h, else hour)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("series takes no arguments (got %q); to count one queue use --queue", pos[0])
	}
	for _, n := range []struct{ what, name string }{{"queue", *queue}, {"handler", *handler}} {
		if n.name != "" {
			if err := rdq.ValidateName(n.what, n.name); err != nil {
				return &codedError{code: exitUsage, err: err}
			}
		}
	}
	now := time.Now()
	from, err := parseTime("--since", *since, now)
	if err != nil {
		return err
	}
	var width time.Duration
	switch *by {
	case "minute":
		width = time.Minute
	case "hour":
		width = time.Hour
	case "":
		width = time.Minute
		if now.Sub(from) > seriesAutoMinutes {
			width = time.Hour
		}
	default:
		return usageErrorf("--by %q: use minute or hour", *by)
	}
	p, err := store.SeriesWindow(width, from, time.Time{}, now)
	if err != nil {
		return &codedError{code: exitUsage, err: err}
	}
	p.Queue, p.Handler = *queue, *handler
	b, err := e.openBackend(false)
	if err != nil {
		return err
	}
	defer b.close()
	sr, ok := store.SeriesReaderOf(b.Backend)
	if !ok {
		return fmt.Errorf("%s keeps no series of attempts", b.desc)
	}
	s, err := sr.Series(e.ctx, p)
	if err != nil {
		return err
	}
	if e.g.json {
		lines := make([]jsonSeriesLine, 0, len(s.Lines))
		for _, l := range s.Lines {
			jl := jsonSeriesLine{Queue: l.Queue, Handler: l.Handler, Buckets: make([]jsonSeriesCounts, len(l.Counts))}
			for i, c := range l.Counts {
				jl.Buckets[i] = jsonSeriesCounts{Start: s.Start.Add(time.Duration(i) * s.Width).UTC(), Attempts: c.Attempts,
					Successes: c.Successes, Retryable: c.Retryable, Permanent: c.Permanent, DeadLettered: c.DeadLettered}
			}
			lines = append(lines, jl)
		}
		out := map[string]any{"start": s.Start.UTC(), "width_seconds": int64(s.Width / time.Second), "lines": lines}
		if !s.PartialUntil.IsZero() {
			out["partial_until"] = s.PartialUntil.UTC()
		}
		return writeJSON(e.stdout, out)
	}
	partial := func() {
		if !s.PartialUntil.IsZero() {
			fmt.Fprintf(e.stdout, "attempts before %s may be missing: the store is still counting them from its history; run again to fill them in\n",
				fmtTime(s.PartialUntil))
		}
	}
	sums := make([]store.SeriesCounts, p.Buckets)
	var total store.SeriesCounts
	for _, l := range s.Lines {
		for i, c := range l.Counts {
			sums[i] = sums[i].Add(c)
			total = total.Add(c)
		}
	}
	unit, layout := "minute", "2006-01-02 15:04Z"
	if s.Width == time.Hour {
		unit = "hour"
	}
	what := "every queue"
	switch {
	case *queue != "" && *handler != "":
		what = fmt.Sprintf("handler %s of queue %s", cell(*handler), cell(*queue))
	case *queue != "":
		what = "queue " + cell(*queue)
	case *handler != "":
		what = "handler " + cell(*handler) + " in every queue"
	}
	if total.IsZero() {
		fmt.Fprintf(e.stdout, "no attempt finished in %s since %s\n", what, fmtTime(s.Start))
		partial()
		return nil
	}
	t := newTable(e.stdout, "TIME", "ATTEMPTS", "SUCCEEDED", "RETRYABLE", "PERMANENT", "DEAD")
	quiet := 0
	for i, c := range sums {
		if c.IsZero() {
			quiet++
			continue
		}
		t.row(s.Start.Add(time.Duration(i)*s.Width).UTC().Format(layout), fmtCount(c.Attempts), fmtCount(c.Successes),
			fmtCount(c.Retryable), fmtCount(c.Permanent), fmtCount(c.DeadLettered))
	}
	t.row("total", fmtCount(total.Attempts), fmtCount(total.Successes), fmtCount(total.Retryable),
		fmtCount(total.Permanent), fmtCount(total.DeadLettered))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\n%s, per %s since %s", what, unit, fmtTime(s.Start))
	if quiet > 0 {
		fmt.Fprintf(e.stdout, "; %d quiet %s not shown", quiet, plural(int64(quiet), unit, unit+"s"))
	}
	fmt.Fprintln(e.stdout)
	partial()
	return nil
}
