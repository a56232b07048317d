-- Generated from pgstore/migrations/0004_live_tasks.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 4: live tasks, cancellation, and idempotency keys that
-- outlive their tasks.

-- An operator can cancel a waiting task: it goes to the dead-letter queue
-- with an attempt of outcome CANCELLED naming who cancelled it and why.
ALTER TABLE "rdq".attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE "rdq".attempts ADD CONSTRAINT attempts_outcome_check
    CHECK (outcome IN ('SUCCESS', 'RETRYABLE_FAILURE', 'PERMANENT_FAILURE', 'LEASE_EXPIRED', 'CANCELLED'));

-- Live-task listing of PENDING tasks across every queue, soonest due first
-- (a listing of one queue reads tasks_claim_idx).
CREATE INDEX tasks_pending_idx ON "rdq".tasks (next_attempt_at, id)
    WHERE status = 'PENDING';

-- The live-task listings page by (time, id): the per-status indexes get the
-- ID as their last column, so a page is an ordered index range that stops
-- at the page size, with no sort. Same names, same leading columns: the
-- statements they served before are served as before.
DROP INDEX "rdq".tasks_claim_idx;
CREATE INDEX tasks_claim_idx ON "rdq".tasks (queue, next_attempt_at, id)
    WHERE status = 'PENDING';
DROP INDEX "rdq".tasks_lease_expiry_idx;
CREATE INDEX tasks_lease_expiry_idx ON "rdq".tasks (lease_expires_at, id)
    WHERE status = 'IN_FLIGHT';
DROP INDEX "rdq".tasks_succeeded_idx;
CREATE INDEX tasks_succeeded_idx ON "rdq".tasks (finished_at, id)
    WHERE status = 'SUCCEEDED';

-- idempotency_keys remembers every idempotency key from the moment its task
-- is stored until a configurable window after the task is purged, so a
-- resubmission within the window returns the original task's ID instead of
-- running the work again. purged_at is NULL while the task exists.
CREATE TABLE "rdq".idempotency_keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    task_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL,
    purged_at  timestamptz,
    PRIMARY KEY (queue, key)
);

-- Pruning keys whose window after their task's purge has passed.
CREATE INDEX idempotency_keys_purged_idx ON "rdq".idempotency_keys (purged_at)
    WHERE purged_at IS NOT NULL;

-- Writers that do not know the table yet must not add keys while the
-- existing ones are copied.
LOCK TABLE "rdq".tasks IN SHARE MODE;

INSERT INTO "rdq".idempotency_keys (queue, key, task_id, created_at)
SELECT t.queue, t.idempotency_key, t.id, t.created_at
FROM "rdq".tasks AS t
WHERE t.idempotency_key IS NOT NULL;

INSERT INTO "rdq".schema_migrations (version, name) VALUES (4, '0004_live_tasks.sql');
