package io.github.srjn45.rdq;

import java.net.InetAddress;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * Claims and executes rdq tasks from PostgreSQL with the same rules as Go's
 * {@code worker.Worker}: per queue, a fetch loop claims up to its free slots
 * and runs each task's handler on a bounded pool; one heartbeat loop extends
 * all running leases in one statement per lease length; one completer writes
 * finished attempts in batches; maintenance reclaims expired leases (recording
 * a LEASE_EXPIRED attempt numbered past the task's highest) and purges old
 * succeeded tasks. It wakes on LISTEN/NOTIFY and polls as a fallback.
 *
 * <pre>{@code
 * Worker w = Worker.builder(dataSource)
 *         .queue("emails", QueueConfig.builder().concurrency(20).build())
 *         .handle("send-welcome", ctx -> mailer.send(ctx.payloadText()))
 *         .build();
 * w.start();
 * ...
 * w.stop(Duration.ofSeconds(30)); // stop claiming, let handlers finish, release the rest
 * }</pre>
 *
 * <p>A worker claims only the tasks of the handlers registered with it: during
 * a rolling deploy, the tasks of a handler only newer workers have wait, PENDING
 * with their budget untouched, for a worker that has it. A worker with no handler
 * refuses to start. It registers itself in the worker registry (pgstore's
 * workers table, listed by {@code rdq workers} and the console) while it runs.
 *
 * <p>A queue with a {@link Breaker} ({@link QueueConfig.Builder#breaker}) has
 * Go's circuit breaker: failures of one cause across enough distinct tasks
 * pause the handler in the database for every worker of either language, and
 * after the cool-off one worker runs one probe task that resumes it or pauses
 * it again, audited as Go audits it.
 *
 * <p>Connections: the worker holds one connection per queue (claims), one each
 * for heartbeats, finishes, maintenance, notifications and the registry, taken
 * from the DataSource and given back at stop. Logs go through SLF4J with the task ID,
 * queue, handler, attempt and worker ID, never payloads; successes are logged at
 * DEBUG, failures at WARN and dead-lettering at ERROR. While a handler runs, its
 * thread's MDC holds {@link #MDC_TASK_ID}, {@link #MDC_QUEUE}, {@link #MDC_HANDLER}
 * and {@link #MDC_ATTEMPT}, so the handler's own log lines carry them.
 */
public final class Worker implements AutoCloseable {
    /** Default poll interval when no notification arrives. */
    public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofSeconds(1);
    /** Default interval between reclaims of expired leases. */
    public static final Duration DEFAULT_RECLAIM_INTERVAL = Duration.ofSeconds(10);
    /** Default interval between purges of old succeeded tasks. */
    public static final Duration DEFAULT_PURGE_INTERVAL = Duration.ofMinutes(1);
    /** Default retention of succeeded tasks. */
    public static final Duration DEFAULT_SUCCEEDED_TTL = Duration.ofHours(24);
    /** Default most finishes written in one statement. */
    public static final int DEFAULT_FINISH_BATCH_SIZE = 1000;
    /** Default longest wait of a finish for its batch. */
    public static final Duration DEFAULT_FINISH_INTERVAL = Duration.ofMillis(10);
    /** The actor named in the audit entries of purges. */
    public static final String PURGE_ACTOR = "rdq-worker";
    /** Default interval between refreshes of the worker's registry entry, as Go's worker.DefaultRegistryInterval. */
    public static final Duration DEFAULT_REGISTRY_INTERVAL = Duration.ofSeconds(10);

    /** The MDC key holding the ID of the task whose handler runs on this thread. */
    public static final String MDC_TASK_ID = "task_id";
    /** The MDC key holding the queue of the task whose handler runs on this thread. */
    public static final String MDC_QUEUE = "queue";
    /** The MDC key holding the handler name of the task whose handler runs on this thread. */
    public static final String MDC_HANDLER = "handler";
    /** The MDC key holding the attempt number the handler on this thread runs. */
    public static final String MDC_ATTEMPT = "attempt";

    private static final Logger LOG = LoggerFactory.getLogger(Worker.class);
    private static final int RECLAIM_BATCH = 100;
    private static final int PURGE_BATCH = 1000;
    private static final int MAINTENANCE_ROUNDS = 10;
    private static final long FINISH_RETRY_FOR_MS = 15_000;
    private static final long ABANDON_AFTER_MS = 1_000;
    /** As Go's worker: an entry is stale after this many missed refreshes... */
    private static final int REGISTRY_STALE_REFRESHES = 3;
    /** ...and removed this long after that. */
    private static final Duration REGISTRY_EXPIRE_AFTER = Duration.ofHours(1);

    private final DataSource dataSource;
    private final PgStore store;
    private final String id;
    private final Duration pollInterval;
    private final @Nullable Duration reclaimInterval; // null: off
    private final @Nullable Duration purgeInterval; // null: off
    private final Duration succeededTtl;
    private final int finishBatch;
    private final Duration finishInterval;
    private final @Nullable Duration registryInterval; // null: off
    private final Metrics metrics;
    private final Tracing tracing;
    private final @Nullable Executor handlerExecutor;
    private ScheduledExecutorService registryTimer;
    private Registry registry;
    private final Map<String, QueueRunner> queues = new TreeMap<>();
    private final Map<String, Handler> handlers = new ConcurrentHashMap<>();
    /** The registered handlers' names, sorted; set by start. A claim takes only their tasks. */
    private volatile String[] handlerNames = new String[0];

    private final Object lock = new Object();
    private State state = State.NEW;

    private enum State { NEW, RUNNING, STOPPING, STOPPED }

    // Running state.
    private volatile boolean stopClaiming;
    private volatile boolean loopsStopped;
    private final List<Thread> loops = new ArrayList<>();
    private Thread heartbeatThread;
    private Thread completerThread;
    private ScheduledExecutorService timers;
    private final Map<Execution, Boolean> running = Collections.synchronizedMap(new IdentityHashMap<>());
    private final List<Execution> interrupted = new ArrayList<>(); // guarded by running
    private final AtomicInteger executing = new AtomicInteger();
    private final AtomicInteger completing = new AtomicInteger();
    private final LinkedBlockingQueue<FinishItem> finishQueue = new LinkedBlockingQueue<>();
    private volatile boolean completerClosed;
    private final java.util.concurrent.atomic.AtomicLongArray counts = new java.util.concurrent.atomic.AtomicLongArray(10);
    private static final int C_CLAIMED = 0;
    private static final int C_SUCCEEDED = 1;
    private static final int C_RETRIED = 2;
    private static final int C_DEAD = 3;
    private static final int C_LOST = 4;
    private static final int C_RELEASED = 5;
    private static final int C_RECLAIMED = 6;
    private static final int C_FINISH_STMTS = 7;
    private static final int C_HEARTBEAT_STMTS = 8;
    private static final int C_SNOOZED = 9;
    private volatile boolean heartbeatStop;
    /** The connection the notification loop listens on, aborted at stop to end its wait at once. */
    private volatile Connection listening;

    private Worker(Builder b) {
        this.dataSource = b.dataSource;
        this.store = new PgStore(b.schema, b.keyRetention);
        this.id = b.id == null || b.id.isEmpty() ? defaultId() : b.id;
        this.pollInterval = b.pollInterval;
        this.reclaimInterval = b.reclaimInterval;
        this.purgeInterval = b.purgeInterval;
        this.succeededTtl = b.succeededTtl;
        this.finishInterval = b.finishInterval;
        this.registryInterval = b.registryInterval;
        this.metrics = b.metrics;
        this.tracing = b.tracing;
        this.handlerExecutor = b.handlerExecutor;
        this.finishBatch = b.finishBatch;
        if (b.queues.isEmpty()) {
            throw new InvalidInputException("rdq: invalid input: Worker.Builder.build: no queue; call queue(name) or "
                    + "queue(name, config) for each queue the worker runs");
        }
        for (Map.Entry<String, QueueConfig> e : b.queues.entrySet()) {
            Limits.validateName("queue", e.getKey());
            queues.put(e.getKey(), new QueueRunner(e.getKey(), e.getValue()));
        }
        for (Map.Entry<String, Handler> e : b.handlers.entrySet()) {
            handle(e.getKey(), e.getValue());
        }
    }

    /**
     * d, checked as the value of Worker.Builder's method: non-null and
     * positive; off names the method turning the job off, if any.
     */
    private static Duration checked(String method, Duration d, @Nullable String off) {
        Objects.requireNonNull(d, () -> "Worker.Builder." + method + ": the duration is null; leave it unset for the default"
                + (off != null ? ", or call Worker.Builder." + off + "() to turn it off" : ""));
        if (d.isZero() || d.isNegative()) {
            throw new InvalidInputException("rdq: invalid input: Worker.Builder." + method + "(" + GoDurations.format(d)
                    + ") is not positive; leave it unset for the default"
                    + (off != null ? ", or call Worker.Builder." + off + "() to turn it off" : ""));
        }
        return d;
    }

    private static String defaultId() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            host = "worker";
        }
        byte[] b = new byte[4];
        new SecureRandom().nextBytes(b);
        return host + "-" + ProcessHandle.current().pid() + "-" + HexFormat.of().formatHex(b);
    }

    /** A builder for a worker claiming from dataSource. */
    public static Builder builder(DataSource dataSource) {
        return new Builder(dataSource);
    }

    /**
     * Configures a {@link Worker}. An unset setting keeps its default (the
     * {@code DEFAULT_} constants, Go's worker's); there is no value meaning
     * "the default": a setter refuses null with a NullPointerException and a
     * zero or negative value with an {@link InvalidInputException}, each
     * naming the setter.
     */
    public static final class Builder {
        private final DataSource dataSource;
        private String schema = PgStore.DEFAULT_SCHEMA;
        private final Map<String, QueueConfig> queues = new LinkedHashMap<>();
        private final Map<String, Handler> handlers = new LinkedHashMap<>();
        private Duration pollInterval = DEFAULT_POLL_INTERVAL;
        private @Nullable Duration reclaimInterval = DEFAULT_RECLAIM_INTERVAL;
        private @Nullable Duration purgeInterval = DEFAULT_PURGE_INTERVAL;
        private Duration succeededTtl = DEFAULT_SUCCEEDED_TTL;
        private int finishBatch = DEFAULT_FINISH_BATCH_SIZE;
        private Duration finishInterval = DEFAULT_FINISH_INTERVAL;
        private Duration keyRetention = PgStore.DEFAULT_KEY_RETENTION;
        private @Nullable Duration registryInterval = DEFAULT_REGISTRY_INTERVAL;
        private Metrics metrics = Metrics.NONE;
        private Tracing tracing = Tracing.NONE;
        private @Nullable Executor handlerExecutor;
        private @Nullable String id;

        private Builder(DataSource ds) {
            this.dataSource = Objects.requireNonNull(ds, "Worker.builder: the DataSource is null");
        }

        /** The PostgreSQL schema holding rdq's tables; "rdq" by default. */
        public Builder schema(String s) {
            this.schema = Objects.requireNonNull(s, "Worker.Builder.schema: the schema is null; leave it unset for \"rdq\"");
            return this;
        }

        /** The worker's ID in leases, history and logs; hostname-pid-random by default. */
        public Builder id(String id) {
            this.id = Objects.requireNonNull(id, "Worker.Builder.id: the ID is null; leave it unset for hostname-pid-random");
            return this;
        }

        /** Runs a queue with the given configuration. */
        public Builder queue(String name, QueueConfig cfg) {
            queues.put(Objects.requireNonNull(name, "Worker.Builder.queue: the queue name is null"),
                    Objects.requireNonNull(cfg, () -> "Worker.Builder.queue: the configuration of \"" + name
                            + "\" is null; call queue(name) for the defaults"));
            return this;
        }

        /** Runs a queue with the default configuration. */
        public Builder queue(String name) {
            return queue(name, QueueConfig.defaults());
        }

        /**
         * Registers a handler by name; see {@link Worker#handle}.
         *
         * @throws IllegalStateException if name is taken
         */
        public Builder handle(String name, Handler h) {
            if (handlers.putIfAbsent(Objects.requireNonNull(name, "Worker.Builder.handle: the handler name is null"),
                    Objects.requireNonNull(h, () -> "Worker.Builder.handle: the handler of \"" + name + "\" is null")) != null) {
                throw new IllegalStateException("rdq: Worker.Builder.handle: a handler is already registered under \"" + name + "\"");
            }
            return this;
        }

        /** How often each queue is polled when no notification arrives; 1s by default. */
        public Builder pollInterval(Duration d) {
            this.pollInterval = checked("pollInterval", d, null);
            return this;
        }

        /** How often expired leases are reclaimed; 10s by default, {@link #disableReclaim()} for never. */
        public Builder reclaimInterval(Duration d) {
            this.reclaimInterval = checked("reclaimInterval", d, "disableReclaim");
            return this;
        }

        /**
         * This worker never reclaims expired leases (another worker of the queue
         * must, or tasks of a worker that died stay in flight).
         */
        public Builder disableReclaim() {
            this.reclaimInterval = null;
            return this;
        }

        /** How often old succeeded tasks are purged; 1m by default, {@link #disablePurge()} for never. */
        public Builder purgeInterval(Duration d) {
            this.purgeInterval = checked("purgeInterval", d, "disablePurge");
            return this;
        }

        /** This worker never purges old succeeded tasks. */
        public Builder disablePurge() {
            this.purgeInterval = null;
            return this;
        }

        /** How long succeeded tasks are kept; 24h by default. */
        public Builder succeededTtl(Duration d) {
            this.succeededTtl = checked("succeededTtl", d, null);
            return this;
        }

        /**
         * How long the idempotency keys of purged tasks are kept before this
         * worker's purges delete them; 7 days by default, as pgstore's
         * Config.KeyRetention. Give every client and worker of a schema the same value.
         */
        public Builder keyRetention(Duration d) {
            this.keyRetention = checked("keyRetention", d, null);
            return this;
        }

        /**
         * How often the worker refreshes its entry in the worker registry; 10s by
         * default, {@link #disableRegistry()} to not register. Its entry is stale after
         * three missed refreshes.
         */
        public Builder registryInterval(Duration d) {
            this.registryInterval = checked("registryInterval", d, "disableRegistry");
            return this;
        }

        /** The worker does not register in the worker registry ({@code rdq workers} does not list it). */
        public Builder disableRegistry() {
            this.registryInterval = null;
            return this;
        }

        /**
         * Reports the worker's metrics to a Micrometer registry (micrometer-core
         * is an optional dependency: add it to use this), named so that a
         * Prometheus registry exports the Go worker's metrics by the same names
         * and labels: {@code rdq_worker_attempts_total{queue,outcome}},
         * {@code rdq_worker_dead_lettered_total{queue}},
         * {@code rdq_worker_handler_duration_seconds{queue,handler}},
         * {@code rdq_worker_claim_duration_seconds{queue}},
         * {@code rdq_worker_reclaimed_total}, {@code rdq_worker_leases_lost_total},
         * {@code rdq_worker_released_total}, {@code rdq_worker_snoozed_total},
         * {@code rdq_worker_results_dropped_total} and
         * {@code rdq_worker_in_flight} (each by queue),
         * {@code rdq_worker_purged_total}, and for a queue with a
         * {@link Breaker} {@code rdq_worker_breaker_state{queue,handler}} and
         * {@code rdq_worker_breaker_transitions_total{queue,handler,to}}. In Micrometer's own names: the
         * counter {@code rdq.worker.attempts}, the timer
         * {@code rdq.worker.handler.duration}, the gauge
         * {@code rdq.worker.in_flight}, and so on. Without a registry the worker
         * reports no metrics; {@link Worker#stats()} still counts.
         *
         * @throws NullPointerException if registry is null
         */
        public Builder meterRegistry(io.micrometer.core.instrument.MeterRegistry registry) {
            this.metrics = new MicrometerMetrics(
                    Objects.requireNonNull(registry, "Worker.Builder.meterRegistry: registry is null"));
            return this;
        }

        /**
         * Traces every execution with OpenTelemetry (opentelemetry-api is an
         * optional dependency: add it to use this), as Go's worker traces it: a
         * CONSUMER span {@code "rdq.execute " + handler} from the tracer
         * {@code io.github.srjn45.rdq}, with the attributes {@code rdq.task_id},
         * {@code rdq.queue}, {@code rdq.handler}, {@code rdq.attempt},
         * {@code rdq.life}, {@code rdq.worker_id} and, once known,
         * {@code rdq.outcome} (an {@link Outcome} name, or {@code SNOOZED}); a
         * failure adds an {@code exception} event with its type and message and
         * sets the status to error. The span's parent is the W3C trace context
         * ({@code traceparent}, {@code tracestate}) in the task's headers, which
         * the Go and Java clients write from the submitter's current span, so a
         * trace continues from a submitter in either language; the span is
         * current while the handler runs. Without it the worker makes no spans.
         *
         * @throws NullPointerException if openTelemetry is null
         */
        public Builder openTelemetry(io.opentelemetry.api.OpenTelemetry openTelemetry) {
            this.tracing = new OtelTracing(
                    Objects.requireNonNull(openTelemetry, "Worker.Builder.openTelemetry: openTelemetry is null"));
            return this;
        }

        /**
         * Runs every queue's handlers on executor instead of the worker's own
         * pools (a fixed pool of its concurrency per queue), for example
         * {@code Executors.newVirtualThreadPerTaskExecutor()} on Java 21. Each
         * queue still runs at most its concurrency at once: the worker claims
         * only for its free slots. The worker never shuts a supplied executor
         * down. An execution the executor refuses is released unrun, without
         * counting an attempt.
         *
         * @throws NullPointerException if executor is null
         */
        public Builder handlerExecutor(Executor executor) {
            this.handlerExecutor = Objects.requireNonNull(executor, "Worker.Builder.handlerExecutor: executor is null");
            return this;
        }

        /** Most finishes written in one statement; 1,000 by default, as Go's worker. */
        public Builder finishBatchSize(int n) {
            if (n < 1) {
                throw new InvalidInputException("rdq: invalid input: Worker.Builder.finishBatchSize(" + n
                        + ") is less than 1; leave it unset for the default (" + DEFAULT_FINISH_BATCH_SIZE + ")");
            }
            this.finishBatch = n;
            return this;
        }

        /** Longest wait of a finish for its batch; 10ms by default. */
        public Builder finishInterval(Duration d) {
            this.finishInterval = checked("finishInterval", d, null);
            return this;
        }

        /**
         * Validates the configuration, checks the schema version and returns the worker.
         *
         * @throws InvalidInputException for invalid configuration
         * @throws SchemaVersionException when the schema is at a version this SDK does not know
         */
        public Worker build() {
            Worker w = new Worker(this);
            try (Connection c = dataSource.getConnection()) {
                w.store.checkVersion(c);
            } catch (SQLException e) {
                throw new StoreException("rdq: worker: checking the schema version of " + w.store.schema, e);
            }
            return w;
        }
    }

    /** What the worker did since it started. */
    public WorkerStats stats() {
        return statsOf(counts, true);
    }

    /**
     * Whether the worker is running: started and not yet told to stop. False
     * before {@link #start}, and from the moment {@link #stop} begins.
     */
    public boolean isRunning() {
        synchronized (lock) {
            return state == State.RUNNING;
        }
    }

    /**
     * What the worker did since it started, per queue it runs (every queue
     * configured, in name order). The statement counts are the worker's, not a
     * queue's: they are zero here and counted in {@link #stats()}.
     */
    public Map<String, WorkerStats> queueStats() {
        Map<String, WorkerStats> out = new LinkedHashMap<>();
        for (QueueRunner q : queues.values()) {
            out.put(q.name, statsOf(q.counts, false));
        }
        return Collections.unmodifiableMap(out);
    }

    private static WorkerStats statsOf(java.util.concurrent.atomic.AtomicLongArray c, boolean statements) {
        return new WorkerStats(c.get(C_CLAIMED), c.get(C_SUCCEEDED), c.get(C_RETRIED), c.get(C_DEAD), c.get(C_LOST),
                c.get(C_RELEASED), c.get(C_RECLAIMED), statements ? c.get(C_FINISH_STMTS) : 0,
                statements ? c.get(C_HEARTBEAT_STMTS) : 0, c.get(C_SNOOZED));
    }

    /** Counts one event of kind c in the worker's and q's counts (q null: the worker's alone). */
    private void count(QueueRunner q, int c) {
        counts.incrementAndGet(c);
        if (q != null) {
            q.counts.incrementAndGet(c);
        }
    }

    /** The worker's ID, as recorded in leases and attempt history. */
    public String id() {
        return id;
    }

    /**
     * Registers h as the handler of tasks whose handler name is name. The worker
     * claims only the tasks of its registered handlers: the tasks of others wait,
     * PENDING with their budget untouched, for a worker that has their handler.
     *
     * @throws InvalidInputException if name is not a valid name
     * @throws IllegalStateException after start, or if name is taken
     */
    public void handle(String name, Handler h) {
        Objects.requireNonNull(name, "Worker.handle: the handler name is null");
        Limits.validateName("handler", name);
        Objects.requireNonNull(h, () -> "Worker.handle: the handler of \"" + name + "\" is null");
        synchronized (lock) {
            if (state != State.NEW) {
                throw new IllegalStateException("rdq: worker: handle(\"" + name + "\") after start");
            }
            if (handlers.putIfAbsent(name, h) != null) {
                throw new IllegalStateException("rdq: worker: a handler is already registered under \"" + name + "\"");
            }
        }
    }

    // --- Connections --------------------------------------------------------

    /** One loop's connection: taken lazily, dropped after an error, closed at the end. */
    private final class Conn implements AutoCloseable {
        private Connection c;

        Connection get() throws SQLException {
            if (c == null) {
                c = dataSource.getConnection();
                if (!c.getAutoCommit()) {
                    c.setAutoCommit(true);
                }
            }
            return c;
        }

        void drop() {
            close();
        }

        @Override
        public void close() {
            if (c != null) {
                try {
                    c.close();
                } catch (SQLException e) {
                    LOG.debug("closing a connection failed: {}", e.toString());
                }
                c = null;
            }
        }
    }

    // --- Lifecycle ----------------------------------------------------------

    /**
     * Starts the worker's threads and returns.
     *
     * @throws IllegalStateException if the worker was already started; a worker runs once
     * @throws InvalidInputException if no handler is registered: the queues it serves
     *         would have nothing to run
     * @throws ConnectionsUnavailableException if the DataSource cannot give, at
     *         once, every connection the worker holds while it runs
     *         ({@link #connectionsNeeded()}); nothing is started
     */
    public void start() {
        synchronized (lock) {
            if (state != State.NEW) {
                throw new IllegalStateException("rdq: worker: start on a worker already started or stopped; a Worker runs once");
            }
            if (handlers.isEmpty()) {
                throw new InvalidInputException("rdq: invalid input: worker: start: no handler is registered, so its queues ("
                        + String.join(", ", queues.keySet()) + ") have nothing to run; call handle for each handler their tasks name before start");
            }
            checkConnections();
            state = State.RUNNING;
            handlerNames = handlers.keySet().stream().sorted().toArray(String[]::new);
        }
        // Every execution schedules its timeout and cancels it when the handler
        // returns: cancelled timers leave the queue at once, or it would hold
        // one per task run in the last timeout's length.
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, daemon("rdq-timeouts-" + id));
        t.setRemoveOnCancelPolicy(true);
        timers = t;
        completerThread = thread("rdq-completer", this::completerLoop);
        heartbeatThread = thread("rdq-heartbeat", this::heartbeatLoop);
        for (QueueRunner q : queues.values()) {
            q.start();
            metrics.inFlight(q.name, q.busy::get);
            loops.add(thread("rdq-fetch-" + q.name, q::fetchLoop));
        }
        loops.add(thread("rdq-notify", this::notificationLoop));
        if (reclaimInterval != null || purgeInterval != null) {
            loops.add(thread("rdq-maintenance", this::maintenanceLoop));
        }
        if (registryInterval != null) {
            registryTimer = Executors.newSingleThreadScheduledExecutor(daemon("rdq-registry-" + id));
            Registry r = new Registry();
            registryTimer.scheduleWithFixedDelay(r::refresh, 0, registryInterval.toNanos(), TimeUnit.NANOSECONDS);
            registry = r;
        }
        LOG.info("worker started worker_id={} queues={}", id, queues.keySet());
    }

    /**
     * How many connections the worker holds from its DataSource while it runs:
     * one per queue (claims), one each for heartbeats, results, notifications,
     * maintenance (unless reclaims and purges are both disabled) and
     * the worker registry (unless disabled). A
     * shutdown that releases tasks, and a circuit breaker that pauses or
     * resumes a handler, take one more for a moment. Size a pool to
     * this plus what the application itself uses.
     */
    public int connectionsNeeded() {
        int n = queues.size() + 3;
        if (reclaimInterval != null || purgeInterval != null) {
            n++;
        }
        if (registryInterval != null) {
            n++;
        }
        return n;
    }

    /**
     * Takes every connection the worker will hold, at once, and gives them
     * back: a pool too small for the worker fails here, with how many it
     * lacks, instead of starving the worker's loops (and the application's own
     * queries) later.
     */
    private void checkConnections() {
        int needed = connectionsNeeded();
        List<Connection> taken = new ArrayList<>(needed);
        try {
            while (taken.size() < needed) {
                taken.add(dataSource.getConnection());
            }
        } catch (SQLException | RuntimeException e) {
            throw new ConnectionsUnavailableException("rdq: worker: start: the DataSource gave " + taken.size() + " of the "
                    + needed + " connections the worker holds while it runs (one per queue: " + queues.size()
                    + "; one each for heartbeats, results, notifications"
                    + (reclaimInterval != null || purgeInterval != null ? ", maintenance" : "")
                    + (registryInterval != null ? ", the worker registry" : "")
                    + "); size its pool to at least " + needed + " plus what the application uses: " + e.getMessage(),
                    needed, taken.size(), e);
        } finally {
            for (Connection c : taken) {
                try {
                    c.close();
                } catch (SQLException e) {
                    LOG.debug("giving back a connection taken to count them failed: {}", e.toString());
                }
            }
        }
    }

    private static ThreadFactory daemon(String name) {
        return r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        };
    }

    private Thread thread(String name, Runnable r) {
        Thread t = new Thread(r, name + "-" + id);
        t.setDaemon(true);
        t.start();
        return t;
    }

    /**
     * Shuts the worker down gracefully: stops claiming, waits up to grace for
     * running handlers, then interrupts those still running (reason
     * {@link TaskContext.CancelReason#STOPPING}) and releases their tasks, due
     * again at once, without counting an attempt. Finished results are written
     * before it returns. Handlers ignoring interruption for more than a second
     * are abandoned: whatever they return later is discarded.
     *
     * @return true when every handler finished within the grace period
     */
    public boolean stop(Duration grace) {
        Objects.requireNonNull(grace, "Worker.stop: the grace period is null; pass Duration.ZERO to interrupt handlers at once");
        synchronized (lock) {
            if (state == State.NEW) {
                state = State.STOPPED;
                return true;
            }
            if (state != State.RUNNING) {
                return true;
            }
            state = State.STOPPING;
        }
        LOG.info("worker stopping worker_id={}", id);
        stopClaiming = true;
        loopsStopped = true;
        for (QueueRunner q : queues.values()) {
            q.signal(true);
        }
        for (Thread t : loops) {
            t.interrupt();
        }
        abortListening();
        for (Thread t : loops) {
            joinQuietly(t, 60_000);
        }
        long deadline = System.nanoTime() + grace.toNanos();
        boolean clean = waitExecutions(deadline);
        if (!clean) {
            List<Execution> still = new ArrayList<>();
            synchronized (running) {
                still.addAll(running.keySet());
            }
            for (Execution e : still) {
                e.cancel(TaskContext.CancelReason.STOPPING);
            }
            waitExecutions(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ABANDON_AFTER_MS));
            List<Execution> toRelease = takeForRelease();
            if (!toRelease.isEmpty()) {
                release(toRelease);
            }
            LOG.warn("worker grace period over worker_id={} released={}", id, toRelease.size());
        }
        while (completing.get() > 0) {
            sleepQuietly(5);
        }
        completerClosed = true;
        completerThread.interrupt();
        joinQuietly(completerThread, 60_000);
        heartbeatStop = true;
        heartbeatThread.interrupt();
        joinQuietly(heartbeatThread, 60_000);
        timers.shutdownNow();
        for (QueueRunner q : queues.values()) {
            if (q.pool != null) {
                q.pool.shutdown(); // the worker's own; a supplied executor is its owner's
            }
        }
        if (registryTimer != null) {
            registryTimer.shutdownNow();
            try {
                registryTimer.awaitTermination(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            registry.deregister();
        }
        synchronized (lock) {
            state = State.STOPPED;
        }
        LOG.info("worker stopped worker_id={}", id);
        return clean;
    }

    /** Stops the worker with a 30-second grace period. */
    @Override
    public void close() {
        stop(Duration.ofSeconds(30));
    }

    private boolean waitExecutions(long deadlineNanos) {
        synchronized (executing) {
            while (executing.get() > 0) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    executing.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return true;
        }
    }

    private static void joinQuietly(Thread t, long ms) {
        try {
            t.join(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // --- Executions ---------------------------------------------------------

    /** One run of a handler on one claimed task. */
    private final class Execution {
        final QueueRunner q;
        final PgStore.Lease lease;
        final String handler;
        final int attempt;
        final TaskContext ctx;
        volatile long nextBeatNanos;
        Thread thread; // guarded by this
        boolean returned; // guarded by running
        boolean lost; // guarded by running
        boolean abandoned; // guarded by running
        ScheduledFuture<?> timeoutTimer;
        /** System.nanoTime() when the claim that leased the task was sent. */
        final long claimedNanos;
        /** The pause this execution probes, for a breaker's probe; else null. */
        final RdqAdmin.HandlerPause probe;

        Execution(QueueRunner q, Task t) {
            this(q, t, System.nanoTime(), null);
        }

        Execution(QueueRunner q, Task t, long claimedNanos, RdqAdmin.HandlerPause probe) {
            this.q = q;
            this.claimedNanos = claimedNanos;
            this.probe = probe;
            this.lease = new PgStore.Lease(t.id(), t.leaseToken());
            this.handler = t.handler();
            this.attempt = t.nextAttempt();
            this.ctx = new TaskContext(t, id);
            this.nextBeatNanos = System.nanoTime() + q.heartbeat.toNanos();
        }

        /** Interrupts the handler, once, for the first reason given. */
        synchronized void cancel(TaskContext.CancelReason reason) {
            if (ctx.reason == null) {
                ctx.reason = reason;
                if (thread != null) {
                    thread.interrupt();
                }
            }
        }

        synchronized void bind(Thread t) {
            this.thread = t;
        }

        /** Detaches the handler's thread and clears an interrupt meant for this execution. */
        synchronized void unbind() {
            this.thread = null;
            Thread.interrupted();
        }

        void log(String msg, Object... extra) {
            logTask(LOG::info, msg, this, extra);
        }
    }

    private interface LogFn {
        void log(String format, Object... args);
    }

    private void logTask(LogFn fn, String msg, Execution e, Object... extra) {
        logFields(fn, msg, e.lease.id().toString(), e.q.name, e.handler, e.attempt, extra);
    }

    private void logFields(LogFn fn, String msg, String taskId, String queue, String handler, int attempt,
            Object... extra) {
        StringBuilder fmt = new StringBuilder(msg).append(" task_id={} queue={} handler={} attempt={} worker_id={}");
        Object[] args = new Object[5 + extra.length];
        args[0] = taskId;
        args[1] = queue;
        args[2] = handler;
        args[3] = attempt;
        args[4] = id;
        for (int i = 0; i + 1 < extra.length; i += 2) {
            fmt.append(' ').append(extra[i]).append("={}");
        }
        int k = 5;
        for (int i = 1; i < extra.length; i += 2) {
            args[k++] = extra[i];
        }
        fn.log(fmt.toString(), java.util.Arrays.copyOf(args, k));
    }

    private void startExecution(QueueRunner q, Task t, long claimedNanos, RdqAdmin.HandlerPause probe) {
        Execution e = new Execution(q, t, claimedNanos, probe);
        count(q, C_CLAIMED);
        running.put(e, Boolean.TRUE);
        q.busy.incrementAndGet();
        executing.incrementAndGet();
        if (LOG.isDebugEnabled()) {
            logTask(LOG::debug, "task claimed", e, "life", t.life());
        }
        try {
            q.runner.execute(() -> execute(e, t));
        } catch (RejectedExecutionException x) {
            // The supplied executor would not run it: give the task back unrun.
            synchronized (running) {
                running.remove(e);
            }
            q.busy.decrementAndGet();
            synchronized (executing) {
                executing.decrementAndGet();
                executing.notifyAll();
            }
            logTask(LOG::error, "the handler executor refused the execution; releasing the task", e, "error", x.toString());
            release(List.of(e));
        }
    }

    private void execute(Execution e, Task t) {
        QueueRunner q = e.q;
        Tracing.Execution span = Tracing.NO_EXECUTION;
        try {
            span = tracing.execution(t, q.name, e.attempt, id);
            Throwable err = null;
            long start = System.nanoTime();
            e.bind(Thread.currentThread());
            Optional<Duration> timeout = q.policy.taskTimeout(t, q.timeout);
            if (timeout.isPresent()) {
                e.timeoutTimer = timers.schedule(() -> e.cancel(TaskContext.CancelReason.TIMEOUT),
                        timeout.get().toNanos(), TimeUnit.NANOSECONDS);
            }
            try {
                Handler h = handlers.get(t.handler());
                if (h == null) {
                    throw new PermanentException(new UnknownHandlerException(t.handler(), q.name));
                }
                if (e.ctx.reason == null) {
                    MDC.put(MDC_TASK_ID, e.lease.id().toString());
                    MDC.put(MDC_QUEUE, q.name);
                    MDC.put(MDC_HANDLER, e.handler);
                    MDC.put(MDC_ATTEMPT, Integer.toString(e.attempt));
                    try (AutoCloseable scope = span.makeCurrent()) {
                        h.handle(e.ctx);
                    } finally {
                        MDC.remove(MDC_TASK_ID);
                        MDC.remove(MDC_QUEUE);
                        MDC.remove(MDC_HANDLER);
                        MDC.remove(MDC_ATTEMPT);
                    }
                } else {
                    throw new InterruptedException("rdq: execution interrupted before it started");
                }
            } catch (Throwable x) {
                err = x;
            } finally {
                if (e.timeoutTimer != null) {
                    e.timeoutTimer.cancel(false);
                }
                e.unbind();
            }
            long durNanos = System.nanoTime() - start;
            metrics.handlerDuration(q.name, e.handler, durNanos);
            TaskContext.CancelReason reason = e.ctx.reason;
            if (err != null && reason == TaskContext.CancelReason.TIMEOUT && isInterruption(err)) {
                err = new HandlerTimeoutException(timeout.orElseThrow());
            }
            boolean wasInterrupted = err != null && reason == TaskContext.CancelReason.STOPPING;
            synchronized (running) {
                e.returned = true;
                if (e.abandoned) {
                    span.error("abandoned at shutdown; task released");
                    logTask(LOG::warn, "handler returned after its task was released at shutdown; result discarded", e);
                    return;
                }
                if (e.lost) {
                    span.error("lease lost");
                    logTask(LOG::debug, "handler returned after its lease was lost; result discarded", e);
                    return;
                }
                if (wasInterrupted) {
                    span.error("interrupted at shutdown; task released");
                    running.remove(e);
                    interrupted.add(e);
                    return;
                }
                completing.incrementAndGet();
            }
            try {
                Duration snooze = Failures.snoozeOf(err).orElse(null);
                if (snooze != null) {
                    if (e.probe == null && q.policy.canSnooze(t.snoozes())) {
                        // (A breaker's probe must be answered, so it never snoozes.)
                        span.outcome("SNOOZED");
                        // Not yet: back to waiting, no attempt spent.
                        PgStore.Completion c = new PgStore.Completion(e.lease, Status.PENDING,
                                micros(snooze), null, null, id, durNanos / 1000);
                        if (completerClosed) {
                            running.remove(e);
                            logTask(LOG::error, "worker stopped before the snooze could be written; the lease will expire and the task be reclaimed", e);
                        } else {
                            finishQueue.add(new FinishItem(e, c, null, null, durNanos, true));
                        }
                        return;
                    }
                    err = new RetryAfterException(snooze, new SnoozeSpentException(snooze, t.snoozes()));
                }
                Decision d = q.policy.forTask(t).decide(e.attempt, err, ThreadLocalRandom.current().nextDouble());
                Status status = err == null ? Status.SUCCEEDED : d.dead() ? Status.DEAD : Status.PENDING;
                Failure f = err == null ? null : q.policy.describe(err);
                long retryMicros = status == Status.PENDING ? d.retryIn().toNanos() / 1000 : 0;
                PgStore.Completion c = new PgStore.Completion(e.lease, status, retryMicros, d.outcome(), f, id,
                        durNanos / 1000);
                if (f != null) {
                    span.failure(f.type(), f.message());
                }
                span.outcome(d.outcome().name());
                breakerAfter(e, err, d, f);
                if (completerClosed) {
                    running.remove(e);
                    logTask(LOG::error, "worker stopped before the result could be written; the lease will expire and the task be reclaimed", e);
                } else {
                    finishQueue.add(new FinishItem(e, c, d, f, durNanos, false));
                }
            } finally {
                completing.decrementAndGet();
            }
        } finally {
            span.end();
            q.busy.decrementAndGet();
            q.signal(false);
            synchronized (executing) {
                executing.decrementAndGet();
                executing.notifyAll();
            }
        }
    }

    private static long micros(Duration d) {
        try {
            return d.toNanos() / 1000;
        } catch (ArithmeticException x) {
            return Long.MAX_VALUE / 1000;
        }
    }

    /**
     * A snooze recorded as a failed attempt: the task snoozed as often as its
     * policy allows in this life. Its type is "snoozed", as Go's.
     */
    private static final class SnoozeSpentException extends RuntimeException implements ErrorTyped {
        private static final long serialVersionUID = 1L;

        SnoozeSpentException(Duration after, int snoozes) {
            super("snoozed for " + GoDurations.format(after) + ", counted as an attempt: the task already snoozed "
                    + snoozes + " times in this life (Policy.maxSnoozes)", null, false, false);
        }

        @Override
        public String errorType() {
            return "snoozed";
        }
    }

    /** Whether err is how a handler reports being interrupted. */
    private static boolean isInterruption(Throwable err) {
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable t = err; t != null && seen.add(t); t = t.getCause()) {
            if (t instanceof InterruptedException || t instanceof java.io.InterruptedIOException
                    || t instanceof java.nio.channels.ClosedByInterruptException
                    || t instanceof java.util.concurrent.CancellationException) {
                return true;
            }
        }
        return false;
    }

    private List<Execution> takeForRelease() {
        synchronized (running) {
            List<Execution> out = new ArrayList<>(interrupted);
            interrupted.clear();
            for (Execution e : new ArrayList<>(running.keySet())) {
                if (!e.returned) {
                    e.abandoned = true;
                    running.remove(e);
                    out.add(e);
                }
            }
            return out;
        }
    }

    private void release(List<Execution> execs) {
        List<PgStore.Lease> leases = new ArrayList<>();
        for (Execution e : execs) {
            leases.add(e.lease);
        }
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(true);
            boolean[] ok = store.release(c, leases);
            for (int i = 0; i < execs.size(); i++) {
                if (ok[i]) {
                    count(execs.get(i).q, C_RELEASED);
                    metrics.released(execs.get(i).q.name);
                    logTask(LOG::info, "task released", execs.get(i));
                } else {
                    count(execs.get(i).q, C_LOST);
                    metrics.leaseLost(execs.get(i).q.name);
                    logTask(LOG::warn, "lease lost before release", execs.get(i));
                }
            }
        } catch (SQLException | RuntimeException ex) {
            for (Execution e : execs) {
                logTask(LOG::error, "release failed; the lease will expire and the task be reclaimed", e, "error", ex.toString());
            }
        }
    }

    // --- Queues and fetching ------------------------------------------------

    private final class QueueRunner {
        final String name;
        final Policy policy;
        final int concurrency;
        final Duration lease;
        final Duration heartbeat;
        final Optional<Duration> timeout;
        /** The queue's breaker on this worker; null when it has none. */
        final @Nullable BreakerState breaker;
        final AtomicInteger busy = new AtomicInteger();
        /** This queue's share of the worker's counts (the C_ indexes). */
        final java.util.concurrent.atomic.AtomicLongArray counts = new java.util.concurrent.atomic.AtomicLongArray(10);
        /** The worker's own pool for this queue's handlers; null when an executor was supplied. */
        ExecutorService pool;
        /** Where this queue's handlers run: pool, or the supplied executor. */
        Executor runner;
        private boolean wake; // guarded by this
        private boolean slotFreed; // guarded by this

        QueueRunner(String name, QueueConfig c) {
            this.name = name;
            this.policy = c.policy;
            this.concurrency = c.concurrency;
            this.lease = c.lease;
            this.heartbeat = c.heartbeat;
            this.timeout = c.timeout;
            this.breaker = c.breaker == null ? null : new BreakerState(c.breaker);
        }

        void start() {
            if (handlerExecutor != null) {
                runner = handlerExecutor;
                return;
            }
            AtomicInteger n = new AtomicInteger();
            pool = Executors.newFixedThreadPool(concurrency, r -> {
                Thread t = new Thread(r, "rdq-exec-" + name + "-" + n.incrementAndGet() + "-" + id);
                t.setDaemon(true);
                return t;
            });
            runner = pool;
        }

        synchronized void signal(boolean notification) {
            if (notification) {
                wake = true;
            } else {
                slotFreed = true;
            }
            notifyAll();
        }

        void fetchLoop() {
            try (Conn conn = new Conn()) {
                boolean mayHaveMore;
                while (!stopClaiming) {
                    int free = concurrency - busy.get();
                    free -= probe(this, conn, free);
                    if (free > 0) {
                        try {
                            long claimStart = System.nanoTime();
                            List<Task> tasks = store.claim(conn.get(), name, free, lease.toNanos() / 1000, id, handlerNames);
                            metrics.claimDuration(name, System.nanoTime() - claimStart);
                            if (stopClaiming) {
                                releaseUnstarted(tasks);
                                return;
                            }
                            List<Task> held = holdBack(tasks);
                            for (Task t : tasks) {
                                startExecution(this, t, claimStart, null);
                            }
                            if (!held.isEmpty()) {
                                LOG.info("releasing tasks claimed while their handler's breaker tripped queue={} tasks={} worker_id={}",
                                        name, held.size(), id);
                                releaseUnstarted(held);
                            }
                            // Tasks held back are due again at once; claim them after
                            // the next wake-up, not in a loop while the pause is written.
                            mayHaveMore = tasks.size() + held.size() == free && held.isEmpty();
                        } catch (SQLException | RuntimeException e) {
                            conn.drop();
                            if (stopClaiming) {
                                return;
                            }
                            LOG.error("claim failed queue={} worker_id={} error={}", name, id, e.toString());
                            mayHaveMore = false;
                        }
                    } else {
                        mayHaveMore = true;
                    }
                    long deadline = System.nanoTime() + pollInterval.toNanos();
                    synchronized (this) {
                        while (!stopClaiming && !wake && !(mayHaveMore && slotFreed)) {
                            long left = deadline - System.nanoTime();
                            if (left <= 0) {
                                break;
                            }
                            try {
                                wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                            } catch (InterruptedException e) {
                                if (stopClaiming) {
                                    return;
                                }
                            }
                        }
                        wake = false;
                        slotFreed = false;
                    }
                }
            }
        }

        /**
         * Removes from tasks, and returns, those whose handler this worker's
         * breaker is tripping right now: until the pause commits the store
         * still hands them out, and running them would spend attempts against
         * the failure that tripped it. They are given back, no attempt counted.
         */
        private List<Task> holdBack(List<Task> tasks) {
            if (breaker == null || !breaker.anyTripping()) {
                return List.of();
            }
            List<Task> held = new ArrayList<>();
            tasks.removeIf(t -> breaker.isTripping(t.handler()) && held.add(t));
            return held;
        }

        private void releaseUnstarted(List<Task> tasks) {
            if (tasks.isEmpty()) {
                return;
            }
            List<Execution> execs = new ArrayList<>();
            for (Task t : tasks) {
                execs.add(new Execution(this, t));
            }
            release(execs);
        }
    }

    // --- Circuit breaker ----------------------------------------------------

    /**
     * What an execution hands the breaker once its result is known (Go's
     * breakerAfter): it records the attempt, and trips the breaker or answers
     * a probe. A trip or an answer is written on a connection of its own,
     * taken from the DataSource for the moment it lasts.
     */
    private void breakerAfter(Execution e, Throwable err, Decision d, Failure f) {
        BreakerState b = e.q.breaker;
        if (b == null || !handlers.containsKey(e.handler)) {
            return; // a handler this worker does not run is not its to judge
        }
        boolean failed = err != null && d.outcome() == Outcome.RETRYABLE_FAILURE;
        String fingerprint = f == null ? "" : f.fingerprint();
        if (e.probe != null) {
            answerProbe(e, failed, fingerprint);
            return;
        }
        BreakerState.Trip tr = b.observe(System.nanoTime(), e.claimedNanos, e.handler, e.lease.id(), failed, fingerprint);
        if (tr == null) {
            return;
        }
        try {
            String reason = tr.failed() + " of " + tr.total() + " attempts failed within "
                    + GoDurations.format(b.policy.window()) + ", " + tr.tasks() + " distinct tasks with one cause";
            Boolean changed = null;
            String error = null;
            try {
                changed = pauseWrite(new HandlerPauseSql.Pause(e.q.name, e.handler, b.policy.coolOff(), null,
                        Breaker.ACTOR, reason, tr.fingerprint(), tr.ratio()));
            } catch (SQLException | RuntimeException x) {
                error = x.toString();
            }
            Object[] attrs = {e.q.name, e.handler, tr.fingerprint(), tr.ratio(), tr.tasks(),
                    GoDurations.format(b.policy.coolOff()), id, error};
            String fields = " queue={} handler={} fingerprint={} ratio={} failed_tasks={} cool_off={} worker_id={}";
            if (error != null) {
                LOG.error("circuit breaker could not pause the handler" + fields + " error={}", attrs);
            } else if (changed) {
                metrics.breakerTransition(e.q.name, e.handler, "open");
                metrics.breakerState(e.q.name, e.handler, 1);
                LOG.warn("circuit breaker opened: handler paused on every worker" + fields, attrs);
            } else {
                LOG.info("circuit breaker tripped, but the handler was already paused" + fields, attrs);
            }
        } finally {
            b.tripped(e.handler, System.nanoTime());
        }
    }

    /** Runs a handler pause or reopening in a transaction of its own. */
    private boolean pauseWrite(HandlerPauseSql.Pause p) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            return inTransaction(c, () -> store.handlerPauses.pause(c, p));
        }
    }

    private interface SqlCall<T> {
        T call() throws SQLException;
    }

    /** Runs call on c in a transaction, committed when it returns, rolled back when it throws. */
    private static <T> T inTransaction(Connection c, SqlCall<T> call) throws SQLException {
        boolean auto = c.getAutoCommit();
        c.setAutoCommit(false);
        try {
            T v = call.call();
            c.commit();
            return v;
        } catch (SQLException | RuntimeException x) {
            try {
                c.rollback();
            } catch (SQLException r) {
                x.addSuppressed(r);
            }
            throw x;
        } finally {
            c.setAutoCommit(auto);
        }
    }

    /**
     * Go's answerProbe: resumes the handler after a successful probe or one
     * that failed with another cause than the one that tripped the breaker (an
     * ordinary failure of that task); pauses it again with a doubled cool-off
     * after a probe that failed with the tripping cause, keeping the original
     * cause as its reason.
     */
    private void answerProbe(Execution e, boolean failed, String fingerprint) {
        BreakerState b = e.q.breaker;
        RdqAdmin.HandlerPause p = e.probe;
        String tripping = p.fingerprint().orElse("");
        boolean probeFailed = failed && (tripping.isEmpty() || fingerprint.equals(tripping));
        if (!probeFailed) {
            String reason = "probe succeeded";
            String msg = "circuit breaker closed: probe succeeded, handler resumed";
            if (failed) {
                reason = "probe failed with another cause (fingerprint " + fingerprint
                        + "), not the one that tripped the breaker (" + tripping + ")";
                msg = "circuit breaker closed: probe failed with another cause, handler resumed";
            }
            Boolean changed = null;
            String error = null;
            try (Connection c = dataSource.getConnection()) {
                String r = reason;
                changed = inTransaction(c, () -> store.handlerPauses.resume(c, e.q.name, e.handler, e.lease, Breaker.ACTOR, r));
            } catch (SQLException | RuntimeException x) {
                error = x.toString();
            }
            b.resumed(e.handler, System.nanoTime());
            if (error != null) {
                logTask(LOG::error, "circuit breaker could not resume the handler after its probe", e, "trips", p.trips(),
                        "error", error);
            } else if (changed) {
                metrics.breakerTransition(e.q.name, e.handler, "closed");
                metrics.breakerState(e.q.name, e.handler, 0);
                logTask(LOG::info, msg, e, "trips", p.trips(), "fingerprint", fingerprint);
            } else {
                logTask(LOG::info, "probe answered, but the handler was no longer waiting for it", e, "trips", p.trips());
            }
            return;
        }
        Duration next = b.policy.coolOff(p.trips() + 1);
        String prefix = "probe failed with the same cause; tripped because ";
        String reason = prefix + (p.reason().startsWith(prefix) ? p.reason().substring(prefix.length()) : p.reason());
        Boolean changed = null;
        String error = null;
        try {
            changed = pauseWrite(new HandlerPauseSql.Pause(e.q.name, e.handler, next, e.lease, Breaker.ACTOR, reason,
                    tripping.isEmpty() ? fingerprint : tripping, p.ratio().orElse(1)));
        } catch (SQLException | RuntimeException x) {
            error = x.toString();
        }
        if (error != null) {
            logTask(LOG::error, "circuit breaker could not reopen after a failed probe", e, "trips", p.trips(), "error", error);
        } else if (changed) {
            metrics.breakerTransition(e.q.name, e.handler, "open");
            metrics.breakerState(e.q.name, e.handler, 1);
            logTask(LOG::warn, "circuit breaker reopened: probe failed", e, "trips", p.trips(), "fingerprint", fingerprint,
                    "cool_off", GoDurations.format(next));
        } else {
            logTask(LOG::info, "probe failed, but the handler was no longer waiting for it", e, "trips", p.trips());
        }
    }

    /**
     * Go's probe: at most once per poll interval, reads the queue's paused
     * handlers (noticing pauses and resumes other workers or operators made)
     * and, when one this worker runs is due a probe, claims the probes and
     * starts them. Returns how many it started.
     */
    private int probe(QueueRunner q, Conn conn, int free) {
        BreakerState b = q.breaker;
        if (b == null || free < 1 || !b.mayProbe(System.nanoTime(), pollInterval.toNanos())) {
            return 0;
        }
        try {
            Connection c = conn.get();
            List<RdqAdmin.HandlerPause> paused = store.handlerPauses.paused(c, q.name);
            observePauses(q, paused);
            boolean due = false;
            for (RdqAdmin.HandlerPause p : paused) {
                if (handlers.containsKey(p.handler()) && p.probeAt().isPresent()) {
                    due = true;
                }
            }
            if (!due) {
                return 0;
            }
            long claimed = System.nanoTime();
            List<HandlerPauseSql.Probe> probes = inTransaction(c,
                    () -> store.handlerPauses.claimProbe(c, List.of(q.name), q.lease.toNanos() / 1000, id, handlerNames));
            for (HandlerPauseSql.Probe p : probes) {
                metrics.breakerTransition(q.name, p.task().handler(), "half_open");
                metrics.breakerState(q.name, p.task().handler(), 2);
                logFields(LOG::info, "circuit breaker half-open: probing with one task", p.task().id().toString(), q.name,
                        p.task().handler(), p.task().nextAttempt(), "trips", p.pause().trips());
                startExecution(q, p.task(), claimed, p.pause());
            }
            return probes.size();
        } catch (SQLException | RuntimeException e) {
            conn.drop();
            LOG.error("claiming a probe failed queue={} worker_id={} error={}", q.name, id, e.toString());
            return 0;
        }
    }

    /**
     * Sets the state gauge of q's handlers from the store's view, clears the
     * evidence of the handlers paused or resumed since the last look, and logs
     * the changes other workers made.
     */
    private void observePauses(QueueRunner q, List<RdqAdmin.HandlerPause> paused) {
        BreakerState.Noticed n = q.breaker.notice(paused, System.nanoTime());
        for (RdqAdmin.HandlerPause p : paused) {
            metrics.breakerState(q.name, p.handler(), p.state().equals("half_open") ? 2 : 1);
        }
        for (RdqAdmin.HandlerPause p : n.added()) {
            LOG.info("handler paused queue={} handler={} state={} actor={} trips={} worker_id={}", q.name, p.handler(),
                    p.state(), p.actor(), p.trips(), id);
        }
        for (String h : n.gone()) {
            metrics.breakerState(q.name, h, 0);
            LOG.info("handler resumed queue={} handler={} worker_id={}", q.name, h, id);
        }
    }

    // --- Notifications ------------------------------------------------------

    private void notificationLoop() {
        long backoffMs = 100;
        while (!loopsStopped) {
            Connection c = null;
            try {
                c = dataSource.getConnection();
                listening = c;
                if (loopsStopped) {
                    break; // stop may have looked for the connection before it was set
                }
                c.setAutoCommit(true);
                PGConnection pg = c.unwrap(PGConnection.class);
                try (Statement st = c.createStatement()) {
                    st.execute(store.listen);
                }
                // Anything made due before LISTEN took effect is found by the first poll.
                for (QueueRunner q : queues.values()) {
                    q.signal(true);
                }
                boolean received = false;
                while (!loopsStopped) {
                    PGNotification[] ns = pg.getNotifications(250);
                    if (ns == null) {
                        continue;
                    }
                    if (!received) {
                        backoffMs = 100;
                        received = true;
                    }
                    for (PGNotification n : ns) {
                        QueueRunner q = queues.get(n.getParameter());
                        if (q != null) {
                            q.signal(true);
                        }
                    }
                }
            } catch (SQLException | RuntimeException e) {
                if (loopsStopped) {
                    break;
                }
                LOG.warn("notifications failed; polling meanwhile worker_id={} error={}", id, e.toString());
            } finally {
                listening = null;
                if (c != null) {
                    try {
                        c.close();
                    } catch (SQLException e) {
                        LOG.debug("closing the notification connection failed: {}", e.toString());
                    }
                }
            }
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(backoffMs);
            while (!loopsStopped && System.nanoTime() < until) {
                sleepQuietly(Math.min(50, backoffMs));
            }
            backoffMs = Math.min(backoffMs * 2, 30_000);
        }
    }

    /**
     * Ends the notification loop's wait for notifications at once: the driver
     * blocks in a socket read that an interrupt does not end, so the
     * connection is aborted (JDBC's Connection.abort closes its socket; a pool
     * discards such a connection).
     */
    private void abortListening() {
        Connection c = listening;
        if (c == null) {
            return;
        }
        try {
            c.abort(Runnable::run);
        } catch (SQLException | RuntimeException e) {
            LOG.debug("aborting the notification connection failed; the loop ends within its wait worker_id={} error={}",
                    id, e.toString());
        }
    }

    // --- Heartbeats ---------------------------------------------------------

    private void heartbeatLoop() {
        long tick = Long.MAX_VALUE;
        for (QueueRunner q : queues.values()) {
            tick = Math.min(tick, q.heartbeat.toMillis());
        }
        tick = Math.max(tick / 4, 1);
        try (Conn conn = new Conn()) {
            while (!heartbeatStop) {
                try {
                    Thread.sleep(tick);
                } catch (InterruptedException e) {
                    continue;
                }
                beat(conn);
            }
        }
    }

    private void beat(Conn conn) {
        long now = System.nanoTime();
        Map<Duration, List<Execution>> groups = new TreeMap<>();
        synchronized (running) {
            for (Execution e : running.keySet()) {
                if (e.nextBeatNanos - now > 0) {
                    continue;
                }
                groups.computeIfAbsent(e.q.lease, k -> new ArrayList<>()).add(e);
            }
        }
        for (Map.Entry<Duration, List<Execution>> g : groups.entrySet()) {
            List<Execution> execs = g.getValue();
            List<PgStore.Lease> leases = new ArrayList<>();
            for (Execution e : execs) {
                leases.add(e.lease);
            }
            boolean[] ok;
            try {
                ok = store.heartbeat(conn.get(), leases, g.getKey().toNanos() / 1000);
                counts.incrementAndGet(C_HEARTBEAT_STMTS);
            } catch (SQLException | RuntimeException e) {
                conn.drop();
                LOG.warn("heartbeat failed; retrying leases={} worker_id={} error={}", leases.size(), id, e.toString());
                continue;
            }
            List<Execution> lost = new ArrayList<>();
            synchronized (running) {
                for (int i = 0; i < execs.size(); i++) {
                    Execution e = execs.get(i);
                    if (!running.containsKey(e)) {
                        continue;
                    }
                    if (ok[i]) {
                        e.nextBeatNanos = now + e.q.heartbeat.toNanos();
                        continue;
                    }
                    e.lost = true;
                    running.remove(e);
                    if (!e.returned) {
                        lost.add(e);
                    }
                }
            }
            for (Execution e : lost) {
                count(e.q, C_LOST);
                metrics.leaseLost(e.q.name);
                logTask(LOG::warn, "lease lost; interrupting the handler", e);
                e.cancel(TaskContext.CancelReason.LEASE_LOST);
            }
        }
    }

    // --- Completer ----------------------------------------------------------

    /** A finished execution to write: a finish, or a snooze (c's status PENDING and retry, no attempt). */
    private record FinishItem(Execution e, PgStore.Completion c, Decision d, Failure f, long durNanos, boolean snooze) {}

    private void completerLoop() {
        try (Conn conn = new Conn()) {
            List<FinishItem> buf = new ArrayList<>(finishBatch);
            while (true) {
                FinishItem first;
                try {
                    first = completerClosed ? finishQueue.poll() : finishQueue.poll(100, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    continue;
                }
                if (first == null) {
                    if (completerClosed) {
                        return;
                    }
                    continue;
                }
                buf.clear();
                buf.add(first);
                long deadline = System.nanoTime() + finishInterval.toNanos();
                while (buf.size() < finishBatch) {
                    long left = deadline - System.nanoTime();
                    FinishItem it;
                    try {
                        it = left <= 0 ? finishQueue.poll() : finishQueue.poll(left, TimeUnit.NANOSECONDS);
                    } catch (InterruptedException e) {
                        it = finishQueue.poll();
                    }
                    if (it == null) {
                        if (left <= 0 || completerClosed) {
                            break;
                        }
                        continue;
                    }
                    buf.add(it);
                }
                flush(conn, buf);
            }
        }
    }

    private void flush(Conn conn, List<FinishItem> all) {
        List<FinishItem> snoozed = new ArrayList<>();
        List<FinishItem> finished = new ArrayList<>(all.size());
        for (FinishItem it : all) {
            (it.snooze() ? snoozed : finished).add(it);
        }
        if (!snoozed.isEmpty()) {
            write(conn, snoozed, true);
        }
        if (!finished.isEmpty()) {
            write(conn, finished, false);
        }
    }

    private void write(Conn conn, List<FinishItem> items, boolean snooze) {
        List<PgStore.Completion> comps = new ArrayList<>(items.size());
        List<PgStore.Lease> leases = new ArrayList<>(items.size());
        long[] delays = new long[items.size()];
        for (int i = 0; i < items.size(); i++) {
            comps.add(items.get(i).c());
            leases.add(items.get(i).c().lease());
            delays[i] = items.get(i).c().retryMicros();
        }
        boolean[] ok = null;
        Exception failure = null;
        long started = System.nanoTime();
        long wait = 50;
        while (true) {
            try {
                if (snooze) {
                    ok = store.snooze(conn.get(), leases, delays);
                } else {
                    ok = store.finish(conn.get(), comps);
                    counts.incrementAndGet(C_FINISH_STMTS);
                }
                break;
            } catch (SQLException | RuntimeException e) {
                conn.drop();
                failure = e;
                if (TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + wait > FINISH_RETRY_FOR_MS) {
                    break;
                }
                LOG.warn("finish failed; retrying tasks={} retry_in_ms={} worker_id={} error={}", comps.size(), wait, id, e.toString());
                sleepUninterruptibly(wait);
                wait = Math.min(wait * 2, 2_000);
            }
        }
        for (int i = 0; i < items.size(); i++) {
            FinishItem it = items.get(i);
            running.remove(it.e());
            if (ok == null) {
                metrics.resultDropped(it.e().q.name);
                logTask(LOG::error, "writing the result failed; the lease will expire and the task be reclaimed", it.e(),
                        "outcome", snooze ? "SNOOZED" : it.d().outcome(), "error", String.valueOf(failure));
            } else if (!ok[i]) {
                count(it.e().q, C_LOST);
                metrics.leaseLost(it.e().q.name);
                logTask(LOG::warn, "lease lost before the result was written; result discarded", it.e(), "outcome",
                        snooze ? "SNOOZED" : it.d().outcome());
            } else {
                recordFinish(it);
            }
        }
    }

    private static void sleepUninterruptibly(long ms) {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        boolean interrupted = false;
        while (true) {
            long left = until - System.nanoTime();
            if (left <= 0) {
                break;
            }
            try {
                TimeUnit.NANOSECONDS.sleep(left);
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private void recordFinish(FinishItem it) {
        if (it.snooze()) {
            count(it.e().q, C_SNOOZED);
            metrics.snoozed(it.e().q.name);
            logTask(LOG::info, "task snoozed", it.e(), "retry_in_ms", it.c().retryMicros() / 1000);
            return;
        }
        count(it.e().q, switch (it.c().status()) {
            case SUCCEEDED -> C_SUCCEEDED;
            case PENDING -> C_RETRIED;
            default -> C_DEAD;
        });
        metrics.attempt(it.e().q.name, it.d().outcome());
        if (it.c().status() == Status.DEAD) {
            metrics.deadLettered(it.e().q.name);
        }
        switch (it.c().status()) {
            case SUCCEEDED -> {
                if (LOG.isDebugEnabled()) {
                    logTask(LOG::debug, "task succeeded", it.e(), "duration_ms", it.durNanos() / 1_000_000);
                }
            }
            case PENDING -> logTask(LOG::warn, "attempt failed; retry scheduled", it.e(), "outcome", it.d().outcome(),
                    "retry_in_ms", it.d().retryIn().toMillis(), "error_type", it.f().type(), "error", it.f().message());
            case DEAD -> logTask(LOG::error, "task dead-lettered", it.e(), "reason",
                    it.d().outcome() == Outcome.PERMANENT_FAILURE ? "permanent failure" : "attempts exhausted", "outcome",
                    it.d().outcome(), "error_type", it.f().type(), "error", it.f().message());
            default -> { }
        }
    }

    // --- Worker registry ----------------------------------------------------

    /**
     * The worker's entry in the worker registry, as Go's worker keeps it:
     * registered at start, refreshed every registry interval with the executions
     * in flight, stale after three missed refreshes, removed at stop.
     */
    private final class Registry {
        private final Conn conn = new Conn(); // used by the registry thread, then by deregister
        private final String host = hostName();
        private final int pid = (int) ProcessHandle.current().pid();
        private final String version = sdkVersion();
        private final int slots = queues.values().stream().mapToInt(q -> q.concurrency).sum();
        private final List<String> handlerList = List.of(handlerNames);
        private final List<String> queueList = List.copyOf(queues.keySet());

        void refresh() {
            int inFlight = queues.values().stream().mapToInt(q -> q.busy.get()).sum();
            long staleAfter = registryInterval.toNanos() / 1000 * REGISTRY_STALE_REFRESHES;
            try {
                store.registerWorker(conn.get(), new PgStore.Registration(id, host, pid, version, queueList,
                        handlerList, slots, inFlight, staleAfter, staleAfter + REGISTRY_EXPIRE_AFTER.toNanos() / 1000));
            } catch (SQLException | RuntimeException e) {
                conn.drop();
                LOG.warn("registering the worker failed; operators may see it as stale until the next refresh worker_id={} error={}",
                        id, e.toString());
            }
        }

        void deregister() {
            try {
                store.deregisterWorker(conn.get(), id);
            } catch (SQLException | RuntimeException e) {
                LOG.warn("deregistering the worker failed; its entry turns stale, then expires worker_id={} error={}",
                        id, e.toString());
            } finally {
                conn.close();
            }
        }
    }

    private static String hostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            return "";
        }
    }

    /** The version a registry entry shows: the SDK's, marked as Java's. */
    private static String sdkVersion() {
        String v = Worker.class.getPackage() == null ? null : Worker.class.getPackage().getImplementationVersion();
        return "java " + (v == null ? "unknown" : v);
    }

    // --- Maintenance --------------------------------------------------------

    private void maintenanceLoop() {
        long now = System.nanoTime();
        long reclaimEvery = reclaimInterval == null ? Long.MAX_VALUE : reclaimInterval.toNanos();
        long purgeEvery = purgeInterval == null ? Long.MAX_VALUE : purgeInterval.toNanos();
        long nextReclaim = reclaimInterval == null ? Long.MAX_VALUE
                : now + 1 + ThreadLocalRandom.current().nextLong(reclaimEvery);
        long nextPurge = purgeInterval == null ? Long.MAX_VALUE
                : now + 1 + ThreadLocalRandom.current().nextLong(purgeEvery);
        try (Conn conn = new Conn()) {
            while (!loopsStopped) {
                long wake = Math.min(nextReclaim, nextPurge);
                long left = wake - System.nanoTime();
                if (left > 0) {
                    try {
                        TimeUnit.NANOSECONDS.sleep(left);
                    } catch (InterruptedException e) {
                        continue;
                    }
                }
                if (loopsStopped) {
                    return;
                }
                now = System.nanoTime();
                if (now - nextReclaim >= 0) {
                    reclaimExpired(conn);
                    nextReclaim = System.nanoTime() + reclaimEvery;
                }
                if (now - nextPurge >= 0) {
                    purgeSucceeded(conn);
                    nextPurge = System.nanoTime() + purgeEvery;
                }
            }
        }
    }

    private Duration reclaimLease() {
        Duration lease = null;
        for (QueueRunner q : queues.values()) {
            if (lease == null || q.lease.compareTo(lease) < 0) {
                lease = q.lease;
            }
        }
        return lease == null ? QueueConfig.DEFAULT_LEASE : lease;
    }

    /**
     * Takes over tasks of this worker's queues whose lease expired (the store
     * records the lost execution as a LEASE_EXPIRED attempt numbered past the
     * task's highest) and retries or dead-letters each per its queue's policy.
     */
    private void reclaimExpired(Conn conn) {
        List<String> names = new ArrayList<>(queues.keySet());
        for (int round = 0; round < MAINTENANCE_ROUNDS && !loopsStopped; round++) {
            List<Task> tasks;
            try {
                tasks = store.reclaimExpired(conn.get(), names, RECLAIM_BATCH, reclaimLease().toNanos() / 1000, id);
            } catch (SQLException | RuntimeException e) {
                conn.drop();
                LOG.error("reclaiming expired leases failed worker_id={} error={}", id, e.toString());
                return;
            }
            if (tasks.isEmpty()) {
                return;
            }
            List<PgStore.Completion> comps = new ArrayList<>();
            List<Decision> decisions = new ArrayList<>();
            for (Task t : tasks) {
                QueueRunner q = queues.get(t.queue());
                Policy p = (q == null ? Policy.defaults() : q.policy).forTask(t);
                Decision d = p.decideLeaseExpired(t.attempts(), ThreadLocalRandom.current().nextDouble());
                decisions.add(d);
                comps.add(new PgStore.Completion(new PgStore.Lease(t.id(), t.leaseToken()),
                        d.dead() ? Status.DEAD : Status.PENDING, d.dead() ? 0 : d.retryIn().toNanos() / 1000, null,
                        null, null, 0));
                logFields(LOG::warn, "lease expired; the execution was lost and the task reclaimed", t.id().toString(),
                        t.queue(), t.handler(), t.attempts());
            }
            boolean[] ok;
            try {
                ok = store.finish(conn.get(), comps);
            } catch (SQLException | RuntimeException e) {
                conn.drop();
                LOG.error("deciding reclaimed tasks failed; they will be reclaimed again tasks={} worker_id={} error={}",
                        tasks.size(), id, e.toString());
                return;
            }
            for (int i = 0; i < tasks.size(); i++) {
                Task t = tasks.get(i);
                count(queues.get(t.queue()), C_RECLAIMED);
                metrics.reclaimed(t.queue());
                metrics.attempt(t.queue(), Outcome.LEASE_EXPIRED);
                if (ok[i] && decisions.get(i).dead()) {
                    count(queues.get(t.queue()), C_DEAD);
                    metrics.deadLettered(t.queue());
                }
                if (!ok[i]) {
                    logFields(LOG::warn, "deciding a reclaimed task failed: lease lost", t.id().toString(), t.queue(),
                            t.handler(), t.attempts());
                } else if (decisions.get(i).dead()) {
                    logFields(LOG::error, "task dead-lettered", t.id().toString(), t.queue(), t.handler(), t.attempts(),
                            "reason", "attempts exhausted", "outcome", Outcome.LEASE_EXPIRED);
                } else {
                    logFields(LOG::warn, "retry scheduled after lost execution", t.id().toString(), t.queue(),
                            t.handler(), t.attempts(), "outcome", Outcome.LEASE_EXPIRED, "retry_in_ms",
                            decisions.get(i).retryIn().toMillis());
                }
            }
            if (tasks.size() < RECLAIM_BATCH) {
                return;
            }
        }
    }

    private void purgeSucceeded(Conn conn) {
        String filter = "{\"older_than\":\"" + GoDurations.format(succeededTtl) + "\",\"status\":\"SUCCEEDED\"}";
        for (int round = 0; round < MAINTENANCE_ROUNDS && !loopsStopped; round++) {
            long n;
            try {
                n = store.purgeSucceeded(conn.get(), succeededTtl.toNanos() / 1000, PURGE_BATCH, PURGE_ACTOR, filter);
            } catch (SQLException | RuntimeException e) {
                conn.drop();
                if (!loopsStopped) {
                    LOG.error("purging succeeded tasks failed worker_id={} error={}", id, e.toString());
                }
                return;
            }
            if (n > 0) {
                metrics.purged(n);
                LOG.info("purged succeeded tasks count={} older_than={} worker_id={}", n, GoDurations.format(succeededTtl), id);
            }
            if (n < PURGE_BATCH) {
                return;
            }
        }
    }

}
