package io.github.srjn45.rdq;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.jspecify.annotations.Nullable;

/** What a {@link Handler} gets for one execution: the claimed task and its cancellation state. */
public final class TaskContext {
    /** Why an execution was interrupted. */
    public enum CancelReason {
        /** The queue's timeout passed. */
        TIMEOUT,
        /** The worker lost the task's lease; the result will be discarded. */
        LEASE_LOST,
        /** The worker is stopping and its grace period ended; the task will be released. */
        STOPPING
    }

    private final Task task;
    private final String workerId;
    volatile CancelReason reason;

    TaskContext(Task task, String workerId) {
        this.task = task;
        this.workerId = workerId;
    }

    /** A snapshot of the claimed task; {@code task().attempts()} counts attempts before this one. */
    public Task task() {
        return task;
    }

    /** The task's ID. */
    public UUID id() {
        return task.id();
    }

    /** The payload bytes. */
    public byte[] payload() {
        return task.payload();
    }

    /** The payload decoded as UTF-8. */
    public String payloadText() {
        return new String(task.payload(), StandardCharsets.UTF_8);
    }

    /** The task's headers. */
    public Map<String, String> headers() {
        return task.headers();
    }

    /** The number of this attempt in the task's current life (1 for the first). */
    public int attempt() {
        return task.nextAttempt();
    }

    /** The fencing token of this execution: strictly greater for every new execution of the task. */
    public long leaseToken() {
        return task.leaseToken();
    }

    /** The ID of the worker running this execution. */
    public String workerId() {
        return workerId;
    }

    /** Why the execution was interrupted; empty while it is not. */
    public Optional<CancelReason> cancelReason() {
        return Optional.ofNullable(reason);
    }

    /** Whether the execution was interrupted; see {@link #cancelReason()}. */
    public boolean isCancelled() {
        return reason != null;
    }

    /**
     * Throws {@link InterruptedException} if the execution was interrupted, for
     * handlers that do work in steps without blocking calls.
     */
    public void checkCancelled() throws InterruptedException {
        CancelReason r = reason;
        if (r != null) {
            throw new InterruptedException("rdq: execution interrupted: " + r);
        }
    }
}
