package io.github.srjn45.rdq;

/**
 * Thrown by a handler (or given as a first failure) to say that retrying cannot
 * fix the failure: the task goes to the dead-letter queue at once, whatever
 * attempts remain. When it wraps a cause, the recorded error type and message
 * are the cause's.
 */
public class PermanentException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** A permanent failure described by a message. */
    public PermanentException(String message) {
        super(message);
    }

    /** Marks cause as permanent; its type and message are recorded. */
    public PermanentException(Throwable cause) {
        super(cause == null ? null : cause.getMessage(), cause);
    }

    /** Marks cause as permanent, with a message of its own. */
    public PermanentException(String message, Throwable cause) {
        super(message, cause);
    }
}
