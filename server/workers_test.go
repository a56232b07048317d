package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
)

// GET /v1/workers and ListWorkers show the registered workers and the
// waiting tasks no live worker serves, limited to what the caller may read.
func TestListWorkers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	past := time.Now().Add(-5 * time.Minute)
	tasks := []store.NewTask{
		{ID: rdq.NewID(), Queue: "deploy", Handler: "b"},
		{ID: rdq.NewID(), Queue: "deploy", Handler: "b"},
	}
	if _, err := e.st.Enqueue(ctx, store.EnqueueParams{Tasks: tasks, Now: &past}); err != nil {
		t.Fatal(err)
	}

	type listing struct {
		Workers []struct {
			ID     string   `json:"id"`
			Queues []string `json:"queues"`
			Stale  bool     `json:"stale"`
			Slots  int      `json:"slots"`
		} `json:"workers"`
		Unserved []struct {
			Queue     string `json:"queue"`
			Handler   string `json:"handler"`
			Tasks     int64  `json:"tasks"`
			WaitingMs int64  `json:"waiting_ms"`
		} `json:"unserved"`
	}
	var all listing
	e.waitFor("the worker to register", func() bool {
		all = listing{}
		e.do("GET", "/v1/workers", tokOperator, nil, &all)
		return len(all.Workers) == 1
	})
	w := all.Workers[0]
	if w.ID != "e2e-worker" || w.Stale || len(w.Queues) != len(e.receivers) || w.Slots != 4*len(e.receivers) {
		t.Fatalf("GET /v1/workers worker: %+v", w)
	}
	if len(all.Unserved) != 1 || all.Unserved[0].Queue != "deploy" || all.Unserved[0].Handler != "b" ||
		all.Unserved[0].Tasks != 2 || all.Unserved[0].WaitingMs < (4*time.Minute).Milliseconds() {
		t.Fatalf("GET /v1/workers unserved: %+v", all.Unserved)
	}

	// A caller who may read only fail5* sees only those queues.
	var some listing
	e.do("GET", "/v1/workers", tokOrdersOps, nil, &some)
	if len(some.Workers) != 1 || !slices.Equal(some.Workers[0].Queues, []string{"fail500"}) || len(some.Unserved) != 0 {
		t.Fatalf("GET /v1/workers as orders-team: %+v", some)
	}
	wantProblem(t, e.do("GET", "/v1/workers?queue=deploy", tokOrdersOps, nil, nil), 403, "permission_denied")
	var none listing
	e.do("GET", "/v1/workers", tokSubmitter, nil, &none)
	if len(none.Workers) != 0 || len(none.Unserved) != 0 {
		t.Fatalf("GET /v1/workers as a submitter (no operator role anywhere): %+v", none)
	}
	wantProblem(t, e.do("GET", "/v1/workers?queue=bad%20name", tokOperator, nil, nil), 400, "invalid_argument")

	got, err := e.grpc.ListWorkers(e.grpcCtx(tokOperator), &rdqv1.ListWorkersRequest{Queue: "deploy"})
	if err != nil {
		t.Fatalf("ListWorkers over gRPC: %v", err)
	}
	if len(got.GetWorkers()) != 0 || len(got.GetUnserved()) != 1 || got.GetUnserved()[0].GetTasks() != 2 ||
		got.GetUnserved()[0].GetOldestDue().AsTime().Unix() != past.Unix() {
		t.Fatalf("ListWorkers(deploy) over gRPC: %v", got)
	}
}
