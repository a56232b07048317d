package pgstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/srjn45/rdq/store"
)

// This file holds every SQL statement pgstore runs. {schema} stands for the
// store's quoted schema name; it is substituted once, when the store is
// created (see buildQueries), in every statement and in the templates of
// the statements built per call (see stmt), which fill only their own
// placeholders (LISTEN's {channel} is filled in once too). Values always travel
// as parameters. The comment of each statement names the index that serves
// it.
//
// Conventions:
//   - A chunk of rows picked by a subquery is addressed as
//     "t.id = ANY (ARRAY(SELECT …))", which the planner serves with primary
//     key lookups; a join on the picked rows may be planned as a hash join
//     over the whole table.
//   - The clock is coalesce($n::timestamptz, now()): the request's Now
//     override, else the database's clock.
//   - Durations travel as bigint microseconds and become intervals with
//     "$n * interval '1 microsecond'".
//   - Batches travel as arrays, expanded with unnest. The hot path's
//     batches (finish, retry in place) are expanded in the select list,
//     where the unnests run in lockstep and generate_series numbers the
//     elements: unnest in FROM (ROWS FROM) first copies every array into
//     a tuplestore of its own.
//   - Status literals are written into the SQL (not parameters), so the
//     planner can match the partial indexes that carry them.
//   - The alias t always names the tasks table, and taskColumns lists the
//     columns scanTask reads, in order.
//   - Plans do not depend on statistics. A statement of the hot path is
//     written in a shape that leaves the planner one reasonable plan, so a
//     table never analyzed, analyzed at a quiet or a busy moment, or full
//     of finished tasks gets the same plan (TestHotPlansHoldInEveryStatisticsState
//     checks every such statement, custom and generic, in each state):
//   - A task named by id in a batch (finish, heartbeat, release, the
//     enqueue's key check, the probe check) is looked up in a subquery
//     fenced with OFFSET 0, correlated to one batch element: the planner
//     can neither flatten it into a join nor hash it, so it runs once per
//     element as a unique probe of tasks_pkey. The update reaches the
//     rows by the ctids the probes returned, as
//     "t.ctid = ANY (ARRAY(SELECT tid …))": a TID scan of those rows
//     whatever the table's size and statistics. A join on the ctids
//     alone is planned on the estimates: on a table of a few hundred pages
//     (a small queue, or any new install) as a hash join over the whole
//     table, for every batch. Each row is paired with its batch element
//     by id ("t.id = w.id": a hash join of the scanned rows with the batch,
//     whose elements name distinct tasks once probed), and the ctid the
//     probe returned is tested with the lease, inside the IS TRUE test
//     below. Written as a join condition, "t.ctid = w.tid" lets a generic
//     plan fetch each ctid in a nested loop, the ANY then a filter that
//     compares every row with the whole batch: a cost quadratic in the
//     batch's size.
//   - A status test that must not be served by a partial index (the probe
//     of tasks_pkey is exact; reading tasks_lease_expiry_idx instead costs
//     every lease in flight, dead entries included) is written
//     "(t.status = 'IN_FLIGHT') IS TRUE": the same test, which no index
//     predicate implies. A ctid test written inside it is no TID
//     condition either.

// taskColumns are the task columns every task-returning query selects, in
// the order scanTask expects.
const taskColumns = `t.id, t.queue, t.handler, t.payload, t.content_type, t.headers,
    t.idempotency_key, t.status, t.attempts, t.life, t.next_attempt_at,
    t.lease_token, t.lease_expires_at, t.lease_owner, t.created_at,
    t.updated_at, t.finished_at, t.last_error_type, t.last_error_message,
    t.last_error_fingerprint, t.max_attempts, t.timeout_us, t.snoozes`

// attemptColumns are the attempt columns scanAttempt reads, in order.
const attemptColumns = `a.task_id, a.number, a.life, a.outcome, a.error_type, a.message,
    a.stack, a.worker_id, a.lease_token, a.started_at, a.finished_at`

// auditColumns are the audit columns scanAudit reads, in order.
const auditColumns = `a.id, a.at, a.actor, a.action, a.filter, a.ids, a.count, a.reason, a.details, a.queues`

// --- Migrations -------------------------------------------------------------

// sqlMigrateLock serializes concurrent Migrate calls on one schema until the
// migrating transaction ends. $1: lock key derived from the schema.
const sqlMigrateLock = `SELECT pg_advisory_xact_lock($1)`

// sqlSchemaExists reports whether the schema $1 exists. Index:
// pg_namespace_nspname_index.
const sqlSchemaExists = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`

const sqlCreateSchema = `CREATE SCHEMA IF NOT EXISTS {schema}`

const sqlCreateMigrationsTable = `
CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// sqlCurrentVersion reads the schema version. Index: schema_migrations_pkey.
const sqlCurrentVersion = `SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations`

// sqlRecordVersion records an applied migration. $1 version, $2 file name.
const sqlRecordVersion = `INSERT INTO {schema}.schema_migrations (version, name) VALUES ($1, $2)`

// --- Store ------------------------------------------------------------------

// sqlEnqueue inserts a batch of tasks; rows that conflict on the primary key
// or on the idempotency key are skipped (the caller looks them up with
// sqlEnqueueLookup). First failures become attempt 1; a permanent one makes
// the task DEAD at once, counted into dead_counts. Queues that received a
// pending task due now are notified.
//
// Rows are inserted in (queue, idempotency key, id) order, so concurrent
// batches sharing keys wait on each other's key in one order and never
// deadlock (40P01).
//
// A task with an idempotency key is inserted only if its key is new in
// idempotency_keys, or the key's task was purged longer than the key
// retention ($18 µs) ago: the key row is the arbiter, and ON CONFLICT DO
// UPDATE judges the latest committed version of a conflicting row, so an
// enqueue racing the purge of its key's task sees the fresh purge and
// inserts nothing.
//
// Indexes: idempotency_keys_pkey (conflict arbiter), tasks_pkey and
// tasks_idempotency_key_idx (conflict arbiters), tasks_claim_idx
// (maintained), dead_counts_pkey (conflict arbiter),
// paused_handlers_pkey (held: see the paused handlers section).
//
// $1..$15 parallel arrays, one element per task: id, queue, handler,
// payload, content type, headers (JSON text), idempotency key (NULL for
// none), delay (µs), and the first failure (NULL outcome for none): outcome,
// error type, message, stack, fingerprint, worker id, duration (µs).
// $16 Now override, $17 notification channel, $18 key retention (µs).
// $19, $20 parallel arrays: the task's own max attempts and timeout (µs), 0
// for the queue's.
const sqlEnqueue = `
WITH input AS (
    SELECT *
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[],
                $7::text[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::text[],
                $13::text[], $14::text[], $15::bigint[], $19::integer[], $20::bigint[])
         AS i(id, queue, handler, payload, content_type, headers,
              idempotency_key, delay_us, ff_outcome, ff_error_type, ff_message, ff_stack,
              ff_fingerprint, ff_worker_id, ff_duration_us, max_attempts, timeout_us)
),
clock AS (
    SELECT coalesce($16::timestamptz, now()) AS now
),
keyed AS (
    INSERT INTO {schema}.idempotency_keys AS k (queue, key, task_id, created_at)
    SELECT i.queue, i.idempotency_key, i.id, c.now
    FROM input i CROSS JOIN clock c
    WHERE i.idempotency_key IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM {schema}.tasks AS e WHERE e.id = i.id OFFSET 0)
    ORDER BY i.queue, i.idempotency_key
    ON CONFLICT (queue, key) DO UPDATE
        SET task_id = excluded.task_id, created_at = excluded.created_at, purged_at = NULL
        WHERE k.purged_at <= excluded.created_at - $18::bigint * interval '1 microsecond'
    RETURNING k.task_id
),
inserted AS (
    INSERT INTO {schema}.tasks AS t (
        id, queue, handler, payload, content_type, headers, idempotency_key,
        status, attempts, last_attempt_number, next_attempt_at, created_at, updated_at, finished_at,
        last_error_type, last_error_message, last_error_fingerprint, held,
        max_attempts, timeout_us)
    SELECT i.id, i.queue, i.handler, i.payload, i.content_type, i.headers::jsonb, i.idempotency_key,
           CASE WHEN i.ff_outcome = 'PERMANENT_FAILURE' THEN 'DEAD' ELSE 'PENDING' END,
           CASE WHEN i.ff_outcome IS NULL THEN 0 ELSE 1 END,
           CASE WHEN i.ff_outcome IS NULL THEN 0 ELSE 1 END,
           c.now + i.delay_us * interval '1 microsecond', c.now, c.now,
           CASE WHEN i.ff_outcome = 'PERMANENT_FAILURE' THEN c.now END,
           coalesce(i.ff_error_type, ''), coalesce(i.ff_message, ''), coalesce(i.ff_fingerprint, ''),
           i.ff_outcome IS DISTINCT FROM 'PERMANENT_FAILURE' AND EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                   WHERE h.queue = i.queue AND h.handler = i.handler FOR KEY SHARE),
           coalesce(i.max_attempts, 0), coalesce(i.timeout_us, 0)
    FROM input i CROSS JOIN clock c
    WHERE i.idempotency_key IS NULL OR i.id IN (SELECT k.task_id FROM keyed k)
    ORDER BY i.queue, i.idempotency_key, i.id
    ON CONFLICT DO NOTHING
    RETURNING ` + taskColumns + `
),
first_failures AS (
    INSERT INTO {schema}.attempts (
        task_id, number, life, outcome, error_type, message, stack, worker_id,
        lease_token, started_at, finished_at)
    SELECT i.id, 1, 0, i.ff_outcome, i.ff_error_type, i.ff_message, i.ff_stack, i.ff_worker_id,
           0, c.now - i.ff_duration_us * interval '1 microsecond', c.now
    FROM input i JOIN inserted n ON n.id = i.id CROSS JOIN clock c
    WHERE i.ff_outcome IS NOT NULL
),
counted AS (
    INSERT INTO {schema}.dead_counts AS d (queue, handler, error_type, fingerprint, shard, n)
    SELECT n.queue, n.handler, n.last_error_type, n.last_error_fingerprint, floor(random() * 16)::smallint, count(*)
    FROM inserted n
    WHERE n.status = 'DEAD'
    GROUP BY n.queue, n.handler, n.last_error_type, n.last_error_fingerprint
    ORDER BY n.queue, n.handler, n.last_error_type, n.last_error_fingerprint
    ON CONFLICT (queue, handler, error_type, fingerprint, shard) DO UPDATE SET n = d.n + excluded.n
),
notified AS (
    SELECT count(pg_notify($17, q.queue)) AS n
    FROM (SELECT DISTINCT n.queue FROM inserted n CROSS JOIN clock c
          WHERE n.status = 'PENDING' AND n.next_attempt_at <= c.now) q
)
SELECT t.* FROM inserted t CROSS JOIN notified`

// sqlEnqueueLookup finds the existing tasks an enqueue conflicted with, by
// ID or by (queue, idempotency key); a task matching both comes twice.
//
// Indexes: tasks_pkey, tasks_idempotency_key_idx.
//
// $1 ids, $2 queues and $3 keys (parallel arrays).
const sqlEnqueueLookup = `
SELECT ` + taskColumns + `
FROM {schema}.tasks AS t
WHERE t.id = ANY($1::uuid[])
UNION ALL
SELECT ` + taskColumns + `
FROM {schema}.tasks AS t
JOIN unnest($2::text[], $3::text[]) AS k(queue, idempotency_key)
  ON t.queue = k.queue AND t.idempotency_key = k.idempotency_key`

// sqlClaim leases up to $2 due PENDING tasks of the queues $1 (distinct
// names), oldest due first, skipping rows other claimers hold locked. Each
// gets a new token (previous + 1) and a lease of $3 µs, owned by $5.
// sqlClaimQueue does the same for the one queue $1 (a text), which is how
// a worker claims.
//
// Index: tasks_claim_idx (queue, next_attempt_at) WHERE status = 'PENDING',
// read once per queue (by the lateral subquery of sqlClaim) as an ordered
// range that stops after $2 rows; so a claim costs the same with a million
// due tasks as with ten (a queue = ANY(...) condition would read and sort
// every due task). Paused queues are skipped through paused_queues_pkey
// before any task is read. The tasks of paused handlers are held, outside
// the index; the paused_handlers_pkey check on each candidate catches the
// few a pause could not hold because they were written concurrently with
// it.
//
// The locked rows are updated by their physical address (a TID scan of the
// ctids the subquery locked), not looked up again through tasks_pkey. A
// row this transaction holds locked keeps its ctid until the update. A row
// the subquery locked in a version newer than the statement's snapshot
// (updated and committed by another transaction in between) is not visible
// to the TID scan and is left unclaimed, still PENDING, for a later claim.
// sqlClaimQueue's generic plan is its custom plan (the candidates come out
// of the index in order, with no array of unknown length to size), so
// PostgreSQL plans it once per connection rather than at every claim.
//
// sqlClaimQueue starts its range at $6 (NULL: the front of the queue).
// Every claim leaves the index entries of the tasks it took behind, dead,
// at the front of the queue's range, until VACUUM removes them; a claim
// that starts at the front reads them all (a million tasks since the last
// VACUUM are some 6,000 index pages per claim). See claimFloors for the
// start a claim is given while the queue has a backlog, and why no task is
// lost by it.
//
// $4 Now override.
const sqlClaim = claimUpdate + `
    SELECT d.ctid
    FROM unnest($1::text[]) AS q(queue)
    CROSS JOIN LATERAL (` + claimCandidatesOfQ + `) AS d
    ORDER BY d.next_attempt_at
    LIMIT $2))
RETURNING ` + taskColumns

// sqlClaimQueue is sqlClaim for the one queue $1.
const sqlClaimQueue = claimUpdate + claimCandidatesOf1 + `))
RETURNING ` + taskColumns

// sqlClaimHandlers is sqlClaim for the tasks of the handlers $6 only,
// which is how a worker claims: a task of another handler is not locked or
// changed. sqlClaimQueueHandlers does the same for the one queue $1,
// starting at $7 as sqlClaimQueue starts at $6.
//
// Index: tasks_claim_idx, read as sqlClaim reads it, the handler a filter
// on the rows of the range: no index is written for it on the hot path.
// The due tasks of handlers no claimant runs (a rolling deploy's new
// handler) are read, not locked, by each claim that passes them on its way
// to the tasks it takes. Like sqlClaimQueue, sqlClaimQueueHandlers has one
// plan, the generic one.
const sqlClaimHandlers = claimUpdate + `
    SELECT d.ctid
    FROM unnest($1::text[]) AS q(queue)
    CROSS JOIN LATERAL (` + claimCandidatesOfQH + `) AS d
    ORDER BY d.next_attempt_at
    LIMIT $2))
RETURNING ` + taskColumns

// sqlClaimQueueHandlers is sqlClaimHandlers for the one queue $1.
const sqlClaimQueueHandlers = claimUpdate + claimCandidatesOf1H + `))
RETURNING ` + taskColumns

// claimCandidatesOfQH and claimCandidatesOf1H are claimCandidatesOfQ and
// claimCandidatesOf1 for the tasks of the handlers $6.
const (
	claimCandidatesOfQH = `
        SELECT d.ctid, d.next_attempt_at
        FROM {schema}.tasks AS d
        WHERE d.status = 'PENDING' AND NOT d.held
          AND d.queue = q.queue
          AND d.next_attempt_at <= coalesce($4::timestamptz, now())
          AND d.handler = ANY ($6::text[])
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_queues AS p WHERE p.queue = q.queue)
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                          WHERE h.queue = q.queue AND h.handler = d.handler OFFSET 0)
        ORDER BY d.next_attempt_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    `
	claimCandidatesOf1H = `
        SELECT d.ctid
        FROM {schema}.tasks AS d
        WHERE d.status = 'PENDING' AND NOT d.held
          AND d.queue = $1
          AND d.next_attempt_at <= coalesce($4::timestamptz, now())
          AND d.next_attempt_at >= coalesce($7::timestamptz, '-infinity')
          AND d.handler = ANY ($6::text[])
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_queues AS p WHERE p.queue = $1)
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                          WHERE h.queue = $1 AND h.handler = d.handler OFFSET 0)
        ORDER BY d.next_attempt_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    `
)

// claimUpdate, claimCandidatesOfQ and claimCandidatesOf1 are the parts of
// the claim statements: the update of the locked rows, and the subquery
// that locks the due tasks of the queue q.queue or $1.
const (
	claimUpdate = `
UPDATE {schema}.tasks AS t
SET status = 'IN_FLIGHT',
    lease_token = t.lease_token + 1,
    lease_expires_at = coalesce($4::timestamptz, now()) + $3::bigint * interval '1 microsecond',
    lease_owner = $5,
    claimed_at = coalesce($4::timestamptz, now()),
    updated_at = coalesce($4::timestamptz, now())
WHERE t.status = 'PENDING' AND t.ctid = ANY (ARRAY(`
	claimCandidatesOfQ = `
        SELECT d.ctid, d.next_attempt_at
        FROM {schema}.tasks AS d
        WHERE d.status = 'PENDING' AND NOT d.held
          AND d.queue = q.queue
          AND d.next_attempt_at <= coalesce($4::timestamptz, now())
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_queues AS p WHERE p.queue = q.queue)
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                          WHERE h.queue = q.queue AND h.handler = d.handler OFFSET 0)
        ORDER BY d.next_attempt_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    `
	claimCandidatesOf1 = `
        SELECT d.ctid
        FROM {schema}.tasks AS d
        WHERE d.status = 'PENDING' AND NOT d.held
          AND d.queue = $1
          AND d.next_attempt_at <= coalesce($4::timestamptz, now())
          AND d.next_attempt_at >= coalesce($6::timestamptz, '-infinity')
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_queues AS p WHERE p.queue = $1)
          AND NOT EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                          WHERE h.queue = $1 AND h.handler = d.handler OFFSET 0)
        ORDER BY d.next_attempt_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    `
)

// sqlHeartbeat extends the current leases among ($1[i], $2[i]) to $3 µs from
// now and returns the (id, token) pairs it extended; the rest are stale.
//
// Index: tasks_pkey, one lookup per lease (the status test is written so
// that tasks_lease_expiry_idx cannot serve it; see the conventions).
//
// $4 Now override.
const sqlHeartbeat = `
WITH leases AS (
    SELECT DISTINCT l.id, l.token
    FROM unnest($1::uuid[], $2::bigint[]) AS l(id, token)
),
found AS (
    SELECT l.id, x.tid, x.held_token
    FROM leases l CROSS JOIN LATERAL (` + leaseProbe + `) AS x
)
UPDATE {schema}.tasks AS t
SET lease_expires_at = coalesce($4::timestamptz, now()) + $3::bigint * interval '1 microsecond',
    updated_at = coalesce($4::timestamptz, now())
FROM found f
WHERE t.ctid = ANY (ARRAY(SELECT f.tid FROM found f)) AND t.id = f.id
  AND (t.ctid = f.tid AND t.lease_token = f.held_token AND t.status = 'IN_FLIGHT') IS TRUE
RETURNING t.id, t.lease_token`

// leaseProbe is the subquery that finds the current lease of the batch
// element l (columns id and token) through tasks_pkey, returning its ctid
// as tid (see the conventions). The update that uses the tid tests token
// and status again: a row updated since the statement's snapshot is
// rechecked in its newest version.
const leaseProbe = `
        SELECT x.ctid AS tid, x.lease_token AS held_token
        FROM {schema}.tasks AS x
        WHERE x.id = l.id AND x.lease_token = l.token
          AND (x.status = 'IN_FLIGHT') IS TRUE
        OFFSET 0`

// sqlFinish applies a batch of completions whose leases are current: the
// first completion of each (id, token) in the batch counts; the others, and
// completions with stale tokens, change nothing. An attempt, when given, is
// numbered one past the task's highest attempt number (across lives; the
// task's last_attempt_number, which every statement recording an attempt
// advances) and counted. Returns the batch positions (1-based) applied.
// Queues with a retry due now are notified.
//
// A plain success (outcome SUCCESS, status SUCCEEDED, no error text) is
// recorded in the task row rather than as an attempts row (in_row): its
// worker in lease_owner, its start in claimed_at; sqlGetAttempts reads it
// from there. The hot path's commonest result then writes one row, not two.
//
// Tasks that went DEAD are counted into dead_counts in the same statement:
// one upsert row per (queue, handler, error type, fingerprint), all into
// one shard picked at random, in key order (so concurrent statements lock
// the rows in the same order). With no task going DEAD it inserts nothing.
//
// Indexes: tasks_pkey (update, one lookup per completion, as for
// sqlHeartbeat), attempts_pkey (insert of the attempts not in_row),
// dead_counts_pkey (conflict arbiter).
//
// $1..$11 parallel arrays, one element per completion: id, token, new
// status, retry in (µs), and the attempt (NULL outcome for none): outcome,
// error type, message, stack, fingerprint, worker id, duration (µs).
// $12 Now override, $13 notification channel.
const sqlFinish = `
WITH input AS (
    SELECT unnest($1::uuid[]) AS id, unnest($2::bigint[]) AS token, unnest($3::text[]) AS status,
           unnest($4::bigint[]) AS retry_us, unnest($5::text[]) AS outcome,
           unnest($6::text[]) AS error_type, unnest($7::text[]) AS message,
           unnest($8::text[]) AS stack, unnest($9::text[]) AS fingerprint,
           unnest($10::text[]) AS worker_id, unnest($11::bigint[]) AS duration_us,
           generate_series(1, cardinality($1::uuid[])::bigint) AS ord
),
clock AS (
    SELECT coalesce($12::timestamptz, now()) AS now
),
firsts AS (
    SELECT DISTINCT ON (i.id, i.token) i.*,
           (i.outcome = 'SUCCESS' AND i.status = 'SUCCEEDED'
             AND i.error_type = '' AND i.message = '' AND i.stack = '') IS TRUE AS in_row
    FROM input i
    ORDER BY i.id, i.token, i.ord
),
winners AS (
    SELECT l.*, x.tid, x.held_token, c.now
    FROM firsts l CROSS JOIN clock c CROSS JOIN LATERAL (` + leaseProbe + `) AS x
),
finished AS (
    UPDATE {schema}.tasks AS t
    SET status = w.status,
        attempts = t.attempts + CASE WHEN w.outcome IS NULL THEN 0 ELSE 1 END,
        last_attempt_number = t.last_attempt_number + CASE WHEN w.outcome IS NULL THEN 0 ELSE 1 END,
        claimed_at = CASE WHEN w.in_row THEN w.now - w.duration_us * interval '1 microsecond'
            ELSE t.claimed_at END,
        lease_owner = CASE WHEN w.in_row THEN w.worker_id ELSE t.lease_owner END,
        next_attempt_at = CASE WHEN w.status = 'PENDING'
            THEN w.now + w.retry_us * interval '1 microsecond'
            ELSE t.next_attempt_at END,
        finished_at = CASE WHEN w.status IN ('SUCCEEDED', 'DEAD') THEN w.now END,
        lease_expires_at = NULL,
        held = w.status = 'PENDING' AND EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                   WHERE h.queue = t.queue AND h.handler = t.handler FOR KEY SHARE),
        last_error_type = CASE WHEN w.outcome IS NULL OR w.outcome = 'SUCCESS'
            THEN t.last_error_type ELSE w.error_type END,
        last_error_message = CASE WHEN w.outcome IS NULL OR w.outcome = 'SUCCESS'
            THEN t.last_error_message ELSE w.message END,
        last_error_fingerprint = CASE WHEN w.outcome IS NULL OR w.outcome = 'SUCCESS'
            THEN t.last_error_fingerprint ELSE w.fingerprint END,
        updated_at = w.now
    FROM winners w
    WHERE t.ctid = ANY (ARRAY(SELECT w.tid FROM winners w)) AND t.id = w.id
      AND (t.ctid = w.tid AND t.lease_token = w.held_token AND t.status = 'IN_FLIGHT') IS TRUE
    RETURNING t.id, t.queue, t.status, t.life, t.next_attempt_at, t.last_attempt_number,
              t.handler, t.last_error_type, t.last_error_fingerprint,
              w.ord, w.token, w.outcome, w.error_type, w.message, w.stack, w.worker_id,
              w.duration_us, w.in_row
),
shard AS (
    SELECT floor(random() * 16)::smallint AS n
),
counted AS (
    INSERT INTO {schema}.dead_counts AS d (queue, handler, error_type, fingerprint, shard, n)
    SELECT f.queue, f.handler, f.last_error_type, f.last_error_fingerprint, s.n, count(*)
    FROM finished f CROSS JOIN shard s
    WHERE f.status = 'DEAD'
    GROUP BY f.queue, f.handler, f.last_error_type, f.last_error_fingerprint, s.n
    ORDER BY f.queue, f.handler, f.last_error_type, f.last_error_fingerprint
    ON CONFLICT (queue, handler, error_type, fingerprint, shard) DO UPDATE SET n = d.n + excluded.n
),
recorded AS (
    INSERT INTO {schema}.attempts (
        task_id, number, life, outcome, error_type, message, stack, worker_id,
        lease_token, started_at, finished_at)
    SELECT f.id, f.last_attempt_number, f.life, f.outcome, f.error_type, f.message, f.stack,
           f.worker_id, f.token, c.now - f.duration_us * interval '1 microsecond', c.now
    FROM finished f CROSS JOIN clock c
    WHERE f.outcome IS NOT NULL AND NOT f.in_row
),
notified AS (
    SELECT count(pg_notify($13, q.queue)) AS n
    FROM (SELECT DISTINCT f.queue FROM finished f CROSS JOIN clock c
          WHERE f.status = 'PENDING' AND f.next_attempt_at <= c.now) q
)
SELECT f.ord FROM finished f CROSS JOIN notified`

// sqlRelease returns the current leases among ($1[i], $2[i]) to PENDING, due
// now, without recording an attempt. The first occurrence of each (id,
// token) counts. Returns the batch positions (1-based) released and
// notifies their queues.
//
// Index: tasks_pkey, one lookup per lease (as for sqlHeartbeat).
//
// $3 Now override, $4 notification channel.
const sqlRelease = `
WITH leases AS (
    SELECT DISTINCT ON (l.id, l.token) l.id, l.token, l.ord
    FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS l(id, token, ord)
    ORDER BY l.id, l.token, l.ord
),
found AS (
    SELECT l.ord, l.id, x.tid, x.held_token
    FROM leases l CROSS JOIN LATERAL (` + leaseProbe + `) AS x
),
released AS (
    UPDATE {schema}.tasks AS t
    SET status = 'PENDING',
        next_attempt_at = coalesce($3::timestamptz, now()),
        lease_expires_at = NULL,
        held = EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                       WHERE h.queue = t.queue AND h.handler = t.handler FOR KEY SHARE),
        updated_at = coalesce($3::timestamptz, now())
    FROM found l
    WHERE t.ctid = ANY (ARRAY(SELECT l.tid FROM found l)) AND t.id = l.id
      AND (t.ctid = l.tid AND t.lease_token = l.held_token AND t.status = 'IN_FLIGHT') IS TRUE
    RETURNING l.ord, t.queue
),
notified AS (
    SELECT count(pg_notify($4, q.queue)) AS n
    FROM (SELECT DISTINCT r.queue FROM released r) q
)
SELECT r.ord FROM released r CROSS JOIN notified`

// sqlSnooze returns the current leases among ($1[i], $2[i]) to PENDING, due
// $3[i] µs from now, without recording or counting an attempt, and counts a
// snooze. The first occurrence of each (id, token) counts. Returns the batch
// positions (1-based) snoozed and notifies the queues of those due now.
//
// Index: tasks_pkey, one lookup per lease (as for sqlRelease).
//
// $4 Now override, $5 notification channel.
const sqlSnooze = `
WITH leases AS (
    SELECT DISTINCT ON (l.id, l.token) l.id, l.token, l.delay_us, l.ord
    FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS l(id, token, delay_us, ord)
    ORDER BY l.id, l.token, l.ord
),
snoozed AS (
    UPDATE {schema}.tasks AS t
    SET status = 'PENDING',
        next_attempt_at = coalesce($4::timestamptz, now()) + greatest(l.delay_us, 0) * interval '1 microsecond',
        lease_expires_at = NULL,
        snoozes = t.snoozes + 1,
        held = EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                       WHERE h.queue = t.queue AND h.handler = t.handler FOR KEY SHARE),
        updated_at = coalesce($4::timestamptz, now())
    FROM leases l
    WHERE t.id = ANY ($1::uuid[]) AND t.id = l.id AND t.lease_token = l.token
      AND (t.status = 'IN_FLIGHT') IS TRUE
    RETURNING l.ord, t.queue, l.delay_us
),
notified AS (
    SELECT count(pg_notify($5, q.queue)) AS n
    FROM (SELECT DISTINCT s.queue FROM snoozed s WHERE s.delay_us <= 0) q
)
SELECT s.ord FROM snoozed s CROSS JOIN notified`

// sqlRetryInPlace ends a batch of failed executions whose leases are
// current and keeps their tasks leased to the same worker for the next
// attempt (store.InPlaceRetrier): the first occurrence of each (id, token)
// counts. Each attempt is recorded, numbered and counted as sqlFinish
// records a retry; then a task whose queue and handler are not paused stays
// IN_FLIGHT with a new token (previous + 1) and a lease of $11 µs owned by
// the attempt's worker, and one whose queue or handler is paused goes back
// to PENDING due after its retry delay (held, for a paused handler), as
// sqlFinish leaves a retry. Returns the tasks with their batch position
// (1-based) and whether each was kept; notifies the queues of the tasks
// left PENDING and due now.
//
// Indexes: tasks_pkey (one lookup per item, as for sqlFinish; the update
// reaches the row by its ctid), paused_queues_pkey and paused_handlers_pkey
// (one probe each per item), attempts_pkey (insert).
//
// $1..$9 parallel arrays, one element per item: id, token, retry in (µs),
// error type, message, stack, fingerprint, worker id, duration (µs).
// $10 Now override, $11 lease (µs), $12 notification channel.
const sqlRetryInPlace = `
WITH input AS (
    SELECT unnest($1::uuid[]) AS id, unnest($2::bigint[]) AS token, unnest($3::bigint[]) AS retry_us,
           unnest($4::text[]) AS error_type, unnest($5::text[]) AS message,
           unnest($6::text[]) AS stack, unnest($7::text[]) AS fingerprint,
           unnest($8::text[]) AS worker_id, unnest($9::bigint[]) AS duration_us,
           generate_series(1, cardinality($1::uuid[])::bigint) AS ord
),
clock AS (
    SELECT coalesce($10::timestamptz, now()) AS now
),
firsts AS (
    SELECT DISTINCT ON (i.id, i.token) i.*
    FROM input i
    ORDER BY i.id, i.token, i.ord
),
winners AS (
    SELECT l.*, x.tid, x.held_token, c.now,
           EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                   WHERE h.queue = x.queue AND h.handler = x.handler FOR KEY SHARE) AS handler_paused,
           EXISTS (SELECT 1 FROM {schema}.paused_queues AS p WHERE p.queue = x.queue) AS queue_paused
    FROM firsts l CROSS JOIN clock c CROSS JOIN LATERAL (
        SELECT x.ctid AS tid, x.lease_token AS held_token, x.queue, x.handler
        FROM {schema}.tasks AS x
        WHERE x.id = l.id AND x.lease_token = l.token
          AND (x.status = 'IN_FLIGHT') IS TRUE
        OFFSET 0) AS x
),
retried AS (
    UPDATE {schema}.tasks AS t
    SET status = CASE WHEN w.handler_paused OR w.queue_paused THEN 'PENDING' ELSE 'IN_FLIGHT' END,
        attempts = t.attempts + 1,
        last_attempt_number = t.last_attempt_number + 1,
        lease_token = t.lease_token + CASE WHEN w.handler_paused OR w.queue_paused THEN 0 ELSE 1 END,
        lease_expires_at = CASE WHEN w.handler_paused OR w.queue_paused THEN NULL
            ELSE w.now + $11::bigint * interval '1 microsecond' END,
        lease_owner = CASE WHEN w.handler_paused OR w.queue_paused THEN t.lease_owner ELSE w.worker_id END,
        claimed_at = CASE WHEN w.handler_paused OR w.queue_paused THEN t.claimed_at ELSE w.now END,
        next_attempt_at = w.now + w.retry_us * interval '1 microsecond',
        held = w.handler_paused,
        last_error_type = w.error_type,
        last_error_message = w.message,
        last_error_fingerprint = w.fingerprint,
        updated_at = w.now
    FROM winners w
    WHERE t.ctid = ANY (ARRAY(SELECT w.tid FROM winners w)) AND t.id = w.id
      AND (t.ctid = w.tid AND t.lease_token = w.held_token AND t.status = 'IN_FLIGHT') IS TRUE
    RETURNING ` + taskColumns + `, w.ord, t.status = 'IN_FLIGHT' AS kept, t.held,
              t.last_attempt_number, w.token AS old_token, w.error_type AS a_error_type,
              w.message AS a_message, w.stack AS a_stack, w.worker_id AS a_worker_id,
              w.duration_us AS a_duration_us
),
recorded AS (
    INSERT INTO {schema}.attempts (
        task_id, number, life, outcome, error_type, message, stack, worker_id,
        lease_token, started_at, finished_at)
    SELECT r.id, r.last_attempt_number, r.life, 'RETRYABLE_FAILURE', r.a_error_type, r.a_message,
           r.a_stack, r.a_worker_id, r.old_token, c.now - r.a_duration_us * interval '1 microsecond', c.now
    FROM retried r CROSS JOIN clock c
),
notified AS (
    SELECT count(pg_notify($12, q.queue)) AS n
    FROM (SELECT DISTINCT r.queue FROM retried r CROSS JOIN clock c
          WHERE NOT r.kept AND NOT r.held AND r.next_attempt_at <= c.now) q
)
SELECT ` + taskColumns + `, t.ord, t.kept FROM retried t CROSS JOIN notified`

// sqlReclaimExpired takes over up to $2 IN_FLIGHT tasks whose lease expired,
// in the queues $1 (every queue when empty), oldest expiry first, skipping
// rows locked by others. Each gets a LEASE_EXPIRED attempt for the lost
// execution (its worker, token and claim time), numbered one past the
// task's highest attempt number, counted in attempts and summarized as the
// last error; then a new token and a lease of $3 µs owned by $4.
//
// Indexes: tasks_lease_expiry_idx (lease_expires_at) WHERE status =
// 'IN_FLIGHT'; attempts_pkey (insert).
//
// $5 Now override; $6, $7, $8 the lease-expired failure's type, message and
// fingerprint.
const sqlReclaimExpired = `
WITH expired AS (
    SELECT e.id, e.lease_owner, e.lease_token, e.claimed_at
    FROM {schema}.tasks AS e
    WHERE e.status = 'IN_FLIGHT'
      AND e.lease_expires_at <= coalesce($5::timestamptz, now())
      AND (cardinality($1::text[]) = 0 OR e.queue = ANY($1::text[]))
    ORDER BY e.lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
clock AS (
    SELECT coalesce($5::timestamptz, now()) AS now
),
reclaimed AS (
    UPDATE {schema}.tasks AS t
    SET lease_token = t.lease_token + 1,
        lease_expires_at = c.now + $3::bigint * interval '1 microsecond',
        lease_owner = $4,
        claimed_at = c.now,
        attempts = t.attempts + 1,
        last_attempt_number = t.last_attempt_number + 1,
        last_error_type = $6,
        last_error_message = $7,
        last_error_fingerprint = $8,
        updated_at = c.now
    FROM expired e CROSS JOIN clock c
    WHERE t.id = e.id
    RETURNING ` + taskColumns + `, t.last_attempt_number
),
recorded AS (
    INSERT INTO {schema}.attempts (
        task_id, number, life, outcome, error_type, message, stack, worker_id,
        lease_token, started_at, finished_at)
    SELECT r.id, r.last_attempt_number, r.life, 'LEASE_EXPIRED', $6, $7, '', e.lease_owner,
           e.lease_token, coalesce(e.claimed_at, c.now), c.now
    FROM reclaimed r JOIN expired e ON e.id = r.id CROSS JOIN clock c
)
SELECT ` + taskColumns + ` FROM reclaimed t`

// sqlGetTask reads one task. Index: tasks_pkey.
const sqlGetTask = `SELECT ` + taskColumns + ` FROM {schema}.tasks AS t WHERE t.id = $1`

// sqlGetAttempts reads a task's history in number order: its attempts
// rows, and the success sqlFinish recorded in the task row, if any (a
// SUCCEEDED task whose last attempt number has no row). Indexes:
// attempts_pkey (task_id, number), tasks_pkey.
const sqlGetAttempts = `
SELECT ` + attemptColumns + `
FROM {schema}.attempts AS a
WHERE a.task_id = $1
UNION ALL
SELECT t.id, t.last_attempt_number, t.life, 'SUCCESS', '', '', '', t.lease_owner, t.lease_token,
       t.claimed_at, t.finished_at
FROM {schema}.tasks AS t
WHERE t.id = $1 AND t.status = 'SUCCEEDED' AND t.last_attempt_number > 0
  AND NOT EXISTS (SELECT 1 FROM {schema}.attempts AS a
                  WHERE a.task_id = t.id AND a.number = t.last_attempt_number)
ORDER BY 2`

// sqlRedriveLock locks the tasks a redrive names and reads what decides
// each one's fate. Index: tasks_pkey.
const sqlRedriveLock = `
SELECT t.id, t.status, t.life
FROM {schema}.tasks AS t
WHERE t.id = ANY($1::uuid[])
FOR UPDATE`

// sqlRedrivePayload reads the payload a payload edit replaces (for its
// audit hash). Index: tasks_pkey.
const sqlRedrivePayload = `SELECT t.payload FROM {schema}.tasks AS t WHERE t.id = $1`

// sqlRedriveIDs moves the DEAD tasks $1 to PENDING in a new life, attempts
// reset, history and last error kept, due after $2 µs plus a random share
// of $3 µs; $4, when not NULL, replaces the payload. Queues with tasks due
// now are notified. The moved tasks are counted out of dead_counts (as
// sqlFinish counts them in, with negative counts). Returns how many moved.
//
// Indexes: tasks_pkey; dead_counts_pkey (conflict arbiter).
//
// $5 Now override, $6 notification channel.
const sqlRedriveIDs = `
WITH redriven AS (
    UPDATE {schema}.tasks AS t
    SET status = 'PENDING',
        attempts = 0,
        snoozes = 0,
        life = t.life + 1,
        next_attempt_at = coalesce($5::timestamptz, now())
            + ($2::bigint + floor(random() * $3::bigint)::bigint) * interval '1 microsecond',
        finished_at = NULL,
        lease_expires_at = NULL,
        payload = coalesce($4::bytea, t.payload),
        held = EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                       WHERE h.queue = t.queue AND h.handler = t.handler FOR KEY SHARE),
        updated_at = coalesce($5::timestamptz, now())
    WHERE t.id = ANY($1::uuid[]) AND t.status = 'DEAD'
    RETURNING t.queue, t.handler, t.last_error_type, t.last_error_fingerprint, t.next_attempt_at
),
shard AS (
    SELECT floor(random() * 16)::smallint AS n
),
uncounted AS (
    INSERT INTO {schema}.dead_counts AS d (queue, handler, error_type, fingerprint, shard, n)
    SELECT r.queue, r.handler, r.last_error_type, r.last_error_fingerprint, s.n, -count(*)
    FROM redriven r CROSS JOIN shard s
    GROUP BY r.queue, r.handler, r.last_error_type, r.last_error_fingerprint, s.n
    ORDER BY r.queue, r.handler, r.last_error_type, r.last_error_fingerprint
    ON CONFLICT (queue, handler, error_type, fingerprint, shard) DO UPDATE SET n = d.n + excluded.n
),
notified AS (
    SELECT count(pg_notify($6, q.queue)) AS n
    FROM (SELECT DISTINCT r.queue FROM redriven r
          WHERE r.next_attempt_at <= coalesce($5::timestamptz, now())) q
)
SELECT count(*) FROM redriven CROSS JOIN notified`

// sqlInsertAudit writes one audit entry, after the change it records and in
// its transaction. Its queues are those of the tasks $5 (changed, not
// deleted, by the callers) and the queue the filter $4 names, if any.
// Indexes: audit_pkey; tasks_pkey (the tasks' queues).
//
// $1 Now override, $2 actor, $3 action, $4 filter JSON, $5 ids, $6 count,
// $7 reason, $8 details JSON.
const sqlInsertAudit = `
INSERT INTO {schema}.audit (at, actor, action, filter, ids, count, reason, details, queues)
VALUES (coalesce($1::timestamptz, now()), $2, $3, $4, $5::uuid[], $6, $7, $8::jsonb,
    ARRAY(SELECT DISTINCT q.queue FROM (
        SELECT t.queue FROM {schema}.tasks AS t WHERE t.id = ANY ($5::uuid[])
        UNION ALL
        SELECT nullif($4::text, '')::jsonb ->> 'queue'
    ) AS q WHERE q.queue IS NOT NULL ORDER BY q.queue))`

// sqlPurgeSucceeded deletes up to $2 SUCCEEDED tasks that finished more than
// $1 µs ago, with their history, and audits the deletion as "retention"
// when there was one. Returns how many it deleted.
//
// The idempotency keys of the deleted tasks are kept, marked purged, for
// the key retention (see sqlEnqueue); idempotency_keys_pkey.
//
// Indexes: tasks_succeeded_idx (finished_at) WHERE status = 'SUCCEEDED';
// attempts_pkey (history delete).
//
// $3 Now override, $4 actor, $5 filter JSON.
const sqlPurgeSucceeded = `
WITH picked AS (
    SELECT t.id
    FROM {schema}.tasks AS t
    WHERE t.status = 'SUCCEEDED'
      AND t.finished_at < coalesce($3::timestamptz, now()) - $1::bigint * interval '1 microsecond'
    ORDER BY t.finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.tasks AS t
    WHERE t.id = ANY (ARRAY(SELECT p.id FROM picked p))
    RETURNING t.id, t.queue, t.idempotency_key
),
history AS (
    DELETE FROM {schema}.attempts AS a
    WHERE a.task_id = ANY (ARRAY(SELECT d.id FROM deleted d))
),
retired AS (
    UPDATE {schema}.idempotency_keys AS k
    SET purged_at = coalesce($3::timestamptz, now()), task_id = d.id
    FROM deleted d
    WHERE k.queue = d.queue AND k.key = d.idempotency_key
),
audited AS (
    INSERT INTO {schema}.audit (at, actor, action, filter, count, queues)
    SELECT coalesce($3::timestamptz, now()), $4, 'retention', $5, count(*),
        ARRAY(SELECT DISTINCT d.queue FROM deleted d ORDER BY d.queue)
    FROM deleted
    HAVING count(*) > 0
)
SELECT count(*) FROM deleted`

// sqlListen subscribes a connection to the store's notification channel
// ({channel}, the quoted name Channel returns; LISTEN takes no parameters).
// The statements above that make tasks due send pg_notify on it with the
// queue name as payload.
const sqlListen = `LISTEN {channel}`

// --- Admin ------------------------------------------------------------------

// Dead-letter statements are templates: {filter} becomes the AND-ed
// conditions of a DeadFilter (see deadFilter), each field one parameter, so
// every combination is its own prepared statement whose plan uses the index
// of its most selective field:
//
//	no field, DeadAfter/DeadBefore  tasks_dead_idx (finished_at DESC, id DESC)
//	Queue                           tasks_dead_queue_idx
//	Handler                         tasks_dead_handler_idx
//	ErrorType                       tasks_dead_error_type_idx
//	Fingerprint                     tasks_dead_fingerprint_idx
//	IDs                             tasks_pkey
//
// MessageContains is a residual filter on the rows those indexes produce (a
// substring search needs no extension that way), and so are LifeMin and
// LifeBelow: no dead index holds the life, and a redrive-loop triage
// ("life >= 2") is almost always narrowed by a queue, handler or
// fingerprint whose index yields the rows in page order.

// sqlListDead pages through dead tasks newest dead first. {after} is empty
// or the keyset condition (finished_at, id) < cursor. Indexes: see above;
// the ORDER BY matches every dead index, so a page reads Limit entries.
const sqlListDead = `
SELECT ` + taskColumns + `
FROM {schema}.tasks AS t
WHERE t.status = 'DEAD'{filter}{after}
ORDER BY t.finished_at DESC, t.id DESC
LIMIT {limit}`

// sqlListDeadAfter is the keyset condition of sqlListDead.
const sqlListDeadAfter = `
  AND (t.finished_at, t.id) < ({cursor_at}::timestamptz, {cursor_id}::uuid)`

// sqlCountDead counts dead tasks, for filters dead_counts cannot answer
// (see sqlCountDeadSummary). Indexes: see above (index-only scans).
const sqlCountDead = `
SELECT count(*)
FROM {schema}.tasks AS t
WHERE t.status = 'DEAD'{filter}`

// sqlDeadGroups groups dead tasks by fingerprint, largest first; the
// example of each group is its most recently dead task. It serves the
// filters dead_counts cannot answer (see sqlDeadGroupsSummary).
//
// Indexes: see above for the grouping scan; tasks_dead_fingerprint_idx for
// each group's example.
const sqlDeadGroups = `
WITH groups AS (
    SELECT t.last_error_fingerprint AS fingerprint, count(*) AS n,
           min(t.finished_at) AS first_seen, max(t.finished_at) AS last_seen
    FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD'{filter}
    GROUP BY t.last_error_fingerprint
)
SELECT g.fingerprint, g.n, g.first_seen, g.last_seen, x.id, x.last_error_type, x.last_error_message
FROM groups g
CROSS JOIN LATERAL (
    SELECT t.id, t.last_error_type, t.last_error_message
    FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD' AND t.last_error_fingerprint = g.fingerprint{filter}
    ORDER BY t.finished_at DESC, t.id DESC
    LIMIT 1
) x
ORDER BY g.n DESC, g.fingerprint`

// Counting and grouping by Queue, Handler, ErrorType and Fingerprint alone
// read dead_counts instead of the dead tasks: {counts_filter} is the same
// filter as {filter}, on the summary's columns (alias d) and with the same
// parameters. dead_counts has a few rows per failure kind, so it is read
// whole, or by its primary key dead_counts_pkey when Queue is set.

// sqlCountDeadSummary counts dead tasks from dead_counts. Index:
// dead_counts_pkey (Queue), else the table is read whole.
const sqlCountDeadSummary = `
SELECT coalesce(sum(d.n), 0)::bigint
FROM {schema}.dead_counts AS d
WHERE true{counts_filter}`

// sqlDeadGroupsSummary groups dead tasks by fingerprint from dead_counts,
// largest first, as sqlDeadGroups does. Each group's last and first dead
// time, and its example (the most recently dead task), come from two
// LIMIT 1 probes of tasks_dead_fingerprint_idx (fingerprint, finished_at
// DESC, id DESC), one from each end of the fingerprint's range. {filter}
// keeps the probes to the tasks the filter selects: a residual condition
// on the range, which the probe walks until a task matches (the summary
// says one does). When the planner expects very few matches in the range
// (two or more filter fields besides Fingerprint), it may read the
// fingerprint's range with a bitmap scan and sort it instead.
//
// Indexes: dead_counts_pkey (Queue) or the whole of dead_counts; then
// tasks_dead_fingerprint_idx, forward and backward, per group.
const sqlDeadGroupsSummary = `
WITH groups AS (
    SELECT d.fingerprint, sum(d.n)::bigint AS n
    FROM {schema}.dead_counts AS d
    WHERE true{counts_filter}
    GROUP BY d.fingerprint
    HAVING sum(d.n) > 0
)
SELECT g.fingerprint, g.n, o.finished_at, x.finished_at, x.id, x.last_error_type, x.last_error_message
FROM groups g
CROSS JOIN LATERAL (
    SELECT t.id, t.finished_at, t.last_error_type, t.last_error_message
    FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD' AND t.last_error_fingerprint = g.fingerprint{filter}
    ORDER BY t.finished_at DESC, t.id DESC
    LIMIT 1
) x
CROSS JOIN LATERAL (
    SELECT t.finished_at
    FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD' AND t.last_error_fingerprint = g.fingerprint{filter}
    ORDER BY t.finished_at, t.id
    LIMIT 1
) o
ORDER BY g.n DESC, g.fingerprint`

// sqlRedriveDead redrives one chunk of dead tasks matching {filter} (and
// {life_limit}, the MaxLife condition), writes the audit entry in the same
// statement when any moved, and counts the matching tasks left dead by
// MaxLife ({at_limit}). Queues with tasks due now are notified. The
// redriven tasks are counted out of dead_counts as in sqlRedriveIDs.
//
// Indexes: see above for the selection; tasks_pkey for the update;
// dead_counts_pkey (conflict arbiter).
const sqlRedriveDead = `
WITH picked AS (
    SELECT t.id
    FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD'{filter}{life_limit}
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
),
clock AS (
    SELECT coalesce({now}::timestamptz, now()) AS now
),
redriven AS (
    UPDATE {schema}.tasks AS t
    SET status = 'PENDING',
        attempts = 0,
        snoozes = 0,
        life = t.life + 1,
        next_attempt_at = c.now
            + ({delay}::bigint + floor(random() * {spread}::bigint)::bigint) * interval '1 microsecond',
        finished_at = NULL,
        lease_expires_at = NULL,
        held = EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                       WHERE h.queue = t.queue AND h.handler = t.handler FOR KEY SHARE),
        updated_at = c.now
    FROM clock c
    WHERE t.id = ANY (ARRAY(SELECT p.id FROM picked p))
    RETURNING t.queue, t.handler, t.last_error_type, t.last_error_fingerprint, t.next_attempt_at
),
shard AS (
    SELECT floor(random() * 16)::smallint AS n
),
uncounted AS (
    INSERT INTO {schema}.dead_counts AS d (queue, handler, error_type, fingerprint, shard, n)
    SELECT r.queue, r.handler, r.last_error_type, r.last_error_fingerprint, s.n, -count(*)
    FROM redriven r CROSS JOIN shard s
    GROUP BY r.queue, r.handler, r.last_error_type, r.last_error_fingerprint, s.n
    ORDER BY r.queue, r.handler, r.last_error_type, r.last_error_fingerprint
    ON CONFLICT (queue, handler, error_type, fingerprint, shard) DO UPDATE SET n = d.n + excluded.n
),
audited AS (
    INSERT INTO {schema}.audit (at, actor, action, filter, count, reason, details, queues)
    SELECT (SELECT now FROM clock), {actor}, 'redrive', {filter_json}, count(*), {reason}, {details}::jsonb,
        ARRAY(SELECT DISTINCT r.queue FROM redriven r ORDER BY r.queue)
    FROM redriven
    HAVING count(*) > 0
),
notified AS (
    SELECT count(pg_notify({channel}, q.queue)) AS n
    FROM (SELECT DISTINCT r.queue FROM redriven r CROSS JOIN clock c
          WHERE r.next_attempt_at <= c.now) q
)
SELECT (SELECT count(*) FROM redriven), {at_limit}, (SELECT n FROM notified)`

// sqlRedriveDeadLifeLimit keeps tasks at or past MaxLife out of a redrive.
const sqlRedriveDeadLifeLimit = `
      AND t.life < {max_life}`

// sqlRedriveDeadAtLimit counts the matching tasks MaxLife keeps dead.
// Indexes: those of sqlCountDead.
const sqlRedriveDeadAtLimit = `(
    SELECT count(*) FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD'{filter} AND t.life >= {max_life})`

// sqlPurgeDead deletes one chunk of dead tasks matching {filter}, with their
// history, and audits the deletion in the same statement when there was
// one. {keys} is what becomes of the deleted tasks' idempotency keys:
// sqlPurgeDeadRetireKeys for a retention purge, sqlPurgeDeadDropKeys for
// an operator's. The deleted tasks are counted out of dead_counts as in
// sqlRedriveIDs. Returns how many it deleted.
//
// Indexes: see above for the selection; tasks_pkey and attempts_pkey for
// the deletes; dead_counts_pkey (conflict arbiter).
const sqlPurgeDead = `
WITH picked AS (
    SELECT t.id
    FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD'{filter}
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.tasks AS t
    WHERE t.id = ANY (ARRAY(SELECT p.id FROM picked p))
    RETURNING t.id, t.queue, t.handler, t.last_error_type, t.last_error_fingerprint, t.idempotency_key
),
keys AS ({keys}
),
history AS (
    DELETE FROM {schema}.attempts AS a
    WHERE a.task_id = ANY (ARRAY(SELECT d.id FROM deleted d))
),
shard AS (
    SELECT floor(random() * 16)::smallint AS n
),
uncounted AS (
    INSERT INTO {schema}.dead_counts AS d (queue, handler, error_type, fingerprint, shard, n)
    SELECT r.queue, r.handler, r.last_error_type, r.last_error_fingerprint, s.n, -count(*)
    FROM deleted r CROSS JOIN shard s
    GROUP BY r.queue, r.handler, r.last_error_type, r.last_error_fingerprint, s.n
    ORDER BY r.queue, r.handler, r.last_error_type, r.last_error_fingerprint
    ON CONFLICT (queue, handler, error_type, fingerprint, shard) DO UPDATE SET n = d.n + excluded.n
),
audited AS (
    INSERT INTO {schema}.audit (at, actor, action, filter, count, reason, queues)
    SELECT now(), {actor}, {action}, {filter_json}, count(*), {reason},
        ARRAY(SELECT DISTINCT d.queue FROM deleted d ORDER BY d.queue)
    FROM deleted
    HAVING count(*) > 0
)
SELECT count(*) FROM deleted`

// sqlPurgeDeadRetireKeys keeps the keys of tasks purged by retention,
// marked purged, for the key retention (see sqlEnqueue).
// Index: idempotency_keys_pkey.
const sqlPurgeDeadRetireKeys = `
    UPDATE {schema}.idempotency_keys AS k
    SET purged_at = now(), task_id = d.id
    FROM deleted d
    WHERE k.queue = d.queue AND k.key = d.idempotency_key`

// sqlPurgeDeadDropKeys frees the keys of tasks an operator purged: the
// operator removed the work on purpose, so submitting it again is allowed
// at once. Index: idempotency_keys_pkey.
const sqlPurgeDeadDropKeys = `
    DELETE FROM {schema}.idempotency_keys AS k
    USING deleted d
    WHERE k.queue = d.queue AND k.key = d.idempotency_key`

// sqlRecountDeadLock keeps writers from changing the dead set while
// RecountDead rebuilds dead_counts (until its transaction ends).
const sqlRecountDeadLock = `LOCK TABLE {schema}.tasks IN SHARE MODE`

// sqlRecountDeadClear empties dead_counts. Index: none (every row).
const sqlRecountDeadClear = `DELETE FROM {schema}.dead_counts`

// sqlRecountDead fills dead_counts from the dead tasks, all in shard 0; the
// same statement as the backfill of migration 0003. Index: none, it reads
// every dead task (through a dead index, or the whole table when most
// tasks are dead).
const sqlRecountDead = `
INSERT INTO {schema}.dead_counts (queue, handler, error_type, fingerprint, shard, n)
SELECT t.queue, t.handler, t.last_error_type, t.last_error_fingerprint, 0, count(*)
FROM {schema}.tasks AS t
WHERE t.status = 'DEAD'
GROUP BY t.queue, t.handler, t.last_error_type, t.last_error_fingerprint`

// sqlListAudit pages through the audit log newest first. {filter} holds the
// AND-ed conditions of ListAuditParams.
//
// Indexes: audit_pkey (no filter, BeforeID), audit_actor_idx (Actor),
// audit_action_idx (Action), audit_at_idx (Since, Until).
const sqlListAudit = `
SELECT ` + auditColumns + `
FROM {schema}.audit AS a
WHERE true{filter}
ORDER BY a.id DESC
LIMIT {limit}`

// sqlStats counts tasks per queue and status; each branch reads the partial
// index of its status (index-only where the visibility map allows).
//
// Indexes: tasks_claim_idx and tasks_held_idx (PENDING, with the oldest
// due time),
// tasks_lease_expiry_idx (IN_FLIGHT), tasks_succeeded_idx (SUCCEEDED
// within the window). DEAD is summed from dead_counts (read whole: a few
// rows per failure kind), not counted from the tasks.
//
// $1 Now override, $2 succeeded window in µs (all retained when <= 0).
const sqlStats = `
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
)
SELECT s.queue, s.status, s.n, s.oldest_due, (SELECT now FROM clock)
FROM (
    SELECT p.queue, 'PENDING' AS status, sum(p.n)::bigint AS n, min(p.oldest_due) AS oldest_due
    FROM (
        SELECT t.queue, count(*) AS n, min(t.next_attempt_at) AS oldest_due
        FROM {schema}.tasks AS t
        WHERE t.status = 'PENDING' AND NOT t.held
        GROUP BY t.queue
        UNION ALL
        SELECT t.queue, count(*), min(t.next_attempt_at)
        FROM {schema}.tasks AS t
        WHERE t.status = 'PENDING' AND t.held
        GROUP BY t.queue
    ) p
    GROUP BY p.queue
    UNION ALL
    SELECT t.queue, 'IN_FLIGHT', count(*), NULL
    FROM {schema}.tasks AS t
    WHERE t.status = 'IN_FLIGHT'
    GROUP BY t.queue
    UNION ALL
    SELECT d.queue, 'DEAD', sum(d.n)::bigint, NULL
    FROM {schema}.dead_counts AS d
    GROUP BY d.queue
    HAVING sum(d.n) > 0
    UNION ALL
    SELECT t.queue, 'SUCCEEDED',
           count(*) FILTER (WHERE $2::bigint <= 0
                            OR t.finished_at >= c.now - $2::bigint * interval '1 microsecond'),
           NULL
    FROM {schema}.tasks AS t CROSS JOIN clock c
    WHERE t.status = 'SUCCEEDED'
    GROUP BY t.queue
) s
ORDER BY s.queue`

// sqlPauseQueue pauses queue $1 unless it is paused already, and audits the
// change ("pause", actor $2, reason $3, filter JSON $4) in the same
// statement. Returns how many entries it wrote (0 or 1).
// Index: paused_queues_pkey.
const sqlPauseQueue = `
WITH paused AS (
    INSERT INTO {schema}.paused_queues (queue, paused_at, actor, reason)
    VALUES ($1, now(), $2, $3)
    ON CONFLICT (queue) DO NOTHING
    RETURNING queue
), audited AS (
    INSERT INTO {schema}.audit (at, actor, action, filter, count, reason, queues)
    SELECT now(), $2, 'pause', $4, 0, $3, ARRAY[queue] FROM paused
    RETURNING id
)
SELECT count(*) FROM audited`

// sqlResumeQueue resumes queue $1 if it is paused, and audits the change
// ("resume", actor $2, reason $3, filter JSON $4) in the same statement.
// Index: paused_queues_pkey.
const sqlResumeQueue = `
WITH resumed AS (
    DELETE FROM {schema}.paused_queues WHERE queue = $1
    RETURNING queue
), audited AS (
    INSERT INTO {schema}.audit (at, actor, action, filter, count, reason, queues)
    SELECT now(), $2, 'resume', $4, 0, $3, ARRAY[queue] FROM resumed
    RETURNING id
), notified AS (
    SELECT count(pg_notify($5, queue)) AS n FROM resumed
)
SELECT count(*) FROM audited CROSS JOIN notified`

// sqlPausedQueues lists the paused queues by name. Index: paused_queues_pkey.
const sqlPausedQueues = `SELECT queue FROM {schema}.paused_queues ORDER BY queue`

// --- Live tasks (store.LiveTasks) -------------------------------------------
//
// These statements are rendered at call time with stmt (operator actions,
// not the hot path), so they add nothing to queries.

// sqlKeyLookup reads the idempotency keys of tasks an enqueue conflicted
// with but could not find: keys whose task was purged. $1 queues, $2 keys
// (parallel arrays). Index: idempotency_keys_pkey.
const sqlKeyLookup = `
SELECT k.queue, k.key, k.task_id, k.created_at
FROM {schema}.idempotency_keys AS k
JOIN unnest($1::text[], $2::text[]) AS w(queue, key)
  ON k.queue = w.queue AND k.key = w.key`

// sqlPruneKeys deletes up to $2 idempotency keys whose task was purged
// more than $1 µs (the key retention) ago, oldest first, skipping rows
// others hold. $3 Now override. Index: idempotency_keys_purged_idx.
const sqlPruneKeys = `
DELETE FROM {schema}.idempotency_keys AS k
WHERE (k.queue, k.key) IN (
    SELECT p.queue, p.key
    FROM {schema}.idempotency_keys AS p
    WHERE p.purged_at IS NOT NULL
      AND p.purged_at <= coalesce($3::timestamptz, now()) - $1::bigint * interval '1 microsecond'
    ORDER BY p.purged_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED)`

// sqlListTasks pages through the tasks of one live state. {state} is the
// state's condition, {filter} the AND-ed TaskFilter conditions, {after}
// the keyset condition and {order} the state's order.
//
// Indexes: in flight: tasks_lease_expiry_idx (lease_expires_at);
// succeeded: tasks_succeeded_idx (finished_at), read backwards. Each is
// read in order and stops after {limit} rows. The waiting states have
// statements of their own: sqlListTasksHeld (one queue) and
// sqlListTasksWaiting (every queue).
const sqlListTasks = `
SELECT ` + taskColumns + `
FROM {schema}.tasks AS t
WHERE {state}{filter}{after}
ORDER BY {order}
LIMIT {limit}`

// sqlListTasksHeld is sqlListTasks for the waiting states (pending,
// retrying) with a Queue filter: the queue's tasks that are not held and
// those that are (their handler is paused) live in two indexes, each read
// in order up to {limit} rows, then merged.
//
// Indexes: tasks_claim_idx (queue, next_attempt_at, id) for the tasks not
// held; tasks_held_idx (queue, handler, attempts, next_attempt_at) for the
// held ones, which are few but for a paused handler's backlog.
const sqlListTasksHeld = `
SELECT t.*
FROM (
    (SELECT ` + taskColumns + `
     FROM {schema}.tasks AS t
     WHERE {state} AND NOT t.held{filter}{after}
     ORDER BY {order}
     LIMIT {limit})
    UNION ALL
    (SELECT ` + taskColumns + `
     FROM {schema}.tasks AS t
     WHERE {state} AND t.held{filter}{after}
     ORDER BY {order}
     LIMIT {limit})
) AS t
ORDER BY {order}
LIMIT {limit}`

// sqlListTasksWaiting is sqlListTasksHeld for every queue: the queues with
// waiting tasks are found by skipping through the two indexes' leading
// column (one descent per queue, held or not), and each queue's page is
// read as sqlListTasksHeld reads it; the pages are merged. A page costs
// {limit} rows per queue, never a pass over the waiting tasks. (No index
// orders the waiting tasks of every queue by due time: one would be written
// by every submit and retry, the hot path, for the sake of this listing.)
//
// Indexes: tasks_claim_idx (queue, next_attempt_at, id) and tasks_held_idx
// (queue, handler, attempts, next_attempt_at), as for sqlListTasksHeld.
// The planner cannot know how many queues the recursive scans find (it
// takes a hundred each), so its estimate is far above the cost; the
// statement runs after sqlJITOff, in a read-only transaction of its own.
const sqlListTasksWaiting = `
WITH RECURSIVE ready(queue) AS (
    (SELECT t.queue FROM {schema}.tasks AS t
     WHERE t.status = 'PENDING' AND NOT t.held
     ORDER BY t.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT t.queue FROM {schema}.tasks AS t
            WHERE t.status = 'PENDING' AND NOT t.held AND t.queue > r.queue
            ORDER BY t.queue LIMIT 1)
    FROM ready r
    WHERE r.queue IS NOT NULL
),
held(queue) AS (
    (SELECT t.queue FROM {schema}.tasks AS t
     WHERE t.status = 'PENDING' AND t.held
     ORDER BY t.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT t.queue FROM {schema}.tasks AS t
            WHERE t.status = 'PENDING' AND t.held AND t.queue > h.queue
            ORDER BY t.queue LIMIT 1)
    FROM held h
    WHERE h.queue IS NOT NULL
),
queues AS (
    SELECT r.queue FROM ready r WHERE r.queue IS NOT NULL
    UNION
    SELECT h.queue FROM held h WHERE h.queue IS NOT NULL
)
SELECT t.*
FROM queues q
CROSS JOIN LATERAL (
    (SELECT ` + taskColumns + `
     FROM {schema}.tasks AS t
     WHERE {state} AND NOT t.held AND t.queue = q.queue{filter}{after}
     ORDER BY {order}
     LIMIT {limit})
    UNION ALL
    (SELECT ` + taskColumns + `
     FROM {schema}.tasks AS t
     WHERE {state} AND t.held AND t.queue = q.queue{filter}{after}
     ORDER BY {order}
     LIMIT {limit})
) AS t
ORDER BY {order}
LIMIT {limit}`

// sqlJITOff turns JIT compilation off for the rest of the transaction,
// for a statement whose estimate is far above its cost (see
// sqlListTasksWaiting): compiling it costs more than running it.
const sqlJITOff = `SET LOCAL jit = off`

// sqlTaskByKey reads the task holding an idempotency key. $1 queue, $2 key.
// Index: tasks_idempotency_key_idx.
const sqlTaskByKey = `
SELECT ` + taskColumns + `
FROM {schema}.tasks AS t
WHERE t.queue = $1 AND t.idempotency_key = $2`

// sqlLiveLock locks the tasks a retry-now or cancel names, in ID order, and
// reads their status. $1 ids. Index: tasks_pkey.
const sqlLiveLock = `
SELECT t.id, t.status
FROM {schema}.tasks AS t
WHERE t.id = ANY($1::uuid[])
ORDER BY t.id
FOR UPDATE`

// sqlRetryNow makes the locked PENDING tasks $1 due now and notifies their
// queues. Returns how many it changed. $2 Now override, $3 channel.
// Index: tasks_pkey.
const sqlRetryNow = `
WITH moved AS (
    UPDATE {schema}.tasks AS t
    SET next_attempt_at = coalesce($2::timestamptz, now()),
        updated_at = coalesce($2::timestamptz, now())
    WHERE t.id = ANY($1::uuid[]) AND t.status = 'PENDING'
    RETURNING t.queue
),
notified AS (
    SELECT count(pg_notify($3, q.queue)) AS n
    FROM (SELECT DISTINCT m.queue FROM moved m) q
)
SELECT (SELECT count(*) FROM moved), (SELECT n FROM notified)`

// sqlCancel moves the locked PENDING tasks $1 to DEAD with a CANCELLED
// attempt each (numbered one past the task's highest attempt number, as in
// sqlFinish), counts them into dead_counts and returns how many it moved.
//
// Indexes: tasks_pkey (update), attempts_pkey (insert),
// dead_counts_pkey (conflict arbiter).
//
// $1 ids, $2 Now override, $3 error type, $4 message, $5 fingerprint,
// $6 actor.
const sqlCancel = `
WITH clock AS (
    SELECT coalesce($2::timestamptz, now()) AS now
),
cancelled AS (
    UPDATE {schema}.tasks AS t
    SET status = 'DEAD',
        attempts = t.attempts + 1,
        last_attempt_number = t.last_attempt_number + 1,
        finished_at = c.now,
        lease_expires_at = NULL,
        last_error_type = $3,
        last_error_message = $4,
        last_error_fingerprint = $5,
        updated_at = c.now
    FROM clock c
    WHERE t.id = ANY($1::uuid[]) AND t.status = 'PENDING'
    RETURNING t.id, t.queue, t.handler, t.life, t.last_attempt_number
),
recorded AS (
    INSERT INTO {schema}.attempts (
        task_id, number, life, outcome, error_type, message, stack, worker_id,
        lease_token, started_at, finished_at)
    SELECT x.id, x.last_attempt_number, x.life, 'CANCELLED', $3, $4, '', $6, 0, c.now, c.now
    FROM cancelled x CROSS JOIN clock c
),
shard AS (
    SELECT floor(random() * 16)::smallint AS n
),
counted AS (
    INSERT INTO {schema}.dead_counts AS d (queue, handler, error_type, fingerprint, shard, n)
    SELECT x.queue, x.handler, $3, $5, s.n, count(*)
    FROM cancelled x CROSS JOIN shard s
    GROUP BY x.queue, x.handler, s.n
    ORDER BY x.queue, x.handler
    ON CONFLICT (queue, handler, error_type, fingerprint, shard) DO UPDATE SET n = d.n + excluded.n
)
SELECT count(*) FROM cancelled`

// --- Worker registry (store.WorkerRegistry) ---------------------------------
//
// workers holds a row per running worker (a few dozen rows), so every
// statement reads it whole; a row is live while last_seen + stale_after is
// in the future and kept until last_seen + expire_after.

// sqlRegisterWorker inserts or refreshes worker $1 (keeping started_at) and
// removes the other workers' expired rows. Index: workers_pkey (conflict
// arbiter); the delete reads the table whole.
//
// $2 host, $3 pid, $4 version, $5 queues, $6 handlers, $7 slots,
// $8 in flight, $9 stale after µs, $10 expire after µs, $11 Now override.
const sqlRegisterWorker = `
WITH clock AS (
    SELECT coalesce($11::timestamptz, now()) AS now
),
expired AS (
    DELETE FROM {schema}.workers AS w
    USING clock c
    WHERE w.id <> $1 AND w.last_seen + w.expire_after * interval '1 microsecond' <= c.now
)
INSERT INTO {schema}.workers AS w (
    id, host, pid, version, queues, handlers, slots, in_flight, started_at,
    last_seen, stale_after, expire_after)
SELECT $1, $2, $3, $4, $5::text[], $6::text[], $7, $8, c.now, c.now, $9, $10
FROM clock c
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, version = excluded.version,
    queues = excluded.queues, handlers = excluded.handlers,
    slots = excluded.slots, in_flight = excluded.in_flight,
    last_seen = excluded.last_seen, stale_after = excluded.stale_after,
    expire_after = excluded.expire_after`

// sqlDeregisterWorker removes worker $1. Index: workers_pkey.
const sqlDeregisterWorker = `DELETE FROM {schema}.workers WHERE id = $1`

// sqlWorkers lists the unexpired workers serving queue $1 (every worker
// when empty), by ID, each with whether it is stale. Reads workers whole.
//
// $2 Now override.
const sqlWorkers = `
WITH clock AS (
    SELECT coalesce($2::timestamptz, now()) AS now
)
SELECT w.id, w.host, w.pid, w.version, w.queues, w.handlers, w.slots,
       w.in_flight, w.started_at, w.last_seen,
       w.last_seen + w.stale_after * interval '1 microsecond' <= c.now
FROM {schema}.workers AS w CROSS JOIN clock c
WHERE w.last_seen + w.expire_after * interval '1 microsecond' > c.now
  AND ($1 = '' OR $1 = ANY (w.queues))
ORDER BY w.id`

// sqlUnservedHandlers counts the PENDING tasks per (queue, handler) of the
// queues $1 (every queue when empty) that no live worker serves, with the
// earliest due time and the clock. Each branch reads the partial index of
// its tasks: tasks_claim_idx (not held) and tasks_held_idx (held).
//
// $2 Now override.
const sqlUnservedHandlers = `
WITH clock AS (
    SELECT coalesce($2::timestamptz, now()) AS now
),
live AS (
    SELECT w.queues, w.handlers
    FROM {schema}.workers AS w CROSS JOIN clock c
    WHERE w.last_seen + w.stale_after * interval '1 microsecond' > c.now
),
waiting AS (
    SELECT t.queue, t.handler, count(*) AS n, min(t.next_attempt_at) AS oldest
    FROM {schema}.tasks AS t
    WHERE t.status = 'PENDING' AND NOT t.held
      AND (cardinality($1::text[]) = 0 OR t.queue = ANY ($1::text[]))
    GROUP BY t.queue, t.handler
    UNION ALL
    SELECT t.queue, t.handler, count(*), min(t.next_attempt_at)
    FROM {schema}.tasks AS t
    WHERE t.status = 'PENDING' AND t.held
      AND (cardinality($1::text[]) = 0 OR t.queue = ANY ($1::text[]))
    GROUP BY t.queue, t.handler
)
SELECT x.queue, x.handler, sum(x.n)::bigint, min(x.oldest), (SELECT now FROM clock)
FROM waiting AS x
WHERE NOT EXISTS (
    SELECT 1 FROM live AS l
    WHERE x.queue = ANY (l.queues) AND x.handler = ANY (l.handlers))
GROUP BY x.queue, x.handler
ORDER BY x.queue, x.handler`

// sqlUnservedDue is sqlUnservedHandlers for the due, not held tasks of the
// queues $1 only (UnservedParams.DueOnly). Index: tasks_claim_idx, each
// queue's range up to now.
//
// $2 Now override.
const sqlUnservedDue = `
WITH clock AS (
    SELECT coalesce($2::timestamptz, now()) AS now
),
live AS (
    SELECT w.queues, w.handlers
    FROM {schema}.workers AS w CROSS JOIN clock c
    WHERE w.last_seen + w.stale_after * interval '1 microsecond' > c.now
)
SELECT x.queue, x.handler, x.n, x.oldest, (SELECT now FROM clock)
FROM (
    SELECT t.queue, t.handler, count(*) AS n, min(t.next_attempt_at) AS oldest
    FROM {schema}.tasks AS t
    WHERE t.queue = ANY ($1::text[]) AND t.status = 'PENDING' AND NOT t.held
      AND t.next_attempt_at <= (SELECT now FROM clock)
    GROUP BY t.queue, t.handler
) AS x
WHERE NOT EXISTS (
    SELECT 1 FROM live AS l
    WHERE x.queue = ANY (l.queues) AND x.handler = ANY (l.handlers))
ORDER BY x.queue, x.handler`

// sqlDeadLetterUnserved moves up to $5 PENDING, not held tasks of queue $1
// and handler $2, due for at least $4 µs while no live worker serves the
// pair, to DEAD with a PERMANENT_FAILURE attempt each (numbered as in
// sqlCancel), counts them into dead_counts, audits them as
// "dead_letter_unserved" and returns how many it moved.
//
// Indexes: tasks_claim_idx (the queue's due tasks, oldest first),
// tasks_pkey (update), attempts_pkey (insert), dead_counts_pkey (conflict
// arbiter), audit_pkey (insert).
//
// $3 Now override, $6 error type, $7 message, $8 fingerprint, $9 actor,
// $10 the audit filter JSON.
const sqlDeadLetterUnserved = `
WITH clock AS (
    SELECT coalesce($3::timestamptz, now()) AS now
),
picked AS (
    SELECT t.id
    FROM {schema}.tasks AS t
    WHERE t.queue = $1 AND t.status = 'PENDING' AND NOT t.held AND t.handler = $2
      AND t.next_attempt_at <= (SELECT now FROM clock) - $4::bigint * interval '1 microsecond'
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.workers AS w
          WHERE w.last_seen + w.stale_after * interval '1 microsecond' > (SELECT now FROM clock)
            AND $1 = ANY (w.queues) AND $2 = ANY (w.handlers))
    ORDER BY t.next_attempt_at, t.id
    LIMIT $5
    FOR UPDATE SKIP LOCKED
),
dead AS (
    UPDATE {schema}.tasks AS t
    SET status = 'DEAD',
        attempts = t.attempts + 1,
        last_attempt_number = t.last_attempt_number + 1,
        finished_at = c.now,
        lease_expires_at = NULL,
        last_error_type = $6,
        last_error_message = $7,
        last_error_fingerprint = $8,
        updated_at = c.now
    FROM clock c
    WHERE t.id = ANY (ARRAY(SELECT id FROM picked)) AND t.status = 'PENDING'
    RETURNING t.id, t.queue, t.handler, t.life, t.last_attempt_number
),
recorded AS (
    INSERT INTO {schema}.attempts (
        task_id, number, life, outcome, error_type, message, stack, worker_id,
        lease_token, started_at, finished_at)
    SELECT x.id, x.last_attempt_number, x.life, 'PERMANENT_FAILURE', $6, $7, '', $9, 0, c.now, c.now
    FROM dead x CROSS JOIN clock c
),
shard AS (
    SELECT floor(random() * 16)::smallint AS n
),
counted AS (
    INSERT INTO {schema}.dead_counts AS d (queue, handler, error_type, fingerprint, shard, n)
    SELECT x.queue, x.handler, $6, $8, s.n, count(*)
    FROM dead x CROSS JOIN shard s
    GROUP BY x.queue, x.handler, s.n
    ON CONFLICT (queue, handler, error_type, fingerprint, shard) DO UPDATE SET n = d.n + excluded.n
),
audited AS (
    INSERT INTO {schema}.audit (at, actor, action, filter, ids, count, reason, details, queues)
    SELECT c.now, $9, 'dead_letter_unserved', $10, array_agg(x.id), count(*), $7, '{}'::jsonb, ARRAY[$1::text]
    FROM dead x CROSS JOIN clock c
    GROUP BY c.now
)
SELECT count(*) FROM dead`

// --- Paused handlers (store.HandlerPauser) --------------------------------
//
// Held tasks. A PENDING task whose (queue, handler) has a paused_handlers
// row is held: tasks.held is true, which takes it out of tasks_claim_idx
// (claims never read it) and into tasks_held_idx. Every statement that makes
// a task PENDING (enqueue, finish with a retry, release, redrive) sets held
// from paused_handlers, reading the row FOR KEY SHARE; ResumeHandler
// deletes the row first (waiting for those readers to commit) and releases
// the held tasks in a later statement of its transaction, so no task stays
// held after its handler resumed. A task written concurrently with a pause
// may miss being held; claims skip it through paused_handlers_pkey, and
// ClaimProbe holds it (sqlHoldStrays) before it picks a probe.

// pauseColumns are the paused_handlers columns scanPause reads, in order.
const pauseColumns = `p.queue, p.handler, p.state, p.since, p.probe_at, p.trips, p.probe_id,
    p.probe_token, p.actor, p.reason, p.fingerprint, p.ratio`

// sqlPauseHandler pauses ($1, $2) unless it is paused already: open, a
// probe due after $3 µs (never when NULL). Returns the trips count.
// Index: paused_handlers_pkey.
//
// $4 actor, $5 reason, $6 fingerprint, $7 ratio, $8 Now override.
const sqlPauseHandler = `
INSERT INTO {schema}.paused_handlers AS p (queue, handler, state, since, probe_at, trips,
                                           actor, reason, fingerprint, ratio)
SELECT $1, $2, 'open', c.now, c.now + $3::bigint * interval '1 microsecond', 1, $4, $5, $6, $7
FROM (SELECT coalesce($8::timestamptz, now()) AS now) c
ON CONFLICT (queue, handler) DO NOTHING
RETURNING p.trips`

// sqlReopenHandler answers a failed probe: if ($1, $2) is half-open with
// the probe (task $9, token $10), it opens again with a probe due after $3
// µs and one more trip. Returns the trips count. Index:
// paused_handlers_pkey.
//
// $4..$8 as in sqlPauseHandler.
const sqlReopenHandler = `
UPDATE {schema}.paused_handlers AS p
SET state = 'open',
    probe_at = c.now + $3::bigint * interval '1 microsecond',
    trips = p.trips + 1,
    probe_id = NULL,
    probe_token = 0,
    probe_expires_at = NULL,
    actor = $4, reason = $5, fingerprint = $6, ratio = $7
FROM (SELECT coalesce($8::timestamptz, now()) AS now) c
WHERE p.queue = $1 AND p.handler = $2 AND p.state = 'half_open'
  AND p.probe_id = $9 AND p.probe_token = $10
RETURNING p.trips`

// sqlHoldTasks holds the PENDING tasks of ($1, $2) that are not held yet.
// Returns how many. Index: tasks_claim_idx (the queue's range).
const sqlHoldTasks = `
WITH held AS (
    UPDATE {schema}.tasks AS t
    SET held = true
    WHERE t.status = 'PENDING' AND NOT t.held AND t.queue = $1 AND t.handler = $2
    RETURNING 1
)
SELECT count(*) FROM held`

// sqlResumeHandler deletes the pause of ($1, $2); with a probe (task $3,
// token $4, or NULL for none) only if that probe is the current one.
// Returns the trips count. Index: paused_handlers_pkey.
const sqlResumeHandler = `
DELETE FROM {schema}.paused_handlers AS p
WHERE p.queue = $1 AND p.handler = $2
  AND ($3::uuid IS NULL OR (p.state = 'half_open' AND p.probe_id = $3 AND p.probe_token = $4))
RETURNING p.trips`

// sqlUnholdTasks releases the held tasks of ($1, $2) once its pause is
// gone, and notifies the queue when there were any. Returns how many.
// Index: tasks_held_idx.
//
// $3 notification channel.
const sqlUnholdTasks = `
WITH released AS (
    UPDATE {schema}.tasks AS t
    SET held = false
    WHERE t.status = 'PENDING' AND t.held AND t.queue = $1 AND t.handler = $2
      AND NOT EXISTS (SELECT 1 FROM {schema}.paused_handlers AS h
                      WHERE h.queue = t.queue AND h.handler = t.handler)
    RETURNING 1
), notified AS (
    SELECT count(pg_notify($3, $1)) AS n FROM (SELECT 1 FROM released LIMIT 1) r
)
SELECT count(*) FROM released CROSS JOIN notified`

// probeDue selects, as CTE "due", the paused handlers of the queues $1
// due a probe at (SELECT now FROM clock): the cool-off has passed (open,
// probe_at reached) or the probe is gone (half-open, probe_expires_at
// reached and the probe task no longer under a live lease), in a queue
// that is not paused (a paused queue runs nothing, not even a probe;
// paused_queues_pkey). The pause row is locked FOR NO KEY UPDATE SKIP LOCKED: concurrent callers never
// both take one handler, and a caller that waited sees the new
// probe_expires_at; the lock does not conflict with the FOR KEY SHARE that
// every writer of a PENDING task takes on the row, so a steady stream of
// enqueues or retries of the paused handler cannot starve its probe (FOR
// UPDATE would conflict, and SKIP LOCKED would skip the handler whenever
// one of them is open).
const probeDue = `
due AS (
    SELECT p.queue, p.handler
    FROM {schema}.paused_handlers AS p
    WHERE p.queue = ANY($1::text[])
      AND p.probe_at IS NOT NULL
      AND ((p.state = 'open' AND p.probe_at <= (SELECT now FROM clock))
        OR (p.state = 'half_open' AND p.probe_expires_at <= (SELECT now FROM clock)
            AND NOT EXISTS (SELECT 1 FROM {schema}.tasks AS x
                            WHERE x.id = p.probe_id AND (x.status = 'IN_FLIGHT') IS TRUE
                              AND x.lease_token = p.probe_token
                              AND x.lease_expires_at > (SELECT now FROM clock)
                            OFFSET 0)))
      AND NOT EXISTS (SELECT 1 FROM {schema}.paused_queues AS pq WHERE pq.queue = p.queue)
    FOR NO KEY UPDATE OF p SKIP LOCKED
)`

// sqlHoldStrays runs first in ClaimProbe's transaction: it locks the
// handlers due a probe (probeDue) and holds their PENDING tasks that are
// not held yet. Those are the tasks a writer made PENDING concurrently
// with the pause (its statement did not see the uncommitted pause row,
// and the pause's sqlHoldTasks did not see its uncommitted task); claims
// skip them, but without this a probe would never pick them, and a
// handler whose every waiting task is one of them would stay paused for
// good. This statement's snapshot is later than the pause's, so it sees
// every such writer that has committed by the end of the cool-off; one
// still open then is held by the next failed probe's pause, or released
// by the resume.
//
// Index: paused_handlers_pkey; tasks_claim_idx (the queue's range), read
// only for the handlers due a probe.
//
// $1 queues, $2 Now override.
const sqlHoldStrays = `
WITH clock AS (
    SELECT coalesce($2::timestamptz, now()) AS now
),` + probeDue + `,
held AS (
    UPDATE {schema}.tasks AS t
    SET held = true
    FROM due d
    WHERE t.status = 'PENDING' AND NOT t.held AND t.queue = d.queue AND t.handler = d.handler
    RETURNING 1
)
SELECT count(*) FROM held`

// sqlClaimProbe leases one probe per paused handler of the queues $1 due
// a probe (probeDue; the caller's sqlHoldStrays holds the row locks
// already): the held task with the fewest attempts, oldest due among
// those. The handler turns half-open with that task as its probe.
//
// Indexes: paused_handlers_pkey; tasks_held_idx (queue, handler,
// attempts, next_attempt_at), an ordered range that stops at the first due
// task; tasks_pkey.
//
// $2 lease (µs), $3 Now override, $4 worker id, $5 the handlers the
// claimant runs (every handler when empty).
const sqlClaimProbe = `
WITH clock AS (
    SELECT coalesce($3::timestamptz, now()) AS now
),` + probeDue + `,
picked AS (
    SELECT k.id
    FROM due d
    CROSS JOIN LATERAL (
        SELECT t.id
        FROM {schema}.tasks AS t
        WHERE t.status = 'PENDING' AND t.held
          AND t.queue = d.queue AND t.handler = d.handler
          AND t.next_attempt_at <= (SELECT now FROM clock)
        ORDER BY t.attempts, t.next_attempt_at
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS k
    WHERE coalesce(cardinality($5::text[]), 0) = 0 OR d.handler = ANY ($5::text[])
),
claimed AS (
    UPDATE {schema}.tasks AS t
    SET status = 'IN_FLIGHT',
        lease_token = t.lease_token + 1,
        lease_expires_at = c.now + $2::bigint * interval '1 microsecond',
        lease_owner = $4,
        claimed_at = c.now,
        updated_at = c.now
    FROM clock c
    WHERE t.id = ANY (ARRAY(SELECT k.id FROM picked k))
    RETURNING ` + taskColumns + `
),
probing AS (
    UPDATE {schema}.paused_handlers AS p
    SET state = 'half_open',
        probe_id = t.id,
        probe_token = t.lease_token,
        probe_expires_at = c.now + $2::bigint * interval '1 microsecond'
    FROM claimed t CROSS JOIN clock c
    WHERE p.queue = t.queue AND p.handler = t.handler
    RETURNING ` + pauseColumns + `
)
SELECT ` + taskColumns + `, ` + pauseColumns + `
FROM claimed t JOIN probing p ON p.queue = t.queue AND p.handler = t.handler`

// sqlPausedHandlers lists the paused handlers of queue $1 (all when
// empty). Index: paused_handlers_pkey.
const sqlPausedHandlers = `
SELECT ` + pauseColumns + `
FROM {schema}.paused_handlers AS p
WHERE $1 = '' OR p.queue = $1
ORDER BY p.queue, p.handler`

// queries are the static statements with the schema filled in.
type queries struct {
	schema string

	createSchema          string
	createMigrationsTable string
	currentVersion        string
	recordVersion         string

	enqueue            string
	enqueueLookup      string
	claim              string
	claimQueue         string
	claimHandlers      string
	claimQueueHandlers string
	heartbeat          string
	finish             string
	release            string
	snooze             string
	retryInPlace       string
	reclaimExpired     string
	getTask            string
	getAttempts        string
	redriveLock        string
	redrivePayload     string
	redriveIDs         string
	insertAudit        string
	purgeSucceeded     string
	stats              string
	pauseQueue         string
	resumeQueue        string
	pausedQueues       string

	pauseHandler   string
	reopenHandler  string
	holdTasks      string
	resumeHandler  string
	unholdTasks    string
	claimProbe     string
	holdStrays     string
	pausedHandlers string

	recountDeadLock  string
	recountDeadClear string
	recountDead      string

	listen string

	keyLookup          string
	pruneKeys          string
	taskByKey          string
	liveLock           string
	retryNow           string
	cancel             string
	registerWorker     string
	deregisterWorker   string
	workers            string
	unservedHandlers   string
	unservedDue        string
	deadLetterUnserved string

	notDueCounts               string
	waitingCounts              string
	groupOrigins               string
	deadHistogram              string
	deadHistogramByFingerprint string
	deadGroupKeys              string
	seriesClock                string
	seriesPending              string
	seriesRollup               string
	seriesRollupHours          string
	series                     string

	// Templates of the statements built per call (see stmt), and the
	// fragments of them that name the schema: the schema is filled in,
	// the other placeholders are left for stmt.render.
	listDead            string
	countDead           string
	countDeadSummary    string
	deadGroups          string
	deadGroupsSummary   string
	redriveDead         string
	redriveDeadAtLimit  string
	purgeDead           string
	purgeDeadRetireKeys string
	purgeDeadDropKeys   string
	listAudit           string
	listTasks           string
	listTasksHeld       string
	listTasksWaiting    string
}

// buildQueries renders every statement for a store of quotedSchema
// (pgx.Identifier.Sanitize of the schema) notifying quotedChannel: once,
// when the store is created.
func buildQueries(quotedSchema, quotedChannel string) queries {
	r := strings.NewReplacer("{schema}", quotedSchema)
	return queries{
		schema:                quotedSchema,
		createSchema:          r.Replace(sqlCreateSchema),
		createMigrationsTable: r.Replace(sqlCreateMigrationsTable),
		currentVersion:        r.Replace(sqlCurrentVersion),
		recordVersion:         r.Replace(sqlRecordVersion),
		enqueue:               r.Replace(sqlEnqueue),
		enqueueLookup:         r.Replace(sqlEnqueueLookup),
		claim:                 r.Replace(sqlClaim),
		claimQueue:            r.Replace(sqlClaimQueue),
		claimHandlers:         r.Replace(sqlClaimHandlers),
		claimQueueHandlers:    r.Replace(sqlClaimQueueHandlers),
		heartbeat:             r.Replace(sqlHeartbeat),
		finish:                r.Replace(sqlFinish),
		release:               r.Replace(sqlRelease),
		snooze:                r.Replace(sqlSnooze),
		retryInPlace:          r.Replace(sqlRetryInPlace),
		reclaimExpired:        r.Replace(sqlReclaimExpired),
		getTask:               r.Replace(sqlGetTask),
		getAttempts:           r.Replace(sqlGetAttempts),
		redriveLock:           r.Replace(sqlRedriveLock),
		redrivePayload:        r.Replace(sqlRedrivePayload),
		redriveIDs:            r.Replace(sqlRedriveIDs),
		insertAudit:           r.Replace(sqlInsertAudit),
		purgeSucceeded:        r.Replace(sqlPurgeSucceeded),
		stats:                 r.Replace(sqlStats),
		pauseQueue:            r.Replace(sqlPauseQueue),
		resumeQueue:           r.Replace(sqlResumeQueue),
		pausedQueues:          r.Replace(sqlPausedQueues),
		pauseHandler:          r.Replace(sqlPauseHandler),
		reopenHandler:         r.Replace(sqlReopenHandler),
		holdTasks:             r.Replace(sqlHoldTasks),
		resumeHandler:         r.Replace(sqlResumeHandler),
		unholdTasks:           r.Replace(sqlUnholdTasks),
		claimProbe:            r.Replace(sqlClaimProbe),
		holdStrays:            r.Replace(sqlHoldStrays),
		pausedHandlers:        r.Replace(sqlPausedHandlers),
		recountDeadLock:       r.Replace(sqlRecountDeadLock),
		recountDeadClear:      r.Replace(sqlRecountDeadClear),
		recountDead:           r.Replace(sqlRecountDead),

		// {channel} is LISTEN's own: elsewhere it is a parameter of stmt.
		listen: strings.ReplaceAll(sqlListen, "{channel}", quotedChannel),

		keyLookup:          r.Replace(sqlKeyLookup),
		pruneKeys:          r.Replace(sqlPruneKeys),
		taskByKey:          r.Replace(sqlTaskByKey),
		liveLock:           r.Replace(sqlLiveLock),
		retryNow:           r.Replace(sqlRetryNow),
		cancel:             r.Replace(sqlCancel),
		registerWorker:     r.Replace(sqlRegisterWorker),
		deregisterWorker:   r.Replace(sqlDeregisterWorker),
		workers:            r.Replace(sqlWorkers),
		unservedHandlers:   r.Replace(sqlUnservedHandlers),
		unservedDue:        r.Replace(sqlUnservedDue),
		deadLetterUnserved: r.Replace(sqlDeadLetterUnserved),

		notDueCounts:               r.Replace(sqlNotDueCounts),
		waitingCounts:              r.Replace(sqlWaitingCounts),
		groupOrigins:               r.Replace(sqlGroupOrigins),
		deadHistogram:              r.Replace(sqlDeadHistogram),
		deadHistogramByFingerprint: r.Replace(sqlDeadHistogramByFingerprint),
		deadGroupKeys:              r.Replace(sqlDeadGroupKeys),
		seriesClock:                sqlSeriesClock,
		seriesPending:              r.Replace(sqlSeriesPending),
		seriesRollup:               r.Replace(sqlSeriesRollup),
		seriesRollupHours:          r.Replace(sqlSeriesRollupHours),
		series:                     r.Replace(sqlSeries),

		listDead:            r.Replace(sqlListDead),
		countDead:           r.Replace(sqlCountDead),
		countDeadSummary:    r.Replace(sqlCountDeadSummary),
		deadGroups:          r.Replace(sqlDeadGroups),
		deadGroupsSummary:   r.Replace(sqlDeadGroupsSummary),
		redriveDead:         r.Replace(sqlRedriveDead),
		redriveDeadAtLimit:  r.Replace(sqlRedriveDeadAtLimit),
		purgeDead:           r.Replace(sqlPurgeDead),
		purgeDeadRetireKeys: r.Replace(sqlPurgeDeadRetireKeys),
		purgeDeadDropKeys:   r.Replace(sqlPurgeDeadDropKeys),
		listAudit:           r.Replace(sqlListAudit),
		listTasks:           r.Replace(sqlListTasks),
		listTasksHeld:       r.Replace(sqlListTasksHeld),
		listTasksWaiting:    r.Replace(sqlListTasksWaiting),
	}
}

// stmt builds a dynamic statement: it collects parameters and renders
// named placeholders ({name}) as $n.
type stmt struct {
	args []any
	vars map[string]string
}

func newStmt() *stmt { return &stmt{vars: map[string]string{}} }

// param adds a parameter and returns its placeholder ($n).
func (s *stmt) param(v any) string {
	s.args = append(s.args, v)
	return fmt.Sprintf("$%d", len(s.args))
}

// set names a placeholder's replacement text.
func (s *stmt) set(name, text string) { s.vars["{"+name+"}"] = text }

// render fills every set name of template, a template of queries (whose
// schema is filled in already). Replacement texts may themselves contain
// set names (one level deep); a fragment that names the schema is taken
// from queries too.
func (s *stmt) render(template string) string {
	pairs := make([]string, 0, 2*len(s.vars))
	for k, v := range s.vars {
		pairs = append(pairs, k, v)
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace(r.Replace(template))
}

// deadFilter renders f as AND-ed conditions on tasks t, one parameter per
// set field; "" when f selects every dead task.
func (s *stmt) deadFilter(f store.DeadFilter) string {
	var b strings.Builder
	if len(f.IDs) > 0 {
		b.WriteString("\n      AND t.id = ANY(" + s.param(uuids(f.IDs)) + "::uuid[])")
	}
	if f.Queue != "" {
		b.WriteString("\n      AND t.queue = " + s.param(clean(f.Queue)))
	}
	if f.Handler != "" {
		b.WriteString("\n      AND t.handler = " + s.param(clean(f.Handler)))
	}
	if f.ErrorType != "" {
		b.WriteString("\n      AND t.last_error_type = " + s.param(clean(f.ErrorType)))
	}
	if f.Fingerprint != "" {
		b.WriteString("\n      AND t.last_error_fingerprint = " + s.param(clean(f.Fingerprint)))
	}
	if !f.DeadAfter.IsZero() {
		b.WriteString("\n      AND t.finished_at >= " + s.param(f.DeadAfter) + "::timestamptz")
	}
	if !f.DeadBefore.IsZero() {
		b.WriteString("\n      AND t.finished_at < " + s.param(f.DeadBefore) + "::timestamptz")
	}
	if f.MessageContains != "" {
		// ILIKE with the pattern's wildcards escaped: a case-insensitive
		// substring match that a trigram index, where an operator adds
		// one, can serve.
		b.WriteString("\n      AND t.last_error_message ILIKE " + s.param("%"+likeEscaper.Replace(clean(f.MessageContains))+"%"))
	}
	if f.LifeMin > 0 {
		b.WriteString("\n      AND t.life >= " + s.param(f.LifeMin) + "::integer")
	}
	if f.LifeBelow > 0 {
		b.WriteString("\n      AND t.life < " + s.param(f.LifeBelow) + "::integer")
	}
	return b.String()
}

// countable reports whether dead_counts can answer f: it uses no field
// but Queue, Handler, ErrorType and Fingerprint.
func countable(f store.DeadFilter) bool {
	return len(f.IDs) == 0 && f.DeadAfter.IsZero() && f.DeadBefore.IsZero() && f.MessageContains == "" &&
		f.LifeMin == 0 && f.LifeBelow == 0
}

// deadCountsFilter renders a countable f twice, with shared parameters: as
// AND-ed conditions on tasks t (as deadFilter does) and on dead_counts d.
func (s *stmt) deadCountsFilter(f store.DeadFilter) (tasks, counts string) {
	var t, d strings.Builder
	add := func(value, taskColumn, countsColumn string) {
		if value == "" {
			return
		}
		p := s.param(clean(value))
		t.WriteString("\n      AND t." + taskColumn + " = " + p)
		d.WriteString("\n      AND d." + countsColumn + " = " + p)
	}
	add(f.Queue, "queue", "queue")
	add(f.Handler, "handler", "handler")
	add(f.ErrorType, "last_error_type", "error_type")
	add(f.Fingerprint, "last_error_fingerprint", "fingerprint")
	return t.String(), d.String()
}

// auditFilter renders p as AND-ed conditions on audit a.
func (s *stmt) auditFilter(p store.ListAuditParams) string {
	var b strings.Builder
	if p.Actor != "" {
		b.WriteString("\n  AND a.actor = " + s.param(clean(p.Actor)))
	}
	if p.Action != "" {
		b.WriteString("\n  AND a.action = " + s.param(clean(p.Action)))
	}
	if !p.Since.IsZero() {
		b.WriteString("\n  AND a.at >= " + s.param(p.Since) + "::timestamptz")
	}
	if !p.Until.IsZero() {
		b.WriteString("\n  AND a.at < " + s.param(p.Until) + "::timestamptz")
	}
	if p.BeforeID > 0 {
		b.WriteString("\n  AND a.id < " + s.param(p.BeforeID) + "::bigint")
	}
	return b.String()
}

// micros converts a duration to the bigint microseconds the SQL expects.
func micros(d time.Duration) int64 { return d.Microseconds() }

// likeEscaper escapes LIKE's wildcards and its escape character, so a
// pattern matches the text literally.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// --- Console ----------------------------------------------------------------

// sqlNotDueCounts counts, per queue, the PENDING tasks not due yet (retries
// waiting out their backoff, delayed tasks), held or not. Indexes:
// tasks_claim_idx (queue, next_attempt_at, id) WHERE status = 'PENDING' AND
// NOT held, and tasks_held_idx WHERE status = 'PENDING' AND held: each
// branch names its index's predicate, so neither reads the table's other
// tasks (a predicate on status alone matches neither partial index).
// $1 Now override.
const sqlNotDueCounts = `
SELECT x.queue, count(*)
FROM (SELECT t.queue FROM {schema}.tasks AS t
      WHERE t.status = 'PENDING' AND NOT t.held AND t.next_attempt_at > coalesce($1::timestamptz, now())
      UNION ALL
      SELECT t.queue FROM {schema}.tasks AS t
      WHERE t.status = 'PENDING' AND t.held AND t.next_attempt_at > coalesce($1::timestamptz, now())) AS x
GROUP BY x.queue`

// sqlWaitingCounts splits, per queue, the PENDING tasks not due yet and
// not held by whether they were tried in their current life (retrying) or
// not (scheduled), and counts the held ones. Indexes: tasks_claim_idx
// (queue, next_attempt_at, id) WHERE status = 'PENDING' AND NOT held, the
// not-due range (each row's attempts read from the table), and
// tasks_held_idx (queue, handler, attempts, next_attempt_at) WHERE status =
// 'PENDING' AND held, index-only. $1 Now override.
const sqlWaitingCounts = `
SELECT x.queue,
       count(*) FILTER (WHERE NOT x.held AND x.attempts > 0),
       count(*) FILTER (WHERE NOT x.held AND x.attempts = 0),
       count(*) FILTER (WHERE x.held)
FROM (SELECT t.queue, false AS held, t.attempts FROM {schema}.tasks AS t
      WHERE t.status = 'PENDING' AND NOT t.held AND t.next_attempt_at > coalesce($1::timestamptz, now())
      UNION ALL
      SELECT t.queue, true, t.attempts FROM {schema}.tasks AS t
      WHERE t.status = 'PENDING' AND t.held) AS x
GROUP BY x.queue`

// sqlGroupOrigins finds, per fingerprint of $1, the group's earliest dead
// task and the end of its earliest failed attempt with its last error
// type (its dead time if none). Indexes: tasks_dead_fingerprint_idx
// (last_error_fingerprint, finished_at DESC, id DESC), one LIMIT 1 probe
// per fingerprint, read backward; attempts_pkey (task_id, number), that
// task's attempts.
const sqlGroupOrigins = `
SELECT f.fingerprint,
       coalesce((SELECT min(a.finished_at) FROM {schema}.attempts AS a
                 WHERE a.task_id = o.id AND a.outcome <> 'SUCCESS' AND a.error_type = o.last_error_type),
                o.finished_at)
FROM unnest($1::text[]) AS f(fingerprint)
CROSS JOIN LATERAL (
    SELECT t.id, t.last_error_type, t.finished_at
    FROM {schema}.tasks AS t
    WHERE t.status = 'DEAD' AND t.last_error_fingerprint = f.fingerprint
    ORDER BY t.finished_at, t.id
    LIMIT 1
) AS o`

// sqlDeadHistogram counts the tasks that went dead in [$1, $2) per bucket
// of $3 seconds from $1. Index: tasks_dead_idx (finished_at DESC, id DESC)
// WHERE status = 'DEAD', one range (index-only where the visibility map
// allows).
const sqlDeadHistogram = `
SELECT '' AS fingerprint, floor(extract(epoch FROM (t.finished_at - $1::timestamptz)) / $3::float8)::int AS bucket, count(*)
FROM {schema}.tasks AS t
WHERE t.status = 'DEAD' AND t.finished_at >= $1::timestamptz AND t.finished_at < $2::timestamptz
GROUP BY 1, 2`

// sqlDeadHistogramByFingerprint is sqlDeadHistogram per fingerprint, for the
// fingerprints $4. Index: tasks_dead_fingerprint_idx (last_error_fingerprint,
// finished_at DESC, id DESC) WHERE status = 'DEAD', one range per
// fingerprint.
const sqlDeadHistogramByFingerprint = `
SELECT t.last_error_fingerprint, floor(extract(epoch FROM (t.finished_at - $1::timestamptz)) / $3::float8)::int AS bucket, count(*)
FROM {schema}.tasks AS t
WHERE t.status = 'DEAD' AND t.last_error_fingerprint = ANY($4::text[])
  AND t.finished_at >= $1::timestamptz AND t.finished_at < $2::timestamptz
GROUP BY 1, 2`

// sqlDeadGroupKeys lists the (queue, handler) pairs with dead tasks of each
// fingerprint in $1, from the dead-task summary. Index: none, dead_counts is
// read whole (a few rows per failure kind).
const sqlDeadGroupKeys = `
SELECT d.fingerprint, d.queue, d.handler
FROM {schema}.dead_counts AS d
WHERE d.fingerprint = ANY($1::text[])
GROUP BY d.fingerprint, d.queue, d.handler
HAVING sum(d.n) > 0
ORDER BY d.fingerprint, d.queue, d.handler`

// seriesEvents lists what happened in [lo, hi) (the two expressions it is
// built with), one row per event with its minute: every attempts row
// finished then, and the successes sqlFinish recorded in their task rows
// (a SUCCEEDED task whose last attempt number has no row). An attempt is a
// dead-lettering when it is the last of its life (no later attempt of the
// same life) and that life ended DEAD: the task is dead in it, or has
// since been redriven into a later life. Indexes: attempts_finished_idx
// (one range), tasks_pkey and attempts_pkey (a lookup per attempt),
// tasks_succeeded_idx (one range) and attempts_pkey (a lookup per success).
func seriesEvents(lo, hi string) string {
	return `
    SELECT to_timestamp(floor(extract(epoch FROM a.finished_at) / 60) * 60) AS minute,
           t.queue, t.handler, a.outcome,
           (a.outcome <> 'SUCCESS' AND (t.life > a.life OR t.status = 'DEAD')
            AND NOT EXISTS (SELECT 1 FROM {schema}.attempts AS b
                            WHERE b.task_id = a.task_id AND b.number > a.number AND b.life = a.life)) AS dead
    FROM {schema}.attempts AS a JOIN {schema}.tasks AS t ON t.id = a.task_id
    WHERE a.finished_at >= ` + lo + ` AND a.finished_at < ` + hi + `
    UNION ALL
    SELECT to_timestamp(floor(extract(epoch FROM t.finished_at) / 60) * 60), t.queue, t.handler, 'SUCCESS', false
    FROM {schema}.tasks AS t
    WHERE t.status = 'SUCCEEDED' AND t.finished_at >= ` + lo + ` AND t.finished_at < ` + hi + `
      AND t.last_attempt_number > 0
      AND NOT EXISTS (SELECT 1 FROM {schema}.attempts AS a
                      WHERE a.task_id = t.id AND a.number = t.last_attempt_number)`
}

// seriesCounted are the counts of one group of seriesEvents rows.
const seriesCounted = `count(*) FILTER (WHERE e.outcome <> 'CANCELLED'),
           count(*) FILTER (WHERE e.outcome = 'SUCCESS'),
           count(*) FILTER (WHERE e.outcome IN ('RETRYABLE_FAILURE', 'LEASE_EXPIRED')),
           count(*) FILTER (WHERE e.outcome = 'PERMANENT_FAILURE'),
           count(*) FILTER (WHERE e.dead)`

// sqlSeriesLock takes the rollup lock of one schema if it is free, and
// reports whether it did: $1 is the schema's key (seriesLockKey).
const sqlSeriesLock = `SELECT pg_try_advisory_xact_lock($1)`

// sqlSeriesPending reads, without writing, what is left to roll up for a
// read: of the minutes of [$1, $2) not rolled up yet, how many there are,
// the oldest at or after $3 (counted from the history by the read) and the
// newest before $3 (left out of the read); and how many of the hours of
// [$4, $5) not rolled up yet have every minute rolled up, and those hours
// not rolled up yet. Indexes: series_minutes_pkey (a probe per minute and
// a range per hour), series_hours_done_pkey (a probe per hour).
const sqlSeriesPending = `
WITH pending AS (
    SELECT m.minute
    FROM generate_series($1::timestamptz, $2::timestamptz - interval '1 minute', interval '1 minute') AS m(minute)
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.series_minutes AS s WHERE s.minute = m.minute)
),
hours AS (
    SELECT h.hour,
           (SELECT count(*) FROM {schema}.series_minutes AS s
            WHERE s.minute >= h.hour AND s.minute < h.hour + interval '1 hour') = 60 AS complete
    FROM generate_series($4::timestamptz, $5::timestamptz - interval '1 hour', interval '1 hour') AS h(hour)
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.series_hours_done AS d WHERE d.hour = h.hour)
)
SELECT (SELECT count(*) FROM pending),
       (SELECT min(minute) FROM pending WHERE minute >= $3::timestamptz),
       (SELECT max(minute) FROM pending WHERE minute < $3::timestamptz),
       (SELECT count(*) FROM hours WHERE complete),
       (SELECT coalesce(array_agg(hour ORDER BY hour), '{}') FROM hours)`

// sqlSeriesClock reads the store's clock. $1 Now override.
const sqlSeriesClock = `SELECT coalesce($1::timestamptz, now())`

// sqlSeriesRollup marks the minutes of [$1, $2) not rolled up yet that
// are quiet (no attempt and no success finished in them: a probe each) in
// series_minutes, and rolls the newest $4 of the others into
// series_counts and marks them; it deletes both tables' minutes before $3 (the
// retention). Racing rollups write each row once (ON CONFLICT DO NOTHING:
// the later one waits for the earlier one's commit, then skips; Series
// also runs one rollup at a time). Returns how many minutes it marked.
// Indexes: series_minutes_pkey (the minutes done, one range; the arbiter
// and the deletion), attempts_finished_idx and tasks_succeeded_idx (a
// probe per minute not rolled up), series_counts_pkey (the arbiter and the
// deletion), and those of seriesEvents over the span of the newest
// minutes.
var sqlSeriesRollup = `
WITH pending AS (
    SELECT m.minute
    FROM generate_series($1::timestamptz, $2::timestamptz - interval '1 minute', interval '1 minute') AS m(minute)
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.series_minutes AS s WHERE s.minute = m.minute)
),
probed AS (
    SELECT p.minute,
           NOT EXISTS (SELECT 1 FROM {schema}.attempts AS a
                       WHERE a.finished_at >= p.minute AND a.finished_at < p.minute + interval '1 minute')
           AND NOT EXISTS (SELECT 1 FROM {schema}.tasks AS t
                           WHERE t.status = 'SUCCEEDED'
                             AND t.finished_at >= p.minute AND t.finished_at < p.minute + interval '1 minute') AS quiet
    FROM pending AS p
),
quiet AS (
    SELECT minute FROM probed WHERE quiet
),
busy AS (
    SELECT minute FROM probed WHERE NOT quiet ORDER BY minute DESC LIMIT $4
),
todo AS (
    SELECT minute FROM busy UNION SELECT minute FROM quiet
),
span AS (
    SELECT min(minute) AS lo, max(minute) + interval '1 minute' AS hi FROM busy
),
events AS (` + seriesEvents("(SELECT lo FROM span)", "(SELECT hi FROM span)") + `
),
counted AS (
    INSERT INTO {schema}.series_counts (minute, queue, handler, attempts, successes, retryable, permanent, dead_lettered)
    SELECT e.minute, e.queue, e.handler, ` + seriesCounted + `
    FROM events AS e
    WHERE e.minute IN (SELECT minute FROM busy)
    GROUP BY e.minute, e.queue, e.handler
    ON CONFLICT DO NOTHING
),
marked AS (
    INSERT INTO {schema}.series_minutes (minute) SELECT minute FROM todo
    ON CONFLICT DO NOTHING
),
old_counts AS (
    DELETE FROM {schema}.series_counts WHERE minute < $3::timestamptz
),
old_minutes AS (
    DELETE FROM {schema}.series_minutes WHERE minute < $3::timestamptz
)
SELECT count(*) FROM todo`

// sqlSeriesRollupHours sums the minutes of the hours of [$1, $2) not
// rolled up yet whose every minute is, from series_counts into
// series_hours, and marks them in series_hours_done, and deletes both
// tables' hours before $3. Racing rollups write each row once, as in
// sqlSeriesRollup. Returns how many hours it rolled up. Indexes:
// series_hours_done_pkey (the hours done; the arbiter and the deletion),
// series_minutes_pkey (a range per hour), series_counts_pkey (one range
// over the hours to do), series_hours_pkey (the arbiter and the deletion).
const sqlSeriesRollupHours = `
WITH todo AS (
    SELECT h.hour
    FROM generate_series($1::timestamptz, $2::timestamptz - interval '1 hour', interval '1 hour') AS h(hour)
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.series_hours_done AS d WHERE d.hour = h.hour)
      AND (SELECT count(*) FROM {schema}.series_minutes AS s
           WHERE s.minute >= h.hour AND s.minute < h.hour + interval '1 hour') = 60
),
counted AS (
    INSERT INTO {schema}.series_hours (hour, queue, handler, attempts, successes, retryable, permanent, dead_lettered)
    SELECT x.hour, x.queue, x.handler, sum(x.attempts), sum(x.successes), sum(x.retryable), sum(x.permanent), sum(x.dead_lettered)
    FROM (SELECT to_timestamp(floor(extract(epoch FROM c.minute) / 3600) * 3600) AS hour, c.*
          FROM {schema}.series_counts AS c
          WHERE c.minute >= (SELECT min(hour) FROM todo)
            AND c.minute < (SELECT max(hour) + interval '1 hour' FROM todo)) AS x
    WHERE x.hour IN (SELECT hour FROM todo)
    GROUP BY x.hour, x.queue, x.handler
    ON CONFLICT DO NOTHING
),
marked AS (
    INSERT INTO {schema}.series_hours_done (hour) SELECT hour FROM todo
    ON CONFLICT DO NOTHING
),
old_hours AS (
    DELETE FROM {schema}.series_hours WHERE hour < $3::timestamptz
),
old_done AS (
    DELETE FROM {schema}.series_hours_done WHERE hour < $3::timestamptz
)
SELECT count(*) FROM todo`

// sqlSeries reads a series in buckets of $6 seconds from $1, for queue $7
// and handler $8 when not empty: the hours of [$2, $3) from series_hours
// where rolled up, from series_counts for the hours $10 that are not (an
// array whose length the planner sees); the rolled-up minutes of
// [$1, $2) and [$3, $4) from series_counts; the minutes of [$9, $4) not
// rolled up, and those of [$4, $5), from the history. One snapshot: a
// minute is read from its counters or from the history, never both.
// Indexes: series_hours_pkey and series_counts_pkey (a range each),
// series_counts_pkey (a range per hour not rolled up), series_minutes_pkey (a probe per minute, queue
// and handler of history before $4) and those of seriesEvents over
// [$9, $5).
var sqlSeries = `
WITH events AS (` + seriesEvents("$9::timestamptz", "$5::timestamptz") + `
),
minutes AS (
    SELECT c.hour AS minute, c.queue, c.handler, c.attempts, c.successes, c.retryable, c.permanent, c.dead_lettered
    FROM {schema}.series_hours AS c
    WHERE c.hour >= $2::timestamptz AND c.hour < $3::timestamptz
    UNION ALL
    SELECT c.minute, c.queue, c.handler, c.attempts, c.successes, c.retryable, c.permanent, c.dead_lettered
    FROM unnest($10::timestamptz[]) AS h(hour)
    JOIN {schema}.series_counts AS c ON c.minute >= h.hour AND c.minute < h.hour + interval '1 hour'
    UNION ALL
    SELECT c.minute, c.queue, c.handler, c.attempts, c.successes, c.retryable, c.permanent, c.dead_lettered
    FROM {schema}.series_counts AS c
    WHERE c.minute >= $1::timestamptz AND c.minute < $2::timestamptz
    UNION ALL
    SELECT c.minute, c.queue, c.handler, c.attempts, c.successes, c.retryable, c.permanent, c.dead_lettered
    FROM {schema}.series_counts AS c
    WHERE c.minute >= $3::timestamptz AND c.minute < $4::timestamptz
    UNION ALL
    SELECT e.minute, e.queue, e.handler, ` + seriesCounted + `
    FROM events AS e
    GROUP BY e.minute, e.queue, e.handler
    HAVING e.minute >= $4::timestamptz
        OR NOT EXISTS (SELECT 1 FROM {schema}.series_minutes AS s WHERE s.minute = e.minute)
)
SELECT m.queue, m.handler, floor(extract(epoch FROM (m.minute - $1::timestamptz)) / $6::float8)::int AS bucket,
       sum(m.attempts)::bigint, sum(m.successes)::bigint, sum(m.retryable)::bigint,
       sum(m.permanent)::bigint, sum(m.dead_lettered)::bigint
FROM minutes AS m
WHERE ($7::text = '' OR m.queue = $7::text) AND ($8::text = '' OR m.handler = $8::text)
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3`
