package io.github.srjn45.rdq;

/**
 * The result of submitting a task.
 *
 * @param task      the stored task: the new one, or the earlier one it duplicates
 * @param duplicate true when a task with the same idempotency key (or ID) existed,
 *                  and nothing new was stored
 * @param purged    true for a duplicate whose task no longer exists: retention
 *                  purged it, and its idempotency key is kept for the key
 *                  retention; the task then holds only the original ID, queue,
 *                  idempotency key and creation time
 */
public record SubmitResult(Task task, boolean duplicate, boolean purged) {}
