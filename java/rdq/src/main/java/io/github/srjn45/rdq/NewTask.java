package io.github.srjn45.rdq;

import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import org.jspecify.annotations.Nullable;

/**
 * A task to submit with {@link RdqClient}. Build one with {@link #builder}.
 * Validation happens at submit time, with the same limits as Go.
 */
public final class NewTask {
    final String queue;
    final String handler;
    final byte[] payload;
    final String contentType;
    final Map<String, String> headers;
    final String idempotencyKey;
    final Duration delay;
    final @Nullable Instant runAt;
    final @Nullable Throwable firstFailure;
    final java.util.@Nullable UUID id;
    final OptionalInt maxAttempts;
    final Optional<Duration> timeout;

    private NewTask(Builder b) {
        this.maxAttempts = b.maxAttempts;
        this.timeout = b.timeout;
        this.id = b.id;
        this.queue = b.queue;
        this.handler = b.handler;
        this.payload = b.payload;
        this.contentType = b.contentType;
        this.headers = Map.copyOf(b.headers);
        this.idempotencyKey = b.idempotencyKey;
        this.delay = b.delay;
        this.runAt = b.runAt;
        this.firstFailure = b.firstFailure;
    }

    /**
     * The task's own attempt budget per life, if it asks for one ({@link Policy#UNLIMITED}
     * when it asked for {@link Builder#unlimitedAttempts()}); else its queue's policy decides.
     */
    public OptionalInt maxAttempts() {
        return maxAttempts;
    }

    /** The task's own limit on one execution, if it asks for one; else its queue's timeout applies. */
    public Optional<Duration> timeout() {
        return timeout;
    }

    /** A builder for a task of the given queue, executed by the handler registered under that name. */
    public static Builder builder(String queue, String handler) {
        return new Builder(queue, handler);
    }

    /** Builds a {@link NewTask}. */
    public static final class Builder {
        private final String queue;
        private final String handler;
        private byte[] payload = new byte[0];
        private String contentType = "";
        private final Map<String, String> headers = new LinkedHashMap<>();
        private String idempotencyKey = "";
        private Duration delay = Duration.ZERO;
        private @Nullable Instant runAt;
        private @Nullable Throwable firstFailure;
        private java.util.@Nullable UUID id;
        private OptionalInt maxAttempts = OptionalInt.empty();
        private Optional<Duration> timeout = Optional.empty();

        private Builder(String queue, String handler) {
            this.queue = Objects.requireNonNull(queue, "NewTask.builder: the queue is null");
            this.handler = Objects.requireNonNull(handler, "NewTask.builder: the handler is null");
        }

        /**
         * The task's ID, chosen by the caller (a UUID; a new UUIDv7 by default):
         * submitting the same ID again returns the existing task as a duplicate,
         * so a retried submission is safe.
         */
        public Builder id(java.util.UUID id) {
            this.id = Objects.requireNonNull(id, "NewTask.Builder.id: the ID is null; leave it unset for a new UUIDv7");
            return this;
        }

        /** The payload bytes, at most 1 MiB; copied; null for none. */
        public Builder payload(byte @Nullable [] p) {
            this.payload = p == null ? new byte[0] : p.clone();
            return this;
        }

        /** The payload as UTF-8 text. */
        public Builder payload(String text) {
            Objects.requireNonNull(text, "NewTask.Builder.payload: the text is null; pass bytes, or leave it unset for none");
            return payload(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }

        /** The payload's content type, such as "application/json"; null or empty for none. */
        public Builder contentType(@Nullable String ct) {
            this.contentType = ct == null ? "" : ct;
            return this;
        }

        /** Adds a header (at most 64). */
        public Builder header(String name, String value) {
            Objects.requireNonNull(name, "NewTask.Builder.header: the name is null");
            Objects.requireNonNull(value, () -> "NewTask.Builder.header: the value of \"" + name + "\" is null");
            headers.put(name, value);
            return this;
        }

        /** Adds headers. */
        public Builder headers(Map<String, String> h) {
            Objects.requireNonNull(h, "NewTask.Builder.headers: the map is null");
            h.forEach(this::header);
            return this;
        }

        /**
         * A key that makes the submission idempotent within the queue: a second
         * submission with the same key returns the first task, marked duplicate.
         * Null or empty for none.
         */
        public Builder idempotencyKey(@Nullable String key) {
            this.idempotencyKey = key == null ? "" : key;
            return this;
        }

        /** Postpones the first attempt by d, measured on the database's clock. */
        public Builder delay(Duration d) {
            this.delay = Objects.requireNonNull(d, "NewTask.Builder.delay: the delay is null; leave it unset to run at once");
            this.runAt = null;
            return this;
        }

        /**
         * Makes the first attempt due at t: submitted as the delay from now on
         * this JVM's clock (at least zero), then measured on the database's clock.
         */
        public Builder runAt(Instant t) {
            this.runAt = Objects.requireNonNull(t, "NewTask.Builder.runAt: the instant is null; leave it unset to run at once");
            this.delay = Duration.ZERO;
            return this;
        }

        /**
         * Records a failure the submitter already had as attempt 1 of the task:
         * a {@link PermanentException} (anywhere in the cause chain) puts the task
         * straight into the dead-letter queue, anything else makes it a retry.
         * Null for none.
         */
        public Builder firstFailure(@Nullable Throwable t) {
            this.firstFailure = t;
            return this;
        }

        /**
         * The task's own attempt budget per life, in place of its queue policy's
         * maxAttempts ({@link #unlimitedAttempts()} for no limit). It is stored with the task (a worker in Go or Java uses it) and
         * must be within the queue's bound ({@link Policy.Builder#taskMaxAttempts},
         * {@link Policy#DEFAULT_TASK_MAX_ATTEMPTS} unless the policy given to the
         * client for the queue says otherwise), checked at submission.
         *
         * @throws InvalidInputException if n is not positive
         */
        public Builder maxAttempts(int n) {
            if (n < 1) {
                throw new InvalidInputException("rdq: invalid input: NewTask.Builder.maxAttempts(" + n
                        + "): use a positive number, or NewTask.Builder.unlimitedAttempts() for no limit;"
                        + " leave it unset for the queue's budget");
            }
            this.maxAttempts = OptionalInt.of(n);
            return this;
        }

        /**
         * No limit on this task's attempts, in place of its queue policy's
         * maxAttempts; refused at submission unless the queue allows any budget
         * ({@link Policy.Builder#anyTaskMaxAttempts()} on the policy given to the client).
         */
        public Builder unlimitedAttempts() {
            this.maxAttempts = OptionalInt.of(Policy.UNLIMITED);
            return this;
        }

        /**
         * How long one execution of this task may run, in place of its queue's
         * timeout. It is stored with the task and must be at most the queue's bound
         * ({@link Policy.Builder#taskMaxTimeout}, {@link Policy#DEFAULT_TASK_MAX_TIMEOUT}
         * unless the policy given to the client for the queue says otherwise), checked
         * at submission.
         *
         * @throws InvalidInputException if d is shorter than a microsecond, the store's resolution
         */
        public Builder timeout(Duration d) {
            Objects.requireNonNull(d, "NewTask.Builder.timeout: the timeout is null; leave it unset for the queue's timeout");
            if (d.compareTo(Duration.ofNanos(1000)) < 0) {
                throw new InvalidInputException("rdq: invalid input: NewTask.Builder.timeout(" + GoDurations.format(d)
                        + "): use a positive duration of at least 1µs, or leave it unset for the queue's timeout");
            }
            this.timeout = Optional.of(d);
            return this;
        }

        /** The task. */
        public NewTask build() {
            return new NewTask(this);
        }
    }
}
