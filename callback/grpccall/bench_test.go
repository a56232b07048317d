package grpccall

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
)

// BenchmarkCall measures one attempt's call to a remote handler on
// loopback, a gRPC handler beside an HTTP callback (signed and verified),
// both answering success at once: the cost the caller adds per attempt.
//
//	go test -run '^$' -bench Call -benchmem ./callback/grpccall
func BenchmarkCall(b *testing.B) {
	task := testTask()
	task.ContentType, task.Payload = "application/json", []byte(`{"order":42,"lines":[1,2,3]}`)

	b.Run("grpc", func(b *testing.B) {
		addr := serveHandler(b, &handler{answer: answer(success)})
		call, err := newCaller(b, Config{}).Handler(Target{URL: "grpc://" + addr, Metadata: map[string]string{"authorization": "Bearer bench"}})
		if err != nil {
			b.Fatal(err)
		}
		runBench(b, call, task)
	})
	b.Run("http", func(b *testing.B) {
		secret := []byte("bench-callback-secret-0123456789")
		srv := httptest.NewServer(callback.Receiver(secret, callback.DefaultMaxSkew, func(context.Context, *callback.Message) error { return nil }))
		defer srv.Close()
		c, err := callback.New(callback.Config{Secret: secret, Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		call, err := c.Handler(callback.Target{URL: srv.URL + "/hooks/bench"})
		if err != nil {
			b.Fatal(err)
		}
		runBench(b, call, task)
	})
}

// runBench times call on task, after a first call that connects.
func runBench(b *testing.B, call func(context.Context, *rdq.Task) error, task *rdq.Task) {
	b.Helper()
	ctx := context.Background()
	if err := call(ctx, task); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := call(ctx, task); err != nil {
			b.Fatal(err)
		}
	}
}
