package io.github.srjn45.rdq;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * Decides what happens to a task after a failed attempt: a retry after a
 * backoff, or the dead-letter queue. It is the same policy, with the same
 * formula and defaults, as Go's {@code rdq.Policy}; the shared vectors in
 * {@code testdata/conformance/backoff.json} hold both to it.
 *
 * <p>The backoff for attempt n (1-based, counted in the task's current life) is
 * {@code delay(n) = min(initialBackoff × multiplier^(n-1), max(maxBackoff, initialBackoff))},
 * and the delay applied is spread downwards by jitter: {@code delay(n) - delay(n)×jitter×u}
 * for u drawn uniformly in [0, 1).
 */
public final class Policy {
    /**
     * The stored attempt budget ({@link Task#maxAttempts()}, the envelope's
     * {@code max_attempts}) of a task that retries until it succeeds or fails
     * permanently. Builders ask for it with {@link Builder#unlimitedAttempts()},
     * {@link Builder#anyTaskMaxAttempts()} and {@link NewTask.Builder#unlimitedAttempts()}.
     */
    public static final int UNLIMITED = -1;
    /** Default attempts per life. */
    public static final int DEFAULT_MAX_ATTEMPTS = 20;
    /** Default delay after the first failed attempt. */
    public static final Duration DEFAULT_INITIAL_BACKOFF = Duration.ofSeconds(1);
    /** Default growth of the delay per attempt. */
    public static final double DEFAULT_MULTIPLIER = 2.0;
    /** Default cap of the delay. */
    public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofHours(1);
    /** Default jitter fraction. */
    public static final double DEFAULT_JITTER = 0.2;

    private final int maxAttempts;
    private final long initialNanos;
    private final double multiplier;
    private final long maxNanos;
    private final double jitter;
    private final @Nullable Function<Throwable, @Nullable ErrorClass> classify;
    private final @Nullable BiFunction<String, String, @Nullable String> fingerprint;
    private final int taskMaxAttempts;
    private final Duration taskMaxTimeout;
    private final int maxSnoozes;

    /**
     * The most attempts a task may ask for at submission ({@link NewTask.Builder#maxAttempts})
     * unless the queue's policy says otherwise ({@link Builder#taskMaxAttempts}), as Go's
     * rdq.DefaultTaskMaxAttempts.
     */
    public static final int DEFAULT_TASK_MAX_ATTEMPTS = 100;
    /**
     * The longest timeout a task may ask for at submission ({@link NewTask.Builder#timeout})
     * unless the queue's policy says otherwise ({@link Builder#taskMaxTimeout}), as Go's
     * rdq.DefaultTaskMaxTimeout.
     */
    public static final Duration DEFAULT_TASK_MAX_TIMEOUT = Duration.ofHours(1);
    /**
     * How many times a task may snooze ({@link SnoozeException}) in one life without
     * spending an attempt, unless the queue's policy says otherwise
     * ({@link Builder#maxSnoozes}), as Go's rdq.DefaultMaxSnoozes.
     */
    public static final int DEFAULT_MAX_SNOOZES = 50;

    // After the defaults above, which the builder reads.
    private static final Policy DEFAULTS = builder().build();

    private Policy(Policy p, int maxAttempts) {
        this.maxAttempts = maxAttempts;
        this.initialNanos = p.initialNanos;
        this.multiplier = p.multiplier;
        this.maxNanos = p.maxNanos;
        this.jitter = p.jitter;
        this.classify = p.classify;
        this.fingerprint = p.fingerprint;
        this.taskMaxAttempts = p.taskMaxAttempts;
        this.taskMaxTimeout = p.taskMaxTimeout;
        this.maxSnoozes = p.maxSnoozes;
    }

    /**
     * This policy with the task's own attempt budget, if it has one, in place of
     * maxAttempts, lowered to {@link #taskMaxAttempts()}.
     */
    public Policy forTask(Task t) {
        if (t.maxAttempts().isEmpty()) {
            return this;
        }
        int n = t.maxAttempts().getAsInt();
        if (taskMaxAttempts != UNLIMITED && (n == UNLIMITED || n > taskMaxAttempts)) {
            n = taskMaxAttempts;
        }
        return new Policy(this, n);
    }

    /**
     * The timeout of one execution of t: its own, lowered to {@link #taskMaxTimeout()},
     * if it has one; else queueTimeout (empty: none).
     */
    public Optional<Duration> taskTimeout(Task t, Optional<Duration> queueTimeout) {
        Objects.requireNonNull(t, "Policy.taskTimeout: the task is null");
        Objects.requireNonNull(queueTimeout, "Policy.taskTimeout: the queue's timeout is null; pass Optional.empty() for none");
        return t.timeout().map(own -> own.compareTo(taskMaxTimeout) > 0 ? taskMaxTimeout : own).or(() -> queueTimeout);
    }

    /**
     * Checks a task's own attempt budget and timeout against this policy's bounds,
     * as Go's Policy.CheckTask: a budget from 1 to {@link #taskMaxAttempts()} (or
     * {@link #UNLIMITED} if that is empty), a timeout at most {@link #taskMaxTimeout()}.
     *
     * @throws InvalidInputException naming the bound the task exceeds and what to do
     */
    void checkTask(OptionalInt maxAttempts, Optional<Duration> timeout) {
        if (maxAttempts.isPresent()) {
            int n = maxAttempts.getAsInt();
            int limit = taskMaxAttempts;
            if (n == UNLIMITED && limit != UNLIMITED) {
                throw new InvalidInputException("rdq: invalid input: the task asks for unlimited attempts (NewTask.Builder.unlimitedAttempts), "
                        + "but the queue allows a task at most " + limit
                        + " attempts (Policy.Builder.taskMaxAttempts); ask for at most " + limit
                        + ", or leave it unset for the queue's budget");
            }
            if (limit != UNLIMITED && n > limit) {
                throw new InvalidInputException("rdq: invalid input: NewTask.Builder.maxAttempts(" + n + ") is over the queue's limit of "
                        + limit + " (Policy.Builder.taskMaxAttempts); ask for at most " + limit
                        + ", or raise the limit in the queue's policy");
            }
        }
        if (timeout.isPresent() && timeout.get().compareTo(taskMaxTimeout) > 0) {
            throw new InvalidInputException("rdq: invalid input: NewTask.Builder.timeout(" + GoDurations.format(timeout.get())
                    + ") is over the queue's limit of " + GoDurations.format(taskMaxTimeout)
                    + " (Policy.Builder.taskMaxTimeout); ask for at most " + GoDurations.format(taskMaxTimeout)
                    + ", or raise the limit in the queue's policy");
        }
    }

    /** Whether a task that snoozed n times in its current life may snooze again without spending an attempt. */
    public boolean canSnooze(int n) {
        return n < maxSnoozes;
    }

    /** The most attempts a task may ask for at submission; empty when any budget is allowed, unlimited included. */
    public OptionalInt taskMaxAttempts() {
        return taskMaxAttempts == UNLIMITED ? OptionalInt.empty() : OptionalInt.of(taskMaxAttempts);
    }

    /** The longest timeout a task may ask for at submission. */
    public Duration taskMaxTimeout() {
        return taskMaxTimeout;
    }

    /** How many times a task may snooze in one life without spending an attempt. */
    public int maxSnoozes() {
        return maxSnoozes;
    }

    private Policy(Builder b) {
        this.maxAttempts = b.maxAttempts;
        this.initialNanos = b.initialNanos;
        this.multiplier = b.multiplier;
        this.maxNanos = b.maxNanos;
        this.jitter = b.jitter;
        this.classify = b.classify;
        this.fingerprint = b.fingerprint;
        this.taskMaxAttempts = b.taskMaxAttempts;
        this.taskMaxTimeout = b.taskMaxTimeout;
        this.maxSnoozes = b.maxSnoozes;
    }

    /** The policy with every default. */
    public static Policy defaults() {
        return DEFAULTS;
    }

    /** A builder whose unset settings keep the defaults (the {@code DEFAULT_} constants). */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Builds a {@link Policy}. An unset setting keeps its default; there is no
     * value meaning "the default": a setter refuses null with a
     * {@link NullPointerException} and a value out of its range with an
     * {@link InvalidInputException}, each naming the setter.
     */
    public static final class Builder {
        private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
        private long initialNanos = DEFAULT_INITIAL_BACKOFF.toNanos();
        private double multiplier = DEFAULT_MULTIPLIER;
        private long maxNanos = DEFAULT_MAX_BACKOFF.toNanos();
        private double jitter = DEFAULT_JITTER;
        private @Nullable Function<Throwable, @Nullable ErrorClass> classify;
        private @Nullable BiFunction<String, String, @Nullable String> fingerprint;
        private int taskMaxAttempts = DEFAULT_TASK_MAX_ATTEMPTS;
        private Duration taskMaxTimeout = DEFAULT_TASK_MAX_TIMEOUT;
        private int maxSnoozes = DEFAULT_MAX_SNOOZES;

        private Builder() {}

        /**
         * The most attempts a single task may ask for at submission
         * ({@link NewTask.Builder#maxAttempts}); {@link #DEFAULT_TASK_MAX_ATTEMPTS}
         * when unset. A client given this policy ({@link RdqClient.Builder#policy})
         * refuses a task that asks for more; a worker lowers a stored budget above
         * it to it.
         *
         * @throws InvalidInputException if n is not positive
         */
        public Builder taskMaxAttempts(int n) {
            if (n < 1) {
                throw new InvalidInputException("rdq: invalid input: Policy.Builder.taskMaxAttempts(" + n
                        + "): use a positive number, or Policy.Builder.anyTaskMaxAttempts() to allow any budget"
                        + " (leave it unset for " + DEFAULT_TASK_MAX_ATTEMPTS + ")");
            }
            this.taskMaxAttempts = n;
            return this;
        }

        /** Lets a task ask for any attempt budget at submission, unlimited included. */
        public Builder anyTaskMaxAttempts() {
            this.taskMaxAttempts = UNLIMITED;
            return this;
        }

        /**
         * The longest execution timeout a single task may ask for at submission
         * ({@link NewTask.Builder#timeout}); {@link #DEFAULT_TASK_MAX_TIMEOUT} when
         * unset. A client given this policy refuses a longer one; a worker lowers a
         * stored one to it.
         *
         * @throws InvalidInputException if d is not positive
         */
        public Builder taskMaxTimeout(Duration d) {
            this.taskMaxTimeout = positive("taskMaxTimeout", d, DEFAULT_TASK_MAX_TIMEOUT);
            return this;
        }

        /**
         * How many times a task may snooze ({@link SnoozeException}) in one life
         * without spending an attempt; {@link #DEFAULT_MAX_SNOOZES} when unset. Beyond
         * it a snooze is recorded as a failed attempt of type "snoozed". Zero makes
         * every snooze such an attempt.
         *
         * @throws InvalidInputException if n is negative
         */
        public Builder maxSnoozes(int n) {
            if (n < 0) {
                throw new InvalidInputException("rdq: invalid input: Policy.Builder.maxSnoozes(" + n
                        + ") is negative: use 0 or more (leave it unset for " + DEFAULT_MAX_SNOOZES + ")");
            }
            this.maxSnoozes = n;
            return this;
        }

        /**
         * Attempts per life, the first included; {@link #DEFAULT_MAX_ATTEMPTS} when unset.
         *
         * @throws InvalidInputException if n is not positive
         */
        public Builder maxAttempts(int n) {
            if (n < 1) {
                throw new InvalidInputException("rdq: invalid input: Policy.Builder.maxAttempts(" + n
                        + "): use a positive number, or Policy.Builder.unlimitedAttempts() for no limit"
                        + " (leave it unset for " + DEFAULT_MAX_ATTEMPTS + ")");
            }
            this.maxAttempts = n;
            return this;
        }

        /** No limit on attempts: a task is retried until it succeeds or fails permanently. */
        public Builder unlimitedAttempts() {
            this.maxAttempts = UNLIMITED;
            return this;
        }

        /**
         * The delay after the first failed attempt; {@link #DEFAULT_INITIAL_BACKOFF} when unset.
         *
         * @throws InvalidInputException if d is not positive
         */
        public Builder initialBackoff(Duration d) {
            this.initialNanos = nanos(positive("initialBackoff", d, DEFAULT_INITIAL_BACKOFF));
            return this;
        }

        /**
         * The growth of the delay per attempt, a finite number of at least 1 (1: a
         * constant delay); {@link #DEFAULT_MULTIPLIER} when unset.
         *
         * @throws InvalidInputException if m is below 1, infinite or NaN
         */
        public Builder multiplier(double m) {
            if (!(m >= 1) || Double.isInfinite(m)) {
                throw new InvalidInputException("rdq: invalid input: Policy.Builder.multiplier(" + m
                        + "): use a finite number of at least 1 (leave it unset for " + DEFAULT_MULTIPLIER + ")");
            }
            this.multiplier = m;
            return this;
        }

        /**
         * The cap of the delay; {@link #DEFAULT_MAX_BACKOFF} when unset. A cap below
         * the initial backoff makes every delay the initial backoff.
         *
         * @throws InvalidInputException if d is not positive
         */
        public Builder maxBackoff(Duration d) {
            this.maxNanos = nanos(positive("maxBackoff", d, DEFAULT_MAX_BACKOFF));
            return this;
        }

        /**
         * The fraction in [0, 1] by which a delay may be shortened; 0 for no
         * jitter, {@link #DEFAULT_JITTER} when unset.
         *
         * @throws InvalidInputException if j is outside [0, 1] or NaN
         */
        public Builder jitter(double j) {
            if (!(j >= 0 && j <= 1)) {
                throw new InvalidInputException("rdq: invalid input: Policy.Builder.jitter(" + j
                        + "): use a fraction in [0, 1], 0 for no jitter (leave it unset for " + DEFAULT_JITTER + ")");
            }
            this.jitter = j;
            return this;
        }

        /**
         * A classifier asked about every failure before the defaults; its null
         * answer leaves the failure to them.
         */
        public Builder classify(Function<Throwable, @Nullable ErrorClass> c) {
            this.classify = Objects.requireNonNull(c, "Policy.Builder.classify: the classifier is null");
            return this;
        }

        /**
         * Replaces the default fingerprint of this queue's failures: given the
         * error type and the capped message, it returns the text that identifies
         * the cause; failures with equal text share a fingerprint (the first 16
         * hex digits of its SHA-256). Null, empty or an exception falls back to
         * {@link Failures#fingerprint}. The same hook as Go's Policy.Fingerprint.
         */
        public Builder fingerprint(BiFunction<String, String, @Nullable String> f) {
            this.fingerprint = Objects.requireNonNull(f, "Policy.Builder.fingerprint: the function is null");
            return this;
        }

        /** Builds the policy; every setting was checked by its setter. */
        public Policy build() {
            return new Policy(this);
        }

        private static Duration positive(String method, Duration d, Duration dflt) {
            Objects.requireNonNull(d, () -> "Policy.Builder." + method + ": the duration is null; leave it unset for "
                    + GoDurations.format(dflt));
            if (d.isNegative() || d.isZero()) {
                throw new InvalidInputException("rdq: invalid input: Policy.Builder." + method + "(" + GoDurations.format(d)
                        + ") is not positive (leave it unset for " + GoDurations.format(dflt) + ")");
            }
            return d;
        }

        private static long nanos(Duration d) {
            try {
                return d.toNanos();
            } catch (ArithmeticException e) {
                return Long.MAX_VALUE;
            }
        }
    }

    /**
     * Describes a failure as {@link Failures#describe} does, with the fingerprint
     * computed by this policy's fingerprint function when it has one.
     */
    public @Nullable Failure describe(@Nullable Throwable t) {
        Failure f = Failures.describe(t);
        if (f == null || fingerprint == null) {
            return f;
        }
        String text;
        try {
            text = fingerprint.apply(f.type(), f.message());
        } catch (RuntimeException e) {
            text = null;
        }
        if (text == null || text.isEmpty()) {
            return f;
        }
        return new Failure(f.type(), f.message(), f.stack(), Failures.hashFingerprint(text));
    }

    /** Attempts per life; empty when unlimited. */
    public OptionalInt maxAttempts() {
        return maxAttempts == UNLIMITED ? OptionalInt.empty() : OptionalInt.of(maxAttempts);
    }

    /** The delay after the first failed attempt. */
    public Duration initialBackoff() {
        return Duration.ofNanos(initialNanos);
    }

    /** The growth of the delay per attempt. */
    public double multiplier() {
        return multiplier;
    }

    /** The cap of the delay. */
    public Duration maxBackoff() {
        return Duration.ofNanos(maxNanos);
    }

    /** The fraction by which a delay may be shortened; 0 for none. */
    public double jitter() {
        return jitter;
    }

    /** The backoff after failed attempt n, before jitter, in nanoseconds. */
    public long delayNanos(int n) {
        long initial = initialNanos;
        double mult = multiplier;
        long ceiling = maxNanos;
        if (n < 1) {
            n = 1;
        }
        double d = (double) initial * Math.pow(mult, (double) (n - 1));
        if (d >= (double) ceiling || Double.isInfinite(d) || Double.isNaN(d)) {
            return Math.max(ceiling, initial);
        }
        return (long) d;
    }

    /** The backoff after failed attempt n, before jitter. */
    public Duration delay(int n) {
        return Duration.ofNanos(delayNanos(n));
    }

    /**
     * {@code delay(n)} shortened by the fraction jitter×u, for u in [0, 1); pure:
     * the same n and u always give the same delay, in nanoseconds.
     */
    public long jitteredDelayNanos(int n, double u) {
        long d = delayNanos(n);
        if (u < 0 || Double.isNaN(u)) {
            u = 0;
        }
        if (u >= 1) {
            u = Math.nextDown(1.0);
        }
        return d - (long) ((double) d * jitter * u);
    }

    /** {@code delay(n)} shortened by the fraction jitter×u. */
    public Duration jitteredDelay(int n, double u) {
        return Duration.ofNanos(jitteredDelayNanos(n, u));
    }

    /**
     * Applies the policy to the result of attempt n (1-based in the current
     * life; n counts this attempt): null is success; the classifier's verdict,
     * else a {@link PermanentException} in the cause chain, dead-letters at once;
     * attempts exhausted dead-letters; a {@link RetryAfterException} retries after
     * its delay; anything else retries after {@code jitteredDelay(n, u)}.
     */
    public Decision decide(int n, @Nullable Throwable err, double u) {
        if (err == null) {
            return new Decision(Outcome.SUCCESS, false, Duration.ZERO);
        }
        ErrorClass c = ErrorClass.DEFAULT;
        if (classify != null) {
            ErrorClass v = classify.apply(err);
            if (v != null) {
                c = v;
            }
        }
        if (c == ErrorClass.DEFAULT && Failures.isPermanent(err)) {
            c = ErrorClass.PERMANENT;
        }
        if (c == ErrorClass.PERMANENT) {
            return new Decision(Outcome.PERMANENT_FAILURE, true, Duration.ZERO);
        }
        return retryOrDie(n, err, u, Outcome.RETRYABLE_FAILURE);
    }

    /** Applies the policy after attempt n was lost to an expired lease. */
    public Decision decideLeaseExpired(int n, double u) {
        return retryOrDie(n, null, u, Outcome.LEASE_EXPIRED);
    }

    private Decision retryOrDie(int n, @Nullable Throwable err, double u, Outcome outcome) {
        if (maxAttempts != UNLIMITED && n >= maxAttempts) {
            return new Decision(outcome, true, Duration.ZERO);
        }
        Duration after = Failures.retryAfterOf(err).orElse(null);
        if (after != null) {
            return new Decision(outcome, false, after);
        }
        return new Decision(outcome, false, jitteredDelay(n, u));
    }

    /** Whether a task that made n attempts in its current life may not be attempted again. */
    public boolean exhausted(int n) {
        return maxAttempts != UNLIMITED && n >= maxAttempts;
    }
}
