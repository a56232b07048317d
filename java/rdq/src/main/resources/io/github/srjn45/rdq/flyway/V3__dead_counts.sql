-- Generated from pgstore/migrations/0003_dead_counts.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 3: a maintained count of dead tasks per failure kind.

-- dead_counts holds how many DEAD tasks each (queue, handler, error type,
-- fingerprint) has, so counting and grouping the dead-letter queue reads a
-- few rows per failure kind instead of every dead task. Every statement
-- that moves tasks into or out of DEAD adjusts it in the same statement.
--
-- A key's count is the sum of its rows over shard. Each statement adds to
-- one of 16 shards (0 to 15), picked at random, so a failure storm
-- finishing many batches at once spreads over several rows instead of
-- queueing on one. A shard may go negative (a task counted into one shard
-- can leave through another); the sum over shards never does.
CREATE TABLE "rdq".dead_counts (
    queue       text     NOT NULL,
    handler     text     NOT NULL,
    error_type  text     NOT NULL,
    fingerprint text     NOT NULL,
    shard       smallint NOT NULL,
    n           bigint   NOT NULL,
    PRIMARY KEY (queue, handler, error_type, fingerprint, shard)
);

-- Writers that do not know the table yet must not change the dead set
-- while it is counted.
LOCK TABLE "rdq".tasks IN SHARE MODE;

INSERT INTO "rdq".dead_counts (queue, handler, error_type, fingerprint, shard, n)
SELECT t.queue, t.handler, t.last_error_type, t.last_error_fingerprint, 0, count(*)
FROM "rdq".tasks AS t
WHERE t.status = 'DEAD'
GROUP BY t.queue, t.handler, t.last_error_type, t.last_error_fingerprint;

INSERT INTO "rdq".schema_migrations (version, name) VALUES (3, '0003_dead_counts.sql');
