package io.github.srjn45.rdq.spring;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The {@code rdq.*} properties. Every property left unset takes the SDK
 * builder's default. A zero or negative value where a positive one is needed,
 * or two properties that contradict each other, fail the application's start
 * naming the property (zero never means "the default"); other values out of
 * range fail it with the SDK's message.
 *
 * <pre>
 * rdq.migrate=true
 * rdq.worker.shutdown-timeout=20s
 * rdq.queues.emails.concurrency=20
 * rdq.queues.emails.timeout=2m
 * rdq.queues.emails.policy.max-attempts=8
 * rdq.queues.emails.policy.initial-backoff=1s
 * </pre>
 */
@ConfigurationProperties(prefix = "rdq")
public class RdqProperties {
    /** The PostgreSQL schema holding rdq's tables. */
    private String schema = "rdq";

    /**
     * Whether to create or upgrade rdq's schema when the application starts.
     * Off by default: in production the schema is upgraded by a deploy step
     * (a migration job, "rdq migrate", Flyway) with a user allowed DDL, before
     * new instances start; with it off, an application whose schema is not
     * migrated fails at start saying so.
     */
    private boolean migrate;

    /**
     * How long an idempotency key outlives its purged task, for the client and
     * the worker; the SDK's default (7 days) when unset.
     */
    private @Nullable Duration keyRetention;

    /** The worker. */
    private final Worker worker = new Worker();

    /**
     * The queues the worker runs, by name, with their configuration. A queue
     * named only by a handler ({@code @RdqHandler(queues = ...)}) runs with the
     * defaults.
     */
    private final Map<String, Queue> queues = new LinkedHashMap<>();

    /** The schema. */
    public String getSchema() {
        return schema;
    }

    /** Sets the schema. */
    public void setSchema(String schema) {
        this.schema = schema;
    }

    /** Whether to migrate on start. */
    public boolean isMigrate() {
        return migrate;
    }

    /** Sets whether to migrate on start. */
    public void setMigrate(boolean migrate) {
        this.migrate = migrate;
    }

    /** The key retention, or null for the SDK's default. */
    public @Nullable Duration getKeyRetention() {
        return keyRetention;
    }

    /** Sets the key retention. */
    public void setKeyRetention(@Nullable Duration keyRetention) {
        this.keyRetention = keyRetention;
    }

    /** The worker's properties. */
    public Worker getWorker() {
        return worker;
    }

    /** The queues' properties by queue name. */
    public Map<String, Queue> getQueues() {
        return queues;
    }

    /** The {@code rdq.worker.*} properties. */
    public static class Worker {
        /**
         * Whether to run a worker when handler beans exist. Turn it off in an
         * application that only submits, or to run the worker elsewhere.
         */
        private boolean enabled = true;

        /** Whether the worker starts with the application context. */
        private boolean autoStartup = true;

        /** The worker's ID in leases, history and logs; hostname-pid-random when unset. */
        private @Nullable String id;

        /**
         * How long the worker waits, when the context closes, for running
         * handlers to finish before interrupting them and releasing their tasks.
         */
        private Duration shutdownTimeout = Duration.ofSeconds(30);

        /** How often each queue is polled when no notification arrives; the SDK's default (1s) when unset. */
        private @Nullable Duration pollInterval;

        /** How often expired leases are reclaimed; the SDK's default (10s) when unset. */
        private @Nullable Duration reclaimInterval;

        /** How often old succeeded tasks are purged; the SDK's default (1m) when unset. */
        private @Nullable Duration purgeInterval;

        /** How long succeeded tasks are kept; the SDK's default (24h) when unset. */
        private @Nullable Duration succeededTtl;

        /** Whether the worker is on. */
        public boolean isEnabled() {
            return enabled;
        }

        /** Sets whether the worker is on. */
        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        /** Whether the worker starts with the context. */
        public boolean isAutoStartup() {
            return autoStartup;
        }

        /** Sets whether the worker starts with the context. */
        public void setAutoStartup(boolean autoStartup) {
            this.autoStartup = autoStartup;
        }

        /** The worker ID, or null for the SDK's. */
        public @Nullable String getId() {
            return id;
        }

        /** Sets the worker ID. */
        public void setId(@Nullable String id) {
            this.id = id;
        }

        /** The grace period at shutdown. */
        public Duration getShutdownTimeout() {
            return shutdownTimeout;
        }

        /** Sets the grace period at shutdown. */
        public void setShutdownTimeout(Duration shutdownTimeout) {
            this.shutdownTimeout = shutdownTimeout;
        }

        /** The poll interval, or null for the SDK's default. */
        public @Nullable Duration getPollInterval() {
            return pollInterval;
        }

        /** Sets the poll interval. */
        public void setPollInterval(@Nullable Duration pollInterval) {
            this.pollInterval = pollInterval;
        }

        /** The reclaim interval, or null for the SDK's default. */
        public @Nullable Duration getReclaimInterval() {
            return reclaimInterval;
        }

        /** Sets the reclaim interval. */
        public void setReclaimInterval(@Nullable Duration reclaimInterval) {
            this.reclaimInterval = reclaimInterval;
        }

        /** The purge interval, or null for the SDK's default. */
        public @Nullable Duration getPurgeInterval() {
            return purgeInterval;
        }

        /** Sets the purge interval. */
        public void setPurgeInterval(@Nullable Duration purgeInterval) {
            this.purgeInterval = purgeInterval;
        }

        /** How long succeeded tasks are kept, or null for the SDK's default. */
        public @Nullable Duration getSucceededTtl() {
            return succeededTtl;
        }

        /** Sets how long succeeded tasks are kept. */
        public void setSucceededTtl(@Nullable Duration succeededTtl) {
            this.succeededTtl = succeededTtl;
        }
    }

    /** The {@code rdq.queues.<name>.*} properties. */
    public static class Queue {
        /** Handlers running at once for this queue on this worker; the SDK's default (10) when unset. */
        private @Nullable Integer concurrency;

        /** How long a claim holds a task without a heartbeat; the SDK's default (30s) when unset. */
        private @Nullable Duration lease;

        /** How often running executions extend their lease; a third of the lease when unset. */
        private @Nullable Duration heartbeatInterval;

        /** Bound on one execution; the SDK's default (1m) when unset. */
        private @Nullable Duration timeout;

        /** Whether handlers of this queue run without a deadline (then leave timeout unset). */
        private boolean noTimeout;

        /** The queue's retry policy. */
        private final Policy policy = new Policy();

        /** The queue's circuit breaker, per handler. */
        private final Breaker breaker = new Breaker();

        /** Concurrency, or null for the default. */
        public @Nullable Integer getConcurrency() {
            return concurrency;
        }

        /** Sets the concurrency. */
        public void setConcurrency(@Nullable Integer concurrency) {
            this.concurrency = concurrency;
        }

        /** The lease, or null for the default. */
        public @Nullable Duration getLease() {
            return lease;
        }

        /** Sets the lease. */
        public void setLease(@Nullable Duration lease) {
            this.lease = lease;
        }

        /** The heartbeat interval, or null for the default. */
        public @Nullable Duration getHeartbeatInterval() {
            return heartbeatInterval;
        }

        /** Sets the heartbeat interval. */
        public void setHeartbeatInterval(@Nullable Duration heartbeatInterval) {
            this.heartbeatInterval = heartbeatInterval;
        }

        /** The handler timeout, or null for the default. */
        public @Nullable Duration getTimeout() {
            return timeout;
        }

        /** Sets the handler timeout. */
        public void setTimeout(@Nullable Duration timeout) {
            this.timeout = timeout;
        }

        /** Whether handlers run without a deadline. */
        public boolean isNoTimeout() {
            return noTimeout;
        }

        /** Sets whether handlers run without a deadline. */
        public void setNoTimeout(boolean noTimeout) {
            this.noTimeout = noTimeout;
        }

        /** The policy's properties. */
        public Policy getPolicy() {
            return policy;
        }

        /** The breaker's properties. */
        public Breaker getBreaker() {
            return breaker;
        }
    }

    /**
     * The {@code rdq.queues.<name>.breaker.*} properties: a circuit breaker per
     * handler of the queue ({@link io.github.srjn45.rdq.Breaker}), off unless
     * enabled; each value left unset is the SDK's default.
     */
    public static class Breaker {
        /** Whether the queue's handlers pause when one cause fails many tasks. */
        private boolean enabled;

        /** How far back attempts count; the SDK's default (1m) when unset. */
        private @Nullable Duration window;

        /** Distinct tasks failed with one cause that trip it; the SDK's default (10) when unset. */
        private @Nullable Integer minFailedTasks;

        /** The failed share of attempts that trips it, in (0, 1]; the SDK's default (0.5) when unset. */
        private @Nullable Double failureRatio;

        /** How long the first pause lasts before a probe; the SDK's default (30s) when unset. */
        private @Nullable Duration coolOff;

        /** The cap of the cool-off as it doubles; the SDK's default (10m) when unset. */
        private @Nullable Duration maxCoolOff;

        /** Whether the breaker is on. */
        public boolean isEnabled() {
            return enabled;
        }

        /** Turns the breaker on or off. */
        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        /** The window, or null for the default. */
        public @Nullable Duration getWindow() {
            return window;
        }

        /** Sets the window. */
        public void setWindow(@Nullable Duration window) {
            this.window = window;
        }

        /** The failed tasks that trip it, or null for the default. */
        public @Nullable Integer getMinFailedTasks() {
            return minFailedTasks;
        }

        /** Sets the failed tasks that trip it. */
        public void setMinFailedTasks(@Nullable Integer minFailedTasks) {
            this.minFailedTasks = minFailedTasks;
        }

        /** The failure ratio, or null for the default. */
        public @Nullable Double getFailureRatio() {
            return failureRatio;
        }

        /** Sets the failure ratio. */
        public void setFailureRatio(@Nullable Double failureRatio) {
            this.failureRatio = failureRatio;
        }

        /** The first cool-off, or null for the default. */
        public @Nullable Duration getCoolOff() {
            return coolOff;
        }

        /** Sets the first cool-off. */
        public void setCoolOff(@Nullable Duration coolOff) {
            this.coolOff = coolOff;
        }

        /** The cool-off's cap, or null for the default. */
        public @Nullable Duration getMaxCoolOff() {
            return maxCoolOff;
        }

        /** Sets the cool-off's cap. */
        public void setMaxCoolOff(@Nullable Duration maxCoolOff) {
            this.maxCoolOff = maxCoolOff;
        }

        boolean anySet() {
            return window != null || minFailedTasks != null || failureRatio != null || coolOff != null || maxCoolOff != null;
        }
    }

    /** The {@code rdq.queues.<name>.policy.*} properties. */
    public static class Policy {
        /** Attempts per life, the first included; the SDK's default (20) when unset. */
        private @Nullable Integer maxAttempts;

        /** Whether tasks retry without limit (then leave max-attempts unset). */
        private boolean unlimitedAttempts;

        /** The delay after the first failed attempt; the SDK's default (1s) when unset. */
        private @Nullable Duration initialBackoff;

        /** The growth of the delay per attempt, at least 1; the SDK's default (2) when unset. */
        private @Nullable Double multiplier;

        /** The cap of the delay; the SDK's default (1h) when unset. */
        private @Nullable Duration maxBackoff;

        /** The fraction in [0, 1] by which a delay may be shortened, 0 for none; the SDK's default (0.2) when unset. */
        private @Nullable Double jitter;

        /** The most attempts a single task may ask for at submission; the SDK's default (100) when unset. */
        private @Nullable Integer taskMaxAttempts;

        /** The longest timeout a single task may ask for at submission; the SDK's default (1h) when unset. */
        private @Nullable Duration taskMaxTimeout;

        /** How many times a task may snooze in one life without spending an attempt; the SDK's default (50) when unset. */
        private @Nullable Integer maxSnoozes;

        /** Max attempts, or null for the default. */
        public @Nullable Integer getMaxAttempts() {
            return maxAttempts;
        }

        /** Sets max attempts. */
        public void setMaxAttempts(@Nullable Integer maxAttempts) {
            this.maxAttempts = maxAttempts;
        }

        /** Whether attempts are unlimited. */
        public boolean isUnlimitedAttempts() {
            return unlimitedAttempts;
        }

        /** Sets whether attempts are unlimited. */
        public void setUnlimitedAttempts(boolean unlimitedAttempts) {
            this.unlimitedAttempts = unlimitedAttempts;
        }

        /** The initial backoff, or null for the default. */
        public @Nullable Duration getInitialBackoff() {
            return initialBackoff;
        }

        /** Sets the initial backoff. */
        public void setInitialBackoff(@Nullable Duration initialBackoff) {
            this.initialBackoff = initialBackoff;
        }

        /** The multiplier, or null for the default. */
        public @Nullable Double getMultiplier() {
            return multiplier;
        }

        /** Sets the multiplier. */
        public void setMultiplier(@Nullable Double multiplier) {
            this.multiplier = multiplier;
        }

        /** The max backoff, or null for the default. */
        public @Nullable Duration getMaxBackoff() {
            return maxBackoff;
        }

        /** Sets the max backoff. */
        public void setMaxBackoff(@Nullable Duration maxBackoff) {
            this.maxBackoff = maxBackoff;
        }

        /** The jitter, or null for the default. */
        public @Nullable Double getJitter() {
            return jitter;
        }

        /** Sets the jitter. */
        public void setJitter(@Nullable Double jitter) {
            this.jitter = jitter;
        }

        /** The per-task attempt bound, or null for the default. */
        public @Nullable Integer getTaskMaxAttempts() {
            return taskMaxAttempts;
        }

        /** Sets the per-task attempt bound. */
        public void setTaskMaxAttempts(@Nullable Integer taskMaxAttempts) {
            this.taskMaxAttempts = taskMaxAttempts;
        }

        /** The per-task timeout bound, or null for the default. */
        public @Nullable Duration getTaskMaxTimeout() {
            return taskMaxTimeout;
        }

        /** Sets the per-task timeout bound. */
        public void setTaskMaxTimeout(@Nullable Duration taskMaxTimeout) {
            this.taskMaxTimeout = taskMaxTimeout;
        }

        /** The snooze bound, or null for the default. */
        public @Nullable Integer getMaxSnoozes() {
            return maxSnoozes;
        }

        /** Sets the snooze bound. */
        public void setMaxSnoozes(@Nullable Integer maxSnoozes) {
            this.maxSnoozes = maxSnoozes;
        }
    }
}
