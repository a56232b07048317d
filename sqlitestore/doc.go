// Package sqlitestore is rdq's embedded storage backend: a single SQLite
// database file, with no server to run. It is what rdq uses when no
// PostgreSQL URL is configured, and it suits a small service that runs its
// workers on one host.
//
// It is built on modernc.org/sqlite, a translation of SQLite to pure Go:
// no cgo, so rdq cross-compiles and builds in minimal containers.
//
//	s, err := sqlitestore.Open(ctx, "rdq.db", sqlitestore.Config{})
//	if err != nil { ... }
//	defer s.Close()
//	if err := s.Migrate(ctx); err != nil { ... }
//
// A *Store implements store.Store and store.Admin with the same semantics
// as pgstore, checked by the same compliance kit (package storetest):
// atomic claims, fencing tokens, reclaim of expired leases with a
// LEASE_EXPIRED attempt, attempt numbers taken from the persisted history,
// idempotency keys unique per queue, and audited DLQ operations written in
// the transaction of the change. It does not implement store.Notifier:
// SQLite cannot push a change to another process, so workers poll.
//
// Several processes on the same host may share one database file (say, a
// few worker processes and the rdq command). SQLite serializes writers:
// every write is a short BEGIN IMMEDIATE transaction, which is what makes a
// claim atomic, and write throughput is that of one writer with one fsync
// per commit, which batching amortizes. For more than one host, or more
// write throughput than one file commits, use pgstore.
//
// Every SQL statement is in sql.go, with the index that serves it; the
// schema is in migrations/, embedded in the binary and applied by Migrate.
package sqlitestore
