package grpccall

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/worker"
)

// childEnv, when set, makes the test binary a handler process (see
// runChild): "grpc" or "http", then "-hang" to answer no call or "-serve"
// to answer every call.
const childEnv = "RDQ_GRPCCALL_TEST_CHILD"

// chaosSecret signs the HTTP callbacks of the chaos test.
var chaosSecret = []byte("chaos-callback-secret-0123456789")

// runChild serves a handler on the listener inherited as file descriptor
// 3, a HandlerService or an HTTP callback receiver, writing "executing <id>
// <attempt>" to stdout as each call arrives. In "hang" mode a call waits
// until the process is killed; in "serve" mode a task whose payload is
// "poison" fails permanently and any other succeeds.
func runChild() int {
	lis, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	kind, mode, _ := strings.Cut(os.Getenv(childEnv), "-")
	hang := mode == "hang"
	if kind == "http" {
		srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: callback.Receiver(chaosSecret, time.Minute, func(ctx context.Context, m *callback.Message) error {
			if _, err := fmt.Fprintf(os.Stdout, "executing %s %d\n", m.Data.ID, m.Data.Attempt); err != nil {
				return err
			}
			if hang {
				<-ctx.Done()
				return ctx.Err()
			}
			if string(m.Data.Body()) == "poison" {
				return rdq.Permanent(&rdq.RemoteError{Type: "PoisonError", Message: "poison pill", Stack: "at child.handle (chaos_test.go)"})
			}
			return nil
		})}
		if err := srv.Serve(lis); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		return 0
	}
	h := &handler{answer: func(ctx context.Context, req *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
		if _, err := fmt.Fprintf(os.Stdout, "executing %s %d\n", req.GetId(), req.GetAttempt()); err != nil {
			return nil, err
		}
		if hang {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if string(req.GetPayload()) == "poison" {
			return &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Permanent{Permanent: &rdqv1.Failure{
				ErrorType: "PoisonError", Message: "poison pill", Stack: "at child.handle (chaos_test.go)",
			}}}, nil
		}
		return success, nil
	}}
	srv := grpc.NewServer()
	rdqv1.RegisterHandlerServiceServer(srv, h)
	if err := srv.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return 0
}

// child is a running handler process.
type child struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string // "executing" lines, closed at the process's end
	done  bool
}

func startChild(t *testing.T, lis *os.File, mode string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.ExtraFiles = []*os.File{lis}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, lines: make(chan string, 64)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		// The pipe ends with the process; drain whatever is left so
		// that Wait can close it.
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

// kill SIGKILLs the process and returns the lines it wrote that were not
// read yet, once it is gone.
func (c *child) kill() []string {
	if c.done {
		return nil
	}
	c.done = true
	if err := c.cmd.Process.Kill(); err != nil {
		c.t.Errorf("killing the handler process: %v", err)
	}
	var rest []string
	for l := range c.lines {
		rest = append(rest, l)
	}
	// Wait reports the death by SIGKILL as an error: that is the point.
	if err := c.cmd.Wait(); err == nil {
		c.t.Errorf("the handler process exited normally, not by SIGKILL")
	}
	return rest
}

// next waits for the next line, failing the test if the process ends or
// none comes within a minute.
func (c *child) next() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the handler process ended before any call reached it")
		}
		return l
	case <-time.After(time.Minute):
		c.t.Fatal("no call reached the handler process within a minute")
	}
	return ""
}

type execution struct {
	id      string
	attempt int
}

func parseExecution(t *testing.T, line string) execution {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "executing" {
		t.Fatalf("unexpected line from the handler process: %q", line)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return execution{id: f[1], attempt: n}
}

// chaosKind is a kind of remote handler the chaos test kills.
type chaosKind struct {
	child string // childEnv's prefix
	// route makes the worker's handler of queue "chaos" at addr.
	route func(t *testing.T, addr string) func(context.Context, *rdq.Task) error
	// killedType is the error type of a call whose handler died.
	killedType string
	// poisoned reports whether a's failure is the poison task's.
	poisoned func(a rdq.Attempt) bool
}

// A remote handler process SIGKILLed in the middle of calls is an
// ordinary failed attempt of each call it was running: retryable (of type
// grpc_unavailable for a gRPC handler, transport for an HTTP callback),
// recorded by the worker (not a lease expiry), and every task still ends
// SUCCEEDED or DEAD with its full history once a handler serves again.
// gRPC handlers pass the test HTTP callbacks pass.
func TestHandlerKilledMidCallIsAnOrdinaryFailedAttempt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts handler processes and a worker on PostgreSQL")
	}
	kinds := map[string]chaosKind{
		"grpc": {
			child: "grpc",
			route: func(t *testing.T, addr string) func(context.Context, *rdq.Task) error {
				route, err := newCaller(t, Config{Timeout: 2 * time.Minute}).Router(map[string]Target{"chaos": {URL: "grpc://" + addr}})
				if err != nil {
					t.Fatal(err)
				}
				return route
			},
			killedType: "grpc_unavailable",
			poisoned: func(a rdq.Attempt) bool {
				return a.Outcome == rdq.OutcomePermanentFailure && a.ErrorType == "PoisonError" && a.Stack != ""
			},
		},
		"http": {
			child: "http",
			route: func(t *testing.T, addr string) func(context.Context, *rdq.Task) error {
				c, err := callback.New(callback.Config{Secret: chaosSecret, Allow: []string{addr}, AllowAddrs: []string{"127.0.0.1"}, Timeout: 2 * time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				route, err := c.Router(map[string]callback.Target{"chaos": {URL: "http://" + addr + "/hooks/chaos"}})
				if err != nil {
					t.Fatal(err)
				}
				return route
			},
			killedType: "transport",
			poisoned: func(a rdq.Attempt) bool {
				return a.Outcome == rdq.OutcomePermanentFailure && a.ErrorType == "PoisonError" && a.Message == "poison pill" && a.Stack != ""
			},
		},
	}
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) { runChaos(t, kind) })
	}
}

// runChaos submits tasks to a worker whose handler is a process of kind,
// SIGKILLs that process in the middle of calls several times, then lets
// one serve, and checks every task's end and history.
func runChaos(t *testing.T, kind chaosKind) {
	const (
		tasks       = 8
		kills       = 6
		maxAttempts = 5
	)
	st, _ := pgtest.NewStore(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	// Every handler process serves the same socket, so the target stays
	// the same across kills; while none runs, connections wait in its
	// backlog.
	lf, err := lis.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })

	route := kind.route(t, lis.Addr().String())
	w, err := worker.New(worker.Config{
		Store: st, ID: "chaos-worker", PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]worker.QueueConfig{"chaos": {
			Policy:      rdq.Policy{MaxAttempts: maxAttempts, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Jitter: rdq.NoJitter},
			Concurrency: 2, Timeout: 3 * time.Minute,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("run", route); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
	})

	cl, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]rdq.ID, 0, tasks)
	poison := map[string]bool{}
	for i := range tasks {
		payload := "ok-" + strconv.Itoa(i)
		if i == 0 {
			payload = "poison"
		}
		res, err := cl.Submit(context.Background(), client.Task{Queue: "chaos", Handler: "run", Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
		if payload == "poison" {
			poison[res.Task.ID.String()] = true
		}
	}

	killed := map[execution]bool{}
	for range kills {
		c := startChild(t, lf, kind.child+"-hang")
		lines := []string{c.next()}
		lines = append(lines, c.kill()...)
		for _, l := range lines {
			killed[parseExecution(t, l)] = true
		}
	}
	startChild(t, lf, kind.child+"-serve")

	succeeded, dead := 0, 0
	for _, id := range ids {
		task, history := waitTerminal(t, st, id)
		if task.Status == rdq.StatusSucceeded {
			succeeded++
		} else {
			dead++
		}
		for i, a := range history {
			if a.Number != i+1 || a.WorkerID != "chaos-worker" {
				t.Errorf("task %s: attempt %d is number %d by %q, want %d by chaos-worker", id, i, a.Number, a.WorkerID, i+1)
			}
			if a.Outcome == rdq.OutcomeLeaseExpired {
				t.Errorf("task %s: attempt %d is a lease expiry: the worker should have recorded the failed call", id, a.Number)
			}
			if a.Outcome == rdq.OutcomeRetryableFailure && a.ErrorType != kind.killedType {
				t.Errorf("task %s: attempt %d failed with %s: %s, want %s", id, a.Number, a.ErrorType, a.Message, kind.killedType)
			}
			if killed[execution{id.String(), a.Number}] && (a.Outcome != rdq.OutcomeRetryableFailure || a.ErrorType != kind.killedType) {
				t.Errorf("task %s: killed attempt %d recorded as %s %s", id, a.Number, a.Outcome, a.ErrorType)
			}
		}
		last := history[len(history)-1]
		switch {
		case task.Status == rdq.StatusSucceeded && last.Outcome != rdq.OutcomeSuccess:
			t.Errorf("task %s succeeded with a last attempt %s", id, last.Outcome)
		case poison[id.String()] && (task.Status != rdq.StatusDead || !kind.poisoned(last)):
			t.Errorf("poison task %s: %s, last attempt %+v", id, task.Status, last)
		case task.Status == rdq.StatusDead && !poison[id.String()] && len(history) != maxAttempts:
			t.Errorf("task %s dead after %d attempts, want %d", id, len(history), maxAttempts)
		}
	}
	for e := range killed {
		found := false
		for _, id := range ids {
			found = found || id.String() == e.id
		}
		if !found {
			t.Errorf("the handler process ran an unknown task %s", e.id)
		}
	}
	if len(killed) < kills {
		t.Errorf("%d executions killed, want at least %d", len(killed), kills)
	}
	t.Logf("%d kills, %d executions killed mid-call, %d tasks succeeded, %d dead", kills, len(killed), succeeded, dead)
}

// waitTerminal polls the store until task id is SUCCEEDED or DEAD, failing
// the test if that takes more than two minutes.
func waitTerminal(t *testing.T, st interface {
	Get(context.Context, rdq.ID) (*rdq.Task, []rdq.Attempt, error)
}, id rdq.ID) (*rdq.Task, []rdq.Attempt) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		task, history, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == rdq.StatusSucceeded || task.Status == rdq.StatusDead {
			return task, history
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is still %s after two minutes: %d attempts, last error %+v", id, task.Status, task.Attempts, task.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
