package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

// rpcNames are the methods of the rdq.v1 service descriptor.
func rpcNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, m := range rdqv1.RdqService_ServiceDesc.Methods {
		names = append(names, m.MethodName)
	}
	if len(names) == 0 || len(rdqv1.RdqService_ServiceDesc.Streams) != 0 {
		t.Fatalf("descriptor has %d methods and %d streams; this test knows unary methods only", len(names), len(rdqv1.RdqService_ServiceDesc.Streams))
	}
	return names
}

// Every RPC of the service descriptor has an access policy and exactly one
// REST route, nothing else has either, and Handler's documentation lists
// the routes as they are.
func TestEveryRPCHasAPolicyAndARoute(t *testing.T) {
	names := rpcNames(t)
	for _, name := range names {
		p, ok := rpcPolicies[name]
		if !ok {
			t.Errorf("RPC %s has no entry in rpcPolicies", name)
			continue
		}
		if p.role < RoleSubmitter || p.role > RoleAdmin || p.scope < scopeEachTask || p.scope > scopeAny {
			t.Errorf("RPC %s: policy %+v has no role or no scope", name, p)
		}
	}
	for name := range rpcPolicies {
		if !slices.Contains(names, name) {
			t.Errorf("rpcPolicies has %s, which the service descriptor does not", name)
		}
	}

	routes := map[string]int{}
	patterns := map[string]bool{}
	for _, rt := range restRoutes {
		routes[rt.rpc]++
		if !slices.Contains(names, rt.rpc) {
			t.Errorf("route %s %s calls %s, which the service descriptor does not have", rt.method, rt.path, rt.rpc)
		}
		if rt.method != "GET" && rt.method != "POST" || rt.status < 200 || rt.status > 299 || rt.serve == nil {
			t.Errorf("route %s %s (%s): method, status %d or serve is wrong", rt.method, rt.path, rt.rpc, rt.status)
		}
		if patterns[rt.method+" "+rt.path] {
			t.Errorf("two routes for %s %s", rt.method, rt.path)
		}
		patterns[rt.method+" "+rt.path] = true
	}
	for _, name := range names {
		if routes[name] != 1 {
			t.Errorf("RPC %s has %d REST routes, want 1", name, routes[name])
		}
	}

	src, err := os.ReadFile("http.go")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(GET|POST) +(/v1/\S+) +(\w+)`).FindAllSubmatch(src, -1) {
		documented = append(documented, string(m[1])+" "+string(m[2])+" "+string(m[3]))
	}
	var want []string
	for _, rt := range restRoutes {
		want = append(want, rt.method+" "+rt.path+" "+rt.rpc)
	}
	if !slices.Equal(documented, want) {
		t.Errorf("Handler documents the routes\n%q\nbut restRoutes has\n%q", documented, want)
	}
}

// rpcSample is a valid request of one RPC about queue "orders" (or its
// tasks), and what a caller without any role there gets for it.
type rpcSample struct {
	req proto.Message
	// stranger is the code for a caller without any role in orders:
	// not_found where the request names one task by ID, "" where it names
	// tasks by IDs (each answered as missing, as for an ID that names no
	// task: a per-item not_found, or none purged), permission_denied
	// elsewhere.
	stranger Code
}

// Every RPC refuses a caller outside its scope, and tells a caller without
// any role in the queue of a task it names that the task is not found: a
// new RPC without a sample here fails, and so does one that forgets its
// check. The samples succeed for an admin of every queue, so the refusals
// are not those of invalid requests.
func TestEveryRPCRefusesCallersOutsideItsScope(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tokens, err := NewTokens(map[string]*Principal{restToken: {Name: "root", Grants: []Grant{{Queue: "*", Role: RoleAdmin}}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}

	// A task waiting in "orders" and a dead one.
	later := time.Hour
	res, err := st.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "orders", Handler: "call", IdempotencyKey: "k1", Delay: later},
		{ID: rdq.NewID(), Queue: "orders", Handler: "call"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	live, dead := res[0].Task.ID.String(), res[1].Task.ID
	claimed, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"orders"}, Limit: 1, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claimed) != 1 || claimed[0].ID != dead {
		t.Fatalf("claim: %v, %d tasks", err, len(claimed))
	}
	errs, err := st.Finish(ctx, store.FinishParams{Completions: []store.Completion{{
		Lease: store.Lease{ID: dead, Token: claimed[0].LeaseToken}, Status: rdq.StatusDead,
		Attempt: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "boom", Message: "broke"}, WorkerID: "w"},
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", err, errs)
	}

	orders := &rdqv1.TaskFilter{Queue: "orders"}
	spec := &rdqv1.TaskSpec{Queue: "orders", Handler: "call", Payload: []byte(`{"n":1}`), ContentType: "application/json"}
	samples := map[string]rpcSample{
		"Submit":       {&rdqv1.SubmitRequest{Task: spec}, CodePermissionDenied},
		"SubmitBatch":  {&rdqv1.SubmitBatchRequest{Tasks: []*rdqv1.TaskSpec{spec}}, CodePermissionDenied},
		"GetTask":      {&rdqv1.GetTaskRequest{Id: live}, CodeNotFound},
		"ListDead":     {&rdqv1.ListDeadRequest{Filter: &rdqv1.DeadFilter{Queue: "orders"}}, CodePermissionDenied},
		"DeadGroups":   {&rdqv1.DeadGroupsRequest{Filter: &rdqv1.DeadFilter{Queue: "orders"}}, CodePermissionDenied},
		"ShowDead":     {&rdqv1.ShowDeadRequest{Id: dead.String()}, CodeNotFound},
		"Redrive":      {&rdqv1.RedriveRequest{Ids: []string{dead.String()}, Reason: "fixed"}, ""},
		"Purge":        {&rdqv1.PurgeRequest{Ids: []string{dead.String()}, Reason: "obsolete"}, ""},
		"ListAudit":    {&rdqv1.ListAuditRequest{}, CodePermissionDenied},
		"QueueStats":   {&rdqv1.QueueStatsRequest{}, CodePermissionDenied},
		"PauseQueue":   {&rdqv1.PauseQueueRequest{Queue: "orders", Reason: "maintenance"}, CodePermissionDenied},
		"ResumeQueue":  {&rdqv1.ResumeQueueRequest{Queue: "orders", Reason: "done"}, CodePermissionDenied},
		"ListTasks":    {&rdqv1.ListTasksRequest{State: "pending", Filter: orders}, CodePermissionDenied},
		"TaskByKey":    {&rdqv1.TaskByKeyRequest{Queue: "orders", Key: "k1"}, CodePermissionDenied},
		"RetryTasks":   {&rdqv1.ChangeTasksRequest{Ids: []string{live}, Reason: "now"}, ""},
		"CancelTasks":  {&rdqv1.ChangeTasksRequest{Ids: []string{live}, Reason: "unwanted"}, ""},
		"ListBreakers": {&rdqv1.ListBreakersRequest{Queue: "orders"}, CodePermissionDenied},
		"SetBreaker":   {&rdqv1.SetBreakerRequest{Queue: "orders", Handler: "call", State: "open", Reason: "outage"}, CodePermissionDenied},
		"ListWorkers":  {&rdqv1.ListWorkersRequest{Queue: "orders"}, CodePermissionDenied},
		"GetSeries":    {&rdqv1.GetSeriesRequest{Queue: "orders", Since: timestamppb.Now()}, CodePermissionDenied},
	}

	// invoke calls the RPC through the service descriptor, as the gRPC
	// server does, and returns the code of the request's error or, for a
	// batch, of its one item's; and the response.
	invoke := func(name string, p *Principal) (Code, string) {
		t.Helper()
		sample, ok := samples[name]
		if !ok {
			t.Fatalf("RPC %s has no sample request in this test: add one", name)
		}
		i := slices.IndexFunc(rdqv1.RdqService_ServiceDesc.Methods, func(m grpc.MethodDesc) bool { return m.MethodName == name })
		dec := func(v any) error {
			proto.Merge(v.(proto.Message), sample.req)
			return nil
		}
		out, err := rdqv1.RdqService_ServiceDesc.Methods[i].Handler(svc, WithPrincipal(ctx, p), dec, nil)
		if err != nil {
			return CodeOf(err), ""
		}
		text := prototext.Format(out.(proto.Message))
		if b, ok := out.(*rdqv1.SubmitBatchResponse); ok {
			if len(b.GetResults()) != 1 {
				t.Fatalf("SubmitBatch: %d results for 1 task", len(b.GetResults()))
			}
			return Code(b.GetResults()[0].GetError().GetCode()), text
		}
		return "", text
	}

	nobody := &Principal{Name: "nobody"}
	stranger := &Principal{Name: "stranger", Grants: []Grant{{Queue: "elsewhere", Role: RoleAdmin}}}
	submitter := &Principal{Name: "sub", Grants: []Grant{{Queue: "orders", Role: RoleSubmitter}}}
	operator := &Principal{Name: "ops", Grants: []Grant{{Queue: "orders", Role: RoleOperator}}}
	root := &Principal{Name: "root", Grants: []Grant{{Queue: "*", Role: RoleAdmin}}}
	for _, name := range rpcNames(t) {
		policy := rpcPolicies[name]
		if got, _ := invoke(name, nobody); got != samples[name].stranger {
			t.Errorf("%s by a caller without any grant: %q, want %q", name, got, samples[name].stranger)
		}
		// An admin of another queue is refused alike, except where the
		// scope lets the response show only that other queue.
		got, text := invoke(name, stranger)
		if policy.scope == scopeAny && got == "" {
			if strings.Contains(text, "orders") {
				t.Errorf("%s by an admin of another queue shows orders:\n%s", name, text)
			}
		} else if got != samples[name].stranger {
			t.Errorf("%s by an admin of another queue: %q, want %q", name, got, samples[name].stranger)
		} else if policy.scope == scopeTasks && (strings.Contains(text, "orders") || strings.Contains(text, "changed:") ||
			strings.Contains(text, "redriven:") || strings.Contains(text, "purged:") || (name != "Purge" && !strings.Contains(text, "not_found"))) {
			t.Errorf("%s by an admin of another queue: the task is not answered as missing:\n%s", name, text)
		}
		// A caller with a lesser role in the queue is denied.
		for _, p := range []*Principal{submitter, operator} {
			if p.Grants[0].Role >= policy.role {
				continue
			}
			if got, _ := invoke(name, p); got != CodePermissionDenied {
				t.Errorf("%s by a %s of orders: %q, want permission_denied", name, p.Grants[0].Role, got)
			}
		}
	}
	// In the descriptor's order, so that the redrive comes before the
	// purge, and the retry before the cancel.
	for _, name := range rpcNames(t) {
		if got, _ := invoke(name, root); got != "" {
			t.Errorf("%s by an admin of every queue: %q, want success", name, got)
		}
	}
}

// A check that the RPC's scope does not provide is a defect of the server:
// it fails as internal, never as a refusal the caller could act on.
func TestCallCheckOutsideItsScopeIsInternal(t *testing.T) {
	c := &call{method: "GetTask", p: &Principal{Name: "root", Grants: []Grant{{Queue: "*", Role: RoleAdmin}}}, policy: rpcPolicies["GetTask"]}
	if code := classify(c.queue("orders")).Code; code != CodeInternal {
		t.Errorf("queue check of a task RPC: %s, want internal", code)
	}
	if _, err := c.tasks(context.Background(), []rdq.ID{rdq.NewID()}); classify(err).Code != CodeInternal {
		t.Errorf("IDs check of a task RPC: %v, want internal", err)
	}
	c.policy = rpcPolicies["ListDead"]
	if _, _, err := c.task(context.Background(), rdq.NewID().String()); classify(err).Code != CodeInternal {
		t.Errorf("task check of a queue RPC: %v, want internal", err)
	}
	// A method without a policy is refused before it runs.
	ran := false
	_, err := serve(context.Background(), &Service{log: slog.New(slog.DiscardHandler)}, "NoSuchRPC", func(*call) (int, error) {
		ran = true
		return 1, nil
	})
	if ran || CodeOf(err) != CodeInternal {
		t.Errorf("serve of an RPC without a policy: ran %v, error %v", ran, err)
	}
}
