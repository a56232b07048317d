package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/srjn45/rdq/internal/workload"
	"github.com/srjn45/rdq/storeurl"
)

func init() {
	usages["bench"] = `
Usage: rdq bench [--workloads LIST] [--tasks N] [--storm-tasks N] [--attempts N]
                 [--workers N] [--concurrency N] [--batch N] [--ceiling DURATION]
                 [--warmup N] [--warm-busy N] [--preload N]

Measures throughput on the chosen database, end to end through the client
and workers, and prints each figure next to the database's own ceiling
measured in the same run, so the ratio says how close rdq gets to what the
database alone can do (absolute figures drift on shared machines; the ratio
does not). The workloads (--workloads, comma-separated; default all):

  noop       submit N tasks in batches; workers claim them, run a no-op
             handler and finish them, each with its attempt in its
             history: tasks/s
  fail-once  every task fails its first attempt, is retried at once and
             succeeds: tasks/s, and its share of the no-op rate
  storm      every attempt fails; tasks are retried at once until their
             --attempts are spent and they are dead, with every attempt in
             their history: attempts/s

The ceiling (PostgreSQL only; --ceiling 0 skips it) is raw SQL with no
application code, from two connections: each transaction inserts 500 tasks,
claims 500 due tasks with FOR UPDATE SKIP LOCKED and deletes them, in a
scratch schema it drops afterwards.

Each workload also prints the CPU time this process (the client and the
workers, not the database) spent per task or attempt. Where rdq and the
database share a machine, they share its cores: no workload can run faster
than the cores divided by the CPU per task of both together, while the
ceiling spends none on an application.

On PostgreSQL the measured workloads follow a warm-up (--warmup no-op
tasks, default 5,000; 0 skips it) and an ANALYZE of rdq's tables, so they
run on a table with statistics, as autovacuum keeps them on a table in
use. PostgreSQL plans a prepared statement once for its later runs: without
the ANALYZE, a schema created moments before is measured with plans made
for an empty table. The other statistics states users meet: --warm-busy N
runs N no-op tasks instead, with the ANALYZE taken half way through, while
the queue is busy; --preload N first writes N succeeded and N dead tasks
(a table in use for a while), then ANALYZEs.

The tasks go to fresh queues named rdq-bench-<random>-<workload>; they stay
(SUCCEEDED until the workers' retention removes them; the storm's DEAD,
until purged). Run it against a scratch database or schema, not production.
`
}

type jsonBenchWorkload struct {
	Workload          string  `json:"workload"`
	Queue             string  `json:"queue"`
	Tasks             int     `json:"tasks"`
	Attempts          int64   `json:"attempts"`
	SubmitSeconds     float64 `json:"submit_seconds"`
	TotalSeconds      float64 `json:"total_seconds"`
	TasksPerSecond    float64 `json:"tasks_per_second"`
	AttemptsPerSecond float64 `json:"attempts_per_second"`
	Succeeded         int64   `json:"succeeded"`
	Dead              int64   `json:"dead"`
	// OfCeiling is the workload's rate (tasks/s, or attempts/s for the
	// storm) as a share of the ceiling; 0 without one.
	OfCeiling float64 `json:"of_ceiling,omitempty"`
	// ProcessCPUSeconds is the CPU time the rdq process (client and
	// workers, not the database) used during the workload; absent where
	// the platform does not report it.
	ProcessCPUSeconds float64 `json:"process_cpu_seconds,omitempty"`
}

type jsonBench struct {
	// The no-op workload's figures, at the top level as before.
	Queue          string  `json:"queue,omitempty"`
	Tasks          int     `json:"tasks"`
	Workers        int     `json:"workers"`
	Concurrency    int     `json:"concurrency"`
	SubmitSeconds  float64 `json:"submit_seconds,omitempty"`
	TotalSeconds   float64 `json:"total_seconds,omitempty"`
	SubmitPerSec   float64 `json:"submit_per_second,omitempty"`
	TasksPerSecond float64 `json:"tasks_per_second,omitempty"`
	Succeeded      int64   `json:"succeeded"`
	// CeilingTasksPerSecond is the raw-SQL ceiling of the same run; 0
	// when not measured.
	CeilingTasksPerSecond float64             `json:"ceiling_tasks_per_second,omitempty"`
	Workloads             []jsonBenchWorkload `json:"workloads"`
}

func (e *env) bench(args []string) error {
	fs := newFlagSet("bench", &e.g, e.stderr, usages["bench"])
	list := fs.String("workloads", "noop,fail-once,storm", "workloads to run, comma-separated: noop, fail-once, storm")
	n := fs.Int("tasks", 20000, "tasks of the noop and fail-once workloads")
	stormN := fs.Int("storm-tasks", 20000, "tasks of the storm workload")
	attempts := fs.Int("attempts", 5, "attempts per task in the storm")
	workers := fs.Int("workers", 2, "workers, each with its own claim loop")
	conc := fs.Int("concurrency", 200, "handlers running at once per worker")
	batch := fs.Int("batch", 500, "tasks per submit call")
	ceiling := fs.Duration("ceiling", 10*time.Second, "how long to measure the raw-SQL ceiling (PostgreSQL); 0 skips it")
	warmup := fs.Int("warmup", 5000, "no-op tasks run before measuring, followed by ANALYZE (PostgreSQL); 0 skips both")
	warmBusy := fs.Int("warm-busy", 0, "no-op tasks run before measuring, with an ANALYZE half way through, while busy (PostgreSQL); replaces --warmup")
	preload := fs.Int("preload", 0, "succeeded and as many dead tasks written before measuring, then ANALYZE (PostgreSQL)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return usageErrorf("bench takes no arguments (got %q)", pos[0])
	}
	for _, c := range []struct {
		name   string
		v, max int
	}{{"--tasks", *n, 10_000_000}, {"--storm-tasks", *stormN, 10_000_000}, {"--attempts", *attempts, 100},
		{"--workers", *workers, 64}, {"--concurrency", *conc, 10000}, {"--batch", *batch, 10000}} {
		if c.v < 1 || c.v > c.max {
			return usageErrorf("%s %d: use 1 to %d", c.name, c.v, c.max)
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--warmup", *warmup}, {"--warm-busy", *warmBusy}, {"--preload", *preload}} {
		if c.v < 0 || c.v > 10_000_000 {
			return usageErrorf("%s %d: use 0 to 10000000", c.name, c.v)
		}
	}
	if *ceiling < 0 {
		return usageErrorf("--ceiling %s is negative", *ceiling)
	}
	var kinds []workload.Kind
	for _, k := range strings.Split(*list, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(workload.Kinds, workload.Kind(k)) {
			return usageErrorf("--workloads: unknown workload %q: use noop, fail-once or storm", k)
		}
		if !slices.Contains(kinds, workload.Kind(k)) {
			kinds = append(kinds, workload.Kind(k))
		}
	}
	raw, err := e.databaseURL()
	if err != nil {
		return err
	}
	b, err := e.openBackend(false)
	if err != nil {
		return err
	}
	defer b.close()
	e.announce(b.desc)

	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("naming the bench queues: %w", err)
	}
	prefix := "rdq-bench-" + hex.EncodeToString(suffix[:])
	out := jsonBench{Workers: *workers, Concurrency: *conc}

	if t, err := storeurl.Parse(raw); err == nil && t.Kind == storeurl.Postgres && *ceiling > 0 {
		fmt.Fprintf(e.stderr, "rdq: bench: measuring the raw-SQL ceiling for %s\n", fmtDuration(*ceiling))
		c, err := workload.Ceiling(e.ctx, t.ConnString, *ceiling)
		if err != nil {
			return hideSecret(err, queryPassword(raw))
		}
		out.CeilingTasksPerSecond = c
		if !e.g.json {
			fmt.Fprintf(e.stdout, "%-10s %10s tasks/s   raw SQL, no application code\n", "ceiling", fmtCount(int64(c)))
		}
	}
	if t, err := storeurl.Parse(raw); err == nil && t.Kind == storeurl.Postgres {
		analyze := func(ctx context.Context) error {
			if err := workload.Analyze(ctx, t.ConnString, t.Schema); err != nil {
				return hideSecret(fmt.Errorf("bench: %w", err), queryPassword(raw))
			}
			return nil
		}
		// A table that already holds many finished tasks: its statistics
		// are those of the finished tasks.
		if *preload > 0 {
			fmt.Fprintf(e.stderr, "rdq: bench: preloading %s succeeded and %s dead tasks, then ANALYZE\n", fmtCount(int64(*preload)), fmtCount(int64(*preload)))
			for _, k := range []workload.Kind{workload.NoOp, workload.Storm} {
				if _, err := workload.Run(e.ctx, workload.Config{
					Store: b, Queue: prefix + "-preload-" + string(k), Kind: k, Tasks: *preload, Attempts: 1,
					Workers: *workers, Concurrency: *conc, Batch: *batch,
				}); err != nil {
					return fmt.Errorf("bench: preloading: %w", err)
				}
			}
			if err := analyze(e.ctx); err != nil {
				return err
			}
		}
		switch {
		case *warmBusy > 0:
			// Statistics taken while the queue is busy: many tasks
			// pending and in flight.
			fmt.Fprintf(e.stderr, "rdq: bench: warming up: %s no-op tasks, with an ANALYZE half way through\n", fmtCount(int64(*warmBusy)))
			if _, err := workload.Run(e.ctx, workload.Config{
				Store: b, Queue: prefix + "-warmup", Kind: workload.NoOp, Tasks: *warmBusy, Workers: *workers, Concurrency: *conc, Batch: *batch,
				Midway: analyze,
			}); err != nil {
				return fmt.Errorf("bench: warming up: %w", err)
			}
		case *warmup > 0:
			// A table in use has statistics; one created moments before
			// has none, and statements planned on it keep plans made for
			// an empty table until the next ANALYZE. Measure what
			// production runs.
			fmt.Fprintf(e.stderr, "rdq: bench: warming up: %s no-op tasks, then ANALYZE\n", fmtCount(int64(*warmup)))
			if _, err := workload.Run(e.ctx, workload.Config{
				Store: b, Queue: prefix + "-warmup", Kind: workload.NoOp, Tasks: *warmup, Workers: *workers, Concurrency: *conc, Batch: *batch,
			}); err != nil {
				return fmt.Errorf("bench: warming up: %w", err)
			}
			if err := analyze(e.ctx); err != nil {
				return err
			}
		}
	}
	var noop float64
	for _, k := range kinds {
		tasks := *n
		if k == workload.Storm {
			tasks = *stormN
		}
		queue := prefix
		if len(kinds) > 1 || k != workload.NoOp {
			queue = prefix + "-" + string(k)
		}
		fmt.Fprintf(e.stderr, "rdq: bench: %s: %s tasks, %d workers × %d concurrent handlers, queue %s\n", k, fmtCount(int64(tasks)), *workers, *conc, queue)
		res, err := workload.Run(e.ctx, workload.Config{
			Store: b, Queue: queue, Kind: k, Tasks: tasks, Workers: *workers, Concurrency: *conc, Batch: *batch, Attempts: *attempts,
		})
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		w := jsonBenchWorkload{
			Workload: string(k), Queue: queue, Tasks: tasks, Attempts: res.Attempts,
			SubmitSeconds: res.Submit.Seconds(), TotalSeconds: res.Elapsed.Seconds(),
			TasksPerSecond: res.TasksPerSecond, AttemptsPerSecond: res.AttemptsPerSecond,
			Succeeded: res.Succeeded, Dead: res.Dead, ProcessCPUSeconds: res.ProcessCPU.Seconds(),
		}
		rate, unit, per := res.TasksPerSecond, "tasks/s", int64(tasks)
		if k == workload.Storm {
			rate, unit, per = res.AttemptsPerSecond, "attempts/s", res.Attempts
		}
		if out.CeilingTasksPerSecond > 0 {
			w.OfCeiling = rate / out.CeilingTasksPerSecond
		}
		out.Workloads = append(out.Workloads, w)
		if k == workload.NoOp {
			noop = res.TasksPerSecond
			out.Queue, out.Tasks, out.SubmitSeconds, out.TotalSeconds = queue, tasks, w.SubmitSeconds, w.TotalSeconds
			out.SubmitPerSec, out.TasksPerSecond, out.Succeeded = float64(tasks)/res.Submit.Seconds(), res.TasksPerSecond, res.Succeeded
		}
		if e.g.json {
			continue
		}
		var notes []string
		if w.OfCeiling > 0 {
			notes = append(notes, fmt.Sprintf("%3.0f%% of the ceiling", 100*w.OfCeiling))
		}
		switch {
		case k == workload.FailOnce && noop > 0:
			notes = append(notes, fmt.Sprintf("%.0f%% of noop", 100*res.TasksPerSecond/noop))
		case k == workload.Storm:
			notes = append(notes, fmt.Sprintf("%s tasks × %d attempts, all dead with full histories", fmtCount(int64(tasks)), *attempts))
		}
		if res.ProcessCPU > 0 && per > 0 {
			notes = append(notes, fmt.Sprintf("rdq's own CPU %.0f µs per %s",
				float64(res.ProcessCPU.Microseconds())/float64(per), strings.TrimSuffix(unit, "s/s")))
		}
		fmt.Fprintf(e.stdout, "%-10s %10s %-10s %s\n", k, fmtCount(int64(rate)), unit, strings.Join(notes, "; "))
	}
	if e.g.json {
		return writeJSON(e.stdout, out)
	}
	return nil
}
