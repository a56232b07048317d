package io.github.srjn45.rdq;

import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import java.util.function.Consumer;

/**
 * A selection of live tasks for {@link RdqAdmin#listTasks}, as Go's
 * {@code tasks.Filter}: every field that is set must match (AND); an empty
 * filter selects every task of the state listed. The fields mean what they
 * mean in {@link DeadFilter}, with its bounds; a task that never failed has
 * no error type, fingerprint or message. Immutable; build one with
 * {@link #builder()}.
 *
 * <pre>{@code
 * TaskFilter f = TaskFilter.builder().queue("emails").messageContains("503").build();
 * }</pre>
 */
public final class TaskFilter {
    private static final TaskFilter ALL = builder().build();

    /** The same conditions as a dead-task filter: pgstore renders them alike. */
    final DeadFilter conditions;

    private TaskFilter(DeadFilter conditions) {
        this.conditions = conditions;
    }

    /** A builder of a filter with no field set. */
    public static Builder builder() {
        return new Builder();
    }

    /** The filter that selects every task of the state listed. */
    public static TaskFilter all() {
        return ALL;
    }

    /** The tasks named, each once; empty when the filter names none. */
    public List<UUID> ids() {
        return conditions.ids();
    }

    /** The queue the tasks must be in. */
    public Optional<String> queue() {
        return conditions.queue();
    }

    /** The handler the tasks must have. */
    public Optional<String> handler() {
        return conditions.handler();
    }

    /** The type of the tasks' last error, matched exactly. */
    public Optional<String> errorType() {
        return conditions.errorType();
    }

    /** The fingerprint of the tasks' last error. */
    public Optional<String> fingerprint() {
        return conditions.fingerprint();
    }

    /** A case-insensitive substring of the tasks' last error message. */
    public Optional<String> messageContains() {
        return conditions.messageContains();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TaskFilter f && conditions.equals(f.conditions);
    }

    @Override
    public int hashCode() {
        return conditions.hashCode();
    }

    /** The filter as JSON, the set fields only. */
    @Override
    public String toString() {
        return conditions.toString();
    }

    /**
     * Builds a {@link TaskFilter}. A value out of bounds throws
     * {@link InvalidInputException} saying what was wrong; a null value throws
     * {@link NullPointerException} naming the setter.
     */
    public static final class Builder {
        private final DeadFilter.Builder b = DeadFilter.builder();

        private Builder() {}

        /** Limits the selection to these tasks (duplicates count once; at most {@link DeadFilter#MAX_IDS}). */
        public Builder ids(Collection<UUID> taskIds) {
            Objects.requireNonNull(taskIds, "TaskFilter.Builder.ids: taskIds is null");
            return set(f -> f.ids(taskIds));
        }

        /** The queue the tasks must be in. */
        public Builder queue(String name) {
            Objects.requireNonNull(name, "TaskFilter.Builder.queue: name is null");
            return set(f -> f.queue(name));
        }

        /** The handler the tasks must have. */
        public Builder handler(String name) {
            Objects.requireNonNull(name, "TaskFilter.Builder.handler: name is null");
            return set(f -> f.handler(name));
        }

        /** The type of the tasks' last error, e.g. {@code java.net.ConnectException}. */
        public Builder errorType(String type) {
            Objects.requireNonNull(type, "TaskFilter.Builder.errorType: type is null");
            return set(f -> f.errorType(type));
        }

        /** The fingerprint of the tasks' last error, hexadecimal. */
        public Builder fingerprint(String hex) {
            Objects.requireNonNull(hex, "TaskFilter.Builder.fingerprint: hex is null");
            return set(f -> f.fingerprint(hex));
        }

        /** A case-insensitive substring of the tasks' last error message. */
        public Builder messageContains(String text) {
            Objects.requireNonNull(text, "TaskFilter.Builder.messageContains: text is null");
            return set(f -> f.messageContains(text));
        }

        /** Builds the filter. */
        public TaskFilter build() {
            return new TaskFilter(b.build());
        }

        private Builder set(Consumer<DeadFilter.Builder> field) {
            try {
                field.accept(b);
            } catch (InvalidInputException e) {
                throw new InvalidInputException(e.getMessage().replace("invalid input: DeadFilter: ", "invalid input: TaskFilter: "));
            }
            return this;
        }
    }
}
