package pgstore_test

import (
	"context"
	"log"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// Open a store on the application's pool and bring its schema up to date.
// Migrate is safe to run from every process at start-up.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("RDQ_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	s, err := pgstore.New(pool, pgstore.Config{
		Schema: "rdq", // the default; one schema per rdq installation
		Logger: slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// s is a store.Store for the client and the worker, and a store.Admin
	// for the dead-letter queue.
	var _ store.Store = s
	var _ store.Admin = s
}

// Check whether a deployment's schema is behind this build of rdq.
func ExampleStore_Version() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("RDQ_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	v, err := s.Version(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if v < pgstore.LatestVersion() {
		log.Printf("schema %s is at version %d of %d: run Migrate", s.Schema(), v, pgstore.LatestVersion())
	}
}

// Wake up as soon as tasks are due instead of waiting for the next poll.
func ExampleStore_Notifications() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("RDQ_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	hints, err := s.Notifications(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for queue := range hints { // closed when ctx is done
		log.Printf("tasks may be due in queue %s", queue)
		cancel()
	}
}
