package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
)

// globals are the flags every command accepts, before or after its name.
type globals struct {
	databaseURL string
	schema      string
	json        bool
}

// newFlagSet returns a flag set for one command that also accepts the
// global flags, defaulting to what was given before the command name.
func newFlagSet(name string, g *globals, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The global flags keep what was given before the command (or the
	// environment); their help shows no default, so no URL is printed.
	fs.Var(globalString{&g.databaseURL}, "database-url", "database `URL` (postgres://…, redis://… or sqlite:PATH; default $RDQ_DATABASE_URL, else the per-user SQLite file)")
	fs.Var(globalString{&g.schema}, "schema", "PostgreSQL `schema` holding rdq's tables (default $RDQ_SCHEMA, else the URL's schema parameter, else rdq)")
	fs.Var(globalBool{&g.json}, "json", "print JSON instead of tables")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), strings.TrimLeft(usage, "\n"))
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// globalString is a string flag whose current value is not its default:
// help output does not print it.
type globalString struct{ p *string }

func (v globalString) String() string     { return "" }
func (v globalString) Set(s string) error { *v.p = s; return nil }

// globalBool is globalString for a boolean flag.
type globalBool struct{ p *bool }

func (v globalBool) String() string   { return "" }
func (v globalBool) IsBoolFlag() bool { return true }
func (v globalBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("use true or false")
	}
	*v.p = b
	return nil
}

// parseInterspersed parses flags and positional arguments in any order
// ("show ID --json" as well as "show --json ID"); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// filterFlags are the dead-task selection flags shared by ls, count,
// groups, redrive and purge.
type filterFlags struct {
	queue, handler, errorType, fingerprint string
	since, until, grep                     string
	lifeMin, lifeBelow                     int
}

func (ff *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&ff.queue, "queue", "", "only tasks of this `queue`")
	fs.StringVar(&ff.handler, "handler", "", "only tasks of this `handler`")
	fs.StringVar(&ff.errorType, "error-type", "", "only tasks whose last error has this `type` (e.g. timeout, panic, *net.OpError)")
	fs.StringVar(&ff.fingerprint, "fingerprint", "", "only tasks whose last error has this `fingerprint` (see dlq groups)")
	fs.StringVar(&ff.since, "since", "", "only tasks that went dead at or after `TIME` (RFC 3339, a date, or an age like 2h or 7d)")
	fs.StringVar(&ff.until, "until", "", "only tasks that went dead before `TIME` (same forms as --since)")
	fs.StringVar(&ff.grep, "grep", "", "only tasks whose last error message contains `TEXT` (case-insensitive)")
	fs.IntVar(&ff.lifeMin, "life-min", 0, "only tasks redriven at least `N` times (life >= N; 1 finds tasks that died again after a redrive)")
	fs.IntVar(&ff.lifeBelow, "life-below", 0, "only tasks redriven fewer than `N` times (life < N; 1 finds tasks never redriven)")
}

func (ff *filterFlags) set() bool {
	return ff.queue != "" || ff.handler != "" || ff.errorType != "" || ff.fingerprint != "" ||
		ff.since != "" || ff.until != "" || ff.grep != "" || ff.lifeMin != 0 || ff.lifeBelow != 0
}

func (ff *filterFlags) filter(now time.Time) (dlq.Filter, error) {
	f := dlq.Filter{
		Queue: ff.queue, Handler: ff.handler, ErrorType: ff.errorType,
		Fingerprint: ff.fingerprint, MessageContains: ff.grep,
		LifeMin: ff.lifeMin, LifeBelow: ff.lifeBelow,
	}
	var err error
	if f.DeadAfter, err = parseTime("--since", ff.since, now); err != nil {
		return f, err
	}
	if f.DeadBefore, err = parseTime("--until", ff.until, now); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	return f, nil
}

// parseTime reads a point in time: RFC 3339, a date (midnight UTC), or an
// age before now ("90m", "2h", "7d", "1d12h").
func parseTime(flagName, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	d, err := parseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, usageErrorf("%s %q: use an RFC 3339 time (2025-01-02T15:04:05Z), a date (2025-01-02), or an age like 2h or 7d", flagName, s)
	}
	return now.Add(-d), nil
}

// parseDuration is time.ParseDuration that also accepts a leading number
// of days ("7d", "1d12h").
func parseDuration(s string) (time.Duration, error) {
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.Atoi(s[:i])
		if err != nil || days < 0 || days > 100000 {
			return 0, fmt.Errorf("bad number of days in %q", s)
		}
		d := time.Duration(days) * 24 * time.Hour
		if rest := s[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil {
				return 0, err
			}
			d += r
		}
		return d, nil
	}
	return time.ParseDuration(s)
}

// durationFlag is a flag.Value accepting parseDuration's forms.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return errors.New("use a duration like 90s, 10m, 2h or 7d")
	}
	if d < 0 {
		return errors.New("the duration is negative")
	}
	*f.d = d
	return nil
}

func parseIDs(args []string) ([]rdq.ID, error) {
	ids := make([]rdq.ID, 0, len(args))
	for _, a := range args {
		id, err := rdq.ParseID(a)
		if err != nil {
			return nil, usageErrorf("%q is not a task id: task ids look like 0190c1f2-7a3b-7c4d-8e5f-6a7b8c9d0e1f (see dlq ls)", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
