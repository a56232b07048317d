-- rdq SQLite schema, version 1.
--
-- Times are INTEGER unix microseconds (UTC) on the store's clock, so that
-- comparisons and ORDER BY are plain integer comparisons. Task IDs are the
-- 16 bytes of a UUIDv7, which sort in creation order.

CREATE TABLE rdq_tasks (
    id                     BLOB    NOT NULL PRIMARY KEY CHECK (length(id) = 16),
    queue                  TEXT    NOT NULL,
    handler                TEXT    NOT NULL,
    payload                BLOB    NOT NULL,
    content_type           TEXT    NOT NULL DEFAULT '',
    headers                TEXT,                       -- JSON object; NULL when there are none
    idempotency_key        TEXT,                       -- NULL when there is none
    status                 TEXT    NOT NULL CHECK (status IN ('PENDING', 'IN_FLIGHT', 'SUCCEEDED', 'DEAD')),
    attempts               INTEGER NOT NULL DEFAULT 0,
    life                   INTEGER NOT NULL DEFAULT 0,
    next_attempt_at        INTEGER NOT NULL,
    lease_token            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at       INTEGER,                    -- set only while IN_FLIGHT
    lease_owner            TEXT    NOT NULL DEFAULT '',
    claimed_at             INTEGER,                    -- start of the current (or last) execution
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    finished_at            INTEGER,                    -- set when SUCCEEDED or DEAD
    last_error_type        TEXT    NOT NULL DEFAULT '',
    last_error_message     TEXT    NOT NULL DEFAULT '',
    last_error_fingerprint TEXT    NOT NULL DEFAULT ''
);

-- Claim: due PENDING tasks of one queue, oldest due first.
CREATE INDEX rdq_tasks_claim ON rdq_tasks (queue, next_attempt_at, id) WHERE status = 'PENDING';

-- Reclaim: IN_FLIGHT tasks by lease expiry.
CREATE INDEX rdq_tasks_expiry ON rdq_tasks (lease_expires_at, id) WHERE status = 'IN_FLIGHT';

-- Retention: SUCCEEDED tasks by finish time.
CREATE INDEX rdq_tasks_succeeded ON rdq_tasks (finished_at) WHERE status = 'SUCCEEDED';

-- Idempotency: one task per (queue, key) while it exists.
CREATE UNIQUE INDEX rdq_tasks_idempotency ON rdq_tasks (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Dead-letter browsing, newest dead first, unfiltered and by each exact filter.
CREATE INDEX rdq_tasks_dead             ON rdq_tasks (finished_at, id)                         WHERE status = 'DEAD';
CREATE INDEX rdq_tasks_dead_queue       ON rdq_tasks (queue, finished_at, id)                  WHERE status = 'DEAD';
CREATE INDEX rdq_tasks_dead_handler     ON rdq_tasks (handler, finished_at, id)                WHERE status = 'DEAD';
CREATE INDEX rdq_tasks_dead_error_type  ON rdq_tasks (last_error_type, finished_at, id)        WHERE status = 'DEAD';
CREATE INDEX rdq_tasks_dead_fingerprint ON rdq_tasks (last_error_fingerprint, finished_at, id) WHERE status = 'DEAD';

-- Attempt history. The primary key serves "max(number) + 1" numbering,
-- history reads in number order and the cascade when a task is deleted.
CREATE TABLE rdq_attempts (
    task_id     BLOB    NOT NULL REFERENCES rdq_tasks (id) ON DELETE CASCADE,
    number      INTEGER NOT NULL CHECK (number >= 1),
    life        INTEGER NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('SUCCESS', 'RETRYABLE_FAILURE', 'PERMANENT_FAILURE', 'LEASE_EXPIRED')),
    error_type  TEXT    NOT NULL DEFAULT '',
    message     TEXT    NOT NULL DEFAULT '',
    stack       TEXT    NOT NULL DEFAULT '',
    worker_id   TEXT    NOT NULL DEFAULT '',
    lease_token INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, number)
);

-- Audit log of DLQ mutations and retention. AUTOINCREMENT keeps IDs
-- strictly increasing even if the newest entry were ever deleted.
CREATE TABLE rdq_audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL DEFAULT '',
    action  TEXT    NOT NULL,
    filter  TEXT    NOT NULL DEFAULT '',             -- JSON of the selection, for mutations by filter
    ids     TEXT    NOT NULL DEFAULT '[]',           -- JSON array of task IDs, for mutations by ID
    count   INTEGER NOT NULL,
    reason  TEXT    NOT NULL DEFAULT '',
    details TEXT    NOT NULL DEFAULT '{}'            -- JSON object of strings
);

CREATE INDEX rdq_audit_actor  ON rdq_audit (actor, id);
CREATE INDEX rdq_audit_action ON rdq_audit (action, id);
CREATE INDEX rdq_audit_at     ON rdq_audit (at);
