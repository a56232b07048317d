package io.github.srjn45.rdq;

/**
 * Executes one task. Returning normally is success. Throwing fails the attempt:
 * a {@link PermanentException} sends the task to the dead-letter queue at once,
 * a {@link RetryAfterException} asks for the next attempt no sooner than its
 * delay, and any other exception (or error) is retried on the queue's backoff
 * schedule until attempts are exhausted. The recorded error type is the
 * exception's class name unless it implements {@link ErrorTyped}.
 *
 * <p>The handler's thread is interrupted when the queue's timeout passes (the
 * attempt then fails with {@link HandlerTimeoutException}), when the worker
 * loses the task's lease (the result is discarded: the task belongs to another
 * execution now), or when a stopping worker's grace period ends (the task is
 * released without counting an attempt). {@link TaskContext#cancelReason()}
 * says which. Handlers should return promptly when interrupted.
 *
 * <p>Delivery is at-least-once: handlers must be idempotent. The lease token
 * ({@link TaskContext#leaseToken()}) is strictly greater for every new execution
 * of a task, and can fence writes downstream.
 */
@FunctionalInterface
public interface Handler {
    /** Executes the task described by ctx. */
    void handle(TaskContext ctx) throws Exception;
}
