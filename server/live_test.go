package server_test

import (
	"context"
	"encoding/base64"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server"
)

// TestLiveTasksAPI: live tasks over REST and gRPC, with the operator role
// required on the queues touched.
func TestLiveTasksAPI(t *testing.T) {
	e := newEnv(t)
	// Queue "nothing" is accepted but no worker serves it: its tasks wait.
	var ids []string
	for i, key := range []string{"order-1", "order-2", "order-3"} {
		var out struct {
			Task envelope `json:"task"`
		}
		body := map[string]any{"version": 1, "queue": "nothing", "handler": "call", "idempotency_key": key,
			"payload": base64.StdEncoding.EncodeToString([]byte(`{"n":1}`))}
		if resp := e.do("POST", "/v1/tasks", tokSubmitter, body, &out); resp.StatusCode != 200 {
			t.Fatalf("submit %d: %d", i, resp.StatusCode)
		}
		ids = append(ids, out.Task.ID)
	}

	var page struct {
		Tasks         []envelope `json:"tasks"`
		NextPageToken string     `json:"next_page_token"`
	}
	if resp := e.do("GET", "/v1/tasks?state=pending&queue=nothing&page_size=2", tokOperator, nil, &page); resp.StatusCode != 200 || len(page.Tasks) != 2 || page.NextPageToken == "" {
		t.Fatalf("list pending: %d, %d tasks, token %q", resp.StatusCode, len(page.Tasks), page.NextPageToken)
	}
	first := append([]envelope(nil), page.Tasks...)
	page.Tasks = nil
	if resp := e.do("GET", "/v1/tasks?state=pending&queue=nothing&page_size=2&page_token="+page.NextPageToken, tokOperator, nil, &page); resp.StatusCode != 200 || len(page.Tasks) != 1 || page.NextPageToken != "" {
		t.Fatalf("list pending, page 2: %d, %d tasks, token %q", resp.StatusCode, len(page.Tasks), page.NextPageToken)
	}
	seen := map[string]bool{}
	for _, tk := range append(first, page.Tasks...) {
		seen[tk.ID] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("listing never showed %s", id)
		}
	}
	wantProblem(t, e.do("GET", "/v1/tasks?state=pending&queue=nothing", tokSubmitter, nil, nil), 403, "permission_denied")
	wantProblem(t, e.do("GET", "/v1/tasks?state=pending&queue=nothing", tokOrdersOps, nil, nil), 403, "permission_denied")
	wantProblem(t, e.do("GET", "/v1/tasks?state=dead&queue=nothing", tokOperator, nil, nil), 400, "invalid_argument")

	var byKey envelope
	if resp := e.do("GET", "/v1/tasks:by-key?queue=nothing&key=order-2", tokOperator, nil, &byKey); resp.StatusCode != 200 || byKey.ID != ids[1] {
		t.Fatalf("by key: %d %+v, want %s", resp.StatusCode, byKey, ids[1])
	}
	wantProblem(t, e.do("GET", "/v1/tasks:by-key?queue=nothing&key=order-9", tokOperator, nil, nil), 404, "not_found")

	// Cancelling needs the operator role on the task's queue: a caller
	// without any role there learns nothing (the task is not_found, as a
	// missing one is), a submitter is denied; neither changes anything.
	cancel := map[string]any{"ids": []string{ids[0]}, "reason": "customer withdrew"}
	wantProblem(t, e.do("POST", "/v1/tasks:cancel", tokSubmitter, cancel, nil), 403, "permission_denied")
	var foreign struct {
		Changed int64 `json:"changed"`
		Results []struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"results"`
	}
	if resp := e.do("POST", "/v1/tasks:cancel", tokOrdersOps, cancel, &foreign); resp.StatusCode != 200 || foreign.Changed != 0 ||
		len(foreign.Results) != 1 || foreign.Results[0].Error == nil || foreign.Results[0].Error.Code != "not_found" {
		t.Errorf("cancel of a task outside the caller's grants: %d %+v", resp.StatusCode, foreign)
	}
	wantProblem(t, e.do("POST", "/v1/tasks:cancel", tokOperator, map[string]any{"ids": []string{ids[0]}}, nil), 400, "invalid_argument")
	if task, _, err := e.st.Get(context.Background(), rdq.MustParseID(ids[0])); err != nil || task.Status != rdq.StatusPending {
		t.Fatalf("after refused cancels: %v, %v", task, err)
	}

	var res struct {
		Changed int64 `json:"changed"`
		Results []struct {
			ID    string `json:"id"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"results"`
	}
	missing := rdq.NewID().String()
	cancel["ids"] = []string{ids[0], missing}
	if resp := e.do("POST", "/v1/tasks:cancel", tokOperator, cancel, &res); resp.StatusCode != 200 || res.Changed != 1 ||
		res.Results[0].Error != nil || res.Results[1].Error == nil || res.Results[1].Error.Code != "not_found" {
		t.Fatalf("cancel: %d %+v", resp.StatusCode, res)
	}
	task, attempts, err := e.st.Get(context.Background(), rdq.MustParseID(ids[0]))
	if err != nil || task.Status != rdq.StatusDead || attempts[len(attempts)-1].Outcome != rdq.OutcomeCancelled || attempts[len(attempts)-1].WorkerID != "oncall" {
		t.Fatalf("cancelled task: %v %+v %v", task, attempts, err)
	}

	// gRPC: the same, and cancelling a dead task is a per-item not_pending.
	out, err := e.grpc.CancelTasks(e.grpcCtx(tokOperator), &rdqv1.ChangeTasksRequest{Ids: []string{ids[0], ids[2]}, Reason: "duplicate order"})
	if err != nil || out.GetChanged() != 1 || out.GetResults()[0].GetError().GetCode() != string(server.CodeNotPending) || out.GetResults()[1].GetError() != nil {
		t.Fatalf("gRPC cancel: %+v, %v", out, err)
	}
	retry, err := e.grpc.RetryTasks(e.grpcCtx(tokOperator), &rdqv1.ChangeTasksRequest{Ids: []string{ids[1]}, Reason: "upstream fixed"})
	if err != nil || retry.GetChanged() != 1 {
		t.Fatalf("gRPC retry: %+v, %v", retry, err)
	}
	_, err = e.grpc.RetryTasks(e.grpcCtx(tokSubmitter), &rdqv1.ChangeTasksRequest{Ids: []string{ids[1]}, Reason: "x"})
	wantGRPCCode(t, err, codes.PermissionDenied, server.CodePermissionDenied)
	list, err := e.grpc.ListTasks(e.grpcCtx(tokOperator), &rdqv1.ListTasksRequest{State: "pending", Filter: &rdqv1.TaskFilter{Queue: "nothing"}})
	if err != nil || len(list.GetTasks()) != 1 || list.GetTasks()[0].GetId() != ids[1] {
		t.Fatalf("gRPC list: %+v, %v", list, err)
	}
	got, err := e.grpc.TaskByKey(e.grpcCtx(tokOperator), &rdqv1.TaskByKeyRequest{Queue: "nothing", Key: "order-1"})
	if err != nil || got.GetTask().GetStatus() != string(rdq.StatusDead) || len(got.GetHistory()) != 1 {
		t.Fatalf("gRPC by key: %+v, %v", got, err)
	}
}
