-- Generated from pgstore/migrations/0006_lean_hot_path.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 6: a leaner hot path.
--
-- A success is recorded in its task's row: a SUCCEEDED task whose highest
-- attempt number has no attempts row succeeded at that attempt, run by
-- lease_owner under lease_token from claimed_at to finished_at, and the
-- history reads it from there (sqlGetAttempts). A first-try success then
-- writes no attempts row and no attempts index entry. Successes recorded
-- as rows by earlier versions read as before. Builds that do not know
-- version 6 would not show such successes, which is why this is a version.
--
-- The live listing of waiting tasks across every queue no longer has an
-- index of its own: it reads each queue's range of tasks_claim_idx and
-- tasks_held_idx (sqlListTasksWaiting). tasks_pending_idx was written by
-- every submit and every retry, and claims could be planned on it, reading
-- other queues' due tasks.
DROP INDEX "rdq".tasks_pending_idx;

INSERT INTO "rdq".schema_migrations (version, name) VALUES (6, '0006_lean_hot_path.sql');
