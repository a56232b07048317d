-- rdq schema, version 9: the time series of attempts (store.SeriesReader).
--
-- The series is counted from the attempt history, never by the statements
-- that claim and finish tasks: a read rolls each complete minute up into
-- series_counts once (sqlSeriesRollup), and counts the last few minutes
-- from the history itself. Complete hours are rolled up again, from the
-- minute rows, into series_hours, so a day reads 24 rows per queue and
-- handler rather than 1,440.

-- attempts by finish time: the history of one minute is one range.
CREATE INDEX attempts_finished_idx ON {schema}.attempts (finished_at);

-- series_counts holds one row per minute, queue and handler with any
-- attempt or dead-lettering in that minute. Rows are written once and
-- never updated; rows older than the retention are deleted by the rollup.
CREATE TABLE {schema}.series_counts (
    minute        timestamptz NOT NULL,
    queue         text        NOT NULL,
    handler       text        NOT NULL,
    attempts      bigint      NOT NULL,
    successes     bigint      NOT NULL,
    retryable     bigint      NOT NULL,
    permanent     bigint      NOT NULL,
    dead_lettered bigint      NOT NULL,
    PRIMARY KEY (minute, queue, handler)
);

-- series_minutes lists the minutes rolled up into series_counts, quiet
-- ones included, so that a minute is rolled up once.
CREATE TABLE {schema}.series_minutes (
    minute timestamptz PRIMARY KEY
);

-- series_hours holds the sums of series_counts per hour, queue and handler,
-- for the hours listed in series_hours_done; written once, like
-- series_counts.
CREATE TABLE {schema}.series_hours (
    hour          timestamptz NOT NULL,
    queue         text        NOT NULL,
    handler       text        NOT NULL,
    attempts      bigint      NOT NULL,
    successes     bigint      NOT NULL,
    retryable     bigint      NOT NULL,
    permanent     bigint      NOT NULL,
    dead_lettered bigint      NOT NULL,
    PRIMARY KEY (hour, queue, handler)
);

CREATE TABLE {schema}.series_hours_done (
    hour timestamptz PRIMARY KEY
);
