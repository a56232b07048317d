// Package redisstore is rdq's Redis backend: tasks, their attempt history
// and the dead-letter queue in a Redis server, for teams whose retry state
// already lives in Redis.
//
//	s, err := redisstore.Open(ctx, "redis://127.0.0.1:6379/0", redisstore.Config{})
//	if err != nil { ... }
//	defer s.Close()
//
// A *Store implements store.Store and every optional capability the SQL
// stores have (store.Notifier, Admin, Pauser, HandlerPauser, LiveTasks,
// WorkerRegistry, Snoozer, InPlaceRetrier, NotDueCounter, WaitingCounter,
// GroupOriginReader, DeadHistogrammer, DeadGroupKeyer, SeriesReader) with
// their semantics, checked by the same compliance kit (package
// storetest). Every operation is one Lua script, which Redis runs
// atomically: a claim of a whole batch is one script, as is every finish
// batch. The store owns the clock: scripts read the server's TIME, never
// the caller's clock. Each claim increments the task's own fencing token;
// attempts are numbered from the task's persisted history (its highest
// number plus one), so numbers continue across redrives. Idempotency keys
// are unique per queue and outlive a purged task by Config.KeyRetention.
// Notifications are Redis pub/sub messages published by Enqueue. Every
// mutation that is audited writes its audit entry first in its script, so
// a failed audit write leaves everything as it was.
//
// # Durability
//
// Open checks the server's persistence and eviction settings
// (CheckDurability) and warns about those that can lose acknowledged tasks,
// or refuses them with Config.RequireDurable: rdq needs appendonly yes and
// a maxmemory-policy that evicts none of its keys (noeviction).
//
// There is no schema and nothing to migrate: keys are created as tasks
// arrive, under the store's namespace (Config.Namespace). Every script is
// in scripts.go, with the keys it touches.
//
// # Keys and Redis Cluster
//
// A queue's keys share a hash tag (the queue's name in braces), so all of
// one queue's data lives in one slot. The namespace's own keys (the index
// from task ID to queue, the set of queues, the audit log) live outside
// the queues' slots, and a batch may span queues, so the scripts touch
// keys of several slots: this version runs on a standalone Redis (or one
// with replicas and Sentinel), not on Redis Cluster.
package redisstore
