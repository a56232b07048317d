package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Tokens of the test principals.
const (
	tokSubmitter = "8eBtc_b4_CQA5UTn2-ENAkvRrKFCKExOZd08xOwy5vg"
	tokOperator  = "q3CEh15-2u-ZdTXyxkMxHu2VQImyM8G9na4fwqWO8DQ"
	tokAdmin     = "-VmMqRdGptPGlEVQP3PpvL5t2FdMKhtIqC9QCu3kL1k"
	tokOrdersOps = "44MXDOB70mspP5jwcUarc_pGnf-U8lhggrlujbNHV1o"
)

var secret = []byte("callback-secret-for-tests-0123")

// receiver is a callback endpoint that verifies signatures and records what
// it was sent.
type receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string][]call // by task id
	// respond decides the answer to the n-th call (1-based) for a task.
	respond func(w http.ResponseWriter, r *http.Request, n int)
}

// call is one verified callback request.
type call struct {
	msg    *callback.Message
	header http.Header
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	rc := &receiver{calls: map[string][]call{}, respond: respond}
	rc.srv = httptest.NewServer(callback.VerifyHandler(secret, time.Minute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := callback.MessageFrom(r.Context())
		if !ok {
			http.Error(w, "no verified message", http.StatusInternalServerError)
			return
		}
		rc.mu.Lock()
		rc.calls[m.Data.ID] = append(rc.calls[m.Data.ID], call{msg: m, header: r.Header.Clone()})
		n := len(rc.calls[m.Data.ID])
		rc.mu.Unlock()
		rc.respond(w, r, n)
	})))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) received(id string) []call {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]call(nil), rc.calls[id]...)
}

type env struct {
	t         *testing.T
	st        *pgstore.Store
	svc       *server.Service
	rest      *httptest.Server
	hc        *http.Client
	grpc      rdqv1.RdqServiceClient
	receivers map[string]*receiver
	reg       *prometheus.Registry
	redirects atomic.Int32
	healthy   atomic.Bool // fail500 answers 200 once set
}

var testPolicy = rdq.Policy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Jitter: rdq.NoJitter}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	e := &env{t: t, st: st, receivers: map[string]*receiver{}}

	e.receivers["flaky"] = newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 2 {
			http.Error(w, fmt.Sprintf("flaky failure %d", n), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.receivers["fail500"] = newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if e.healthy.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "upstream exploded: connection pool exhausted", http.StatusInternalServerError)
	})
	e.receivers["bad400"] = newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, `{"error":"order 42 has no lines"}`, http.StatusBadRequest)
	})
	hang := make(chan struct{})
	e.receivers["hang"] = newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	})
	t.Cleanup(func() { close(hang) }) // runs before the receiver closes
	target := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) { e.redirects.Add(1) })
	e.receivers["redirect"] = newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Redirect(w, r, target.srv.URL+"/moved", http.StatusFound)
	})

	caller, err := callback.New(callback.Config{Secret: secret, Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(caller.Close)
	targets := map[string]callback.Target{}
	queues := map[string]worker.QueueConfig{}
	served := map[string][]string{}
	for q, rc := range e.receivers {
		targets[q] = callback.Target{URL: rc.srv.URL + "/hooks/" + q}
		qc := worker.QueueConfig{Policy: testPolicy, Concurrency: 4}
		if q == "hang" {
			qc.Timeout = 200 * time.Millisecond
			qc.Policy.MaxAttempts = 2
		}
		queues[q] = qc
		served[q] = []string{"call"}
	}
	route, err := caller.Router(targets)
	if err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	e.reg = reg
	w, err := worker.New(worker.Config{
		Store: st, ID: "e2e-worker", Queues: queues, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Metrics: reg, Propagator: propagation.TraceContext{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("call", route); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
	})

	tokens, err := server.NewTokens(map[string]*server.Principal{
		tokSubmitter: {Name: "shop", Grants: []server.Grant{{Queue: "*", Role: server.RoleSubmitter}}},
		tokOperator:  {Name: "oncall", Grants: []server.Grant{{Queue: "*", Role: server.RoleOperator}}},
		tokAdmin:     {Name: "root", Grants: []server.Grant{{Queue: "*", Role: server.RoleAdmin}}},
		tokOrdersOps: {Name: "orders-team", Grants: []server.Grant{{Queue: "fail5*", Role: server.RoleOperator}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	served["nothing"] = nil
	e.svc, err = server.New(server.Config{
		Store: st, Auth: tokens, Queues: served, Logger: slog.New(slog.DiscardHandler),
		Metrics: reg, Gatherer: reg, MaxBodyBytes: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.rest = httptest.NewServer(e.svc.Handler())
	t.Cleanup(e.rest.Close)
	e.hc = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(e.hc.CloseIdleConnections)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := e.svc.NewGRPCServer()
	served2 := make(chan error, 1)
	go func() { served2 <- g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("closing the gRPC client: %v", err)
		}
		g.GracefulStop()
		if err := <-served2; err != nil {
			t.Errorf("gRPC server: %v", err)
		}
	})
	e.grpc = rdqv1.NewRdqServiceClient(conn)
	return e
}

// do sends a REST request and decodes a JSON answer into out (if not nil).
func (e *env) do(method, path, token string, body any, out any, hdr ...string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.rest.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: decoding: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	return resp
}

func (e *env) grpcCtx(token string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// wait polls the store until task id satisfies done.
func (e *env) wait(id string, what string, done func(*rdq.Task) bool) (*rdq.Task, []rdq.Attempt) {
	e.t.Helper()
	tid := rdq.MustParseID(id)
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, attempts, err := e.st.Get(context.Background(), tid)
		if err != nil {
			e.t.Fatal(err)
		}
		if done(task) {
			return task, attempts
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("task %s never became %s: %s, %d attempts, last error %+v", id, what, task.Status, task.Attempts, task.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond until it holds.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// claims is how many claims the worker has made from queue: the sample
// count of rdq_worker_claim_duration_seconds.
func (e *env) claims(queue string) uint64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rdq_worker_claim_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queue {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

func hasStatus(s rdq.Status) func(*rdq.Task) bool {
	return func(t *rdq.Task) bool { return t.Status == s }
}

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

type envelope struct {
	Version  int               `json:"version"`
	ID       string            `json:"id"`
	Queue    string            `json:"queue"`
	Status   string            `json:"status"`
	Payload  string            `json:"payload"`
	Headers  map[string]string `json:"headers"`
	Attempts int               `json:"attempts"`
	Life     int               `json:"life"`
	History  []struct {
		Number    int    `json:"number"`
		Outcome   string `json:"outcome"`
		ErrorType string `json:"error_type"`
		Message   string `json:"message"`
	} `json:"history"`
}

func submitREST(e *env, queue string, payload string, hdr ...string) string {
	e.t.Helper()
	var out struct {
		Task      envelope `json:"task"`
		Duplicate bool     `json:"duplicate"`
	}
	body := map[string]any{"version": 1, "queue": queue, "handler": "call", "payload": base64.StdEncoding.EncodeToString([]byte(payload)), "content_type": "application/json"}
	resp := e.do("POST", "/v1/tasks", tokSubmitter, body, &out, hdr...)
	if resp.StatusCode != 200 || out.Task.ID == "" || out.Task.Status != "PENDING" {
		e.t.Fatalf("submit to %s: %d %+v", queue, resp.StatusCode, out)
	}
	return out.Task.ID
}

func wantProblem(t *testing.T, resp *http.Response, status int, code string) problem {
	t.Helper()
	var p problem
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("not a problem document (%d): %s", resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if resp.StatusCode != status || p.Status != status || p.Code != code || p.Type != server.ProblemTypePrefix+code || p.Title == "" || p.Detail == "" {
		t.Errorf("got %d %+v, want %d %s", resp.StatusCode, p, status, code)
	}
	return p
}

func wantGRPCCode(t *testing.T, err error, c codes.Code, code server.Code) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != c {
		t.Fatalf("err = %v, want gRPC %s", err, c)
	}
	var reason string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == server.ErrorDomain {
			reason = info.Reason
		}
	}
	if reason != string(code) || server.CodeOf(err) != code {
		t.Errorf("ErrorInfo reason = %q, CodeOf = %q, want %s", reason, server.CodeOf(err), code)
	}
}

func TestEndToEnd(t *testing.T) {
	e := newEnv(t)

	t.Run("REST submit, two failures then success, signed callbacks in the submitter's trace", func(t *testing.T) {
		const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		id := submitREST(e, "flaky", `{"order":1}`, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		task, attempts := e.wait(id, "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		if len(attempts) != 3 || attempts[0].Outcome != rdq.OutcomeRetryableFailure || attempts[1].Outcome != rdq.OutcomeRetryableFailure || attempts[2].Outcome != rdq.OutcomeSuccess {
			t.Fatalf("history: %+v", attempts)
		}
		if attempts[0].ErrorType != "http_503" || !strings.Contains(attempts[0].Message, "flaky failure 1") {
			t.Errorf("first attempt: %q %q", attempts[0].ErrorType, attempts[0].Message)
		}
		calls := e.receivers["flaky"].received(id)
		if len(calls) != 3 {
			t.Fatalf("%d callbacks, want 3", len(calls))
		}
		var lastToken int64
		for i, c := range calls {
			d := c.msg.Data
			if d.Attempt != i+1 || d.Queue != "flaky" || d.Handler != "call" || string(d.Body()) != `{"order":1}` {
				t.Errorf("call %d message: %+v", i, d)
			}
			if d.LeaseToken <= lastToken {
				t.Errorf("call %d lease token %d not increasing", i, d.LeaseToken)
			}
			lastToken = d.LeaseToken
			if tp := c.header.Get("traceparent"); !strings.Contains(tp, traceID) {
				t.Errorf("call %d traceparent %q is not in trace %s", i, tp, traceID)
			}
		}
		if task.Headers["traceparent"] == "" {
			t.Error("the task does not carry the submitter's trace context")
		}
		var got envelope
		if resp := e.do("GET", "/v1/tasks/"+id, tokSubmitter, nil, &got); resp.StatusCode != 200 {
			t.Fatalf("get: %d", resp.StatusCode)
		}
		if got.Version != 1 || got.Status != "SUCCEEDED" || len(got.History) != 3 || got.History[2].Outcome != "SUCCESS" {
			t.Errorf("GET /v1/tasks/{id} = %+v", got)
		}
		if p, _ := base64.StdEncoding.DecodeString(got.Payload); string(p) != `{"order":1}` {
			t.Errorf("payload %q", p)
		}
	})

	t.Run("unsigned and mis-signed callbacks are rejected by the receiver", func(t *testing.T) {
		url := e.receivers["flaky"].srv.URL
		forged := rdq.NewID().String()
		body := []byte(`{"type":"rdq.task","data":{"id":"` + forged + `","queue":"flaky","handler":"call"}}`)
		now := time.Now().Unix()
		for name, sig := range map[string]string{"unsigned": "", "mis-signed": callback.Sign([]byte("not-the-secret-at-all"), forged, now, body)} {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			if sig != "" {
				req.Header.Set(callback.HeaderID, forged)
				req.Header.Set(callback.HeaderTimestamp, strconv.FormatInt(now, 10))
				req.Header.Set(callback.HeaderSignature, sig)
			}
			resp, err := e.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || len(e.receivers["flaky"].received(forged)) != 0 {
				t.Errorf("%s: status %d", name, resp.StatusCode)
			}
		}
	})

	t.Run("gRPC submit and batch", func(t *testing.T) {
		ctx := e.grpcCtx(tokSubmitter)
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		res, err := e.grpc.Submit(ctx, &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{
			Queue: "flaky", Handler: "call", Payload: []byte("grpc"), IdempotencyKey: "grpc-1",
		}})
		if err != nil {
			t.Fatal(err)
		}
		if res.GetDuplicate() || res.GetTask().GetStatus() != "PENDING" {
			t.Fatalf("submit: %v", res)
		}
		again, err := e.grpc.Submit(ctx, &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", IdempotencyKey: "grpc-1"}})
		if err != nil || !again.GetDuplicate() || again.GetTask().GetId() != res.GetTask().GetId() {
			t.Fatalf("duplicate submit: %v %v", again, err)
		}
		task, _ := e.wait(res.GetTask().GetId(), "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		if !strings.Contains(task.Headers["traceparent"], "0af7651916cd43dd8448eb211c80319c") {
			t.Errorf("traceparent %q", task.Headers["traceparent"])
		}
		got, err := e.grpc.GetTask(ctx, &rdqv1.GetTaskRequest{Id: res.GetTask().GetId()})
		if err != nil || got.GetTask().GetStatus() != "SUCCEEDED" || len(got.GetHistory()) != 3 {
			t.Fatalf("get: %v %v", got, err)
		}

		batch, err := e.grpc.SubmitBatch(ctx, &rdqv1.SubmitBatchRequest{Tasks: []*rdqv1.TaskSpec{
			{Queue: "flaky", Handler: "call", Payload: []byte("a")},
			{Queue: "bad queue", Handler: "call"},
			{Queue: "flaky", Handler: "nope"},
			{Queue: "flaky", Handler: "call", DelayMs: -1},
			{Queue: "flaky", Handler: "call", ContentType: "text/plain\r\nX-Evil: 1"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		r := batch.GetResults()
		if len(r) != 5 || r[0].GetTask().GetId() == "" || r[0].GetError() != nil {
			t.Fatalf("batch: %v", batch)
		}
		for i := 1; i < len(r); i++ {
			if r[i].GetError().GetCode() != "invalid_argument" || r[i].GetTask() != nil {
				t.Errorf("batch item %d: %v", i, r[i])
			}
		}
		e.wait(r[0].GetTask().GetId(), "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
	})

	t.Run("a task's own budget and timeout travel over REST and gRPC, within the queue's bounds", func(t *testing.T) {
		var out struct {
			Task struct {
				ID          string `json:"id"`
				MaxAttempts int    `json:"max_attempts"`
				TimeoutMs   int64  `json:"timeout_ms"`
			} `json:"task"`
		}
		body := map[string]any{"version": 1, "queue": "flaky", "handler": "call", "max_attempts": 5, "timeout_ms": 2000}
		if resp := e.do("POST", "/v1/tasks", tokSubmitter, body, &out); resp.StatusCode != 200 || out.Task.MaxAttempts != 5 || out.Task.TimeoutMs != 2000 {
			t.Fatalf("REST submit: %d %+v", resp.StatusCode, out)
		}
		task, _ := e.wait(out.Task.ID, "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		if task.MaxAttempts != 5 || task.Timeout != 2*time.Second {
			t.Errorf("stored after REST: max attempts %d, timeout %s; want 5 and 2s", task.MaxAttempts, task.Timeout)
		}

		ctx := e.grpcCtx(tokSubmitter)
		res, err := e.grpc.Submit(ctx, &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", MaxAttempts: 7, TimeoutMs: 1500}})
		if err != nil {
			t.Fatal(err)
		}
		if res.GetTask().GetMaxAttempts() != 7 || res.GetTask().GetTimeoutMs() != 1500 {
			t.Errorf("gRPC submit answered max attempts %d, timeout %d ms; want 7 and 1500", res.GetTask().GetMaxAttempts(), res.GetTask().GetTimeoutMs())
		}
		e.wait(res.GetTask().GetId(), "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		got, err := e.grpc.GetTask(ctx, &rdqv1.GetTaskRequest{Id: res.GetTask().GetId()})
		if err != nil || got.GetTask().GetMaxAttempts() != 7 || got.GetTask().GetTimeoutMs() != 1500 {
			t.Fatalf("gRPC get: %v %v", got, err)
		}

		wantProblem(t, e.do("POST", "/v1/tasks", tokSubmitter, map[string]any{"version": 1, "queue": "flaky", "handler": "call", "max_attempts": 1000}, nil), 400, "invalid_argument")
		for _, spec := range []*rdqv1.TaskSpec{
			{Queue: "flaky", Handler: "call", MaxAttempts: 1000},
			{Queue: "flaky", Handler: "call", MaxAttempts: -1},
			{Queue: "flaky", Handler: "call", TimeoutMs: -5},
			{Queue: "flaky", Handler: "call", TimeoutMs: (2 * time.Hour).Milliseconds()},
		} {
			if _, err := e.grpc.Submit(ctx, &rdqv1.SubmitRequest{Task: spec}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("gRPC submit of max attempts %d, timeout %d ms: %v, want InvalidArgument", spec.MaxAttempts, spec.TimeoutMs, err)
			}
		}
	})

	var deadID string
	t.Run("always 500 lands in the DLQ with status and body in its history", func(t *testing.T) {
		deadID = submitREST(e, "fail500", `{"order":500}`)
		task, attempts := e.wait(deadID, "DEAD", hasStatus(rdq.StatusDead))
		if len(attempts) != 3 || task.LastError.Type != "http_500" {
			t.Fatalf("attempts %d, last error %+v", len(attempts), task.LastError)
		}
		for _, a := range attempts {
			if a.Outcome != rdq.OutcomeRetryableFailure || !strings.Contains(a.Message, "500 Internal Server Error") || !strings.Contains(a.Message, "upstream exploded: connection pool exhausted") {
				t.Errorf("attempt %d: %s %q", a.Number, a.Outcome, a.Message)
			}
		}
		var list struct {
			Tasks []envelope `json:"tasks"`
		}
		if resp := e.do("GET", "/v1/dlq/tasks?queue=fail500", tokOperator, nil, &list); resp.StatusCode != 200 || len(list.Tasks) != 1 || list.Tasks[0].ID != deadID || list.Tasks[0].Payload != "" {
			t.Fatalf("dlq list: %d %+v", resp.StatusCode, list)
		}
		// The life filter: the task never was redriven (life 0).
		for query, want := range map[string]int{"life_below=1": 1, "life_min=1": 0, "life_min=0&life_below=2": 1} {
			list.Tasks = nil
			if resp := e.do("GET", "/v1/dlq/tasks?queue=fail500&"+query, tokOperator, nil, &list); resp.StatusCode != 200 || len(list.Tasks) != want {
				t.Fatalf("dlq list %s: %d %d tasks, want %d", query, resp.StatusCode, len(list.Tasks), want)
			}
		}
		for _, lf := range []struct {
			min, below int32
			want       int
		}{{0, 1, 1}, {1, 0, 0}} {
			res, err := e.grpc.ListDead(e.grpcCtx(tokOperator), &rdqv1.ListDeadRequest{Filter: &rdqv1.DeadFilter{Queue: "fail500", LifeMin: lf.min, LifeBelow: lf.below}})
			if err != nil || len(res.GetTasks()) != lf.want {
				t.Fatalf("gRPC ListDead life %d..%d: %d tasks, %v; want %d", lf.min, lf.below, len(res.GetTasks()), err, lf.want)
			}
		}
		var groups struct {
			Groups []struct {
				ErrorType string `json:"error_type"`
				Count     int64  `json:"count"`
			} `json:"groups"`
		}
		if resp := e.do("GET", "/v1/dlq/groups?queue=fail500", tokOperator, nil, &groups); resp.StatusCode != 200 || len(groups.Groups) != 1 || groups.Groups[0].Count != 1 || groups.Groups[0].ErrorType != "http_500" {
			t.Fatalf("dlq groups: %d %+v", resp.StatusCode, groups)
		}
		var shown envelope
		if resp := e.do("GET", "/v1/dlq/tasks/"+deadID, tokOperator, nil, &shown); resp.StatusCode != 200 || shown.Status != "DEAD" || len(shown.History) != 3 {
			t.Fatalf("dlq show: %d %+v", resp.StatusCode, shown)
		}
	})

	t.Run("a submitter gets 403 on redrive, over REST and gRPC, and nothing changes", func(t *testing.T) {
		body := map[string]any{"ids": []string{deadID}, "reason": "try"}
		wantProblem(t, e.do("POST", "/v1/dlq:redrive", tokSubmitter, body, nil), 403, "permission_denied")
		_, err := e.grpc.Redrive(e.grpcCtx(tokSubmitter), &rdqv1.RedriveRequest{Ids: []string{deadID}, Reason: "try"})
		wantGRPCCode(t, err, codes.PermissionDenied, server.CodePermissionDenied)
		wantProblem(t, e.do("GET", "/v1/dlq/tasks", tokSubmitter, nil, nil), 403, "permission_denied")
		wantProblem(t, e.do("POST", "/v1/queues:pause", tokOperator, map[string]string{"queue": "fail500"}, nil), 403, "permission_denied")
		// A scoped operator may not act on every queue at once.
		wantProblem(t, e.do("POST", "/v1/dlq:redrive", tokOrdersOps, map[string]any{"all": true, "reason": "x"}, nil), 403, "permission_denied")
		task, _, err := e.st.Get(context.Background(), rdq.MustParseID(deadID))
		if err != nil || task.Status != rdq.StatusDead || task.Life != 0 {
			t.Fatalf("task changed: %+v %v", task, err)
		}
	})

	t.Run("redrive over REST after the fix succeeds, audited with the principal", func(t *testing.T) {
		e.healthy.Store(true)
		defer e.healthy.Store(false)
		var out struct {
			Redriven int64 `json:"redriven"`
			Results  []struct {
				ID    string          `json:"id"`
				Error json.RawMessage `json:"error"`
			} `json:"results"`
		}
		missing := rdq.NewID().String()
		resp := e.do("POST", "/v1/dlq:redrive", tokOrdersOps, map[string]any{"ids": []string{deadID, missing}, "reason": "pool size raised"}, &out)
		if resp.StatusCode != 200 || out.Redriven != 1 || len(out.Results) != 2 || out.Results[0].Error != nil || !strings.Contains(string(out.Results[1].Error), "not_found") {
			t.Fatalf("redrive: %d %+v", resp.StatusCode, out)
		}
		task, attempts := e.wait(deadID, "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		if task.Life != 1 || len(attempts) != 4 || attempts[3].Number != 4 || attempts[3].Life != 1 {
			t.Errorf("after redrive: life %d, attempts %+v", task.Life, attempts)
		}
		var audit struct {
			Entries []struct {
				Actor  string   `json:"actor"`
				Action string   `json:"action"`
				IDs    []string `json:"ids"`
				Reason string   `json:"reason"`
				Queues []string `json:"queues"`
			} `json:"entries"`
		}
		if resp := e.do("GET", "/v1/audit?action=redrive", tokOperator, nil, &audit); resp.StatusCode != 200 || len(audit.Entries) != 1 {
			t.Fatalf("audit: %d %+v", resp.StatusCode, audit)
		}
		if a := audit.Entries[0]; a.Actor != "orders-team" || a.Reason != "pool size raised" || len(a.IDs) != 1 || a.IDs[0] != deadID ||
			len(a.Queues) != 1 || a.Queues[0] != "fail500" {
			t.Errorf("audit entry: %+v", a)
		}
	})

	t.Run("redrive by filter over gRPC, purge over REST", func(t *testing.T) {
		id := submitREST(e, "fail500", `{"order":501}`)
		e.wait(id, "DEAD", hasStatus(rdq.StatusDead))
		ctx := e.grpcCtx(tokOperator)
		res, err := e.grpc.Redrive(ctx, &rdqv1.RedriveRequest{Filter: &rdqv1.DeadFilter{Queue: "fail500"}, Reason: "retry once more", DelayMs: 10})
		if err != nil || res.GetRedriven() != 1 {
			t.Fatalf("redrive by filter: %v %v", res, err)
		}
		e.wait(id, "DEAD again", func(t *rdq.Task) bool { return t.Status == rdq.StatusDead && t.Life == 1 })
		var audit struct {
			Entries []struct {
				Filter  string            `json:"filter"`
				Details map[string]string `json:"details"`
			} `json:"entries"`
		}
		if resp := e.do("GET", "/v1/audit?action=redrive&page_size=1", tokOperator, nil, &audit); resp.StatusCode != 200 || len(audit.Entries) != 1 {
			t.Fatalf("audit: %d %+v", resp.StatusCode, audit)
		}
		if a := audit.Entries[0]; a.Filter == "" || a.Details["delay"] != "10ms" || a.Details["spread"] != "0s" || a.Details["max_life"] == "" {
			t.Errorf("bulk redrive audit entry lacks delay, spread or max life: %+v", a)
		}
		_, err = e.grpc.Redrive(ctx, &rdqv1.RedriveRequest{Reason: "everything?"})
		wantGRPCCode(t, err, codes.InvalidArgument, server.CodeInvalidArgument)

		var out struct {
			Purged int64 `json:"purged"`
		}
		if resp := e.do("POST", "/v1/dlq:purge", tokOperator, map[string]any{"filter": map[string]string{"queue": "fail500"}, "reason": "obsolete"}, &out); resp.StatusCode != 200 || out.Purged != 1 {
			t.Fatalf("purge: %d %+v", resp.StatusCode, out)
		}
		if _, _, err := e.st.Get(context.Background(), rdq.MustParseID(id)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("purged task still there: %v", err)
		}
	})

	t.Run("a task outside the caller's grants is not found; the lease owner is for operators", func(t *testing.T) {
		id := submitREST(e, "flaky", `{"order":"grants"}`)
		e.wait(id, "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		// orders-team operates fail5* only: to it the task does not exist.
		p := wantProblem(t, e.do("GET", "/v1/tasks/"+id, tokOrdersOps, nil, nil), 404, "not_found")
		if strings.Contains(p.Detail, "flaky") || strings.Contains(p.Detail, "store") {
			t.Errorf("404 detail %q names the queue or the store", p.Detail)
		}
		wantProblem(t, e.do("GET", "/v1/dlq/tasks/"+id, tokOrdersOps, nil, nil), 404, "not_found")
		_, err := e.grpc.GetTask(e.grpcCtx(tokOrdersOps), &rdqv1.GetTaskRequest{Id: id})
		wantGRPCCode(t, err, codes.NotFound, server.CodeNotFound)
		missing := rdq.NewID().String()
		// A request naming tasks by IDs answers for it as for a task that
		// does not exist, and leaves it alone.
		answer := func(path, taskID string) string {
			resp := e.do("POST", path, tokOrdersOps, map[string]any{"ids": []string{taskID}, "reason": "r"}, nil)
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Status + " " + strings.ReplaceAll(string(raw), taskID, "ID")
		}
		for _, path := range []string{"/v1/dlq:redrive", "/v1/dlq:purge", "/v1/tasks:retry", "/v1/tasks:cancel"} {
			if foreign, unknown := answer(path, id), answer(path, missing); foreign != unknown || !strings.HasPrefix(foreign, "200 ") {
				t.Errorf("POST %s naming a task outside the caller's grants: %s; naming no task: %s", path, foreign, unknown)
			}
		}
		if task, _, err := e.st.Get(context.Background(), rdq.MustParseID(id)); err != nil || task.Status != rdq.StatusSucceeded {
			t.Errorf("the task after requests outside the caller's grants: %v %v", task, err)
		}
		if p := wantProblem(t, e.do("GET", "/v1/tasks/"+missing, tokSubmitter, nil, nil), 404, "not_found"); strings.Contains(p.Detail, "store") {
			t.Errorf("404 detail %q names the store", p.Detail)
		}

		type owned struct {
			LeaseOwner string `json:"lease_owner"`
			History    []struct {
				WorkerID string `json:"worker_id"`
			} `json:"history"`
		}
		var bySubmitter, byOperator owned
		e.do("GET", "/v1/tasks/"+id, tokSubmitter, nil, &bySubmitter)
		e.do("GET", "/v1/tasks/"+id, tokOperator, nil, &byOperator)
		if byOperator.LeaseOwner != "e2e-worker" || len(byOperator.History) == 0 || byOperator.History[0].WorkerID != "e2e-worker" {
			t.Errorf("operator view: %+v", byOperator)
		}
		if bySubmitter.LeaseOwner != "" || len(bySubmitter.History) != len(byOperator.History) {
			t.Errorf("submitter sees the worker: %+v", bySubmitter)
		}
		for i, a := range bySubmitter.History {
			if a.WorkerID != "" {
				t.Errorf("submitter sees the worker of attempt %d: %q", i+1, a.WorkerID)
			}
		}
		got, err := e.grpc.GetTask(e.grpcCtx(tokSubmitter), &rdqv1.GetTaskRequest{Id: id})
		if err != nil || got.GetTask().GetLeaseOwner() != "" || got.GetHistory()[0].GetWorkerId() != "" {
			t.Errorf("gRPC submitter view: %v %v", got, err)
		}
	})

	t.Run("pause and resume reasons follow the audit rules", func(t *testing.T) {
		for name, reason := range map[string]string{
			"empty":      "",
			"control":    "maintenance\x1b[2J",
			"newline":    "line one\nline two",
			"too long":   strings.Repeat("r", 1025),
			"C1 control": "next\u0085line",
		} {
			resp := e.do("POST", "/v1/queues:pause", tokAdmin, map[string]string{"queue": "flaky", "reason": reason}, nil)
			if resp.StatusCode != 400 {
				t.Errorf("%s reason: status %d, want 400", name, resp.StatusCode)
			}
		}
		_, err := e.grpc.ResumeQueue(e.grpcCtx(tokAdmin), &rdqv1.ResumeQueueRequest{Queue: "flaky"})
		wantGRPCCode(t, err, codes.InvalidArgument, server.CodeInvalidArgument)
		var audit struct {
			Entries []json.RawMessage `json:"entries"`
		}
		for _, action := range []string{"pause", "resume"} {
			if e.do("GET", "/v1/audit?action="+action, tokOperator, nil, &audit); len(audit.Entries) != 0 {
				t.Errorf("a refused %s was audited: %s", action, audit.Entries)
			}
		}
	})

	t.Run("400 is dead at once", func(t *testing.T) {
		id := submitREST(e, "bad400", `{}`)
		task, attempts := e.wait(id, "DEAD", hasStatus(rdq.StatusDead))
		if len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomePermanentFailure || task.LastError.Type != "http_400" || !strings.Contains(attempts[0].Message, "order 42 has no lines") {
			t.Fatalf("attempts: %+v", attempts)
		}
	})

	t.Run("a hanging callback times out as a failed attempt", func(t *testing.T) {
		id := submitREST(e, "hang", `{}`)
		_, attempts := e.wait(id, "DEAD", hasStatus(rdq.StatusDead))
		if len(attempts) != 2 {
			t.Fatalf("attempts: %+v", attempts)
		}
		for _, a := range attempts {
			if a.Outcome != rdq.OutcomeRetryableFailure || a.ErrorType != "timeout" {
				t.Errorf("attempt %d: %s %s %q", a.Number, a.Outcome, a.ErrorType, a.Message)
			}
		}
	})

	t.Run("a redirect is not followed", func(t *testing.T) {
		id := submitREST(e, "redirect", `{}`)
		_, attempts := e.wait(id, "DEAD", hasStatus(rdq.StatusDead))
		if len(attempts) != 1 || attempts[0].Outcome != rdq.OutcomePermanentFailure || !strings.Contains(attempts[0].Message, "not followed") {
			t.Fatalf("attempts: %+v", attempts)
		}
		if n := e.redirects.Load(); n != 0 {
			t.Errorf("the redirect target was called %d times", n)
		}
	})

	t.Run("malformed and oversized requests get a clear 4xx and change nothing", func(t *testing.T) {
		before := totalTasks(t, e.st)
		valid := func(mod func(m map[string]any)) map[string]any {
			m := map[string]any{"version": 1, "queue": "nothing", "handler": "call", "payload": "e30="}
			mod(m)
			return m
		}
		cases := []struct {
			name   string
			token  string
			body   any
			status int
			code   string
			hdr    []string
		}{
			{"not JSON", tokSubmitter, `{"version":1,`, 400, "invalid_argument", nil},
			{"an array", tokSubmitter, `[1,2]`, 400, "invalid_argument", nil},
			{"empty body", tokSubmitter, ``, 400, "invalid_argument", nil},
			{"no version", tokSubmitter, valid(func(m map[string]any) { delete(m, "version") }), 400, "invalid_argument", nil},
			{"bad queue name", tokSubmitter, valid(func(m map[string]any) { m["queue"] = "no spaces" }), 400, "invalid_argument", nil},
			{"queue not served", tokSubmitter, valid(func(m map[string]any) { m["queue"] = "elsewhere" }), 400, "invalid_argument", nil},
			{"content type with CR LF", tokSubmitter, valid(func(m map[string]any) { m["content_type"] = "text/plain\r\nX-Evil: 1" }), 400, "invalid_argument", nil},
			{"content type not a media type", tokSubmitter, valid(func(m map[string]any) { m["content_type"] = "json" }), 400, "invalid_argument", nil},
			{"payload not base64", tokSubmitter, valid(func(m map[string]any) { m["payload"] = "%%%" }), 400, "invalid_argument", nil},
			{"oversized", tokSubmitter, valid(func(m map[string]any) { m["payload"] = base64.StdEncoding.EncodeToString(make([]byte, 100<<10)) }), 413, "payload_too_large", nil},
			{"form encoded", tokSubmitter, "queue=x", 415, "unsupported_media_type", []string{"Content-Type", "application/x-www-form-urlencoded"}},
			{"no token", "", valid(func(map[string]any) {}), 401, "unauthenticated", nil},
			{"bad token", "not-a-valid-token-at-all", valid(func(map[string]any) {}), 401, "unauthenticated", nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := e.do("POST", "/v1/tasks", tc.token, tc.body, nil, tc.hdr...)
				p := wantProblem(t, resp, tc.status, tc.code)
				if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				t.Logf("%d %s: %s", p.Status, p.Code, p.Detail)
			})
		}
		wantProblem(t, e.do("GET", "/v1/tasks/not-a-uuid", tokSubmitter, nil, nil), 400, "invalid_argument")
		wantProblem(t, e.do("GET", "/v1/tasks/"+rdq.NewID().String(), tokSubmitter, nil, nil), 404, "not_found")
		wantProblem(t, e.do("DELETE", "/v1/tasks", tokSubmitter, nil, nil), 405, "method_not_allowed")
		wantProblem(t, e.do("GET", "/v1/nowhere", tokSubmitter, nil, nil), 404, "not_found")
		wantProblem(t, e.do("GET", "/v1/dlq/tasks?dead_after=yesterday", tokOperator, nil, nil), 400, "invalid_argument")
		wantProblem(t, e.do("GET", "/v1/dlq/tasks?life_min=two", tokOperator, nil, nil), 400, "invalid_argument")
		wantProblem(t, e.do("GET", "/v1/dlq/tasks?life_min=3&life_below=2", tokOperator, nil, nil), 400, "invalid_argument")
		wantProblem(t, e.do("GET", "/v1/dlq/tasks?life_below=-1", tokOperator, nil, nil), 400, "invalid_argument")
		wantProblem(t, e.do("POST", "/v1/dlq:redrive", tokOperator, `{"ids":["x"],"reason":"r"}`, nil), 400, "invalid_argument")
		wantProblem(t, e.do("POST", "/v1/dlq:redrive", tokOperator, `{"ids":"x"}`, nil), 400, "invalid_argument")

		_, err := e.grpc.Submit(e.grpcCtx(tokSubmitter), &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "nothing", Handler: ""}})
		wantGRPCCode(t, err, codes.InvalidArgument, server.CodeInvalidArgument)
		_, err = e.grpc.Submit(e.grpcCtx(tokSubmitter), &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "nothing", Handler: "call", Payload: make([]byte, 100<<10)}})
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("oversized gRPC message: %v", err)
		}
		_, err = e.grpc.Submit(context.Background(), &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "nothing", Handler: "call"}})
		wantGRPCCode(t, err, codes.Unauthenticated, server.CodeUnauthenticated)
		_, err = e.grpc.GetTask(e.grpcCtx(tokSubmitter), &rdqv1.GetTaskRequest{Id: rdq.NewID().String()})
		wantGRPCCode(t, err, codes.NotFound, server.CodeNotFound)

		if after := totalTasks(t, e.st); after != before {
			t.Errorf("tasks went from %d to %d", before, after)
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		if _, ok := store.PauserOf(e.st); !ok {
			// Without the store capability the API says so.
			wantProblem(t, e.do("POST", "/v1/queues:pause", tokAdmin, map[string]string{"queue": "flaky", "reason": "maintenance"}, nil), 501, "unimplemented")
			_, err := e.grpc.ResumeQueue(e.grpcCtx(tokAdmin), &rdqv1.ResumeQueueRequest{Queue: "flaky"})
			wantGRPCCode(t, err, codes.Unimplemented, server.CodeUnimplemented)
			return
		}
		if resp := e.do("POST", "/v1/queues:pause", tokAdmin, map[string]string{"queue": "flaky", "reason": "maintenance"}, nil); resp.StatusCode != 200 {
			t.Fatalf("pause: %d", resp.StatusCode)
		}
		id := submitREST(e, "flaky", `{"order":"paused"}`)
		// Two more claims of the queue mean one started after the task
		// was stored: it saw the task, and the pause kept it.
		claims := e.claims("flaky")
		e.waitFor("two more claims of the paused queue", func() bool { return e.claims("flaky") >= claims+2 })
		if task, _, err := e.st.Get(context.Background(), rdq.MustParseID(id)); err != nil || task.Status != rdq.StatusPending || task.Attempts != 0 {
			t.Fatalf("task of a paused queue ran: %+v %v", task, err)
		}
		var stats struct {
			Queues []struct {
				Queue  string `json:"queue"`
				Paused bool   `json:"paused"`
			} `json:"queues"`
		}
		e.do("GET", "/v1/queues", tokOperator, nil, &stats)
		paused := false
		for _, q := range stats.Queues {
			paused = paused || (q.Queue == "flaky" && q.Paused)
		}
		if !paused {
			t.Errorf("stats do not show flaky paused: %+v", stats)
		}
		if _, err := e.grpc.ResumeQueue(e.grpcCtx(tokAdmin), &rdqv1.ResumeQueueRequest{Queue: "flaky", Reason: "done"}); err != nil {
			t.Fatal(err)
		}
		e.wait(id, "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		var audit struct {
			Entries []struct {
				Actor string `json:"actor"`
			} `json:"entries"`
		}
		if e.do("GET", "/v1/audit?action=pause", tokOperator, nil, &audit); len(audit.Entries) != 1 || audit.Entries[0].Actor != "root" {
			t.Errorf("pause audit: %+v", audit)
		}
	})

	t.Run("breakers", func(t *testing.T) {
		open := map[string]any{"queue": "flaky", "handler": "call", "state": "open", "reason": "INC-12"}
		if _, ok := store.HandlerPauserOf(e.st); !ok {
			wantProblem(t, e.do("POST", "/v1/breakers:set", tokAdmin, open, nil), 501, "unimplemented")
			return
		}
		// Forcing a breaker is the admin's, reading it the operator's.
		wantProblem(t, e.do("POST", "/v1/breakers:set", tokOperator, open, nil), 403, "permission_denied")
		wantProblem(t, e.do("POST", "/v1/breakers:set", tokAdmin, map[string]any{"queue": "flaky", "handler": "call", "state": "ajar"}, nil), 400, "invalid_argument")
		var set struct {
			Changed bool `json:"changed"`
		}
		if resp := e.do("POST", "/v1/breakers:set", tokAdmin, open, &set); resp.StatusCode != 200 || !set.Changed {
			t.Fatalf("open: %d %+v", resp.StatusCode, set)
		}
		id := submitREST(e, "flaky", `{"order":"held"}`)
		var list struct {
			Breakers []struct {
				Queue, Handler, State, Actor, Reason string
			} `json:"breakers"`
		}
		e.do("GET", "/v1/breakers?queue=flaky", tokOperator, nil, &list)
		if len(list.Breakers) != 1 || list.Breakers[0].State != "open" || list.Breakers[0].Handler != "call" || list.Breakers[0].Actor != "root" || list.Breakers[0].Reason != "INC-12" {
			t.Fatalf("GET /v1/breakers: %+v", list)
		}
		got, err := e.grpc.ListBreakers(e.grpcCtx(tokOperator), &rdqv1.ListBreakersRequest{})
		if err != nil || len(got.GetBreakers()) != 1 || got.GetBreakers()[0].GetQueue() != "flaky" || got.GetBreakers()[0].GetProbeAt() != nil {
			t.Fatalf("ListBreakers over gRPC: %v, %v", got, err)
		}
		if task, _, err := e.st.Get(context.Background(), rdq.MustParseID(id)); err != nil || task.Status != rdq.StatusPending || task.Attempts != 0 {
			t.Fatalf("task of an open breaker: %+v %v", task, err)
		}
		res, err := e.grpc.SetBreaker(e.grpcCtx(tokAdmin), &rdqv1.SetBreakerRequest{Queue: "flaky", Handler: "call", State: "closed", Reason: "fixed"})
		if err != nil || !res.GetChanged() {
			t.Fatalf("SetBreaker closed over gRPC: %v, %v", res, err)
		}
		e.wait(id, "SUCCEEDED", hasStatus(rdq.StatusSucceeded))
		var audit struct {
			Entries []struct {
				Actor  string `json:"actor"`
				Reason string `json:"reason"`
			} `json:"entries"`
		}
		if e.do("GET", "/v1/audit?action=pause_handler", tokOperator, nil, &audit); len(audit.Entries) != 1 || audit.Entries[0].Actor != "root" || audit.Entries[0].Reason != "INC-12" {
			t.Errorf("pause_handler audit: %+v", audit)
		}
	})

	t.Run("stats, health and metrics", func(t *testing.T) {
		var stats struct {
			Queues []struct {
				Queue string `json:"queue"`
				Dead  int64  `json:"dead"`
			} `json:"queues"`
		}
		if resp := e.do("GET", "/v1/queues", tokOperator, nil, &stats); resp.StatusCode != 200 || len(stats.Queues) == 0 {
			t.Fatalf("stats: %d %+v", resp.StatusCode, stats)
		}
		var scoped struct {
			Queues []struct {
				Queue string `json:"queue"`
			} `json:"queues"`
		}
		e.do("GET", "/v1/queues", tokOrdersOps, nil, &scoped)
		for _, q := range scoped.Queues {
			if !strings.HasPrefix(q.Queue, "fail5") {
				t.Errorf("scoped operator sees queue %s", q.Queue)
			}
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			if resp := e.do("GET", path, "", nil, nil); resp.StatusCode != 200 {
				t.Errorf("%s: %d", path, resp.StatusCode)
			}
		}
		resp := e.do("GET", "/metrics", "", nil, nil)
		raw, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`rdq_server_submitted_total{queue="flaky"}`,
			`rdq_queue_dead_tasks{queue="bad400"} 1`,
			`rdq_queue_oldest_due_age_seconds{queue="flaky"}`,
			`rdq_server_requests_total{code="permission_denied",method="Redrive"}`,
			`rdq_dlq_redriven_total`,
			`rdq_worker_attempts_total`,
		} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

func totalTasks(t *testing.T, st *pgstore.Store) int64 {
	t.Helper()
	stats, err := st.Stats(context.Background(), store.StatsParams{SucceededWindow: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range stats {
		n += s.Pending + s.InFlight + s.Dead + s.Succeeded
	}
	return n
}

func TestDisallowedCallbackTargetRefused(t *testing.T) {
	caller, err := callback.New(callback.Config{Secret: secret, Allow: []string{"https://hooks.example.com/rdq/"}})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	_, err = caller.Router(map[string]callback.Target{"orders": {URL: "http://127.0.0.1:9/rdq/orders"}})
	if !errors.Is(err, callback.ErrNotAllowed) {
		t.Fatalf("err = %v, want ErrNotAllowed", err)
	}
}
