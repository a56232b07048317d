-- Generated from pgstore/migrations/0001_init.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

CREATE SCHEMA IF NOT EXISTS "rdq";

CREATE TABLE IF NOT EXISTS "rdq".schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- rdq schema, version 1.
--
-- Every object lives in the schema the store was configured with; the
-- migration runner replaces "rdq" with that schema's quoted name.
-- Plain SQL only: no extensions and no server-side functions.

-- tasks holds every task in every status. A task is one row for its whole
-- life; attempts hold its history.
CREATE TABLE "rdq".tasks (
    id                     uuid        PRIMARY KEY,
    queue                  text        NOT NULL,
    handler                text        NOT NULL,
    payload                bytea       NOT NULL,
    content_type           text        NOT NULL DEFAULT '',
    headers                jsonb       NOT NULL DEFAULT '{}',
    -- NULL when the task has no idempotency key.
    idempotency_key        text,
    status                 text        NOT NULL
        CHECK (status IN ('PENDING', 'IN_FLIGHT', 'SUCCEEDED', 'DEAD')),
    -- Attempts in the current life; redrive resets it to zero.
    attempts               integer     NOT NULL DEFAULT 0,
    life                   integer     NOT NULL DEFAULT 0,
    -- Highest attempt number recorded for the task in any life; never
    -- reset. Equal to max(attempts.number) of the task.
    last_attempt_number    integer     NOT NULL DEFAULT 0,
    next_attempt_at        timestamptz NOT NULL,
    lease_token            bigint      NOT NULL DEFAULT 0,
    lease_expires_at       timestamptz,
    lease_owner            text        NOT NULL DEFAULT '',
    claimed_at             timestamptz,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    finished_at            timestamptz,
    last_error_type        text        NOT NULL DEFAULT '',
    last_error_message     text        NOT NULL DEFAULT '',
    last_error_fingerprint text        NOT NULL DEFAULT ''
);

-- Claim: due PENDING tasks of a queue, oldest due first.
CREATE INDEX tasks_claim_idx ON "rdq".tasks (queue, next_attempt_at)
    WHERE status = 'PENDING';

-- ReclaimExpired: IN_FLIGHT tasks by lease expiry.
CREATE INDEX tasks_lease_expiry_idx ON "rdq".tasks (lease_expires_at)
    WHERE status = 'IN_FLIGHT';

-- PurgeSucceeded and Stats: SUCCEEDED tasks by finish time.
CREATE INDEX tasks_succeeded_idx ON "rdq".tasks (finished_at)
    WHERE status = 'SUCCEEDED';

-- Enqueue: idempotency key unique per queue while the task exists.
CREATE UNIQUE INDEX tasks_idempotency_key_idx ON "rdq".tasks (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Dead-letter browsing, newest dead first, unfiltered or by time range.
CREATE INDEX tasks_dead_idx ON "rdq".tasks (finished_at DESC, id DESC)
    WHERE status = 'DEAD';

-- Dead-letter browsing by queue.
CREATE INDEX tasks_dead_queue_idx ON "rdq".tasks (queue, finished_at DESC, id DESC)
    WHERE status = 'DEAD';

-- Dead-letter browsing by handler.
CREATE INDEX tasks_dead_handler_idx ON "rdq".tasks (handler, finished_at DESC, id DESC)
    WHERE status = 'DEAD';

-- Dead-letter browsing by error type.
CREATE INDEX tasks_dead_error_type_idx ON "rdq".tasks (last_error_type, finished_at DESC, id DESC)
    WHERE status = 'DEAD';

-- Dead-letter browsing and grouping by failure fingerprint.
CREATE INDEX tasks_dead_fingerprint_idx ON "rdq".tasks (last_error_fingerprint, finished_at DESC, id DESC)
    WHERE status = 'DEAD';

-- attempts is the execution history: one row per attempt, numbered per task
-- across lives.
CREATE TABLE "rdq".attempts (
    task_id     uuid        NOT NULL,
    number      integer     NOT NULL,
    life        integer     NOT NULL,
    outcome     text        NOT NULL
        CHECK (outcome IN ('SUCCESS', 'RETRYABLE_FAILURE', 'PERMANENT_FAILURE', 'LEASE_EXPIRED')),
    error_type  text        NOT NULL DEFAULT '',
    message     text        NOT NULL DEFAULT '',
    stack       text        NOT NULL DEFAULT '',
    worker_id   text        NOT NULL DEFAULT '',
    lease_token bigint      NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    -- Get (history in number order) and deletes of a task's history.
    PRIMARY KEY (task_id, number)
);

-- audit records every mutation of the dead-letter queue and of retention.
CREATE TABLE "rdq".audit (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL,
    actor   text        NOT NULL DEFAULT '',
    action  text        NOT NULL,
    -- The selection as JSON text, for mutations by filter.
    filter  text        NOT NULL DEFAULT '',
    ids     uuid[]      NOT NULL DEFAULT '{}',
    count   bigint      NOT NULL,
    reason  text        NOT NULL DEFAULT '',
    details jsonb       NOT NULL DEFAULT '{}'
);

-- ListAudit by actor, newest first.
CREATE INDEX audit_actor_idx ON "rdq".audit (actor, id DESC);

-- ListAudit by action, newest first.
CREATE INDEX audit_action_idx ON "rdq".audit (action, id DESC);

-- ListAudit by time range.
CREATE INDEX audit_at_idx ON "rdq".audit (at);

INSERT INTO "rdq".schema_migrations (version, name) VALUES (1, '0001_init.sql');
