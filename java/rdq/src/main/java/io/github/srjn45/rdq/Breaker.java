package io.github.srjn45.rdq;

import java.time.Duration;
import java.util.Objects;

/**
 * A queue's circuit breaker policy ({@link QueueConfig.Builder#breaker}), Go's
 * {@code worker.Breaker}: the same defaults, the same decisions, the same store
 * statements and audit entries, so Go and Java workers sharing a queue share
 * its breaker.
 *
 * <p>The worker watches, per handler, the attempts it ran over the last
 * {@link #window()}. When at least {@link #minFailedTasks()} distinct tasks
 * failed with one cause (the same failure fingerprint; retryable failures
 * only) and failed attempts are at least {@link #failureRatio()} of all
 * attempts, the breaker trips: it pauses (queue, handler) in the database, so
 * every worker of either language stops claiming its tasks. After
 * {@link #coolOff()} exactly one worker claims one probe task; if it succeeds
 * (or fails with another cause) the handler resumes, if it fails with the
 * tripping cause the pause starts again with the cool-off doubled, up to
 * {@link #maxCoolOff()}. One task failing again and again counts as one task,
 * and evidence from before a pause or resume never trips the breaker again.
 * Pauses and resumes are audited with actor {@link #ACTOR}.
 */
public final class Breaker {
    /** Default {@link #window()}: one minute. */
    public static final Duration DEFAULT_WINDOW = Duration.ofMinutes(1);
    /** Default {@link #minFailedTasks()}: 10. */
    public static final int DEFAULT_MIN_FAILED_TASKS = 10;
    /** Default {@link #failureRatio()}: 0.5. */
    public static final double DEFAULT_FAILURE_RATIO = 0.5;
    /** Default {@link #coolOff()}: 30 seconds. */
    public static final Duration DEFAULT_COOL_OFF = Duration.ofSeconds(30);
    /** Default {@link #maxCoolOff()}: ten minutes. */
    public static final Duration DEFAULT_MAX_COOL_OFF = Duration.ofMinutes(10);
    /** The actor of the audit entries of the pauses and resumes a breaker makes. */
    public static final String ACTOR = "breaker";

    private final Duration window;
    private final int minFailedTasks;
    private final double failureRatio;
    private final Duration coolOff;
    private final Duration maxCoolOff;

    private Breaker(Builder b) {
        this.window = b.window;
        this.minFailedTasks = b.minFailedTasks;
        this.failureRatio = b.failureRatio;
        this.coolOff = b.coolOff;
        this.maxCoolOff = b.maxCoolOff;
    }

    /** A breaker with every default. */
    public static Breaker defaults() {
        return builder().build();
    }

    /** A builder whose unset settings take the defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /** How far back attempts count. */
    public Duration window() {
        return window;
    }

    /** How many distinct tasks must have failed with the dominant cause within the window. */
    public int minFailedTasks() {
        return minFailedTasks;
    }

    /** The share of failed attempts within the window, in (0, 1], that trips the breaker. */
    public double failureRatio() {
        return failureRatio;
    }

    /** How long the first pause lasts before a probe. */
    public Duration coolOff() {
        return coolOff;
    }

    /** The cap of the cool-off as failed probes double it. */
    public Duration maxCoolOff() {
        return maxCoolOff;
    }

    /** The cool-off after the given number of trips: doubled per trip after the first, capped. */
    Duration coolOff(int trips) {
        Duration d = coolOff;
        for (int i = 1; i < trips && d.compareTo(maxCoolOff) < 0; i++) {
            d = d.multipliedBy(2);
        }
        return d.compareTo(maxCoolOff) < 0 ? d : maxCoolOff;
    }

    @Override
    public String toString() {
        return "Breaker[window=" + GoDurations.format(window) + ", minFailedTasks=" + minFailedTasks + ", failureRatio="
                + failureRatio + ", coolOff=" + GoDurations.format(coolOff) + ", maxCoolOff="
                + GoDurations.format(maxCoolOff) + "]";
    }

    /** Builds a {@link Breaker}; each setter refuses a value out of range at once. */
    public static final class Builder {
        private Duration window = DEFAULT_WINDOW;
        private int minFailedTasks = DEFAULT_MIN_FAILED_TASKS;
        private double failureRatio = DEFAULT_FAILURE_RATIO;
        private Duration coolOff = DEFAULT_COOL_OFF;
        private Duration maxCoolOff = DEFAULT_MAX_COOL_OFF;

        private Builder() {}

        /** How far back attempts count; positive ({@link #DEFAULT_WINDOW} unless set). */
        public Builder window(Duration d) {
            this.window = positive("window", d);
            return this;
        }

        /** Distinct tasks failed with one cause that trip the breaker; at least 1 ({@link #DEFAULT_MIN_FAILED_TASKS}). */
        public Builder minFailedTasks(int n) {
            if (n < 1) {
                throw new InvalidInputException("rdq: invalid input: Breaker.Builder.minFailedTasks: " + n
                        + " is not positive; leave it unset for the default (" + DEFAULT_MIN_FAILED_TASKS + ")");
            }
            this.minFailedTasks = n;
            return this;
        }

        /** The failed share of attempts that trips the breaker, in (0, 1] ({@link #DEFAULT_FAILURE_RATIO}). */
        public Builder failureRatio(double r) {
            if (!(r > 0 && r <= 1)) {
                throw new InvalidInputException("rdq: invalid input: Breaker.Builder.failureRatio: " + r
                        + " is outside (0, 1]; leave it unset for the default (" + DEFAULT_FAILURE_RATIO + ")");
            }
            this.failureRatio = r;
            return this;
        }

        /** How long the first pause lasts before a probe; positive ({@link #DEFAULT_COOL_OFF}). */
        public Builder coolOff(Duration d) {
            this.coolOff = positive("coolOff", d);
            return this;
        }

        /** The cap of the cool-off, not shorter than it; positive ({@link #DEFAULT_MAX_COOL_OFF}). */
        public Builder maxCoolOff(Duration d) {
            this.maxCoolOff = positive("maxCoolOff", d);
            return this;
        }

        /**
         * Builds the breaker.
         *
         * @throws InvalidInputException when maxCoolOff is shorter than coolOff
         */
        public Breaker build() {
            if (maxCoolOff.compareTo(coolOff) < 0) {
                throw new InvalidInputException("rdq: invalid input: Breaker: maxCoolOff " + GoDurations.format(maxCoolOff)
                        + " is shorter than coolOff " + GoDurations.format(coolOff) + "; raise maxCoolOff or lower coolOff");
            }
            return new Breaker(this);
        }

        private static Duration positive(String setter, Duration d) {
            Objects.requireNonNull(d, "Breaker.Builder." + setter + ": the duration is null; leave it unset for the default");
            if (d.isZero() || d.isNegative()) {
                throw new InvalidInputException("rdq: invalid input: Breaker.Builder." + setter + ": "
                        + GoDurations.format(d) + " is not positive; leave it unset for the default");
            }
            return d;
        }
    }
}
