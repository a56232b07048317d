package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/pgstore"
)

// Submit a task in the same transaction as the application's own writes
// (the transactional outbox): the order row and its shipping task are
// committed together or not at all, and workers wake when the transaction
// commits.
func ExampleStore_WithTx() {
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

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, status) VALUES ($1, 'paid')`, 42); err != nil {
			return err
		}
		// A client on the transaction's view of the store; cheap to make.
		c, err := client.New(client.Config{Store: s.WithTx(tx)})
		if err != nil {
			return err
		}
		_, err = c.Submit(ctx, client.Task{
			Queue:          "shipping",
			Handler:        "ship-order",
			Payload:        []byte(`{"order":42}`),
			IdempotencyKey: "ship-order-42",
		})
		return err // an error rolls back the order and the task together
	})
	if err != nil {
		log.Fatal(err)
	}
}
