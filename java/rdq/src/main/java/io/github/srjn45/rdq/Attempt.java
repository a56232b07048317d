package io.github.srjn45.rdq;

import java.time.Instant;
import java.util.UUID;

/**
 * One recorded attempt of a task, numbered across its lives.
 *
 * @param taskId     the task
 * @param number     1, 2, …: one past the highest earlier number, across lives
 * @param life       the life it belongs to
 * @param outcome    what happened
 * @param errorType  the failure's type; empty on success
 * @param message    the failure's message
 * @param stack      the failure's stack trace, if recorded
 * @param workerId   the worker (or client, for a first failure) that recorded it
 * @param leaseToken the fencing token of the execution
 * @param startedAt  when the execution started
 * @param finishedAt when it ended
 */
public record Attempt(UUID taskId, int number, int life, Outcome outcome, String errorType, String message,
        String stack, String workerId, long leaseToken, Instant startedAt, Instant finishedAt) {}
