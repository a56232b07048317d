package server_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// A worker's in_flight counts all its queues: a caller who may not read
// every one of them gets 0.
func TestListWorkersInFlightScoped(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tokens, err := server.NewTokens(map[string]*server.Principal{
		tokOperator:  {Name: "oncall", Grants: []server.Grant{{Queue: "*", Role: server.RoleOperator}}},
		tokOrdersOps: {Name: "a-team", Grants: []server.Grant{{Queue: "a", Role: server.RoleOperator}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	info := store.WorkerInfo{ID: "w", Host: "h", PID: 1, Version: "v", Queues: []string{"a", "b"}, Handlers: []string{"call"}, Slots: 9, InFlight: 7}
	if err := st.RegisterWorker(ctx, store.RegisterWorkerParams{Worker: info, StaleAfter: time.Minute, ExpireAfter: time.Hour, Now: &now}); err != nil {
		t.Fatal(err)
	}
	list := func(token string) *rdqv1.WorkerInfo {
		t.Helper()
		p, err := tokens.Authenticate(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.ListWorkers(server.WithPrincipal(metadata.NewIncomingContext(ctx, nil), p), &rdqv1.ListWorkersRequest{})
		if err != nil || len(res.GetWorkers()) != 1 {
			t.Fatalf("ListWorkers: %v %v", res, err)
		}
		return res.GetWorkers()[0]
	}
	if w := list(tokOperator); w.GetInFlight() != 7 || len(w.GetQueues()) != 2 {
		t.Errorf("an operator of every queue: %v", w)
	}
	if w := list(tokOrdersOps); w.GetInFlight() != 0 || len(w.GetQueues()) != 1 || w.GetSlots() != 9 {
		t.Errorf("an operator of queue a only: %v", w)
	}
}
