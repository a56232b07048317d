-- Generated from pgstore/migrations/0002_paused_queues.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 2: queues can be paused.

-- paused_queues holds the queues whose tasks Claim skips. A queue is paused
-- while its row exists; tasks keep arriving and executions already claimed
-- run to completion.
CREATE TABLE "rdq".paused_queues (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL,
    actor     text        NOT NULL DEFAULT '',
    reason    text        NOT NULL DEFAULT ''
);

INSERT INTO "rdq".schema_migrations (version, name) VALUES (2, '0002_paused_queues.sql');
