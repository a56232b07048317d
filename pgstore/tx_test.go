package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// txTask is the task the transactional tests submit.
func txTask(key string) client.Task {
	return client.Task{Queue: "outbox", Handler: "ship-order", Payload: []byte(`{"order":7}`), IdempotencyKey: key}
}

// nextNotification waits for the next notification on ch.
func nextNotification(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case q := <-ch:
		return q
	case <-time.After(30 * time.Second):
		t.Fatal("no notification within 30s")
		return ""
	}
}

// TestWithTxCommit: a task submitted in the caller's transaction is
// invisible (to Get and to Claim) until the transaction commits, arrives
// together with the caller's own write, and wakes workers only at commit:
// a notification sent by another transaction in the meantime comes first.
func TestWithTxCommit(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	notes, err := s.Notifications(lctx)
	if err != nil {
		t.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit: ErrTxClosed, nothing to undo
	if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Store: s.WithTx(tx)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(ctx, txTask("order-7"))
	if err != nil {
		t.Fatalf("Submit in a transaction: %v", err)
	}
	id := res.Task.ID
	// The transaction sees its own task.
	if got, _, err := s.WithTx(tx).Get(ctx, id); err != nil || got.Status != rdq.StatusPending {
		t.Fatalf("Get inside the transaction = %v, %v", got, err)
	}
	// Nobody else does.
	if _, _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get outside the open transaction: %v, want store.ErrNotFound", err)
	}
	if got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"outbox"}, Limit: 10, Lease: time.Minute, WorkerID: "w"}); err != nil || len(got) != 0 {
		t.Fatalf("Claim outside the open transaction = %d tasks, %v; want none", len(got), err)
	}
	// A notification committed meanwhile arrives before the outbox's.
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "marker", Handler: "h", Payload: []byte("{}")}}}); err != nil {
		t.Fatal(err)
	}
	if q := nextNotification(t, notes); q != "marker" {
		t.Fatalf("first notification is %q, want marker: the uncommitted submit woke workers", q)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if q := nextNotification(t, notes); q != "outbox" {
		t.Fatalf("notification after commit is %q, want outbox", q)
	}
	got, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"outbox"}, Limit: 10, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("Claim after commit = %v, %v; want %s", got, err, id)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+orders).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the caller's own write: %d rows, %v", n, err)
	}
	// The key is taken for good now.
	again, err := client.New(client.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := again.Submit(ctx, txTask("order-7"))
	if err != nil || !dup.Duplicate || dup.Task.ID != id {
		t.Fatalf("resubmitting the committed key = %+v, %v; want a duplicate of %s", dup, err, id)
	}
}

// TestWithTxRollback: rolling back leaves no task, no key and no wake-up.
func TestWithTxRollback(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, _ := pgtest.NewStore(t)
	pool := pgtest.Pool(t)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	notes, err := s.Notifications(lctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Store: s.WithTx(tx)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SubmitMany(ctx, []client.Task{txTask("order-8"), txTask("")})
	if err != nil {
		t.Fatalf("SubmitMany in a transaction: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if _, _, err := s.Get(ctx, r.Task.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s) after rollback: %v, want store.ErrNotFound", r.Task.ID, err)
		}
	}
	if _, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{ID: rdq.NewID(), Queue: "marker", Handler: "h", Payload: []byte("{}")}}}); err != nil {
		t.Fatal(err)
	}
	if q := nextNotification(t, notes); q != "marker" {
		t.Fatalf("first notification is %q, want marker: the rolled-back submit woke workers", q)
	}
	plain, err := client.New(client.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := plain.Submit(ctx, txTask("order-8"))
	if err != nil || fresh.Duplicate || fresh.Task.ID == res[0].Task.ID {
		t.Fatalf("resubmitting the rolled-back key = %+v, %v; want a new task", fresh, err)
	}
}

// envTxChild makes the test binary a process that submits in a
// transaction and waits, never committing, to be killed (see txChild).
const envTxChild = "RDQ_PGSTORE_TX_CHILD"

// txChild opens the schema named by envTxChild, submits a task in a
// transaction, prints its ID and blocks until it is killed. It returns an
// exit code.
func txChild() int {
	ctx := context.Background()
	pool, err := pgtest.NewPool(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close() // not reached: the parent kills this process
	s, err := pgstore.New(pool, pgstore.Config{Schema: os.Getenv(envTxChild)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := client.New(client.Config{Store: s.WithTx(tx)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res, err := c.Submit(ctx, txTask("order-9"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(res.Task.ID)
	// Blocks until SIGKILL: the parent keeps stdin open.
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return 3
}

// TestWithTxCrashBeforeCommit: a process that submits in a transaction and
// dies (SIGKILL) before committing leaves no task, and the idempotency key
// it held is free again.
func TestWithTxCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s, schema := pgtest.NewStore(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envTxChild+"="+schema)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close() }() // the child is dead by then
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("reading the child's task ID: %v (%q)", err, line)
	}
	id, err := rdq.ParseID(strings.TrimSpace(line))
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("the child printed %q: %v", line, err)
	}
	// Submitted but not committed: invisible.
	if _, _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get while the child's transaction is open: %v, want store.ErrNotFound", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, want death by SIGKILL", err)
	}
	// The server notices the lost connection and rolls back; the key is
	// free once it has (Enqueue waits for the dying transaction).
	c, err := client.New(client.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(ctx, txTask("order-9"))
	if err != nil || res.Duplicate || res.Task.ID == id {
		t.Fatalf("resubmitting the crashed transaction's key = %+v, %v; want a new task", res, err)
	}
	if _, _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of the crashed transaction's task: %v, want store.ErrNotFound", err)
	}
}
