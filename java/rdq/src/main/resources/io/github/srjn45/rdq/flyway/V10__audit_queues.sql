-- Generated from pgstore/migrations/0010_audit_queues.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 10: the queues each audit entry touched.
--
-- An entry records the queues of the tasks its mutation changed (or the
-- queue it paused), whatever the selection (ids, a group, a filter), so
-- the audit log filtered by queue finds a redrive or purge selected by id.
-- Entries written before this version keep the empty array; readers fall
-- back on the queue their filter names. Adding a column with a constant
-- default rewrites no row.
ALTER TABLE "rdq".audit ADD COLUMN queues text[] NOT NULL DEFAULT '{}';

INSERT INTO "rdq".schema_migrations (version, name) VALUES (10, '0010_audit_queues.sql');
