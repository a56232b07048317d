package io.github.srjn45.rdq;

/** Where a task is in its life; stored as the enum's name. */
public enum Status {
    /** Waiting for its next attempt to become due and be claimed. */
    PENDING,
    /** Claimed by a worker under a lease. */
    IN_FLIGHT,
    /** An attempt succeeded; final until the task is purged. */
    SUCCEEDED,
    /** In the dead-letter queue: failed permanently or ran out of attempts. */
    DEAD;

    static Status parse(String s) {
        try {
            return valueOf(s);
        } catch (IllegalArgumentException e) {
            throw new RdqException("rdq: unknown task status \"" + s + "\" in the database: upgrade the Java SDK");
        }
    }
}
