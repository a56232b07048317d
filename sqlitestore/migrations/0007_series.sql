-- rdq SQLite schema, version 7: the time series of attempts
-- (store.SeriesReader).
--
-- The series is counted from the attempt history, never by the statements
-- that claim and finish tasks: a read rolls each complete minute up into
-- rdq_series_counts once, and counts the last few minutes from the history
-- itself. Complete hours are rolled up again, from the minute rows, into
-- rdq_series_hours. Times are microseconds; a minute or an hour is its
-- first microsecond.

-- No index serves the rollup: an index on the attempts' finish time would
-- be written by every attempt the embedded store records (successes
-- included), which slowed its drains by some 4%. A rollup reads the
-- history whole instead, once per minute read at the most.

-- One row per minute, queue and handler with any attempt or
-- dead-lettering in that minute, written once; rows older than the
-- retention are deleted by the rollup.
CREATE TABLE rdq_series_counts (
    minute        INTEGER NOT NULL,
    queue         TEXT    NOT NULL,
    handler       TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    successes     INTEGER NOT NULL,
    retryable     INTEGER NOT NULL,
    permanent     INTEGER NOT NULL,
    dead_lettered INTEGER NOT NULL,
    PRIMARY KEY (minute, queue, handler)
) WITHOUT ROWID;

-- The minutes rolled up into rdq_series_counts, quiet ones included, so
-- that a minute is rolled up once.
CREATE TABLE rdq_series_minutes (
    minute INTEGER PRIMARY KEY
);

-- The sums of rdq_series_counts per hour, queue and handler, for the hours
-- listed in rdq_series_hours_done; written once.
CREATE TABLE rdq_series_hours (
    hour          INTEGER NOT NULL,
    queue         TEXT    NOT NULL,
    handler       TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    successes     INTEGER NOT NULL,
    retryable     INTEGER NOT NULL,
    permanent     INTEGER NOT NULL,
    dead_lettered INTEGER NOT NULL,
    PRIMARY KEY (hour, queue, handler)
) WITHOUT ROWID;

CREATE TABLE rdq_series_hours_done (
    hour INTEGER PRIMARY KEY
);
