package io.github.srjn45.rdq;

import java.time.Duration;
import java.util.Objects;

/**
 * Thrown by a handler to say "not yet": the task goes back to waiting and runs
 * again no sooner than {@link #after()} from now, without spending an attempt
 * (unlike {@link RetryAfterException}, which records a failed attempt and counts
 * it). Nothing is added to the task's history; its {@link Task#snoozes()} count
 * grows by one. The same outcome as Go's {@code rdq.Snooze}.
 *
 * <p>A task may snooze {@link Policy#maxSnoozes()} times in one life
 * ({@link Policy#DEFAULT_MAX_SNOOZES} unless the queue's policy says otherwise; a
 * redrive starts a new count). A snooze beyond that is recorded as a failed
 * attempt of type "snoozed", retried after the delay, so a task that never stops
 * snoozing still spends its attempts and reaches the dead-letter queue, where an
 * operator sees it, instead of waiting forever unseen.
 *
 * <pre>{@code
 * w.handle("ship", ctx -> {
 *     if (!warehouse.isOpen()) {
 *         throw new SnoozeException(Duration.ofMinutes(10));
 *     }
 *     warehouse.ship(ctx.payloadText());
 * });
 * }</pre>
 */
public class SnoozeException extends RuntimeException implements ErrorTyped {
    private static final long serialVersionUID = 1L;
    private final Duration after;

    /**
     * Snoozes the task for {@code after}; a negative delay is zero.
     *
     * @throws NullPointerException if after is null
     */
    public SnoozeException(Duration after) {
        super("snoozed for " + GoDurations.format(clamp(after)));
        this.after = clamp(after);
    }

    private static Duration clamp(Duration d) {
        Objects.requireNonNull(d, "after");
        return d.isNegative() ? Duration.ZERO : d;
    }

    /** How long the task waits before it runs again; never negative. */
    public Duration after() {
        return after;
    }

    /** "snoozed", the type of a snooze recorded as an attempt, as in Go. */
    @Override
    public String errorType() {
        return "snoozed";
    }
}
