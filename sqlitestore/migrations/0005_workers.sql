-- rdq SQLite schema, version 5: a registry of running workers
-- (store.WorkerRegistry).

-- rdq_workers holds one row per registered worker, refreshed on an
-- interval; queues and handlers are JSON arrays of names. A row is stale
-- once last_seen + stale_after has passed and is removed once
-- last_seen + expire_after has (times and durations in microseconds).
CREATE TABLE rdq_workers (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL DEFAULT '',
    pid          INTEGER NOT NULL DEFAULT 0,
    version      TEXT    NOT NULL DEFAULT '',
    queues       TEXT    NOT NULL,
    handlers     TEXT    NOT NULL,
    slots        INTEGER NOT NULL DEFAULT 0,
    in_flight    INTEGER NOT NULL DEFAULT 0,
    started_at   INTEGER NOT NULL,
    last_seen    INTEGER NOT NULL,
    stale_after  INTEGER NOT NULL,
    expire_after INTEGER NOT NULL
);
