-- rdq SQLite schema, version 3: live tasks, cancellation, and idempotency
-- keys that outlive their tasks.

-- An operator can cancel a waiting task: it goes to the dead-letter queue
-- with an attempt of outcome CANCELLED. SQLite cannot alter a CHECK
-- constraint, so the attempts table is rebuilt with the new outcome.
CREATE TABLE rdq_attempts_v3 (
    task_id     BLOB    NOT NULL REFERENCES rdq_tasks (id) ON DELETE CASCADE,
    number      INTEGER NOT NULL CHECK (number >= 1),
    life        INTEGER NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('SUCCESS', 'RETRYABLE_FAILURE', 'PERMANENT_FAILURE', 'LEASE_EXPIRED', 'CANCELLED')),
    error_type  TEXT    NOT NULL DEFAULT '',
    message     TEXT    NOT NULL DEFAULT '',
    stack       TEXT    NOT NULL DEFAULT '',
    worker_id   TEXT    NOT NULL DEFAULT '',
    lease_token INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, number)
);
INSERT INTO rdq_attempts_v3 SELECT task_id, number, life, outcome, error_type, message, stack,
    worker_id, lease_token, started_at, finished_at FROM rdq_attempts;
DROP TABLE rdq_attempts;
ALTER TABLE rdq_attempts_v3 RENAME TO rdq_attempts;

-- Live-task listing of PENDING tasks across every queue, soonest due first
-- (a listing of one queue reads rdq_tasks_claim).
CREATE INDEX rdq_tasks_pending ON rdq_tasks (next_attempt_at, id) WHERE status = 'PENDING';

-- Retention and the live-task listing of SUCCEEDED tasks (newest first):
-- the ID is added so the listing needs no sort.
DROP INDEX rdq_tasks_succeeded;
CREATE INDEX rdq_tasks_succeeded ON rdq_tasks (finished_at, id) WHERE status = 'SUCCEEDED';

-- rdq_idempotency_keys remembers every idempotency key from the moment its
-- task is stored until a configurable window after the task is purged by
-- retention, so a resubmission within the window returns the original
-- task's ID instead of running the work again. purged_at is NULL while the
-- task exists.
CREATE TABLE rdq_idempotency_keys (
    queue      TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    task_id    BLOB    NOT NULL CHECK (length(task_id) = 16),
    created_at INTEGER NOT NULL,
    purged_at  INTEGER,
    PRIMARY KEY (queue, key)
);

-- Pruning keys whose window after their task's purge has passed.
CREATE INDEX rdq_idempotency_keys_purged ON rdq_idempotency_keys (purged_at) WHERE purged_at IS NOT NULL;

INSERT INTO rdq_idempotency_keys (queue, key, task_id, created_at)
SELECT queue, idempotency_key, id, created_at FROM rdq_tasks WHERE idempotency_key IS NOT NULL;
