-- rdq schema, version 2: queues can be paused.

-- rdq_paused_queues holds the queues whose tasks Claim skips. A queue is
-- paused while its row exists; tasks keep arriving and executions already
-- claimed run to completion.
CREATE TABLE rdq_paused_queues (
    queue     TEXT    NOT NULL PRIMARY KEY,
    paused_at INTEGER NOT NULL,
    actor     TEXT    NOT NULL DEFAULT '',
    reason    TEXT    NOT NULL DEFAULT ''
);
