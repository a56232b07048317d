package io.github.srjn45.rdq;

/** A classifier's verdict on a failure; see {@link Policy.Builder#classify}. */
public enum ErrorClass {
    /** Leaves the decision to the rest of the policy. */
    DEFAULT,
    /** Retries the task per the backoff schedule, even a permanent failure. */
    RETRYABLE,
    /** Dead-letters the task at once. */
    PERMANENT
}
