-- rdq schema, version 7: a worker claims only the tasks of the handlers it
-- runs.
--
-- Claim: the due PENDING tasks of one handler of a queue that are not
-- held, oldest due first. A claim reads one ordered range per (queue,
-- handler) it names, so the tasks of a handler no running worker has (a
-- rolling deploy's new handler) wait in the index without costing a claim
-- anything. tasks_claim_idx stays for the listings of a queue's waiting
-- tasks in due order.
CREATE INDEX tasks_claim_handler_idx ON {schema}.tasks (queue, handler, next_attempt_at, id)
    WHERE status = 'PENDING' AND NOT held;
