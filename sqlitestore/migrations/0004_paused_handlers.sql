-- rdq SQLite schema, version 4: one handler of a queue can be paused (by an
-- operator, or by the worker's circuit breaker).

-- rdq_paused_handlers holds the (queue, handler) pairs whose tasks Claim
-- skips. A handler is paused while its row exists. state is 'open' (no
-- execution; a probe may run once probe_at has passed, never when it is
-- NULL) or 'half_open' (one probe, the task probe_id under lease
-- probe_token, runs until probe_expires_at at the earliest).
CREATE TABLE rdq_paused_handlers (
    queue            TEXT    NOT NULL,
    handler          TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('open', 'half_open')),
    since            INTEGER NOT NULL,
    probe_at         INTEGER,
    trips            INTEGER NOT NULL DEFAULT 1,
    probe_id         BLOB,
    probe_token      INTEGER NOT NULL DEFAULT 0,
    probe_expires_at INTEGER,
    actor            TEXT    NOT NULL DEFAULT '',
    reason           TEXT    NOT NULL DEFAULT '',
    fingerprint      TEXT    NOT NULL DEFAULT '',
    ratio            REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, handler)
);

-- held marks a PENDING task whose handler is paused: it waits outside the
-- claim index, so claims never read it, and inside rdq_tasks_held, where a
-- probe finds it and a resume releases it.
ALTER TABLE rdq_tasks ADD COLUMN held INTEGER NOT NULL DEFAULT 0;

DROP INDEX rdq_tasks_claim;

-- Claim: due PENDING tasks of one queue that are not held, oldest due first.
CREATE INDEX rdq_tasks_claim ON rdq_tasks (queue, next_attempt_at, id) WHERE status = 'PENDING' AND held = 0;

-- ClaimProbe (fewest attempts first) and ResumeHandler: the held tasks of
-- one handler.
CREATE INDEX rdq_tasks_held ON rdq_tasks (queue, handler, attempts, next_attempt_at, id) WHERE status = 'PENDING' AND held = 1;
