package grpccall_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback/grpccall"
	"github.com/srjn45/rdq/proto/rdqv1"
)

// refunds is a gRPC handler: it refuses, for good, a refund of an order it
// does not know.
type refunds struct {
	rdqv1.UnimplementedHandlerServiceServer
}

func (refunds) Execute(_ context.Context, req *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
	if string(req.GetPayload()) == `{"order":42}` {
		return &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Success{Success: &rdqv1.Success{}}}, nil
	}
	return &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Permanent{Permanent: &rdqv1.Failure{
		ErrorType: "UnknownOrder", Message: "no such order: " + string(req.GetPayload()),
	}}}, nil
}

// A queue's handler is a remote HandlerService: each attempt is one
// Execute call, and its answer is the attempt's outcome. A worker
// registers the handler like any other (worker.Handle).
func ExampleCaller_Handler() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	rdqv1.RegisterHandlerServiceServer(srv, refunds{})
	go func() {
		if err := srv.Serve(lis); err != nil {
			panic(err)
		}
	}()
	defer srv.Stop()

	caller, err := grpccall.New(grpccall.Config{
		Allow:      []string{lis.Addr().String()},
		AllowAddrs: []string{"127.0.0.1"}, // loopback is refused unless listed
	})
	if err != nil {
		panic(err)
	}
	defer caller.Close()
	handler, err := caller.Handler(grpccall.Target{
		URL:      "grpc://" + lis.Addr().String(), // grpcs:// for TLS
		Metadata: map[string]string{"authorization": "Bearer example-token"},
	})
	if err != nil {
		panic(err)
	}

	for _, payload := range []string{`{"order":42}`, `{"order":7}`} {
		task := &rdq.Task{ID: rdq.NewID(), Queue: "refunds", Handler: "refund", ContentType: "application/json", Payload: []byte(payload)}
		err := handler(context.Background(), task)
		f := rdq.Describe(err)
		fmt.Printf("%s: error %v, permanent %v, type %q\n", payload, err != nil, rdq.IsPermanent(err), f.Type)
	}
	// Output:
	// {"order":42}: error false, permanent false, type ""
	// {"order":7}: error true, permanent true, type "UnknownOrder"
}
