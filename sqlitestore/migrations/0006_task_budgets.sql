-- A task's own attempt budget and execution timeout, set at submission (0:
-- the queue's), and the times it snoozed in its current life without
-- spending an attempt (a redrive sets it back to 0).
ALTER TABLE rdq_tasks ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rdq_tasks ADD COLUMN timeout_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rdq_tasks ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
