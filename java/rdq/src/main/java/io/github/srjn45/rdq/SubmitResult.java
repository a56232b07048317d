package io.github.srjn45.rdq;

/**
 * The result of submitting a task.
 *
 * @param task      the stored task: the new one, or the earlier one it duplicates
 * @param duplicate true when a task with the same idempotency key (or ID) existed,
 *                  and nothing new was stored
 */
public record SubmitResult(Task task, boolean duplicate) {}
