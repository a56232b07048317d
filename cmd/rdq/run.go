package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Exit codes, documented in the help text.
const (
	exitOK       = 0 // success, including dry runs and selections that match nothing
	exitError    = 1 // runtime failure: database unreachable, a query failed, aborted at the prompt
	exitUsage    = 2 // bad command, flag or argument; or a confirmation is needed (--yes)
	exitNotFound = 3 // a task named by id does not exist
	exitConflict = 4 // a task named by id is not dead (not waiting, for tasks retry and cancel), or reached its redrive limit
)

const mainUsage = `
rdq operates rdq's queues and dead-letter queue: find out why tasks died,
group similar failures, redrive them once fixed, purge what is beyond saving,
see and cancel the tasks still waiting or running, pause queues, and read the
audit log of who did what.

Usage:
  rdq [global flags] <command> [flags] [arguments]

Commands:
  migrate              create or upgrade rdq's tables (no other command migrates)
  stats                per-queue counts: pending, in flight, dead, succeeded, oldest due
  dlq ls               list dead tasks, newest first (filters, pages)
  dlq count            count dead tasks matching a filter
  dlq show ID          show a task with every attempt and stack trace
  dlq groups           group dead tasks by failure fingerprint
  dlq redrive          put dead tasks back to work (by id, filter or fingerprint)
  dlq purge            delete dead tasks (by id, filter or fingerprint)
  dlq retention        delete dead tasks older than an age (explicit retention)
  tasks ls             list live tasks: pending, retrying, in flight or succeeded
  tasks show ID        show a live task with every attempt
  tasks key QUEUE KEY  show the task holding an idempotency key
  tasks retry ID...    make waiting tasks due now
  tasks cancel ID...   cancel waiting tasks into the dead-letter queue (audited)
  queue ls             list the paused queues
  queue pause QUEUE    stop starting new executions of a queue's tasks, on every worker
  queue resume QUEUE   start them again
  queue breakers       list paused handlers and their circuit breaker state
  queue open Q HANDLER force a handler's breaker open: no new executions, on every worker
  queue close Q HANDLER force it closed: its waiting tasks run again
  audit ls             list audit entries: who changed what, when and why
  workers              list the registered workers, and the tasks no live worker can run
  series               attempts and their outcomes per minute or hour (--since 15m, --by hour)
  console              serve the DLQ console in a browser, for the local user
  bench                no-op, fail-once and storm throughput next to the database's ceiling
                       (scratch databases only)
  help [command]       show help for a command

Global flags (accepted before or after the command):
  --database-url URL   postgres://user@host:5432/db[?schema=NAME],
                       redis://host:6379/0[?namespace=NAME] (rediss:// for TLS),
                       or sqlite:PATH (or a plain path) for a SQLite file. Default:
                       $RDQ_DATABASE_URL, else the per-user SQLite file
                       ($XDG_DATA_HOME or ~/.local/share)/rdq/rdq.db.
  --schema NAME        PostgreSQL schema holding rdq's tables (default: $RDQ_SCHEMA,
                       else the URL's schema parameter, else rdq).
  --json               print JSON (stable snake_case field names) instead of tables.

Exit codes:
  0  success (dry runs, and selections that match nothing, included)
  1  runtime error: database unreachable, a query failed, aborted at the prompt
  2  usage error: bad command, flag or argument, or a bulk change needs --yes
  3  not found: a task named by id does not exist
  4  conflict: a task named by id is not dead (or, for tasks retry and cancel,
     not waiting), or reached its redrive limit

Run 'rdq help <command>' (e.g. 'rdq help dlq redrive') for a command's flags.
`

// exitError carries an exit code with an error message.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// usageErrorf reports a mistake in the command line (exit 2).
func usageErrorf(format string, args ...any) error {
	return &codedError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ce *codedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, rdq.ErrInvalid):
		return exitUsage
	case errors.Is(err, store.ErrNotFound):
		return exitNotFound
	case errors.Is(err, store.ErrNotDead), errors.Is(err, store.ErrRedriveLimit), errors.Is(err, store.ErrNotPending):
		return exitConflict
	}
	return exitError
}

// env is the process environment and standard streams of one run.
type env struct {
	ctx   context.Context
	stdin io.Reader
	// stdout and stderr escape control characters (see termWriter); stdout
	// passes JSON output unchanged.
	stdout io.Writer
	stderr io.Writer
	// rawStdout and rawStderr are the streams themselves, for the payload
	// written to a file or pipe and for the progress line.
	rawStdout io.Writer
	rawStderr io.Writer
	// desc names the database last opened, for messages.
	desc   string
	getenv func(string) string
	g      globals
	in     *bufio.Reader
}

// run executes the rdq command line args (without the program name) and
// returns the process exit code. All I/O goes through the given streams and
// getenv, so tests can drive it in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{ctx: ctx, stdin: stdin, rawStdout: stdout, rawStderr: stderr, getenv: getenv}
	out, errOut := newTermWriter(stdout, &e.g.json), newTermWriter(stderr, nil)
	defer func() {
		_ = out.flush()    // nothing to report a failed write of the last bytes to
		_ = errOut.flush() // likewise
	}()
	// From here on nothing writes to the raw streams but through e.
	stdout, stderr = out, errOut
	e.stdout, e.stderr = stdout, stderr
	e.g.databaseURL = getenv("RDQ_DATABASE_URL")
	e.g.schema = getenv("RDQ_SCHEMA")
	err := e.dispatch(args)
	if errors.Is(err, store.ErrNotMigrated) {
		// The SQL error behind it says only that a table is missing.
		err = fmt.Errorf("%s has no rdq tables: run `rdq migrate` or check --schema (and --database-url)", cmp.Or(e.desc, "the database"))
	}
	code := exitCode(err)
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errFlagParse) {
		// Library errors already start with "rdq: "; say it once.
		fmt.Fprintf(stderr, "rdq: %s\n", strings.TrimPrefix(err.Error(), "rdq: "))
		if code == exitUsage && !errors.Is(err, rdq.ErrInvalid) {
			fmt.Fprintln(stderr, "Run 'rdq help' for usage.")
		}
	}
	return code
}

// errFlagParse marks a flag error the flag package has already printed.
var errFlagParse = errors.New("invalid flags")

func (e *env) dispatch(args []string) error {
	fs := flag.NewFlagSet("rdq", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.StringVar(&e.g.databaseURL, "database-url", e.g.databaseURL, "")
	fs.StringVar(&e.g.schema, "schema", e.g.schema, "")
	fs.BoolVar(&e.g.json, "json", false, "")
	fs.Usage = func() { fmt.Fprint(fs.Output(), strings.TrimLeft(mainUsage, "\n")) }
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(e.stderr, strings.TrimLeft(mainUsage, "\n"))
		return &codedError{code: exitUsage, err: errors.New("no command given")}
	}
	cmd, rest := rest[0], rest[1:]
	switch cmd {
	case "help", "-h", "--help":
		return e.help(rest)
	case "migrate":
		return e.migrate(rest)
	case "stats":
		return e.stats(rest)
	case "workers":
		return e.workers(rest)
	case "series":
		return e.series(rest)
	case "bench":
		return e.bench(rest)
	case "queue":
		return e.queue(rest)
	case "tasks":
		return e.liveTasks(rest)
	case "console":
		return e.consoleCmd(rest)
	case "audit":
		if isHelp(rest) {
			return e.groupHelp("audit")
		}
		if len(rest) == 0 || rest[0] != "ls" {
			return usageErrorf("unknown audit command %s: use 'rdq audit ls'", quoteArg(rest))
		}
		return e.auditLs(rest[1:])
	case "dlq":
		if isHelp(rest) {
			return e.groupHelp("dlq")
		}
		if len(rest) == 0 {
			return usageErrorf("dlq needs a command: ls, count, show, groups, redrive, purge or retention (see 'rdq help dlq')")
		}
		sub, subArgs := rest[0], rest[1:]
		switch sub {
		case "ls", "list":
			return e.dlqLs(subArgs)
		case "count":
			return e.dlqCount(subArgs)
		case "show":
			return e.dlqShow(subArgs)
		case "groups":
			return e.dlqGroups(subArgs)
		case "redrive":
			return e.dlqRedrive(subArgs)
		case "purge":
			return e.dlqPurge(subArgs)
		case "retention":
			return e.dlqRetention(subArgs)
		}
		return usageErrorf("unknown dlq command %q: use ls, count, show, groups, redrive, purge or retention", sub)
	}
	return usageErrorf("unknown command %q", cmd)
}

// groups are the commands that have subcommands.
var groups = []string{"dlq", "queue", "tasks", "audit"}

// isHelp reports whether the arguments after a group ask for its help.
func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help")
}

// groupHelp lists a group's subcommands on stdout, taking their lines from
// the main usage so the two never disagree. It returns flag.ErrHelp: exit 0.
func (e *env) groupHelp(group string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: rdq %s <command> [flags] [arguments]\n\nCommands:\n", group)
	for line := range strings.SplitSeq(mainUsage, "\n") {
		if strings.HasPrefix(line, "  "+group+" ") {
			b.WriteString(line + "\n")
		}
	}
	fmt.Fprintf(&b, "\nRun 'rdq help %s <command>' for a command's flags.\n", group)
	fmt.Fprint(e.stdout, b.String())
	return flag.ErrHelp
}

func quoteArg(args []string) string {
	if len(args) == 0 {
		return "(none)"
	}
	return fmt.Sprintf("%q", args[0])
}

// flagErr turns a flag parse error (already printed with the usage by the
// flag package) into a usage exit.
func flagErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &codedError{code: exitUsage, err: errFlagParse}
}

func (e *env) help(args []string) error {
	topic := strings.Join(args, " ")
	if slices.Contains(groups, topic) {
		if err := e.groupHelp(topic); !errors.Is(err, flag.ErrHelp) {
			return err
		}
		return nil
	}
	if _, ok := usages[topic]; ok {
		// The command's own -h prints its usage and flags; send it to stdout.
		saved := e.stderr
		e.stderr = e.stdout
		err := e.dispatch(append(slices.Clone(args), "-h"))
		e.stderr = saved
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if topic != "" {
		return usageErrorf("no help for %q", topic)
	}
	fmt.Fprint(e.stdout, strings.TrimLeft(mainUsage, "\n"))
	return nil
}

// isTerminal reports whether a stream is an interactive terminal. Tests
// replace it.
var isTerminal = func(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
