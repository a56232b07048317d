package io.github.srjn45.rdq;

import java.time.Duration;
import java.util.Objects;

/**
 * How a worker runs one queue: its policy, concurrency, lease, heartbeat and
 * timeout. Zero values take the same defaults as Go's {@code worker.QueueConfig}.
 */
public final class QueueConfig {
    /** Default handlers running at once per queue on one worker. */
    public static final int DEFAULT_CONCURRENCY = 10;
    /** Default lease. */
    public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);
    /** Default handler timeout. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(1);
    /** As timeout: handlers run without a deadline. */
    public static final Duration NO_TIMEOUT = Duration.ofNanos(-1);

    final Policy policy;
    final int concurrency;
    final Duration lease;
    final Duration heartbeat;
    final Duration timeout; // zero: none
    final Breaker breaker; // null: none

    private QueueConfig(Builder b) {
        this.policy = b.policy;
        this.concurrency = b.concurrency;
        this.lease = b.lease;
        this.heartbeat = b.heartbeat;
        this.timeout = b.timeout;
        this.breaker = b.breaker;
    }

    /** The queue's circuit breaker, if it has one. */
    public java.util.Optional<Breaker> breaker() {
        return java.util.Optional.ofNullable(breaker);
    }

    /** The configuration with every default. */
    public static QueueConfig defaults() {
        return builder().build();
    }

    /** A builder whose unset fields take the defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /** Builds a {@link QueueConfig}. */
    public static final class Builder {
        private Policy policy = Policy.defaults();
        private int concurrency;
        private Duration lease = Duration.ZERO;
        private Duration heartbeat = Duration.ZERO;
        private Duration timeout = Duration.ZERO;
        private Breaker breaker;

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

        /** The retry policy; {@link Policy#defaults()} by default. */
        public Builder policy(Policy p) {
            this.policy = Objects.requireNonNull(p, "policy");
            return this;
        }

        /** Handlers running at once for this queue on this worker; 0 for the default (10). */
        public Builder concurrency(int n) {
            this.concurrency = n;
            return this;
        }

        /** How long a claim holds a task without a heartbeat; zero for the default (30s). */
        public Builder lease(Duration d) {
            this.lease = Objects.requireNonNull(d);
            return this;
        }

        /** How often running executions extend their lease, shorter than the lease; zero for lease/3. */
        public Builder heartbeatInterval(Duration d) {
            this.heartbeat = Objects.requireNonNull(d);
            return this;
        }

        /** Bound on one execution; zero for the default (1m), {@link #NO_TIMEOUT} for none. */
        public Builder timeout(Duration d) {
            this.timeout = Objects.requireNonNull(d);
            return this;
        }

        /**
         * Validates and builds the configuration.
         *
         * @throws InvalidInputException for a field out of range
         */
        public QueueConfig build() {
            if (concurrency < 0) {
                throw new InvalidInputException("rdq: invalid input: worker: Concurrency " + concurrency + " is negative");
            }
            if (concurrency == 0) {
                concurrency = DEFAULT_CONCURRENCY;
            }
            if (lease.isNegative()) {
                throw new InvalidInputException("rdq: invalid input: worker: Lease " + GoDurations.format(lease) + " is negative");
            }
            if (lease.isZero()) {
                lease = DEFAULT_LEASE;
            }
            if (heartbeat.isNegative()) {
                throw new InvalidInputException("rdq: invalid input: worker: HeartbeatInterval "
                        + GoDurations.format(heartbeat) + " is negative");
            }
            if (heartbeat.isZero()) {
                heartbeat = lease.dividedBy(3);
            } else if (heartbeat.compareTo(lease) >= 0) {
                throw new InvalidInputException("rdq: invalid input: worker: HeartbeatInterval "
                        + GoDurations.format(heartbeat) + " must be shorter than Lease " + GoDurations.format(lease));
            }
            if (heartbeat.toMillis() < 1) {
                throw new InvalidInputException("rdq: invalid input: worker: Lease " + GoDurations.format(lease)
                        + " is too short to heartbeat");
            }
            if (timeout.equals(NO_TIMEOUT)) {
                timeout = Duration.ZERO;
            } else if (timeout.isNegative()) {
                throw new InvalidInputException("rdq: invalid input: worker: Timeout " + GoDurations.format(timeout)
                        + " is negative (use QueueConfig.NO_TIMEOUT for none)");
            } else if (timeout.isZero()) {
                timeout = DEFAULT_TIMEOUT;
            }
            return new QueueConfig(this);
        }
    }
}
