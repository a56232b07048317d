-- Generated from pgstore/migrations/0007_workers.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 7: a registry of running workers (store.WorkerRegistry).

-- workers holds one row per registered worker, refreshed on an interval.
-- A row is stale once last_seen + stale_after has passed and is removed
-- once last_seen + expire_after has (both by the database's clock). The
-- table holds a row per running worker, so statements read it whole.
CREATE TABLE "rdq".workers (
    id           text        PRIMARY KEY,
    host         text        NOT NULL DEFAULT '',
    pid          integer     NOT NULL DEFAULT 0,
    version      text        NOT NULL DEFAULT '',
    queues       text[]      NOT NULL,
    handlers     text[]      NOT NULL,
    slots        integer     NOT NULL DEFAULT 0,
    in_flight    integer     NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL,
    last_seen    timestamptz NOT NULL,
    stale_after  bigint      NOT NULL,
    expire_after bigint      NOT NULL
);

INSERT INTO "rdq".schema_migrations (version, name) VALUES (7, '0007_workers.sql');
