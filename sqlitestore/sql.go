package sqlitestore

// Every SQL statement the store runs lives in this file, next to the index
// (from migrations/0001_init.sql) that serves it. Every value is a bound
// parameter; the only text assembled at run time is the choice among the
// constant filter fragments below. Times are unix microseconds.

// taskColumns is the column list scanned by scanTask, in its order.
const taskColumns = `id, queue, handler, payload, content_type, headers, idempotency_key, status,
	attempts, life, next_attempt_at, lease_token, lease_expires_at, lease_owner,
	created_at, updated_at, finished_at, last_error_type, last_error_message, last_error_fingerprint,
	max_attempts, timeout_us, snoozes`

// Migrations.
const (
	sqlCreateMigrations = `CREATE TABLE IF NOT EXISTS rdq_schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL
)`
	// Primary key of rdq_schema_migrations.
	sqlAppliedMigrations = `SELECT version FROM rdq_schema_migrations ORDER BY version`
	sqlRecordMigration   = `INSERT INTO rdq_schema_migrations (version, applied_at) VALUES (?, ?)`
)

// Enqueue.
const (
	// Index rdq_tasks_idempotency (queue, idempotency_key).
	sqlFindByKey = `SELECT ` + taskColumns + ` FROM rdq_tasks WHERE queue = ? AND idempotency_key = ?`

	// Primary key; maintains every index; rdq_paused_handlers' primary key
	// decides whether the task is held (see sqlPauseHandler). An existing
	// ID inserts nothing (the caller reads that task as the duplicate). The caller builds the returned
	// task from the values it bound (RETURNING would buffer every row in a
	// temporary b-tree).
	sqlInsertTask = `INSERT INTO rdq_tasks (
	id, queue, handler, payload, content_type, headers, idempotency_key, status,
	attempts, life, next_attempt_at, lease_token, lease_owner, created_at, updated_at, finished_at,
	last_error_type, last_error_message, last_error_fingerprint, held, max_attempts, timeout_us
) VALUES (?, ?, ?, coalesce(?, x''), ?, ?, ?, ?, ?, 0, ?, 0, '', ?, ?, ?, ?, ?, ?,
	? = 'PENDING' AND EXISTS (SELECT 1 FROM rdq_paused_handlers WHERE queue = ? AND handler = ?), ?, ?)
ON CONFLICT (id) DO NOTHING`

	// Primary key of rdq_attempts (task_id, number): the number is
	// max(number) + 1 over the persisted history of the task.
	// The life is the task's: the primary key of rdq_tasks.
	sqlInsertAttempt = `INSERT INTO rdq_attempts (
	task_id, number, life, outcome, error_type, message, stack, worker_id, lease_token, started_at, finished_at
) SELECT ?1, coalesce(max(number), 0) + 1, (SELECT life FROM rdq_tasks WHERE id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9
FROM rdq_attempts WHERE task_id = ?1`
)

// Claim.
const (
	// Index rdq_tasks_claim (queue, next_attempt_at, id) WHERE status =
	// 'PENDING': an ordered range scan that stops after LIMIT rows. Run
	// once per queue; the candidates of several queues are merged. A
	// paused queue yields none (its primary key in rdq_paused_queues); the
	// tasks of a paused handler are held, outside the index.
	sqlClaimCandidates = `SELECT rowid, id, next_attempt_at FROM rdq_tasks
WHERE status = 'PENDING' AND held = 0 AND queue = ?1 AND next_attempt_at <= ?2
  AND NOT EXISTS (SELECT 1 FROM rdq_paused_queues WHERE queue = ?1)
ORDER BY next_attempt_at, id LIMIT ?3`

	// sqlClaimCandidates for the tasks of the handlers ?4 (a JSON array)
	// only: the same range of rdq_tasks_claim, the handler a filter on its
	// rows, so no index is written for it.
	sqlClaimHandlerCandidates = `SELECT rowid, id, next_attempt_at FROM rdq_tasks
WHERE status = 'PENDING' AND held = 0 AND queue = ?1 AND next_attempt_at <= ?2
  AND handler IN (SELECT value FROM json_each(?4))
  AND NOT EXISTS (SELECT 1 FROM rdq_paused_queues WHERE queue = ?1)
ORDER BY next_attempt_at, id LIMIT ?3`

	// The rowids of the tasks chosen (?5, a JSON array): one statement
	// leases the whole batch.
	sqlClaimTasks = `UPDATE rdq_tasks
SET status = 'IN_FLIGHT', lease_token = lease_token + 1, lease_expires_at = ?1, lease_owner = ?2,
	claimed_at = ?3, updated_at = ?4
WHERE rowid IN (SELECT value FROM json_each(?5)) AND status = 'PENDING'
RETURNING ` + taskColumns
)

// Leases: heartbeat, finish, release, snooze, retry in place. All by
// primary key, fenced by status and token. A task made PENDING is held when
// its handler is paused (the primary key of rdq_paused_handlers).
const (
	sqlHeartbeat = `UPDATE rdq_tasks SET lease_expires_at = ?, updated_at = ?
WHERE id = ? AND status = 'IN_FLIGHT' AND lease_token = ?`

	// ?1 status, ?2 attempts increment, ?3 next attempt time (PENDING),
	// ?4 finished_at (SUCCEEDED, DEAD) or NULL, ?5 now, ?6 whether a
	// failure is recorded, ?7-?9 the failure, ?10 id, ?11 token.
	sqlFinish = `UPDATE rdq_tasks
SET status = ?1, attempts = attempts + ?2,
	next_attempt_at = CASE WHEN ?1 = 'PENDING' THEN ?3 ELSE next_attempt_at END,
	finished_at = ?4, lease_expires_at = NULL, updated_at = ?5,
	held = ?1 = 'PENDING' AND EXISTS (SELECT 1 FROM rdq_paused_handlers AS h WHERE h.queue = rdq_tasks.queue AND h.handler = rdq_tasks.handler),
	last_error_type = CASE WHEN ?6 THEN ?7 ELSE last_error_type END,
	last_error_message = CASE WHEN ?6 THEN ?8 ELSE last_error_message END,
	last_error_fingerprint = CASE WHEN ?6 THEN ?9 ELSE last_error_fingerprint END
WHERE id = ?10 AND status = 'IN_FLIGHT' AND lease_token = ?11`

	sqlRelease = `UPDATE rdq_tasks
SET status = 'PENDING', next_attempt_at = ?, lease_expires_at = NULL, updated_at = ?,
	held = EXISTS (SELECT 1 FROM rdq_paused_handlers AS h WHERE h.queue = rdq_tasks.queue AND h.handler = rdq_tasks.handler)
WHERE id = ? AND status = 'IN_FLIGHT' AND lease_token = ?`

	// A snooze: a release due at ?1 that counts a snooze and no attempt.
	sqlSnooze = `UPDATE rdq_tasks
SET status = 'PENDING', next_attempt_at = ?1, lease_expires_at = NULL, updated_at = ?2, snoozes = snoozes + 1,
	held = EXISTS (SELECT 1 FROM rdq_paused_handlers AS h WHERE h.queue = rdq_tasks.queue AND h.handler = rdq_tasks.handler)
WHERE id = ?3 AND status = 'IN_FLIGHT' AND lease_token = ?4`

	// A retry in place that keeps the task: the failed attempt counted as
	// sqlFinish counts a retry's, and a new lease set as sqlClaimTasks sets
	// one. A task of a paused queue or handler (the primary keys of
	// rdq_paused_queues and rdq_paused_handlers) is not matched: the caller
	// finishes it with sqlFinish instead. ?1 next attempt time, ?2 lease
	// expiry, ?3 lease owner, ?4 now, ?5-?7 the failure, ?8 id, ?9 token.
	sqlRetryInPlace = `UPDATE rdq_tasks
SET attempts = attempts + 1, next_attempt_at = ?1,
	lease_token = lease_token + 1, lease_expires_at = ?2, lease_owner = ?3, claimed_at = ?4, updated_at = ?4,
	last_error_type = ?5, last_error_message = ?6, last_error_fingerprint = ?7
WHERE id = ?8 AND status = 'IN_FLIGHT' AND lease_token = ?9
  AND NOT EXISTS (SELECT 1 FROM rdq_paused_queues AS q WHERE q.queue = rdq_tasks.queue)
  AND NOT EXISTS (SELECT 1 FROM rdq_paused_handlers AS h WHERE h.queue = rdq_tasks.queue AND h.handler = rdq_tasks.handler)
RETURNING ` + taskColumns
)

// Reclaim.
const (
	// Index rdq_tasks_expiry (lease_expires_at, id) WHERE status =
	// 'IN_FLIGHT'. ?3 is a JSON array of queue names; '[]' means all.
	sqlReclaimCandidates = `SELECT id, lease_token, lease_owner, coalesce(claimed_at, ?1) FROM rdq_tasks
WHERE status = 'IN_FLIGHT' AND lease_expires_at <= ?1
	AND (?2 = 0 OR queue IN (SELECT value FROM json_each(?3)))
ORDER BY lease_expires_at, id LIMIT ?4`

	// Primary key, fenced by the token read in the same transaction.
	sqlReclaimTask = `UPDATE rdq_tasks
SET lease_token = lease_token + 1, lease_expires_at = ?, lease_owner = ?, claimed_at = ?,
	attempts = attempts + 1, last_error_type = ?, last_error_message = ?, last_error_fingerprint = ?,
	updated_at = ?
WHERE id = ? AND status = 'IN_FLIGHT' AND lease_token = ?
RETURNING ` + taskColumns
)

// Get.
const (
	// Primary key.
	sqlGetTask = `SELECT ` + taskColumns + ` FROM rdq_tasks WHERE id = ?`

	// Primary key of rdq_attempts (task_id, number).
	sqlGetAttempts = `SELECT task_id, number, life, outcome, error_type, message, stack, worker_id,
	lease_token, started_at, finished_at
FROM rdq_attempts WHERE task_id = ? ORDER BY number`
)

// Redrive by ID.
const (
	// Primary key.
	sqlRedriveLookup = `SELECT status, life, payload, queue FROM rdq_tasks WHERE id = ?`

	// Primary key. ?1 next attempt time, ?2 now, ?3 whether the payload
	// is replaced, ?4 the new payload, ?5 id.
	sqlRedriveTask = `UPDATE rdq_tasks
SET status = 'PENDING', attempts = 0, snoozes = 0, life = life + 1, next_attempt_at = ?1, finished_at = NULL,
	lease_expires_at = NULL, updated_at = ?2,
	payload = CASE WHEN ?3 THEN coalesce(?4, x'') ELSE payload END,
	held = EXISTS (SELECT 1 FROM rdq_paused_handlers AS h WHERE h.queue = rdq_tasks.queue AND h.handler = rdq_tasks.handler)
WHERE id = ?5 AND status = 'DEAD'`
)

// Retention of succeeded tasks.
const (
	// Index rdq_tasks_succeeded (finished_at) WHERE status = 'SUCCEEDED'
	// selects the oldest first; the primary key deletes; the attempts go by
	// ON DELETE CASCADE through rdq_attempts' primary key.
	sqlPurgeSucceeded = `DELETE FROM rdq_tasks WHERE rowid IN (
	SELECT rowid FROM rdq_tasks WHERE status = 'SUCCEEDED' AND finished_at < ? ORDER BY finished_at LIMIT ?
) RETURNING id, queue, idempotency_key`
)

// Audit log.
const (
	// Primary key (AUTOINCREMENT).
	sqlInsertAudit = `INSERT INTO rdq_audit (at, actor, action, filter, ids, count, reason, details, queues)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

	// sqlListAudit is completed with auditFilter* fragments and
	// sqlListAuditTail. Served by the primary key (newest first), or by
	// rdq_audit_actor (actor, id) / rdq_audit_action (action, id) when
	// those filters are set, or rdq_audit_at (at) for a time range.
	sqlListAudit = `SELECT id, at, actor, action, filter, ids, count, reason, details, queues FROM rdq_audit WHERE 1 = 1`

	auditFilterActor    = ` AND actor = ?`
	auditFilterAction   = ` AND action = ?`
	auditFilterSince    = ` AND at >= ?`
	auditFilterUntil    = ` AND at < ?`
	auditFilterBeforeID = ` AND id < ?`
	sqlListAuditTail    = ` ORDER BY id DESC LIMIT ?`
)

// Dead-letter queue. A selection of dead tasks is deadWhere followed by the
// fragments of the filter's set fields, in this order. The planner serves
// it from the partial index of the most selective exact filter, each of
// which also yields the newest-first order without a sort:
//
//	Queue       rdq_tasks_dead_queue       (queue, finished_at, id)
//	Handler     rdq_tasks_dead_handler     (handler, finished_at, id)
//	ErrorType   rdq_tasks_dead_error_type  (last_error_type, finished_at, id)
//	Fingerprint rdq_tasks_dead_fingerprint (last_error_fingerprint, finished_at, id)
//	none        rdq_tasks_dead             (finished_at, id)
//	IDs         the primary key
//
// The time range and the cursor are ranges on finished_at inside any of
// them. MessageContains is checked on the rows the index yields (a
// newest-first scan that stops at the page size), and so are LifeMin
// (deadFilterAtLife) and LifeBelow (deadFilterBelowLife): no dead index
// holds the life. RedriveDead's MaxLife uses the same two fragments.
const (
	deadWhere             = ` WHERE status = 'DEAD'`
	deadFilterIDs         = ` AND id IN (SELECT unhex(value) FROM json_each(?))`
	deadFilterQueue       = ` AND queue = ?`
	deadFilterHandler     = ` AND handler = ?`
	deadFilterErrorType   = ` AND last_error_type = ?`
	deadFilterFingerprint = ` AND last_error_fingerprint = ?`
	deadFilterAfter       = ` AND finished_at >= ?`
	deadFilterBefore      = ` AND finished_at < ?`
	deadFilterMessage     = ` AND ` + containsFoldFunc + `(last_error_message, ?)`
	deadFilterCursor      = ` AND (finished_at, id) < (?, ?)`
	deadFilterBelowLife   = ` AND life < ?`
	deadFilterAtLife      = ` AND life >= ?`
	deadNewestFirst       = ` ORDER BY finished_at DESC, id DESC`

	sqlListDead  = `SELECT ` + taskColumns + ` FROM rdq_tasks`
	sqlCountDead = `SELECT count(*) FROM rdq_tasks`

	// Grouped by rdq_tasks_dead_fingerprint.
	sqlDeadGroups     = `SELECT last_error_fingerprint, count(*), min(finished_at), max(finished_at) FROM rdq_tasks`
	sqlDeadGroupsTail = ` GROUP BY last_error_fingerprint`
	// The newest task of one group: rdq_tasks_dead_fingerprint.
	sqlDeadGroupExample = `SELECT id, last_error_type, last_error_message FROM rdq_tasks`

	// Set-based redrive of one chunk, in two statements. The pick reads
	// the chunk, newest dead first, through the index that serves the
	// selection (see above): sqlRedriveDeadPickHead, the selection,
	// deadNewestFirst, sqlLimit and sqlRedriveDeadPickTail. It returns how
	// many tasks it picked and their row ids as a JSON array. The update
	// then changes those rows by row id, the table's own key (?3, the
	// array; ?1 the base next attempt time, ?2 now). It calls no SQL
	// function, has no bound LIMIT and fails rather than aborts (OR FAIL;
	// the transaction is rolled back on any error), so SQLite keeps no
	// statement journal: a copy of every page the statement changes, taken
	// before the change, which cost about a third of the statement's time.
	//
	// Without random() each task's share of the spread is drawn from its
	// row id r by a random map, new for every chunk: with p = 2^31 - 1
	// (prime), x = (r + ?4) mod p, h = (x^2 * ?5 + ?6) mod p, and the share
	// is h * ?7 (?7 = spread / p, a REAL), with ?4 and ?6 uniform in [0, p)
	// and ?5 in [1, p). h is uniform over [0, p) for every task, and the h
	// of two tasks are independent of each other (but for a chance of
	// 1/p): the squaring keeps tasks with consecutive row ids from falling
	// into a few evenly spaced bursts. Every product stays below 2^62.
	// sqlRedriveDeadQueues reads the queues of the rows a redrive changed
	// (?1, their row ids as a JSON array), for its audit entry; by row id,
	// the table's own key.
	sqlRedriveDeadQueues   = `SELECT DISTINCT queue FROM rdq_tasks WHERE rowid IN (SELECT value FROM json_each(?1)) ORDER BY queue`
	sqlRedriveDeadPickHead = `SELECT count(*), json_group_array(rowid) FROM (SELECT rowid FROM rdq_tasks`
	sqlRedriveDeadPickTail = `)`
	sqlRedriveDeadRows     = `UPDATE OR FAIL rdq_tasks
SET status = 'PENDING', attempts = 0, snoozes = 0, life = life + 1,
	next_attempt_at = ?1 + CAST(
		(((rowid % 2147483647 + ?4) % 2147483647) * ((rowid % 2147483647 + ?4) % 2147483647) % 2147483647 * ?5 + ?6)
		% 2147483647 * ?7 AS INTEGER),
	finished_at = NULL, lease_expires_at = NULL, updated_at = ?2,
	held = EXISTS (SELECT 1 FROM rdq_paused_handlers AS h WHERE h.queue = rdq_tasks.queue AND h.handler = rdq_tasks.handler)
WHERE rowid IN (SELECT value FROM json_each(?3)) AND status = 'DEAD'`

	// Set-based purge of one chunk; attempts go by ON DELETE CASCADE.
	sqlPurgeDeadHead = `DELETE FROM rdq_tasks WHERE rowid IN (SELECT rowid FROM rdq_tasks`
	sqlPurgeDeadTail = ` LIMIT ?) RETURNING id, queue, idempotency_key`
)

// The write connection's page cache. PRAGMA cache_size takes a size in KiB
// when negative, and no bound parameters. Open sets the normal size;
// withBulkCache raises it for one call of a bulk mutation.
const (
	sqlWriteCache = `PRAGMA cache_size = -65536`  // 64 MiB, as Open sets it
	sqlBulkCache  = `PRAGMA cache_size = -262144` // 256 MiB
)

// Stats: one pass over rdq_tasks grouped by queue (a full scan; Stats is an
// operator's call, not on the task path). ?1 now, ?2 the start of the
// succeeded window.
const sqlStats = `SELECT queue,
	sum(status = 'PENDING'), sum(status = 'IN_FLIGHT'), sum(status = 'DEAD'),
	sum(status = 'SUCCEEDED' AND finished_at >= ?2),
	min(CASE WHEN status = 'PENDING' AND next_attempt_at <= ?1 THEN next_attempt_at END)
FROM rdq_tasks GROUP BY queue ORDER BY queue`

// Pausing queues. All by the primary key of rdq_paused_queues.
const (
	sqlPauseQueue = `INSERT INTO rdq_paused_queues (queue, paused_at, actor, reason)
VALUES (?, ?, ?, ?) ON CONFLICT (queue) DO NOTHING`

	sqlResumeQueue = `DELETE FROM rdq_paused_queues WHERE queue = ?`

	sqlPausedQueues = `SELECT queue FROM rdq_paused_queues ORDER BY queue`
)

// Live tasks (store.LiveTasks). A listing is sqlListLive, liveWhere* for
// the state, the dead-letter filter fragments above (deadFilterIDs …
// deadFilterMessage) for the filter, the state's cursor and order, and
// sqlLimit. Each state reads one partial index in order and stops at the
// page size:
//
//	pending, retrying rdq_tasks_pending (next_attempt_at, id), or with a
//	                  Queue filter rdq_tasks_claim (queue, next_attempt_at, id)
//	                  merged with rdq_tasks_held for a paused handler's tasks
//	in flight         rdq_tasks_expiry (lease_expires_at, id)
//	succeeded         rdq_tasks_succeeded (finished_at, id), backwards
const (
	sqlListLive = `SELECT ` + taskColumns + ` FROM rdq_tasks`

	liveWherePending   = ` WHERE status = 'PENDING' AND attempts = 0`
	liveWhereRetrying  = ` WHERE status = 'PENDING' AND attempts > 0`
	liveWhereInFlight  = ` WHERE status = 'IN_FLIGHT'`
	liveWhereSucceeded = ` WHERE status = 'SUCCEEDED'`

	liveNotHeld         = ` AND held = 0`
	liveHeld            = ` AND held = 1`
	liveCursorDue       = ` AND (next_attempt_at, id) > (?, ?)`
	liveCursorExpiry    = ` AND (lease_expires_at, id) > (?, ?)`
	liveCursorFinished  = ` AND (finished_at, id) < (?, ?)`
	liveOrderDue        = ` ORDER BY next_attempt_at, id`
	liveOrderExpiry     = ` ORDER BY lease_expires_at, id`
	liveOrderNewestDone = ` ORDER BY finished_at DESC, id DESC`

	// Index rdq_tasks_idempotency (queue, idempotency_key).
	sqlTaskByKey = sqlFindByKey

	// Primary key.
	sqlLiveStatus = `SELECT status, queue FROM rdq_tasks WHERE id = ?`

	// Primary key. ?1 now, ?2 id.
	sqlRetryNow = `UPDATE rdq_tasks SET next_attempt_at = ?1, updated_at = ?1
WHERE id = ?2 AND status = 'PENDING'`

	// Primary key. ?1 now, ?2-?4 the cancellation failure, ?5 id. The
	// CANCELLED attempt is recorded with sqlInsertAttempt.
	sqlCancel = `UPDATE rdq_tasks
SET status = 'DEAD', attempts = attempts + 1, finished_at = ?1, lease_expires_at = NULL, updated_at = ?1,
	last_error_type = ?2, last_error_message = ?3, last_error_fingerprint = ?4
WHERE id = ?5 AND status = 'PENDING'`
)

// listLiveMerged lists a queue's waiting tasks (pending or retrying, with
// a Queue filter), which live in two indexes: where (the state's
// liveWhere*, the filter and the cursor) is read in order from
// rdq_tasks_claim for the tasks not held and from rdq_tasks_held for a
// paused handler's, each up to the page size, and the two are merged in
// order. Its parameters are where's, the limit, where's again, and the
// limit twice.
func listLiveMerged(where, order string) string {
	return `SELECT * FROM (` + sqlListLive + where + liveNotHeld + order + sqlLimit + `)
UNION ALL
SELECT * FROM (` + sqlListLive + where + liveHeld + order + sqlLimit + `)` + order + sqlLimit
}

// Idempotency keys that outlive their tasks (rdq_idempotency_keys, from
// migrations/0003_live_tasks.sql). A key row is written with its task and
// kept, marked purged, for the key retention after retention purges the
// task; an operator's purge deletes it.
const (
	// Primary key of rdq_idempotency_keys (queue, key).
	sqlKeyFind = `SELECT task_id, created_at FROM rdq_idempotency_keys
WHERE queue = ?1 AND key = ?2 AND (purged_at IS NULL OR purged_at > ?3)`

	// Primary key; an expired key of a purged task is replaced.
	sqlKeyPut = `INSERT INTO rdq_idempotency_keys (queue, key, task_id, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (queue, key) DO UPDATE SET task_id = excluded.task_id, created_at = excluded.created_at, purged_at = NULL`

	// Primary key.
	sqlKeyRetire = `UPDATE rdq_idempotency_keys SET purged_at = ?1, task_id = ?2 WHERE queue = ?3 AND key = ?4`

	// Primary key.
	sqlKeyDrop = `DELETE FROM rdq_idempotency_keys WHERE queue = ? AND key = ?`

	// Index rdq_idempotency_keys_purged (purged_at): oldest first, up to
	// ?2 keys purged at or before ?1.
	sqlKeyPrune = `DELETE FROM rdq_idempotency_keys WHERE rowid IN (
	SELECT rowid FROM rdq_idempotency_keys WHERE purged_at IS NOT NULL AND purged_at <= ?1 ORDER BY purged_at LIMIT ?2
)`
)

// Console reads (see console.go).
const (
	// Index rdq_tasks_claim (queue, next_attempt_at, id) WHERE status =
	// 'PENDING': a range per queue. ?1 now.
	sqlNotDueCounts = `SELECT queue, count(*) FROM rdq_tasks
WHERE status = 'PENDING' AND next_attempt_at > ?1 GROUP BY queue`

	// Indexes rdq_tasks_claim (queue, next_attempt_at, id) WHERE status =
	// 'PENDING' AND held = 0, the not-due range (attempts read from the
	// table), and rdq_tasks_held (queue, handler, attempts,
	// next_attempt_at, id) WHERE status = 'PENDING' AND held = 1,
	// index-only. ?1 now.
	sqlWaitingCounts = `SELECT queue, sum(held = 0 AND attempts > 0), sum(held = 0 AND attempts = 0), sum(held = 1)
FROM (SELECT queue, 0 AS held, attempts FROM rdq_tasks WHERE status = 'PENDING' AND held = 0 AND next_attempt_at > ?1
      UNION ALL
      SELECT queue, 1, attempts FROM rdq_tasks WHERE status = 'PENDING' AND held = 1)
GROUP BY queue`

	// Per fingerprint of ?1 (a JSON array), the group's earliest dead task
	// and the end of its earliest failed attempt with its last error type
	// (its dead time if none). Indexes rdq_tasks_dead_fingerprint
	// (last_error_fingerprint, finished_at, id) WHERE status = 'DEAD', one
	// LIMIT 1 probe per fingerprint; the attempts' primary key (task_id,
	// number), that task's attempts.
	sqlGroupOrigins = `SELECT f.value, coalesce((SELECT min(a.finished_at) FROM rdq_attempts AS a
    WHERE a.task_id = o.id AND a.outcome <> 'SUCCESS' AND a.error_type = o.last_error_type), o.finished_at)
FROM json_each(?1) AS f
JOIN rdq_tasks AS o ON o.id = (SELECT t.id FROM rdq_tasks AS t
    WHERE t.status = 'DEAD' AND t.last_error_fingerprint = f.value ORDER BY t.finished_at, t.id LIMIT 1)`

	// Index rdq_tasks_dead (finished_at, id) WHERE status = 'DEAD': one
	// range. ?1 since, ?2 until, ?3 bucket width (all microseconds).
	sqlDeadHistogram = `SELECT '', (finished_at - ?1) / ?3, count(*) FROM rdq_tasks
WHERE status = 'DEAD' AND finished_at >= ?1 AND finished_at < ?2 GROUP BY 2`

	// Index rdq_tasks_dead_fingerprint (last_error_fingerprint,
	// finished_at, id) WHERE status = 'DEAD': one range per fingerprint of
	// ?4 (a JSON array).
	sqlDeadHistogramByFingerprint = `SELECT last_error_fingerprint, (finished_at - ?1) / ?3, count(*) FROM rdq_tasks
WHERE status = 'DEAD' AND last_error_fingerprint IN (SELECT value FROM json_each(?4))
  AND finished_at >= ?1 AND finished_at < ?2 GROUP BY 1, 2`

	// Index rdq_tasks_dead_fingerprint: the dead tasks of each fingerprint
	// of ?1 (a JSON array).
	sqlDeadGroupKeys = `SELECT DISTINCT last_error_fingerprint, queue, handler FROM rdq_tasks
WHERE status = 'DEAD' AND last_error_fingerprint IN (SELECT value FROM json_each(?1))
ORDER BY 1, 2, 3`
)

// Pausing handlers (store.HandlerPauser). A PENDING task of a paused
// (queue, handler) is held: held = 1 takes it out of rdq_tasks_claim and
// into rdq_tasks_held. Every statement that makes a task PENDING sets held
// from rdq_paused_handlers; writes are serialized, so held is always exact.
const (
	pauseColumns = `queue, handler, state, since, probe_at, trips, probe_id, probe_token, actor, reason, fingerprint, ratio`

	// Primary key of rdq_paused_handlers. ?1 queue, ?2 handler, ?3 now,
	// ?4 probe time or NULL, ?5 actor, ?6 reason, ?7 fingerprint, ?8 ratio.
	sqlPauseHandler = `INSERT INTO rdq_paused_handlers (queue, handler, state, since, probe_at, trips, actor, reason, fingerprint, ratio)
VALUES (?1, ?2, 'open', ?3, ?4, 1, ?5, ?6, ?7, ?8) ON CONFLICT (queue, handler) DO NOTHING RETURNING trips`

	// Primary key; fenced by the probe. ?1 queue, ?2 handler, ?3 probe
	// time, ?4 actor, ?5 reason, ?6 fingerprint, ?7 ratio, ?8 probe id,
	// ?9 probe token.
	sqlReopenHandler = `UPDATE rdq_paused_handlers
SET state = 'open', probe_at = ?3, trips = trips + 1, probe_id = NULL, probe_token = 0, probe_expires_at = NULL,
	actor = ?4, reason = ?5, fingerprint = ?6, ratio = ?7
WHERE queue = ?1 AND handler = ?2 AND state = 'half_open' AND probe_id = ?8 AND probe_token = ?9
RETURNING trips`

	// Index rdq_tasks_claim (the queue's range).
	sqlHoldTasks = `UPDATE rdq_tasks SET held = 1 WHERE status = 'PENDING' AND held = 0 AND queue = ? AND handler = ?`

	// Primary key; with a probe (?3 id or NULL, ?4 token) only if it is
	// the current one.
	sqlResumeHandler = `DELETE FROM rdq_paused_handlers
WHERE queue = ?1 AND handler = ?2 AND (?3 IS NULL OR (state = 'half_open' AND probe_id = ?3 AND probe_token = ?4))
RETURNING trips`

	// Index rdq_tasks_held.
	sqlUnholdTasks = `UPDATE rdq_tasks SET held = 0 WHERE status = 'PENDING' AND held = 1 AND queue = ? AND handler = ?`

	// The handlers of queue ?2 due a probe at ?1: open past probe_at, or
	// half-open past probe_expires_at with the probe task no longer under
	// a live lease; none in a paused queue. Primary keys of
	// rdq_paused_handlers, rdq_tasks and rdq_paused_queues.
	sqlProbeDue = `SELECT handler FROM rdq_paused_handlers AS p
WHERE queue = ?2 AND probe_at IS NOT NULL
  AND ((state = 'open' AND probe_at <= ?1)
    OR (state = 'half_open' AND probe_expires_at <= ?1
        AND NOT EXISTS (SELECT 1 FROM rdq_tasks AS x WHERE x.id = p.probe_id AND x.status = 'IN_FLIGHT'
                        AND x.lease_token = p.probe_token AND x.lease_expires_at > ?1)))
  AND NOT EXISTS (SELECT 1 FROM rdq_paused_queues WHERE queue = ?2)
ORDER BY handler`

	// Index rdq_tasks_held: the fewest attempts, then the oldest due.
	sqlProbeTask = `SELECT rowid FROM rdq_tasks
WHERE status = 'PENDING' AND held = 1 AND queue = ?1 AND handler = ?2 AND next_attempt_at <= ?3
ORDER BY attempts, next_attempt_at, id LIMIT 1`

	// Primary key of rdq_paused_handlers.
	sqlProbeStart = `UPDATE rdq_paused_handlers
SET state = 'half_open', probe_id = ?3, probe_token = ?4, probe_expires_at = ?5
WHERE queue = ?1 AND handler = ?2
RETURNING ` + pauseColumns

	// Primary key of rdq_paused_handlers (a scan of it without a queue).
	sqlPausedHandlers = `SELECT ` + pauseColumns + ` FROM rdq_paused_handlers
WHERE ?1 = '' OR queue = ?1 ORDER BY queue, handler`
)

// Worker registry (rdq_workers, from migrations/0006_workers.sql): a row per
// running worker, a few dozen at most, so statements read it whole. A row is
// live while last_seen + stale_after > now.
const (
	// Reads rdq_workers whole. ?1 now, ?2 the registering worker.
	sqlExpireWorkers = `DELETE FROM rdq_workers WHERE id <> ?2 AND last_seen + expire_after <= ?1`

	// Primary key (conflict arbiter); started_at is kept on refresh.
	sqlRegisterWorker = `INSERT INTO rdq_workers (id, host, pid, version, queues, handlers, slots, in_flight,
	started_at, last_seen, stale_after, expire_after)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version,
	queues = excluded.queues, handlers = excluded.handlers, slots = excluded.slots,
	in_flight = excluded.in_flight, last_seen = excluded.last_seen,
	stale_after = excluded.stale_after, expire_after = excluded.expire_after`

	// Primary key.
	sqlDeregisterWorker = `DELETE FROM rdq_workers WHERE id = ?`

	// Reads rdq_workers whole. ?1 now, ?2 queue ('' for every queue).
	sqlWorkers = `SELECT id, host, pid, version, queues, handlers, slots, in_flight, started_at, last_seen,
	last_seen + stale_after <= ?1
FROM rdq_workers
WHERE last_seen + expire_after > ?1
  AND (?2 = '' OR EXISTS (SELECT 1 FROM json_each(rdq_workers.queues) WHERE value = ?2))
ORDER BY id`

	// A pass over the PENDING tasks grouped by queue and handler (index
	// rdq_tasks_claim and rdq_tasks_held, or a scan: an operator's call),
	// keeping the pairs no live worker serves. ?1 now, ?2 the queues as a
	// JSON array ('[]' for every queue), ?3 1 for due, not held tasks only
	// (then a range of rdq_tasks_claim per queue).
	sqlUnservedHandlers = `SELECT t.queue, t.handler, count(*), min(t.next_attempt_at)
FROM rdq_tasks AS t
WHERE t.status = 'PENDING'
  AND (json_array_length(?2) = 0 OR t.queue IN (SELECT value FROM json_each(?2)))
  AND (?3 = 0 OR (t.held = 0 AND t.next_attempt_at <= ?1))
GROUP BY t.queue, t.handler
HAVING NOT EXISTS (
	SELECT 1 FROM rdq_workers AS w
	WHERE w.last_seen + w.stale_after > ?1
	  AND EXISTS (SELECT 1 FROM json_each(w.queues) WHERE value = t.queue)
	  AND EXISTS (SELECT 1 FROM json_each(w.handlers) WHERE value = t.handler))
ORDER BY t.queue, t.handler`

	// Index rdq_tasks_claim (queue, next_attempt_at, id): the queue's due
	// tasks oldest first, those of handler ?3, up to ?4, unless a live
	// worker serves (?2, ?3). ?1 the latest due time, ?5 now.
	sqlUnservedCandidates = `SELECT id FROM rdq_tasks
WHERE status = 'PENDING' AND held = 0 AND queue = ?2 AND next_attempt_at <= ?1 AND handler = ?3
  AND NOT EXISTS (
	SELECT 1 FROM rdq_workers AS w
	WHERE w.last_seen + w.stale_after > ?5
	  AND EXISTS (SELECT 1 FROM json_each(w.queues) WHERE value = ?2)
	  AND EXISTS (SELECT 1 FROM json_each(w.handlers) WHERE value = ?3))
ORDER BY next_attempt_at, id LIMIT ?4`
)

// The time series (see series.go). Times are microseconds.

// sqliteSeriesEvents lists what happened in [?lo, ?hi), one row per
// attempt with its minute and whether it dead-lettered its task: the last
// attempt of a life that ended DEAD (the task is dead in it or was
// redriven into a later life). Indexes: none for the range, which is read
// from the whole history (no index on finish time, so that recording an
// attempt writes none; see migration 7); the primary keys of rdq_tasks and
// rdq_attempts, a lookup per attempt.
func sqliteSeriesEvents(lo, hi string) string {
	return `SELECT (a.finished_at / 60000000) * 60000000 AS minute, t.queue AS queue, t.handler AS handler,
       a.outcome AS outcome,
       (a.outcome <> 'SUCCESS' AND (t.life > a.life OR t.status = 'DEAD')
        AND NOT EXISTS (SELECT 1 FROM rdq_attempts AS b
                        WHERE b.task_id = a.task_id AND b.number > a.number AND b.life = a.life)) AS dead
FROM rdq_attempts AS a JOIN rdq_tasks AS t ON t.id = a.task_id
WHERE a.finished_at >= ` + lo + ` AND a.finished_at < ` + hi
}

// sqliteSeriesCounted are the counts of one group of events.
const sqliteSeriesCounted = `sum(e.outcome <> 'CANCELLED'), sum(e.outcome = 'SUCCESS'),
       sum(e.outcome IN ('RETRYABLE_FAILURE', 'LEASE_EXPIRED')), sum(e.outcome = 'PERMANENT_FAILURE'), sum(e.dead)`

var (
	// Primary key of rdq_series_minutes: the minutes of [?1, ?2) rolled
	// up.
	sqlSeriesMinutesDone = `SELECT minute FROM rdq_series_minutes WHERE minute >= ?1 AND minute < ?2`

	// sqlSeriesRollup rolls up the minutes ?3 (a JSON array), which lie in
	// [?1, ?2), into rdq_series_counts. Indexes: those of the events, and
	// the primary key of rdq_series_counts (the conflict check).
	sqlSeriesRollup = `INSERT OR IGNORE INTO rdq_series_counts
    (minute, queue, handler, attempts, successes, retryable, permanent, dead_lettered)
SELECT e.minute, e.queue, e.handler, ` + sqliteSeriesCounted + `
FROM (` + sqliteSeriesEventsRollup + `) AS e
WHERE e.minute IN (SELECT value FROM json_each(?3))
GROUP BY e.minute, e.queue, e.handler`

	// Primary key of rdq_series_minutes: marks the minutes ?1 (a JSON
	// array) rolled up.
	sqlSeriesMark = `INSERT OR IGNORE INTO rdq_series_minutes (minute) SELECT value FROM json_each(?1)`

	// The primary keys of both tables, one range each: the minutes before
	// ?1 (the retention).
	sqlSeriesPruneCounts  = `DELETE FROM rdq_series_counts WHERE minute < ?1`
	sqlSeriesPruneMinutes = `DELETE FROM rdq_series_minutes WHERE minute < ?1`

	// Primary key of rdq_series_hours_done: the hours of [?1, ?2) rolled
	// up.
	sqlSeriesHoursDone = `SELECT hour FROM rdq_series_hours_done WHERE hour >= ?1 AND hour < ?2`

	// sqlSeriesRollupHours sums the minutes of the hours ?3 (a JSON array),
	// which lie in [?1, ?2), from rdq_series_counts (its primary key, one
	// range) into rdq_series_hours.
	sqlSeriesRollupHours = `INSERT OR IGNORE INTO rdq_series_hours
    (hour, queue, handler, attempts, successes, retryable, permanent, dead_lettered)
SELECT (c.minute / 3600000000) * 3600000000 AS hour, c.queue, c.handler,
       sum(c.attempts), sum(c.successes), sum(c.retryable), sum(c.permanent), sum(c.dead_lettered)
FROM rdq_series_counts AS c
WHERE c.minute >= ?1 AND c.minute < ?2
  AND (c.minute / 3600000000) * 3600000000 IN (SELECT value FROM json_each(?3))
GROUP BY 1, 2, 3`

	// Primary key of rdq_series_hours_done: marks the hours ?1 (a JSON
	// array) rolled up.
	sqlSeriesMarkHours = `INSERT OR IGNORE INTO rdq_series_hours_done (hour) SELECT value FROM json_each(?1)`

	// The primary keys of both tables, one range each: the hours before
	// ?1 (the retention).
	sqlSeriesPruneHours     = `DELETE FROM rdq_series_hours WHERE hour < ?1`
	sqlSeriesPruneHoursDone = `DELETE FROM rdq_series_hours_done WHERE hour < ?1`

	// sqlSeries reads a series in buckets of ?6 from ?1, for queue ?7 and
	// handler ?8 when not empty: the rolled-up hours of [?2, ?3) from
	// rdq_series_hours, the rolled-up minutes of [?1, ?2) and [?3, ?4)
	// from rdq_series_counts (their primary keys, a range each), and the
	// minutes of [?4, ?5) from the history.
	sqlSeries = `SELECT m.queue, m.handler, (m.minute - ?1) / ?6 AS bucket,
       sum(m.attempts), sum(m.successes), sum(m.retryable), sum(m.permanent), sum(m.dead_lettered)
FROM (
    SELECT c.hour AS minute, c.queue, c.handler, c.attempts, c.successes, c.retryable, c.permanent, c.dead_lettered
    FROM rdq_series_hours AS c
    WHERE c.hour >= ?2 AND c.hour < ?3
    UNION ALL
    SELECT c.minute, c.queue, c.handler, c.attempts, c.successes, c.retryable, c.permanent, c.dead_lettered
    FROM rdq_series_counts AS c
    WHERE c.minute >= ?1 AND c.minute < ?2
    UNION ALL
    SELECT c.minute, c.queue, c.handler, c.attempts, c.successes, c.retryable, c.permanent, c.dead_lettered
    FROM rdq_series_counts AS c
    WHERE c.minute >= ?3 AND c.minute < ?4
    UNION ALL
    SELECT e.minute, e.queue, e.handler, ` + sqliteSeriesCounted + `
    FROM (` + sqliteSeriesEventsTail + `) AS e
    GROUP BY e.minute, e.queue, e.handler
) AS m
WHERE (?7 = '' OR m.queue = ?7) AND (?8 = '' OR m.handler = ?8)
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3`

	sqliteSeriesEventsRollup = sqliteSeriesEvents("?1", "?2")
	sqliteSeriesEventsTail   = sqliteSeriesEvents("?4", "?5")
)
