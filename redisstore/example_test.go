package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
)

// Example submits a task to a Redis store and claims it. It needs a Redis
// server on localhost:6379, so it is compiled but not run by go test; the
// compliance kit (TestCompliance) runs the same calls.
func Example() {
	ctx := context.Background()
	s, err := redisstore.Open(ctx, "redis://localhost:6379/0?namespace=example", redisstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	_, err = s.Enqueue(ctx, store.EnqueueParams{Tasks: []store.NewTask{{
		ID: rdq.NewID(), Queue: "emails", Handler: "send-welcome", Payload: []byte(`{"user":42}`),
	}}})
	if err != nil {
		log.Fatal(err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Queues: []string{"emails"}, Limit: 10, Lease: time.Minute, WorkerID: "worker-1"})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range claimed {
		fmt.Println(t.Handler, t.Status)
	}
}
