package io.github.srjn45.rdq;

import java.time.Duration;
import java.time.Instant;
import java.util.Map;
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
 * @param maxAttempts      the task's own attempt budget per life, set at submission; 0 for the
 *                         queue's, {@link Policy#UNLIMITED} for none
 * @param timeout          the task's own execution timeout, set at submission; zero for the queue's
 * @param snoozes          the times the task snoozed in its current life without spending an attempt
 */
public record Task(UUID id, String queue, String handler, byte[] payload, String contentType,
        Map<String, String> headers, String idempotencyKey, Status status, int attempts, int life,
        @Nullable Instant nextAttemptAt, long leaseToken, @Nullable Instant leaseExpiresAt, String leaseOwner,
        @Nullable Instant createdAt, @Nullable Instant updatedAt, @Nullable Instant finishedAt, String lastErrorType, String lastErrorMessage,
        String lastErrorFingerprint, int maxAttempts, Duration timeout, int snoozes) {

    /** Normalizes: timeout never null. */
    public Task(UUID id, String queue, String handler, byte[] payload, String contentType,
            Map<String, String> headers, String idempotencyKey, Status status, int attempts, int life,
            @Nullable Instant nextAttemptAt, long leaseToken, @Nullable Instant leaseExpiresAt, String leaseOwner,
            @Nullable Instant createdAt, @Nullable Instant updatedAt, @Nullable Instant finishedAt,
            String lastErrorType, String lastErrorMessage, String lastErrorFingerprint, int maxAttempts,
            @Nullable Duration timeout, int snoozes) {
        this.id = id;
        this.queue = queue;
        this.handler = handler;
        this.payload = payload;
        this.contentType = contentType;
        this.headers = headers;
        this.idempotencyKey = idempotencyKey;
        this.status = status;
        this.attempts = attempts;
        this.life = life;
        this.nextAttemptAt = nextAttemptAt;
        this.leaseToken = leaseToken;
        this.leaseExpiresAt = leaseExpiresAt;
        this.leaseOwner = leaseOwner;
        this.createdAt = createdAt;
        this.updatedAt = updatedAt;
        this.finishedAt = finishedAt;
        this.lastErrorType = lastErrorType;
        this.lastErrorMessage = lastErrorMessage;
        this.lastErrorFingerprint = lastErrorFingerprint;
        this.maxAttempts = maxAttempts;
        this.timeout = timeout == null ? Duration.ZERO : timeout;
        this.snoozes = snoozes;
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
