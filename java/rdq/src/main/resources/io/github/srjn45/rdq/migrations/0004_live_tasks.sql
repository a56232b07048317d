-- rdq schema, version 4: live tasks, cancellation, and idempotency keys that
-- outlive their tasks.

-- An operator can cancel a waiting task: it goes to the dead-letter queue
-- with an attempt of outcome CANCELLED naming who cancelled it and why.
ALTER TABLE {schema}.attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE {schema}.attempts ADD CONSTRAINT attempts_outcome_check
    CHECK (outcome IN ('SUCCESS', 'RETRYABLE_FAILURE', 'PERMANENT_FAILURE', 'LEASE_EXPIRED', 'CANCELLED'));

-- Live-task listing of PENDING tasks across every queue, soonest due first
-- (a listing of one queue reads tasks_claim_idx).
CREATE INDEX tasks_pending_idx ON {schema}.tasks (next_attempt_at, id)
    WHERE status = 'PENDING';

-- The live-task listings page by (time, id): the per-status indexes get the
-- ID as their last column, so a page is an ordered index range that stops
-- at the page size, with no sort. Same names, same leading columns: the
-- statements they served before are served as before.
DROP INDEX {schema}.tasks_claim_idx;
CREATE INDEX tasks_claim_idx ON {schema}.tasks (queue, next_attempt_at, id)
    WHERE status = 'PENDING';
DROP INDEX {schema}.tasks_lease_expiry_idx;
CREATE INDEX tasks_lease_expiry_idx ON {schema}.tasks (lease_expires_at, id)
    WHERE status = 'IN_FLIGHT';
DROP INDEX {schema}.tasks_succeeded_idx;
CREATE INDEX tasks_succeeded_idx ON {schema}.tasks (finished_at, id)
    WHERE status = 'SUCCEEDED';

-- idempotency_keys remembers every idempotency key from the moment its task
-- is stored until a configurable window after the task is purged, so a
-- resubmission within the window returns the original task's ID instead of
-- running the work again. purged_at is NULL while the task exists.
CREATE TABLE {schema}.idempotency_keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    task_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL,
    purged_at  timestamptz,
    PRIMARY KEY (queue, key)
);

-- Pruning keys whose window after their task's purge has passed.
CREATE INDEX idempotency_keys_purged_idx ON {schema}.idempotency_keys (purged_at)
    WHERE purged_at IS NOT NULL;

-- Writers that do not know the table yet must not add keys while the
-- existing ones are copied.
LOCK TABLE {schema}.tasks IN SHARE MODE;

INSERT INTO {schema}.idempotency_keys (queue, key, task_id, created_at)
SELECT t.queue, t.idempotency_key, t.id, t.created_at
FROM {schema}.tasks AS t
WHERE t.idempotency_key IS NOT NULL;
