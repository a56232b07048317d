package io.github.srjn45.rdq;

import java.time.Duration;

/**
 * What a policy says to do with a task after an attempt.
 *
 * @param outcome recorded on the attempt
 * @param dead    true when the task goes to the dead-letter queue
 * @param retryIn the delay before the next attempt when the task is retried
 */
public record Decision(Outcome outcome, boolean dead, Duration retryIn) {}
