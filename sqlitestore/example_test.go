package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/sqlitestore"
	"github.com/srjn45/rdq/store"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rdq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlitestore.Open(ctx, filepath.Join(dir, "rdq.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

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
		fmt.Println(t.Handler, t.Status, "token", t.LeaseToken)
	}
	// Output:
	// send-welcome IN_FLIGHT token 1
}
