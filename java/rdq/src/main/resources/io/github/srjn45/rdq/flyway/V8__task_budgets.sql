-- Generated from pgstore/migrations/0008_task_budgets.sql for the schema rdq; do not edit.
-- Regenerate with: go test ./internal/crosslang -run TestJavaMigrationsArePgstoreMigrations -update

-- rdq schema, version 8: what a producer may say per task.
--
-- max_attempts and timeout_us are a task's own attempt budget and
-- execution timeout, set at submission; 0 means the queue's. snoozes counts
-- the times the task snoozed (rdq.Snooze) in its current life without
-- spending an attempt; a redrive sets it back to 0. The constant defaults
-- add the columns without rewriting the table.
ALTER TABLE "rdq".tasks
    ADD COLUMN max_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN timeout_us   bigint  NOT NULL DEFAULT 0,
    ADD COLUMN snoozes      integer NOT NULL DEFAULT 0;

INSERT INTO "rdq".schema_migrations (version, name) VALUES (8, '0008_task_budgets.sql');
