package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server/serverconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The sample tokens of config.json, as README.md uses them.
const (
	shopToken   = "dev-submitter-change-me-eQARNuyd8TUys086A0FlB7W6"
	oncallToken = "dev-operator-change-me-caHfrMSWTiwafjcpBNiaCpAD"
)

// loadSample loads config.json with the variables it names cleared.
func loadSample(t *testing.T) *serverconfig.File {
	t.Helper()
	for _, v := range []string{serverconfig.DatabaseURLEnv, "RDQ_CALLBACK_SECRET", "RDQ_METRICS_TOKEN", "RDQ_TOKEN_SHOP", "RDQ_TOKEN_ONCALL", "RDQ_TOKEN_ROOT"} {
		t.Setenv(v, "")
	}
	cfg, err := serverconfig.Load("config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The sample configuration loads, its callbacks reach the demo receiver,
// and its change-me secrets need -dev, as README.md says.
func TestSampleConfig(t *testing.T) {
	cfg := loadSample(t)
	for name, target := range cfg.Targets() {
		if !strings.HasPrefix(target.URL, "http://"+cfg.DemoReceiver+"/") {
			t.Errorf("queue %s calls %s, not the demo receiver on %s", name, target.URL, cfg.DemoReceiver)
		}
	}
	log := slog.New(slog.DiscardHandler)
	if err := cfg.CheckSecrets(false, log); err == nil || !strings.Contains(err.Error(), "-dev") {
		t.Errorf("without -dev: %v", err)
	}
	if err := cfg.CheckSecrets(true, log); err != nil {
		t.Errorf("with -dev: %v", err)
	}
}

// The demo receiver accepts only callbacks signed with its secret, and
// fails (retryably) those whose payload asks it to.
func TestDemoReceiver(t *testing.T) {
	secret := []byte("the-demo-receiver-test-secret")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer startDemoReceiver(lis, secret, slog.New(slog.DiscardHandler))()
	url := "http://" + lis.Addr().String() + "/hooks/orders"
	for _, tc := range []struct {
		secret  string
		payload string
		want    string // the error type; "" for success
	}{
		{string(secret), `{"order": 42}`, ""},
		{string(secret), `{"fail": true}`, "demo_failure"},
		{"another-secret-entirely", `{"order": 42}`, "http_401"},
	} {
		caller, err := callback.New(callback.Config{Secret: []byte(tc.secret), Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		handle, err := caller.Handler(callback.Target{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		err = handle(context.Background(), &rdq.Task{ID: rdq.NewID(), Queue: "orders", Handler: "charge", ContentType: "application/json", Payload: []byte(tc.payload)})
		caller.Close()
		if got := rdq.ErrorTypeOf(err); got != tc.want {
			t.Errorf("%s signed with %q: error type %q (%v), want %q", tc.payload, tc.secret, got, err, tc.want)
		}
	}
}

// listenAddrs is a log handler that passes on the REST address run logs
// once it serves.
type listenAddrs chan string

func (l listenAddrs) Enabled(context.Context, slog.Level) bool { return true }
func (l listenAddrs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l listenAddrs) WithGroup(string) slog.Handler            { return l }
func (l listenAddrs) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "rdq-server serving" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "rest" {
				l <- a.Value.String()
			}
			return true
		})
	}
	return nil
}

// run serves the sample as README.md shows: a submitted task succeeds at
// the demo receiver, one whose payload asks to fail is dead after its
// queue's attempts, and the operator sees it in the dead-letter queue.
func TestRunServesTheSample(t *testing.T) {
	cfg := loadSample(t)
	cfg.Listen, cfg.GRPCListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DatabaseURL = filepath.Join(t.TempDir(), "rdq.db")
	receiver := httptest.NewServer(callback.Receiver([]byte(cfg.Callback.Secret), callback.DefaultMaxSkew, demoReceiver(slog.New(slog.DiscardHandler))))
	t.Cleanup(receiver.Close) // after the server stops
	cfg.DemoReceiver = ""
	for name, q := range cfg.Queues {
		q.URL = receiver.URL + "/hooks/" + name
		q.InitialBackoff = serverconfig.Duration(10 * time.Millisecond)
		cfg.Queues[name] = q
	}
	cfg.Callback.Allow = []string{strings.TrimPrefix(receiver.URL, "http://")}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	srv := serve(t, cfg)
	call, submit, await := srv.call, srv.submit, srv.await

	await(submit(`{"order": 42}`), "SUCCEEDED")
	failing := submit(`{"fail": true}`)
	await(failing, "DEAD")
	var dead struct {
		Tasks []struct{ ID string }
	}
	if code := call("GET", "/v1/dlq/tasks?queue=orders", oncallToken, nil, &dead); code != http.StatusOK || len(dead.Tasks) != 1 || dead.Tasks[0].ID != failing {
		t.Errorf("dead-letter queue: %d %+v", code, dead)
	}
	var problem struct{ Code string }
	if code := call("POST", "/v1/dlq:redrive", shopToken, map[string]any{"filter": map[string]string{"queue": "orders"}, "reason": "retry"}, &problem); code != http.StatusForbidden || problem.Code != "permission_denied" {
		t.Errorf("a submitter's redrive: %d %+v", code, problem)
	}
}

// grpcHandler is a HandlerService admitting calls with the token
// "Bearer handler-token": a payload asking to fail is refused for good,
// any other succeeds.
type grpcHandler struct {
	rdqv1.UnimplementedHandlerServiceServer
}

func (grpcHandler) Execute(ctx context.Context, req *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer handler-token" {
		return nil, status.Error(codes.Unauthenticated, "bad token")
	}
	if bytes.Contains(req.GetPayload(), []byte("fail")) {
		return &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Permanent{Permanent: &rdqv1.Failure{
			ErrorType: "OrderRejected", Message: "order refused", Stack: "at grpcHandler.Execute",
		}}}, nil
	}
	return &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Success{Success: &rdqv1.Success{}}}, nil
}

// A queue whose url is grpc:// runs its tasks on a gRPC handler, with the
// queue's metadata: a task succeeds, and one the handler refuses is dead
// with the handler's error type, message and stack.
func TestRunServesAGRPCHandler(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	rdqv1.RegisterHandlerServiceServer(g, grpcHandler{})
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	t.Cleanup(func() { // after the server stops
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("gRPC handler: %v", err)
		}
	})

	cfg := loadSample(t)
	cfg.Listen, cfg.GRPCListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DatabaseURL = filepath.Join(t.TempDir(), "rdq.db")
	cfg.DemoReceiver = ""
	q := cfg.Queues["orders"]
	q.URL = "grpc://" + lis.Addr().String()
	q.Metadata = map[string]string{"authorization": "Bearer handler-token"}
	q.InitialBackoff = serverconfig.Duration(10 * time.Millisecond)
	cfg.Queues = map[string]serverconfig.Queue{"orders": q}
	cfg.Callback.Allow = []string{lis.Addr().String()}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	srv := serve(t, cfg)
	srv.await(srv.submit(`{"order": 42}`), "SUCCEEDED")
	failing := srv.submit(`{"fail": true}`)
	srv.await(failing, "DEAD")
	var task struct {
		History []struct {
			Outcome   string `json:"outcome"`
			ErrorType string `json:"error_type"`
			Message   string `json:"message"`
			Stack     string `json:"stack"`
		} `json:"history"`
	}
	if code := srv.call("GET", "/v1/tasks/"+failing, oncallToken, nil, &task); code != http.StatusOK || len(task.History) != 1 {
		t.Fatalf("task: %d %+v", code, task)
	}
	if h := task.History[0]; h.Outcome != "PERMANENT_FAILURE" || h.ErrorType != "OrderRejected" || h.Message != "order refused" || h.Stack != "at grpcHandler.Execute" {
		t.Errorf("attempt = %+v, want the handler's permanent failure", h)
	}
}

// served is a running rdq-server (run) and a REST client of it.
type served struct {
	t      *testing.T
	base   string
	client *http.Client
}

// serve runs cfg until the test ends.
func serve(t *testing.T, cfg *serverconfig.File) *served {
	t.Helper()
	addrs := make(listenAddrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, time.Second, slog.New(addrs)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	s := &served{t: t, client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	t.Cleanup(s.client.CloseIdleConnections)
	select {
	case addr := <-addrs:
		s.base = "http://" + addr
	case err := <-done:
		t.Fatalf("run returned before serving: %v", err)
	}
	return s
}

// call sends a REST request and decodes the answer into out (if not nil).
func (s *served) call(method, path, token string, body any, out any) int {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			s.t.Fatalf("%s %s: %d: %v", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// submit submits a JSON payload to handler charge of queue orders.
func (s *served) submit(payload string) string {
	s.t.Helper()
	var res struct {
		Task struct{ ID string } `json:"task"`
	}
	task := map[string]any{"version": 1, "queue": "orders", "handler": "charge", "content_type": "application/json", "payload": []byte(payload)}
	if code := s.call("POST", "/v1/tasks", shopToken, task, &res); code != http.StatusOK || res.Task.ID == "" {
		s.t.Fatalf("submit: %d %+v", code, res)
	}
	return res.Task.ID
}

// await polls the task until it reaches status.
func (s *served) await(id, status string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got struct{ Status string }
		s.call("GET", "/v1/tasks/"+id, oncallToken, nil, &got)
		if got.Status == status {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("task %s is %s, want %s", id, got.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
