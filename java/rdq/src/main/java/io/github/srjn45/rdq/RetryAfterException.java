package io.github.srjn45.rdq;

import java.time.Duration;
import java.util.Objects;

/**
 * Thrown by a handler to ask for the next attempt no sooner than a given delay
 * (a rate limit's Retry-After, say), overriding the policy's backoff for this
 * attempt. Attempts still count: when they are exhausted the task goes dead.
 * When it wraps a cause, the recorded error type and message are the cause's.
 */
public class RetryAfterException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final Duration after;

    /** A retryable failure described by a message, to retry after {@code after}. */
    public RetryAfterException(Duration after, String message) {
        super(message);
        this.after = clamp(after);
    }

    /** Marks cause as retryable after {@code after}. */
    public RetryAfterException(Duration after, Throwable cause) {
        super(cause == null ? null : cause.getMessage(), cause);
        this.after = clamp(after);
    }

    private static Duration clamp(Duration d) {
        Objects.requireNonNull(d, "after");
        return d.isNegative() ? Duration.ZERO : d;
    }

    /** The delay requested before the next attempt; never negative. */
    public Duration after() {
        return after;
    }
}
