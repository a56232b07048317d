package io.github.srjn45.rdq;

import java.time.Duration;

/**
 * The failure of a handler that did not return within its queue's timeout. It
 * is retryable like any other failure, and its error type is "timeout", as in Go.
 */
public final class HandlerTimeoutException extends RuntimeException implements ErrorTyped {
    private static final long serialVersionUID = 1L;
    private final Duration after;

    /** Creates the failure for the timeout that was exceeded. */
    public HandlerTimeoutException(Duration after) {
        super("handler timed out after " + GoDurations.format(after));
        this.after = after;
    }

    /** The timeout that was exceeded. */
    public Duration after() {
        return after;
    }

    @Override
    public String errorType() {
        return "timeout";
    }
}
