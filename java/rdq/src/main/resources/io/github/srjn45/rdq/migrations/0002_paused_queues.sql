-- rdq schema, version 2: queues can be paused.

-- paused_queues holds the queues whose tasks Claim skips. A queue is paused
-- while its row exists; tasks keep arriving and executions already claimed
-- run to completion.
CREATE TABLE {schema}.paused_queues (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL,
    actor     text        NOT NULL DEFAULT '',
    reason    text        NOT NULL DEFAULT ''
);
