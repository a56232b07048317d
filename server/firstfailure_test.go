package server

import (
	"context"
	"testing"

	"github.com/srjn45/rdq/proto/rdqv1"
)

// A submitter's first failure of a reserved type is recorded with the
// remote_ prefix, as a remote handler's is; other types are kept.
func TestFirstFailureReservedType(t *testing.T) {
	s, _ := slotsService(t, Config{})
	ctx := WithPrincipal(context.Background(), &Principal{Name: "shop", Grants: []Grant{{Queue: "*", Role: RoleSubmitter}}})
	for typ, want := range map[string]string{"cancelled": "remote_cancelled", "unserved_handler": "remote_unserved_handler", "timeout": "timeout"} {
		res, err := s.Submit(ctx, &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{
			Queue: "orders", Handler: "charge", FirstFailure: &rdqv1.FailureSpec{ErrorType: typ, Message: "m"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.GetTask(ctx, &rdqv1.GetTaskRequest{Id: res.GetTask().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if h := got.GetHistory(); len(h) != 1 || h[0].GetErrorType() != want {
			t.Errorf("first failure %q recorded as %v, want one attempt of type %q", typ, h, want)
		}
	}
}
