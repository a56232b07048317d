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
// their semantics, checked by the same compliance kit (package storetest).
// Every operation on a queue is one Lua script, which Redis runs atomically: a claim of a batch of one
// queue is one script, as is a finish batch of one queue (see Redis
// Cluster below for batches across queues). The store owns the clock:
// scripts read the server's TIME, never the caller's clock. Each claim
// increments the task's own fencing token; attempts are numbered from the
// task's persisted history (its highest number plus one), so numbers
// continue across redrives. Idempotency keys are unique per queue and
// outlive a purged task by Config.KeyRetention. Notifications are Redis
// pub/sub messages published by Enqueue. Every audited mutation writes its
// audit entry in the same script as its change, and reserves the entry's
// ID before it, so a failed audit write leaves everything as it was.
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
// # Redis Cluster
//
// One key layout serves a standalone server and Redis Cluster (Open with a
// redis+cluster:// seed list, or New with a *redis.ClusterClient). A
// queue's keys share a hash tag (the queue's name in braces), and every
// script touches the keys of one queue only, so it runs on the node that
// holds that queue's slot; the scripts are marked so that the cluster
// refuses one that strays. The store needs Redis 7.0 or later, on a
// server and on a cluster.
//
// On a cluster, a batch that spans queues (an enqueue, a finish, a
// redrive by IDs) is split into one script per queue, run concurrently:
// each queue's part is atomic, the batch as a whole is not. A claim or
// reclaim over several queues first reads each queue's candidates, merges
// them by due time and then leases each queue's share of the limit, so it
// costs two scripts per queue and may return fewer tasks than are due
// when other claimers race it. On one server, where every slot is local,
// an enqueue, a claim and a finish batch across queues stay one script
// each. An audited mutation that spans queues writes its part of one
// audit entry in each queue it touches, under one reserved ID, and the
// audit log reads the parts as one entry (its queues, IDs and counts
// added up).
//
// The namespace's own keys live in slots of their own and are written
// outside the scripts, in an order that needs no atomicity across slots:
// the set of queues before a queue's first script, the index from task ID
// to queue (SET NX) before the script that inserts the task and deleted
// after the one that deletes it (an entry whose task is missing reads as
// "not found"), and each audit entry's ID (INCR) before the script that
// writes the entry with its change. The worker registry has a hash tag of
// its own.
//
// What reads across queues cost: a dead-letter page or count without a
// queue is one page (or count) per queue, merged newest first, so its cost
// grows with the number of queues, not with the size of the dead-letter
// queue; groups, histograms, stats, not-due counts, paused handlers,
// unserved handlers and the audit log likewise read each queue (one script
// or one page of its audit set each) and merge. A read by task ID costs an
// index lookup first.
//
// Redis replicates asynchronously: a master that fails right after
// answering may take the last writes with it. Config.WaitReplicas makes
// every write wait for that many replicas to acknowledge it (WAIT), so a
// promoted replica holds everything the store acknowledged; a write the
// replicas do not acknowledge fails with ErrNotReplicated.
package redisstore
