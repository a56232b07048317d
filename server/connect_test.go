package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server"
)

// rpcClient returns a Connect client of one rdq.v1 method on the REST
// handler, speaking the protocol opts choose (Connect with binary protobuf
// by default, gRPC-Web with connect.WithGRPCWeb), with token.
func rpcClient[Req, Res any](e *env, method, token string, opts ...connect.ClientOption) func(*Req) (*Res, error) {
	c := connect.NewClient[Req, Res](e.hc, e.rest.URL+server.RPCPath+method, opts...)
	return func(req *Req) (*Res, error) {
		r := connect.NewRequest(req)
		if token != "" {
			r.Header().Set("Authorization", "Bearer "+token)
		}
		resp, err := c.CallUnary(context.Background(), r)
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
}

// wantConnectCode checks a Connect error: its code and the stable code in
// its ErrorInfo detail.
func wantConnectCode(t *testing.T, err error, c connect.Code, code server.Code) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != c {
		t.Fatalf("err = %v, want Connect code %s", err, c)
	}
	var reason string
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*errdetails.ErrorInfo); derr == nil && ok && info.Domain == server.ErrorDomain {
			reason = info.Reason
		}
	}
	if reason != string(code) {
		t.Errorf("ErrorInfo reason = %q, want %s", reason, code)
	}
}

// The rdq.v1 service answers on the REST handler over the Connect protocol
// (JSON and binary protobuf) and gRPC-Web, from the gRPC implementation:
// the same authentication, roles and stable codes, and the same limits.
func TestConnectAndGRPCWeb(t *testing.T) {
	e := newEnv(t)
	if want := "/" + rdqv1.RdqService_ServiceDesc.ServiceName + "/"; server.RPCPath != want {
		t.Fatalf("RPCPath = %q, want %q", server.RPCPath, want)
	}

	// Connect with JSON, as curl would send it: without the optional
	// Connect-Protocol-Version header.
	post := func(token, body string) (*http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequest("POST", e.rest.URL+server.RPCPath+"Submit", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%d: decoding: %v", resp.StatusCode, err)
		}
		return resp, out
	}
	resp, out := post(tokSubmitter, `{"task": {"queue": "flaky", "handler": "call", "payload": "eyJvIjoxfQ==", "contentType": "application/json"}}`)
	task, _ := out["task"].(map[string]any)
	id, _ := task["id"].(string)
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("Connect JSON submit: %d %v", resp.StatusCode, out)
	}
	e.wait(id, "SUCCEEDED", hasStatus(rdq.StatusSucceeded))

	resp, out = post("", `{"task": {"queue": "flaky", "handler": "call"}}`)
	if resp.StatusCode != http.StatusUnauthorized || out["code"] != "unauthenticated" {
		t.Errorf("no token: %d %v, want 401 unauthenticated", resp.StatusCode, out)
	}
	// A body past MaxBodyBytes (64 KiB here) is refused with the stable
	// code payload_too_large, and submits nothing.
	big := `{"task": {"queue": "flaky", "handler": "call", "idempotency_key": "too-big", "payload": "` + strings.Repeat("A", 128<<10) + `"}}`
	if resp, out = post(tokSubmitter, big); resp.StatusCode != http.StatusTooManyRequests || out["code"] != "resource_exhausted" {
		t.Errorf("a 128 KiB body: %d %v, want 429 resource_exhausted", resp.StatusCode, out)
	}
	submitBig := rpcClient[rdqv1.SubmitRequest, rdqv1.SubmitResponse](e, "Submit", tokSubmitter)
	_, err := submitBig(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", IdempotencyKey: "too-big", Payload: make([]byte, 128<<10)}})
	wantConnectCode(t, err, connect.CodeResourceExhausted, server.CodePayloadTooLarge)
	// Compressed, the same message is a few hundred bytes, under the limit
	// on the wire: it is refused once it grows past it, with the stable
	// code, in Connect's and in gRPC-Web's framing.
	for _, proto := range []connect.ClientOption{connect.WithProtoJSON(), connect.WithGRPCWeb()} {
		zipped := rpcClient[rdqv1.SubmitRequest, rdqv1.SubmitResponse](e, "Submit", tokSubmitter, proto, connect.WithSendGzip())
		_, err = zipped(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", IdempotencyKey: "too-big", Payload: make([]byte, 128<<10)}})
		wantConnectCode(t, err, connect.CodeResourceExhausted, server.CodePayloadTooLarge)
		small, err := zipped(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", Payload: []byte(`{"zipped":true}`)}})
		if err != nil || small.GetTask().GetId() == "" {
			t.Errorf("a compressed Submit under the limit: %v, %v", small, err)
		}
	}
	byKey := rpcClient[rdqv1.TaskByKeyRequest, rdqv1.TaskByKeyResponse](e, "TaskByKey", tokOperator)
	_, err = byKey(&rdqv1.TaskByKeyRequest{Queue: "flaky", Key: "too-big"})
	wantConnectCode(t, err, connect.CodeNotFound, server.CodeNotFound)

	// Connect with binary protobuf: an operator reads the task's history.
	get := rpcClient[rdqv1.GetTaskRequest, rdqv1.GetTaskResponse](e, "GetTask", tokOperator)
	got, err := get(&rdqv1.GetTaskRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetId() != id || len(got.GetHistory()) != 3 || got.GetHistory()[0].GetErrorType() != "http_503" {
		t.Errorf("GetTask = %v, want 3 attempts, the first an http_503", got)
	}

	// gRPC-Web: a submitter may not redrive; an operator of other queues
	// reads this one's task as missing.
	redrive := rpcClient[rdqv1.RedriveRequest, rdqv1.RedriveResponse](e, "Redrive", tokSubmitter, connect.WithGRPCWeb())
	_, err = redrive(&rdqv1.RedriveRequest{Filter: &rdqv1.DeadFilter{Queue: "flaky"}, Reason: "retry"})
	wantConnectCode(t, err, connect.CodePermissionDenied, server.CodePermissionDenied)
	foreign := rpcClient[rdqv1.GetTaskRequest, rdqv1.GetTaskResponse](e, "GetTask", tokOrdersOps, connect.WithGRPCWeb())
	_, err = foreign(&rdqv1.GetTaskRequest{Id: id})
	wantConnectCode(t, err, connect.CodeNotFound, server.CodeNotFound)
	webGet := rpcClient[rdqv1.GetTaskRequest, rdqv1.GetTaskResponse](e, "GetTask", tokOperator, connect.WithGRPCWeb())
	if got, err := webGet(&rdqv1.GetTaskRequest{Id: id}); err != nil || got.GetTask().GetStatus() != "SUCCEEDED" {
		t.Errorf("gRPC-Web GetTask = %v, %v", got, err)
	}
}

// Over HTTP/2, the same path speaks the gRPC protocol too.
func TestRPCPathSpeaksGRPC(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewUnstartedServer(e.svc.Handler())
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	submit := connect.NewClient[rdqv1.SubmitRequest, rdqv1.SubmitResponse](srv.Client(), srv.URL+server.RPCPath+"Submit", connect.WithGRPC())
	req := connect.NewRequest(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", Payload: []byte("{}")}})
	req.Header().Set("Authorization", "Bearer "+tokSubmitter)
	resp, err := submit.CallUnary(context.Background(), req)
	if err != nil || resp.Msg.GetTask().GetStatus() != "PENDING" || resp.Msg.GetTask().GetId() == "" {
		t.Fatalf("gRPC Submit = %v, %v", resp, err)
	}
	zipped := connect.NewClient[rdqv1.SubmitRequest, rdqv1.SubmitResponse](srv.Client(), srv.URL+server.RPCPath+"Submit", connect.WithGRPC(), connect.WithSendGzip())
	req = connect.NewRequest(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", Payload: []byte(`{"zipped":true}`)}})
	req.Header().Set("Authorization", "Bearer "+tokSubmitter)
	if resp, err := zipped.CallUnary(context.Background(), req); err != nil || resp.Msg.GetTask().GetId() == "" {
		t.Errorf("compressed gRPC Submit = %v, %v", resp, err)
	}
	req = connect.NewRequest(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call", Payload: make([]byte, 128<<10)}})
	req.Header().Set("Authorization", "Bearer "+tokSubmitter)
	_, err = zipped.CallUnary(context.Background(), req)
	wantConnectCode(t, err, connect.CodeResourceExhausted, server.CodePayloadTooLarge)

	req = connect.NewRequest(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "flaky", Handler: "call"}})
	req.Header().Set("Authorization", "Bearer "+tokOperator[:20]+"x")
	_, err = submit.CallUnary(context.Background(), req)
	wantConnectCode(t, err, connect.CodeUnauthenticated, server.CodeUnauthenticated)
}
