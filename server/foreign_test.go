package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// A task of a queue where the caller holds no role is answered exactly as
// an ID that names no task, on every REST route and RPC that names tasks
// by ID: same status, same body (the ID aside), and the task is left
// alone. (Requests naming several IDs used to fail as a whole with 404 for
// a foreign task, and answer 200 with a per-item not_found for a missing
// one.)
func TestForeignTaskAnsweredAsMissing(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The caller is an admin of queue "a"; the tasks are in "b".
	tokens, err := server.NewTokens(map[string]*server.Principal{tokOperator: {Name: "a-team", Grants: []server.Grant{{Queue: "a", Role: server.RoleAdmin}}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "b", Handler: "call", IdempotencyKey: "k1", Delay: time.Hour},
		{ID: rdq.NewID(), Queue: "b", Handler: "call", Payload: []byte(`{}`), ContentType: "application/json"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	live, dead := res[0].Task.ID, res[1].Task.ID
	claimed, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"b"}, Limit: 1, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 1 || claimed[0].ID != dead {
		t.Fatalf("claim: %v, %d tasks", err, len(claimed))
	}
	if errs, err := st.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: dead, Token: claimed[0].LeaseToken}, Status: rdq.StatusDead,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "boom", Message: "broke"}, WorkerID: "w"},
	}}}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", err, errs)
	}

	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := svc.NewGRPCServer()
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	gc := rdqv1.NewRdqServiceClient(conn)

	// restAnswer is the status and body of a REST request naming id, with
	// id written as ID.
	restAnswer := func(method, path, body string, id rdq.ID) string {
		t.Helper()
		path = strings.ReplaceAll(path, "{id}", id.String())
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(strings.ReplaceAll(body, "{id}", id.String())))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokOperator)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status + " " + strings.ReplaceAll(string(b), id.String(), "ID")
	}
	// grpcAnswer is the status and response of an RPC naming id.
	grpcAnswer := func(call func(context.Context, string) (proto.Message, error), id rdq.ID) string {
		t.Helper()
		cctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokOperator)
		out, err := call(cctx, id.String())
		var text string
		if err != nil {
			st := status.Convert(err)
			text = st.Code().String() + " " + st.Message()
		} else {
			b, err := protojson.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			text = "OK " + string(b)
		}
		return strings.ReplaceAll(text, id.String(), "ID")
	}

	rest := []struct {
		method, path, body string
		task               rdq.ID
	}{
		{"GET", "/v1/tasks/{id}", "", live},
		{"GET", "/v1/dlq/tasks/{id}", "", dead},
		{"POST", "/v1/dlq:redrive", `{"ids": ["{id}"], "reason": "probe"}`, dead},
		{"POST", "/v1/dlq:redrive", `{"ids": ["{id}", "{id}"], "reason": "probe"}`, dead},
		{"POST", "/v1/dlq:redrive", `{"ids": ["{id}"], "payload": "e30=", "reason": "probe"}`, dead},
		{"POST", "/v1/dlq:redrive", `{"ids": ["{id}"]}`, dead},
		{"POST", "/v1/dlq:purge", `{"ids": ["{id}"], "reason": "probe"}`, dead},
		{"POST", "/v1/dlq:purge", `{"ids": ["{id}"]}`, dead},
		{"POST", "/v1/tasks:retry", `{"ids": ["{id}"], "reason": "probe"}`, live},
		{"POST", "/v1/tasks:cancel", `{"ids": ["{id}"], "reason": "probe"}`, live},
		{"POST", "/v1/tasks:cancel", `{"ids": ["{id}"]}`, live},
	}
	for _, r := range rest {
		foreign, missing := restAnswer(r.method, r.path, r.body, r.task), restAnswer(r.method, r.path, r.body, rdq.NewID())
		if foreign != missing {
			t.Errorf("%s %s %s: a foreign task is told from a missing one:\nforeign: %s\nmissing: %s", r.method, r.path, r.body, foreign, missing)
		}
		if strings.Contains(foreign, `"b"`) || strings.Contains(foreign, "queue b") {
			t.Errorf("%s %s: the answer names the task's queue: %s", r.method, r.path, foreign)
		}
	}

	rpcs := map[string]func(context.Context, string) (proto.Message, error){
		"GetTask": func(c context.Context, id string) (proto.Message, error) {
			return gc.GetTask(c, &rdqv1.GetTaskRequest{Id: id})
		},
		"ShowDead": func(c context.Context, id string) (proto.Message, error) {
			return gc.ShowDead(c, &rdqv1.ShowDeadRequest{Id: id})
		},
		"Redrive": func(c context.Context, id string) (proto.Message, error) {
			return gc.Redrive(c, &rdqv1.RedriveRequest{Ids: []string{id}, Reason: "probe"})
		},
		"Purge": func(c context.Context, id string) (proto.Message, error) {
			return gc.Purge(c, &rdqv1.PurgeRequest{Ids: []string{id}, Reason: "probe"})
		},
		"RetryTasks": func(c context.Context, id string) (proto.Message, error) {
			return gc.RetryTasks(c, &rdqv1.ChangeTasksRequest{Ids: []string{id}, Reason: "probe"})
		},
		"CancelTasks": func(c context.Context, id string) (proto.Message, error) {
			return gc.CancelTasks(c, &rdqv1.ChangeTasksRequest{Ids: []string{id}, Reason: "probe"})
		},
	}
	for name, call := range rpcs {
		task := dead
		if name == "GetTask" || name == "RetryTasks" || name == "CancelTasks" {
			task = live
		}
		foreign, missing := grpcAnswer(call, task), grpcAnswer(call, rdq.NewID())
		if foreign != missing {
			t.Errorf("%s: a foreign task is told from a missing one:\nforeign: %s\nmissing: %s", name, foreign, missing)
		}
	}

	// Nothing was done to either task.
	for id, want := range map[rdq.ID]rdq.Status{live: rdq.StatusPending, dead: rdq.StatusDead} {
		task, _, err := st.Get(ctx, id)
		if err != nil || task.Status != want || task.Life != 0 {
			t.Errorf("task %s after the foreign requests: %v %v, want %s in life 0", id, task, err, want)
		}
	}
}
