package io.github.srjn45.rdq;

/**
 * Implemented by an exception that names its own error type for grouping and
 * filtering in the dead-letter queue, instead of its class name. It mirrors the
 * {@code ErrorType() string} method of Go errors, so a Java and a Go handler
 * failing the same way can share a type (for instance "timeout").
 */
public interface ErrorTyped {
    /** The error type; an empty string falls back to the class name. */
    String errorType();
}
