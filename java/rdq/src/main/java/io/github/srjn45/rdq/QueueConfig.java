package io.github.srjn45.rdq;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * How a worker runs one queue: its policy, concurrency, lease, heartbeat and
 * timeout. The defaults are Go's {@code worker.QueueConfig}'s.
 */
public final class QueueConfig {
    /** Default handlers running at once per queue on one worker. */
    public static final int DEFAULT_CONCURRENCY = 10;
    /** Default lease. */
    public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);
    /** Default handler timeout. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(1);

    final Policy policy;
    final int concurrency;
    final Duration lease;
    final Duration heartbeat;
    final Optional<Duration> timeout;
    final @Nullable Breaker breaker; // null: none

    private QueueConfig(Builder b, Duration heartbeat) {
        this.policy = b.policy;
        this.concurrency = b.concurrency;
        this.lease = b.lease;
        this.heartbeat = heartbeat;
        this.timeout = b.timeout;
        this.breaker = b.breaker;
    }

    /** The queue's circuit breaker, if it has one. */
    public Optional<Breaker> breaker() {
        return Optional.ofNullable(breaker);
    }

    /** The configuration with every default. */
    public static QueueConfig defaults() {
        return builder().build();
    }

    /** A builder whose unset settings keep the defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /** The retry policy. */
    public Policy policy() {
        return policy;
    }

    /** Handlers running at once for this queue on one worker. */
    public int concurrency() {
        return concurrency;
    }

    /** How long a claim holds a task without a heartbeat. */
    public Duration lease() {
        return lease;
    }

    /** How often running executions extend their lease. */
    public Duration heartbeatInterval() {
        return heartbeat;
    }

    /** The bound on one execution; empty when handlers run without one. */
    public Optional<Duration> timeout() {
        return timeout;
    }

    /**
     * Builds a {@link QueueConfig}. An unset setting keeps its default; there is
     * no value meaning "the default": a setter refuses null with a
     * {@link NullPointerException} and a zero or negative value with an
     * {@link InvalidInputException}, each naming the setter.
     */
    public static final class Builder {
        private Policy policy = Policy.defaults();
        private int concurrency = DEFAULT_CONCURRENCY;
        private Duration lease = DEFAULT_LEASE;
        private Optional<Duration> heartbeat = Optional.empty();
        private Optional<Duration> timeout = Optional.of(DEFAULT_TIMEOUT);
        private @Nullable Breaker breaker;

        private Builder() {}

        /**
         * Turns on the queue's circuit breaker ({@link Breaker}, Go's
         * {@code QueueConfig.Breaker}); a queue has none unless set.
         * {@code Breaker.defaults()} turns it on with Go's defaults.
         */
        public Builder breaker(Breaker b) {
            this.breaker = Objects.requireNonNull(b, "QueueConfig.Builder.breaker: the breaker is null; leave it unset for none");
            return this;
        }

        /** The retry policy; {@link Policy#defaults()} when unset. */
        public Builder policy(Policy p) {
            this.policy = Objects.requireNonNull(p, "QueueConfig.Builder.policy: the policy is null; leave it unset for Policy.defaults()");
            return this;
        }

        /**
         * Handlers running at once for this queue on this worker; {@link #DEFAULT_CONCURRENCY} when unset.
         *
         * @throws InvalidInputException if n is not positive
         */
        public Builder concurrency(int n) {
            if (n < 1) {
                throw new InvalidInputException("rdq: invalid input: QueueConfig.Builder.concurrency(" + n
                        + ") is not positive (leave it unset for " + DEFAULT_CONCURRENCY + ")");
            }
            this.concurrency = n;
            return this;
        }

        /**
         * How long a claim holds a task without a heartbeat; {@link #DEFAULT_LEASE} when unset.
         *
         * @throws InvalidInputException if d is not positive
         */
        public Builder lease(Duration d) {
            this.lease = positive("lease", d, "leave it unset for " + GoDurations.format(DEFAULT_LEASE));
            return this;
        }

        /**
         * How often running executions extend their lease, shorter than the lease
         * (checked by {@link #build()}); a third of the lease when unset.
         *
         * @throws InvalidInputException if d is not positive
         */
        public Builder heartbeatInterval(Duration d) {
            this.heartbeat = Optional.of(positive("heartbeatInterval", d, "leave it unset for a third of the lease"));
            return this;
        }

        /**
         * The bound on one execution: a handler still running after it is
         * interrupted and the attempt fails with type "timeout";
         * {@link #DEFAULT_TIMEOUT} when unset, {@link #noTimeout()} for none.
         *
         * @throws InvalidInputException if d is not positive
         */
        public Builder timeout(Duration d) {
            this.timeout = Optional.of(positive("timeout", d, "use noTimeout() for none, or leave it unset for "
                    + GoDurations.format(DEFAULT_TIMEOUT)));
            return this;
        }

        /** Handlers run without a bound (a task's own timeout still applies to it). */
        public Builder noTimeout() {
            this.timeout = Optional.empty();
            return this;
        }

        /**
         * Builds the configuration.
         *
         * @throws InvalidInputException if the heartbeat interval is not shorter than
         *     the lease, or the lease is too short to heartbeat
         */
        public QueueConfig build() {
            Duration hb = heartbeat.orElse(lease.dividedBy(3));
            if (hb.compareTo(lease) >= 0) {
                throw new InvalidInputException("rdq: invalid input: QueueConfig.Builder.heartbeatInterval("
                        + GoDurations.format(hb) + ") must be shorter than the lease (" + GoDurations.format(lease) + ")");
            }
            if (hb.toMillis() < 1) {
                throw new InvalidInputException("rdq: invalid input: QueueConfig.Builder.lease(" + GoDurations.format(lease)
                        + ") is too short to heartbeat: give a heartbeat interval of at least 1ms shorter than it");
            }
            return new QueueConfig(this, hb);
        }

        private static Duration positive(String method, Duration d, String hint) {
            Objects.requireNonNull(d, () -> "QueueConfig.Builder." + method + ": the duration is null; " + hint);
            if (d.isZero() || d.isNegative()) {
                throw new InvalidInputException("rdq: invalid input: QueueConfig.Builder." + method + "("
                        + GoDurations.format(d) + ") is not positive; " + hint);
            }
            return d;
        }
    }
}
