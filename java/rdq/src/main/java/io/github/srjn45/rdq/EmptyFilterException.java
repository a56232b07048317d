package io.github.srjn45.rdq;

/**
 * A bulk operation was given the empty filter, which selects every dead task,
 * without being told that the whole dead-letter queue is meant (Go's
 * {@code dlq.ErrAllRequired}). Narrow the filter, or say {@code all()} on the
 * operation's options.
 */
public final class EmptyFilterException extends InvalidInputException {
    private static final long serialVersionUID = 1L;

    EmptyFilterException(String method, String allSetter) {
        super("rdq: invalid input: " + method + ": the filter selects every dead task: narrow it, or set "
                + allSetter + " to mean the whole dead-letter queue");
    }
}
