package io.github.srjn45.rdq;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import javax.sql.DataSource;

/**
 * Submits tasks to rdq on PostgreSQL, on the schema the Go migrations created,
 * with the same statements as Go's client on pgstore. It is thread-safe.
 *
 * <pre>{@code
 * RdqClient client = RdqClient.builder(dataSource).schema("rdq").build();
 * SubmitResult r = client.submit(NewTask.builder("emails", "send-welcome")
 *         .payload("{\"user\":42}").contentType("application/json")
 *         .idempotencyKey("signup-42").build());
 * }</pre>
 *
 * Every submission of one call is one statement: all of its tasks are stored or
 * none. Inside a transaction of the caller's, use the methods taking a
 * {@link Connection}: the tasks commit or roll back with the caller's work.
 */
public final class RdqClient {
    /** The worker ID recorded on first failures when none is configured. */
    public static final String DEFAULT_ID = "client";

    private final DataSource dataSource;
    private final PgStore store;
    private final String id;
    private final java.util.Map<String, Policy> policies;
    private final Tracing tracing;

    private RdqClient(Builder b) {
        this.dataSource = b.dataSource;
        this.store = new PgStore(b.schema, b.keyRetention);
        this.id = b.id;
        this.policies = java.util.Map.copyOf(b.policies);
        this.tracing = b.tracing;
    }

    /** A builder for a client on dataSource. */
    public static Builder builder(DataSource dataSource) {
        return new Builder(dataSource);
    }

    /** Configures an {@link RdqClient}. */
    public static final class Builder {
        private final DataSource dataSource;
        private String schema = PgStore.DEFAULT_SCHEMA;
        private String id = DEFAULT_ID;
        private Duration keyRetention = Duration.ZERO;
        private final java.util.Map<String, Policy> policies = new java.util.HashMap<>();
        private Tracing tracing = Tracing.NONE;

        private Builder(DataSource ds) {
            this.dataSource = Objects.requireNonNull(ds, "dataSource");
        }

        /** The PostgreSQL schema holding rdq's tables; "rdq" by default. */
        public Builder schema(String s) {
            this.schema = s;
            return this;
        }

        /**
         * How long an idempotency key outlives its task once retention purged
         * it (a resubmission within it returns the original ID, marked purged);
         * 7 days by default, as pgstore's Config.KeyRetention. Give every client
         * and worker of a schema the same value.
         */
        public Builder keyRetention(Duration d) {
            this.keyRetention = Objects.requireNonNull(d, "keyRetention");
            return this;
        }

        /** The ID recorded as the worker of first failures; "client" by default. */
        public Builder id(String id) {
            this.id = id == null || id.isEmpty() ? DEFAULT_ID : id;
            return this;
        }

        /**
         * The policy of a queue, used to fingerprint first failures submitted to
         * it the way its workers fingerprint theirs (see
         * {@link Policy.Builder#fingerprint}) and to check a task's own budget and
         * timeout against the queue's bounds ({@link Policy.Builder#taskMaxAttempts},
         * {@link Policy.Builder#taskMaxTimeout}); the worker's policy, typically. A
         * queue without one is checked against the defaults.
         */
        public Builder policy(String queue, Policy p) {
            policies.put(Objects.requireNonNull(queue, "queue"), Objects.requireNonNull(p, "policy"));
            return this;
        }

        /**
         * Traces submissions with OpenTelemetry (opentelemetry-api is an
         * optional dependency: add it to use this): each submit call is a
         * PRODUCER span {@code rdq.submit} from the tracer
         * {@code io.github.srjn45.rdq}, a child of the caller's current span,
         * with the attributes {@code rdq.tasks} and, when they apply to every
         * task, {@code rdq.queue}, {@code rdq.handler} and {@code rdq.task_id};
         * and its W3C trace context ({@code traceparent}, {@code tracestate})
         * is written into each task's headers, as Go's client writes it (a
         * header the task sets itself wins). A worker of either language then
         * parents its execution span by it. Without it the client writes no
         * trace context.
         *
         * @throws NullPointerException if openTelemetry is null
         */
        public Builder openTelemetry(io.opentelemetry.api.OpenTelemetry openTelemetry) {
            this.tracing = new OtelTracing(
                    Objects.requireNonNull(openTelemetry, "RdqClient.Builder.openTelemetry: openTelemetry is null"));
            return this;
        }

        /**
         * Checks the schema version and returns the client.
         *
         * @throws SchemaVersionException when the schema is at a version this SDK does not know
         * @throws StoreException when the database cannot be reached
         */
        public RdqClient build() {
            RdqClient c = new RdqClient(this);
            try (Connection conn = dataSource.getConnection()) {
                c.store.checkVersion(conn);
            } catch (SQLException e) {
                throw new StoreException("rdq: client: checking the schema version of " + c.store.schema, e);
            }
            return c;
        }
    }

    /** Submits one task in its own transaction. */
    public SubmitResult submit(NewTask task) {
        return submitAll(List.of(task)).get(0);
    }

    /**
     * Submits tasks in one statement (one round trip when none conflicts) and
     * returns their results in order. A later task repeating an earlier one's
     * idempotency key is a duplicate of it.
     *
     * @throws InvalidInputException naming the first invalid task; nothing is stored
     */
    public List<SubmitResult> submitAll(List<NewTask> tasks) {
        Tracing.Submission span = submission(tasks);
        try {
            List<PgStore.NewRow> rows = prepare(tasks, span);
            try (Connection conn = dataSource.getConnection()) {
                return run(conn, rows);
            } catch (SQLException e) {
                throw new StoreException("rdq: client: submit " + tasks.size() + " tasks: " + e.getMessage(), e);
            }
        } catch (RuntimeException e) {
            span.failed(e);
            throw e;
        } finally {
            span.end();
        }
    }

    private Tracing.Submission submission(List<NewTask> tasks) {
        if (tracing == Tracing.NONE) {
            return Tracing.NO_SUBMISSION;
        }
        List<String> queues = new ArrayList<>(tasks.size());
        List<String> handlers = new ArrayList<>(tasks.size());
        for (NewTask t : tasks) {
            queues.add(t.queue);
            handlers.add(t.handler);
        }
        return tracing.submission(queues, handlers);
    }

    /** Submits one task on the caller's connection, inside its transaction if one is open. */
    public SubmitResult submit(Connection conn, NewTask task) {
        return submitAll(conn, List.of(task)).get(0);
    }

    /**
     * Submits tasks on the caller's connection, inside its transaction if one is
     * open: they become visible, and due tasks wake workers, when it commits.
     * Nothing here commits, rolls back or changes the connection's auto-commit.
     */
    public List<SubmitResult> submitAll(Connection conn, List<NewTask> tasks) {
        Objects.requireNonNull(conn, "conn");
        Tracing.Submission span = submission(tasks);
        try {
            List<PgStore.NewRow> rows = prepare(tasks, span);
            try {
                return run(conn, rows);
            } catch (SQLException e) {
                throw new StoreException("rdq: client: submit " + tasks.size() + " tasks: " + e.getMessage(), e);
            }
        } catch (RuntimeException e) {
            span.failed(e);
            throw e;
        } finally {
            span.end();
        }
    }

    private List<SubmitResult> run(Connection conn, List<PgStore.NewRow> rows) throws SQLException {
        List<PgStore.Enqueued> res = store.enqueue(conn, rows);
        List<SubmitResult> out = new ArrayList<>(res.size());
        for (PgStore.Enqueued e : res) {
            out.add(new SubmitResult(e.task(), e.duplicate(), e.purged()));
        }
        return out;
    }

    /** What {@link #redrive} did with each task named. */
    public enum RedriveOutcome {
        /** The task was DEAD and is now PENDING in a new life. */
        REDRIVEN,
        /** There is no such task. */
        NOT_FOUND,
        /** The task is not DEAD (or was named twice); nothing changed. */
        NOT_DEAD
    }

    /**
     * Moves the named DEAD tasks back to PENDING in a new life (attempts reset,
     * history and last error kept, attempt numbers continuing), due now, with an
     * audit entry naming the actor and the reason: the same statements as the
     * Go store's Redrive, in one transaction. For redrives by filter or failure
     * group, dry runs and payload edits, use {@link RdqAdmin}.
     *
     * @throws InvalidInputException when the actor or the reason is empty
     */
    public java.util.Map<UUID, RedriveOutcome> redrive(List<UUID> ids, String actor, String reason) {
        if (actor == null || actor.isBlank()) {
            throw new InvalidInputException("rdq: invalid input: an actor is required: say who is redriving");
        }
        if (reason == null || reason.isBlank()) {
            throw new InvalidInputException("rdq: invalid input: a reason is required: say why (a ticket, an incident, the fix that was deployed)");
        }
        try (Connection conn = dataSource.getConnection()) {
            boolean auto = conn.getAutoCommit();
            conn.setAutoCommit(false);
            try {
                java.util.Map<UUID, Status> before = store.redrive(conn, ids, 0, 0, actor, reason);
                conn.commit();
                java.util.Map<UUID, RedriveOutcome> out = new java.util.LinkedHashMap<>();
                for (UUID id : ids) {
                    Status s = before.get(id);
                    RedriveOutcome o = s == null ? RedriveOutcome.NOT_FOUND
                            : s == Status.DEAD && !out.containsKey(id) ? RedriveOutcome.REDRIVEN : RedriveOutcome.NOT_DEAD;
                    out.putIfAbsent(id, o);
                }
                return out;
            } catch (SQLException | RuntimeException e) {
                conn.rollback();
                throw e;
            } finally {
                conn.setAutoCommit(auto);
            }
        } catch (SQLException e) {
            throw new StoreException("rdq: client: redrive " + ids.size() + " tasks: " + e.getMessage(), e);
        }
    }

    /** The task with this ID, if it exists. */
    public Optional<Task> get(UUID id) {
        try (Connection conn = dataSource.getConnection()) {
            return Optional.ofNullable(store.get(conn, id));
        } catch (SQLException e) {
            throw new StoreException("rdq: client: get " + id + ": " + e.getMessage(), e);
        }
    }

    /** The attempt history of a task across its lives, in number order. */
    public List<Attempt> history(UUID id) {
        try (Connection conn = dataSource.getConnection()) {
            return store.attempts(conn, id);
        } catch (SQLException e) {
            throw new StoreException("rdq: client: history of " + id + ": " + e.getMessage(), e);
        }
    }

    private List<PgStore.NewRow> prepare(List<NewTask> tasks, Tracing.Submission span) {
        java.util.Map<String, String> trace = span.headers();
        List<PgStore.NewRow> rows = new ArrayList<>(tasks.size());
        for (int i = 0; i < tasks.size(); i++) {
            try {
                rows.add(prepare(tasks.get(i), trace));
            } catch (InvalidInputException e) {
                throw tasks.size() == 1 ? e : new InvalidInputException("rdq: client: task " + i + ": " + e.getMessage());
            }
        }
        if (tracing != Tracing.NONE) {
            span.tasks(rows.stream().map(r -> r.id().toString()).toList());
        }
        return rows;
    }

    /** t as a row to insert, its headers the trace context's plus its own (its own win). */
    private PgStore.NewRow prepare(NewTask t, java.util.Map<String, String> trace) {
        Duration delay = t.delay;
        if (t.runAt != null) {
            delay = Duration.between(Instant.now(), t.runAt);
            if (delay.isNegative()) {
                delay = Duration.ZERO;
            }
        }
        if (delay.isNegative()) {
            throw new InvalidInputException("rdq: invalid input: delay " + GoDurations.format(delay) + " is negative");
        }
        java.util.Map<String, String> given = t.headers;
        if (!trace.isEmpty()) {
            given = new java.util.LinkedHashMap<>(trace);
            given.putAll(t.headers);
        }
        Limits.validateTask(t.queue, t.handler, t.payload, t.contentType, given, t.idempotencyKey);
        Policy policy = policies.getOrDefault(t.queue, Policy.defaults());
        policy.checkTask(t.maxAttempts, t.timeout);
        Outcome outcome = null;
        Failure f = null;
        if (t.firstFailure != null) {
            outcome = Failures.isPermanent(t.firstFailure) ? Outcome.PERMANENT_FAILURE : Outcome.RETRYABLE_FAILURE;
            Failure d = policy.describe(t.firstFailure);
            f = new Failure(PgStore.clean(d.type()), PgStore.clean(d.message()), PgStore.clean(d.stack()),
                    PgStore.clean(d.fingerprint()));
        }
        java.util.Map<String, String> headers = new java.util.LinkedHashMap<>();
        given.forEach((k, v) -> headers.put(PgStore.clean(k), PgStore.clean(v)));
        long delayMicros;
        try {
            delayMicros = delay.toNanos() / 1000;
        } catch (ArithmeticException e) {
            delayMicros = Long.MAX_VALUE / 1000;
        }
        return new PgStore.NewRow(t.id != null ? t.id : Ids.newId(), t.queue, t.handler, t.payload, PgStore.clean(t.contentType), headers,
                PgStore.clean(t.idempotencyKey), delayMicros, outcome, f, id, 0L, t.maxAttempts.orElse(0),
                t.timeout.map(d -> d.toNanos() / 1000).orElse(0L));
    }
}
