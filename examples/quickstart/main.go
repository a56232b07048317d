// Command quickstart shows rdq end to end in a few seconds: a task that
// fails twice and then succeeds, a task that always fails and lands in the
// dead-letter queue with its full history, and the same task succeeding
// after its handler is fixed and the task is redriven.
//
// It needs no database server: with RDQ_DATABASE_URL unset it keeps its
// tasks in rdq's default SQLite file (~/.local/share/rdq/rdq.db, or
// $XDG_DATA_HOME/rdq/rdq.db), the file the rdq command reads too. Set
// RDQ_DATABASE_URL to a postgres:// URL to run it on PostgreSQL, or to
// sqlite:PATH for another file. It can be run again and again: each run
// works on its own new tasks, after clearing dead tasks an interrupted
// earlier run may have left in its queue.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -v   # also print the worker's logs
//	RDQ_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
	"github.com/srjn45/rdq/worker"
)

const queue = "quickstart"

func main() {
	verbose := flag.Bool("v", false, "print the worker's logs to stderr")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// openStore opens the store RDQ_DATABASE_URL names (rdq's default SQLite
// file when it is unset), clears dead tasks an interrupted earlier run left
// in the quickstart's queue, and returns a description of the store and a
// function that closes it.
func openStore(ctx context.Context, logger *slog.Logger) (storeurl.Store, string, func(), error) {
	url := storeurl.FromEnv()
	st, err := storeurl.Open(ctx, url, storeurl.Config{Logger: logger})
	if err != nil {
		return nil, "", nil, fmt.Errorf("opening %s: %w", storeurl.Describe(url), err)
	}
	closeStore := func() {
		if err := st.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "quickstart: closing the store:", err)
		}
	}
	for {
		n, err := st.PurgeDead(ctx, store.PurgeDeadParams{
			Filter: store.DeadFilter{Queue: queue}, Limit: 1000,
			Actor: "quickstart", Reason: "clearing an earlier quickstart run",
		})
		if err != nil {
			closeStore()
			return nil, "", nil, err
		}
		if n == 0 {
			break
		}
	}
	return st, storeurl.Describe(url), closeStore, nil
}

// gatewayError is what the payment gateway returns while it is
// misconfigured. Its ErrorType groups these failures in the DLQ.
type gatewayError struct{ status int }

func (e *gatewayError) Error() string {
	return fmt.Sprintf("payment gateway answered %d: merchant account not configured", e.status)
}
func (e *gatewayError) ErrorType() string { return "gateway_error" }

func run(ctx context.Context, out io.Writer, verbose bool) error {
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	st, where, closeStore, err := openStore(ctx, logger)
	if err != nil {
		return err
	}
	defer closeStore()
	fmt.Fprintf(out, "rdq quickstart, using %s\n", where)

	// The worker: one queue with a short backoff so this finishes in
	// seconds. Three attempts per life; a task still failing goes dead.
	w, err := worker.New(worker.Config{
		Store:  st,
		ID:     "quickstart-worker",
		Logger: logger,
		Queues: map[string]worker.QueueConfig{queue: {
			Policy: rdq.Policy{
				MaxAttempts:    3,
				InitialBackoff: 100 * time.Millisecond,
				Multiplier:     2,
				Jitter:         rdq.NoJitter,
			},
			Concurrency: 4,
		}},
		PollInterval: 25 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	// send-receipt fails on its first two attempts, then succeeds.
	if err := w.Handle("send-receipt", func(ctx context.Context, t *rdq.Task) error {
		if t.NextAttempt() <= 2 {
			return fmt.Errorf("smtp dial: connection refused (attempt %d)", t.NextAttempt())
		}
		return nil
	}); err != nil {
		return err
	}
	// charge-card fails until the gateway is "fixed".
	var fixed atomic.Bool
	if err := w.Handle("charge-card", func(ctx context.Context, t *rdq.Task) error {
		if !fixed.Load() {
			return &gatewayError{status: 503}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			fmt.Fprintln(os.Stderr, "quickstart: stopping the worker:", err)
		}
	}()

	c, err := client.New(client.Config{Store: st})
	if err != nil {
		return err
	}
	res, err := c.SubmitMany(ctx, []client.Task{
		{Queue: queue, Handler: "send-receipt", Payload: []byte(`{"order":"A-1001"}`), ContentType: "application/json"},
		{Queue: queue, Handler: "charge-card", Payload: []byte(`{"order":"A-1002","cents":4999}`), ContentType: "application/json"},
	})
	if err != nil {
		return err
	}
	receipt, charge := res[0].Task.ID, res[1].Task.ID

	fmt.Fprintln(out, "\n1. send-receipt fails twice, then succeeds")
	task, attempts, err := waitFor(ctx, st, receipt, rdq.StatusSucceeded)
	if err != nil {
		return err
	}
	show(out, task, attempts)

	fmt.Fprintln(out, "\n2. charge-card always fails and lands in the dead-letter queue")
	task, attempts, err = waitFor(ctx, st, charge, rdq.StatusDead)
	if err != nil {
		return err
	}
	show(out, task, attempts)

	fmt.Fprintln(out, "\n3. fix the handler, redrive the dead task, and it succeeds")
	fixed.Store(true)
	errs, err := st.Redrive(ctx, store.RedriveParams{
		IDs:    []rdq.ID{charge},
		Actor:  "quickstart",
		Reason: "merchant account configured",
	})
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "   redriven %s: life 1 starts with a fresh attempt budget\n", charge)
	task, attempts, err = waitFor(ctx, st, charge, rdq.StatusSucceeded)
	if err != nil {
		return err
	}
	show(out, task, attempts)
	return nil
}

// waitFor polls until task id reaches want; it fails if the task reaches
// another final status or takes longer than 30 seconds.
func waitFor(ctx context.Context, st store.Store, id rdq.ID, want rdq.Status) (*rdq.Task, []rdq.Attempt, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		task, attempts, err := st.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if task.Status == want {
			return task, attempts, nil
		}
		if task.Status == rdq.StatusSucceeded || task.Status == rdq.StatusDead {
			return nil, nil, fmt.Errorf("task %s ended %s, expected %s", id, task.Status, want)
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("task %s still %s after 30s", id, task.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// show prints a task and its full attempt history.
func show(out io.Writer, t *rdq.Task, attempts []rdq.Attempt) {
	fmt.Fprintf(out, "   task %s  handler %s  status %s  life %d  attempts in this life %d\n",
		t.ID, t.Handler, t.Status, t.Life, t.Attempts)
	if !t.LastError.IsZero() {
		fmt.Fprintf(out, "   last failure: [%s] %s (fingerprint %s)\n", t.LastError.Type, t.LastError.Message, t.LastError.Fingerprint)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "   #\tlife\toutcome\terror type\tmessage\tworker\tstarted\tfinished")
	for _, a := range attempts {
		fmt.Fprintf(tw, "   %d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.Number, a.Life, a.Outcome, orDash(a.ErrorType), orDash(a.Message), a.WorkerID,
			a.StartedAt.Local().Format("15:04:05.000"), a.FinishedAt.Local().Format("15:04:05.000"))
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
	}
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
