-- rdq SQLite schema, version 7 (the number of the PostgreSQL schema that
-- brings the same change): a worker claims only the tasks of the handlers
-- it runs.

-- Claim: the due PENDING tasks of one handler of a queue that are not
-- held, oldest due first, one ordered range per (queue, handler), so the
-- tasks of a handler no running worker has cost a claim nothing.
-- rdq_tasks_claim stays for the listings of a queue's waiting tasks.
CREATE INDEX rdq_tasks_claim_handler ON rdq_tasks (queue, handler, next_attempt_at, id)
    WHERE status = 'PENDING' AND held = 0;
