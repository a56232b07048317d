package io.github.srjn45.rdq;

import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

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
    final Instant runAt;
    final Throwable firstFailure;
    final java.util.UUID id;

    private NewTask(Builder b) {
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
        private Instant runAt;
        private Throwable firstFailure;
        private java.util.UUID id;

        private Builder(String queue, String handler) {
            this.queue = Objects.requireNonNull(queue, "queue");
            this.handler = Objects.requireNonNull(handler, "handler");
        }

        /**
         * The task's ID, chosen by the caller (a UUID; a new UUIDv7 by default):
         * submitting the same ID again returns the existing task as a duplicate,
         * so a retried submission is safe.
         */
        public Builder id(java.util.UUID id) {
            this.id = Objects.requireNonNull(id, "id");
            return this;
        }

        /** The payload bytes, at most 1 MiB; copied. */
        public Builder payload(byte[] p) {
            this.payload = p == null ? new byte[0] : p.clone();
            return this;
        }

        /** The payload as UTF-8 text. */
        public Builder payload(String text) {
            return payload(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }

        /** The payload's content type, such as "application/json". */
        public Builder contentType(String ct) {
            this.contentType = ct == null ? "" : ct;
            return this;
        }

        /** Adds a header (at most 64). */
        public Builder header(String name, String value) {
            headers.put(name, value);
            return this;
        }

        /** Adds headers. */
        public Builder headers(Map<String, String> h) {
            headers.putAll(h);
            return this;
        }

        /**
         * A key that makes the submission idempotent within the queue: a second
         * submission with the same key returns the first task, marked duplicate.
         */
        public Builder idempotencyKey(String key) {
            this.idempotencyKey = key == null ? "" : key;
            return this;
        }

        /** Postpones the first attempt by d, measured on the database's clock. */
        public Builder delay(Duration d) {
            this.delay = Objects.requireNonNull(d, "delay");
            this.runAt = null;
            return this;
        }

        /**
         * Makes the first attempt due at t: submitted as the delay from now on
         * this JVM's clock (at least zero), then measured on the database's clock.
         */
        public Builder runAt(Instant t) {
            this.runAt = Objects.requireNonNull(t, "runAt");
            this.delay = Duration.ZERO;
            return this;
        }

        /**
         * Records a failure the submitter already had as attempt 1 of the task:
         * a {@link PermanentException} (anywhere in the cause chain) puts the task
         * straight into the dead-letter queue, anything else makes it a retry.
         */
        public Builder firstFailure(Throwable t) {
            this.firstFailure = t;
            return this;
        }

        /** The task. */
        public NewTask build() {
            return new NewTask(this);
        }
    }
}
