-- Generated from pgstore/migrations/0005_paused_handlers.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 5: one handler of a queue can be paused (by an
-- operator, or by the worker's circuit breaker).

-- paused_handlers holds the (queue, handler) pairs whose tasks Claim skips.
-- A handler is paused while its row exists. state is 'open' (no execution;
-- a probe may run once probe_at has passed, never when it is NULL) or
-- 'half_open' (one probe, the task probe_id under lease probe_token, runs
-- until probe_expires_at at the earliest).
CREATE TABLE "rdq".paused_handlers (
    queue            text             NOT NULL,
    handler          text             NOT NULL,
    state            text             NOT NULL CHECK (state IN ('open', 'half_open')),
    since            timestamptz      NOT NULL,
    probe_at         timestamptz,
    trips            integer          NOT NULL DEFAULT 1,
    probe_id         uuid,
    probe_token      bigint           NOT NULL DEFAULT 0,
    probe_expires_at timestamptz,
    actor            text             NOT NULL DEFAULT '',
    reason           text             NOT NULL DEFAULT '',
    fingerprint      text             NOT NULL DEFAULT '',
    ratio            double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, handler)
);

-- held marks a PENDING task whose handler is paused: it waits outside the
-- claim index, so claims never read it, and inside tasks_held_idx, where
-- a probe finds it and a resume releases it.
ALTER TABLE "rdq".tasks ADD COLUMN held boolean NOT NULL DEFAULT false;

DROP INDEX "rdq".tasks_claim_idx;

-- Claim: due PENDING tasks of a queue that are not held, oldest due first.
CREATE INDEX tasks_claim_idx ON "rdq".tasks (queue, next_attempt_at, id)
    WHERE status = 'PENDING' AND NOT held;

-- ClaimProbe (fewest attempts first) and ResumeHandler: the held tasks of
-- one handler.
CREATE INDEX tasks_held_idx ON "rdq".tasks (queue, handler, attempts, next_attempt_at)
    WHERE status = 'PENDING' AND held;

INSERT INTO "rdq".schema_migrations (version, name) VALUES (5, '0005_paused_handlers.sql');
