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

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
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
		{string(secret), `{"fail": true}`, "http_500"},
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
	defer receiver.Close()
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

	addrs := make(listenAddrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, time.Second, slog.New(addrs)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var base string
	select {
	case addr := <-addrs:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("run returned before serving: %v", err)
	}

	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer client.CloseIdleConnections()
	call := func(method, path, token string, body any, out any) int {
		t.Helper()
		var r io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			r = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, base+path, r)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatalf("%s %s: %d: %v", method, path, resp.StatusCode, err)
			}
		}
		return resp.StatusCode
	}
	submit := func(payload string) string {
		t.Helper()
		var res struct {
			Task struct{ ID string } `json:"task"`
		}
		task := map[string]any{"version": 1, "queue": "orders", "handler": "charge", "content_type": "application/json", "payload": []byte(payload)}
		if code := call("POST", "/v1/tasks", shopToken, task, &res); code != http.StatusOK || res.Task.ID == "" {
			t.Fatalf("submit: %d %+v", code, res)
		}
		return res.Task.ID
	}
	// await polls the task until it reaches status.
	await := func(id, status string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got struct{ Status string }
			call("GET", "/v1/tasks/"+id, oncallToken, nil, &got)
			if got.Status == status {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %s, want %s", id, got.Status, status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

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
