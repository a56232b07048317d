package io.github.srjn45.rdq;

import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.UUID;
import org.jspecify.annotations.Nullable;

/**
 * A snapshot of a task as stored: what was submitted and where it is in its
 * life. Instants are null where Go's zero time would be (never set).
 *
 * @param id               the task's ID
 * @param queue            the queue it belongs to
 * @param handler          the name of the handler that executes it
 * @param payload          the payload bytes (empty, never null)
 * @param contentType      the payload's content type; may be empty
 * @param headers          string headers, such as trace context (empty, never null)
 * @param idempotencyKey   the submitter's key; empty when none
 * @param status           where the task is
 * @param attempts         attempts made in the current life
 * @param life             0, plus one per redrive
 * @param nextAttemptAt    when it is (or was) due
 * @param leaseToken       the fencing token: greater for every new execution
 * @param leaseExpiresAt   when the current lease expires, if in flight
 * @param leaseOwner       the worker holding or last holding the lease
 * @param createdAt        when it was submitted
 * @param updatedAt        its last change
 * @param finishedAt       when it succeeded or went dead
 * @param lastErrorType    the last failure's type
 * @param lastErrorMessage the last failure's message
 * @param lastErrorFingerprint the last failure's fingerprint
 * @param maxAttempts      the task's own attempt budget per life, if it was given one at
 *                         submission (at least 1, or {@link Policy#UNLIMITED} for none); empty: its
 *                         queue's applies
 * @param timeout          the task's own execution timeout, if it was given one at submission
 *                         (positive); empty: its queue's applies
 * @param snoozes          the times the task snoozed in its current life without spending an attempt
 */
public record Task(UUID id, String queue, String handler, byte[] payload, String contentType,
        Map<String, String> headers, String idempotencyKey, Status status, int attempts, int life,
        @Nullable Instant nextAttemptAt, long leaseToken, @Nullable Instant leaseExpiresAt, String leaseOwner,
        @Nullable Instant createdAt, @Nullable Instant updatedAt, @Nullable Instant finishedAt, String lastErrorType, String lastErrorMessage,
        String lastErrorFingerprint, OptionalInt maxAttempts, Optional<Duration> timeout, int snoozes) {

    /**
     * Checks the task's own budget and timeout.
     *
     * @throws NullPointerException  if maxAttempts or timeout is null (empty means the queue's)
     * @throws InvalidInputException if maxAttempts holds neither a count from 1 nor
     *                               {@link Policy#UNLIMITED}, or timeout holds a duration that is not positive
     */
    public Task {
        Objects.requireNonNull(maxAttempts, "Task: maxAttempts is null; use OptionalInt.empty() for the queue's budget");
        Objects.requireNonNull(timeout, "Task: timeout is null; use Optional.empty() for the queue's timeout");
        if (maxAttempts.isPresent() && maxAttempts.getAsInt() < 1 && maxAttempts.getAsInt() != Policy.UNLIMITED) {
            throw new InvalidInputException("rdq: invalid input: task " + id + ": maxAttempts " + maxAttempts.getAsInt()
                    + " is neither a count from 1 nor Policy.UNLIMITED; use OptionalInt.empty() for the queue's budget");
        }
        if (timeout.isPresent() && (timeout.get().isZero() || timeout.get().isNegative())) {
            throw new InvalidInputException("rdq: invalid input: task " + id + ": timeout " + timeout.get()
                    + " is not positive; use Optional.empty() for the queue's timeout");
        }
    }

    /** The number, in the current life, of the next attempt: attempts + 1. */
    public int nextAttempt() {
        return attempts + 1;
    }

    @Override
    public String toString() {
        return "task " + id + " (queue " + queue + ", handler " + handler + ", " + status + ")";
    }
}
