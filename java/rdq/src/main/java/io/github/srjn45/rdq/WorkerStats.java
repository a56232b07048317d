package io.github.srjn45.rdq;

/**
 * Counts of what a worker did since it started, for health checks and
 * metrics bridges (the SDK depends on no metrics library; export these to
 * yours). Each count only grows.
 *
 * @param claimed          tasks claimed for execution
 * @param succeeded        attempts recorded as successes
 * @param retried          failed attempts recorded with a retry scheduled
 * @param deadLettered     tasks this worker moved to the dead-letter queue
 * @param leasesLost       executions whose lease another worker took over
 * @param released         tasks released at shutdown without an attempt
 * @param reclaimed        expired leases this worker reclaimed
 * @param finishStatements statements that wrote finished attempts (each a batch)
 * @param heartbeatStatements statements that extended leases (each a batch)
 * @param snoozed          tasks snoozed ({@link SnoozeException}) without spending an attempt
 */
public record WorkerStats(long claimed, long succeeded, long retried, long deadLettered, long leasesLost,
        long released, long reclaimed, long finishStatements, long heartbeatStatements, long snoozed) {}
