package io.github.srjn45.rdq;

/** The result of one attempt, as recorded in a task's history. */
public enum Outcome {
    /** The handler returned normally. */
    SUCCESS,
    /** The handler failed and may be retried. */
    RETRYABLE_FAILURE,
    /** The handler failed in a way retrying cannot fix. */
    PERMANENT_FAILURE,
    /** The worker died or lost the lease; the execution was lost. */
    LEASE_EXPIRED,
    /** An operator cancelled the waiting task into the dead-letter queue. */
    CANCELLED;

    static Outcome parse(String s) {
        try {
            return valueOf(s);
        } catch (IllegalArgumentException e) {
            throw new RdqException("rdq: unknown attempt outcome \"" + s + "\" in the database: upgrade the Java SDK");
        }
    }
}
