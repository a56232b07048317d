package io.github.srjn45.rdq;

/**
 * A classified failure, ready to be recorded as an attempt.
 *
 * @param type        the error type: {@link ErrorTyped#errorType()} or the class name
 * @param message     the error text, capped at {@link Failures#MAX_MESSAGE_BYTES}
 * @param stack       the stack trace, capped at {@link Failures#MAX_STACK_BYTES}; empty if none
 * @param fingerprint {@link Failures#fingerprint(String, String)} of type and message
 */
public record Failure(String type, String message, String stack, String fingerprint) {}
