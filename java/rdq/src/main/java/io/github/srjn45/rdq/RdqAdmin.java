package io.github.srjn45.rdq;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * Operations on a schema's queues, with the same statements and audit entries
 * as Go's pgstore (the {@code rdq} command's {@code stats}, {@code pause} and
 * {@code resume}): per-queue counts, and pausing and resuming queues on every
 * worker at once, Go's and Java's alike. It is thread-safe.
 *
 * <pre>{@code
 * RdqAdmin admin = RdqAdmin.builder(dataSource).schema("rdq").build();
 * admin.pauseQueue("emails", "alice", "INC-42: the mail relay is down");
 * admin.stats();                       // pending, in flight, dead, succeeded per queue
 * admin.resumeQueue("emails", "alice", "INC-42 fixed");
 * }</pre>
 */
public final class RdqAdmin {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final DataSource dataSource;
    private final PgStore store;

    private RdqAdmin(Builder b) {
        this.dataSource = b.dataSource;
        this.store = new PgStore(b.schema);
    }

    /**
     * A builder for operations on dataSource.
     *
     * @throws NullPointerException if dataSource is null
     */
    public static Builder builder(DataSource dataSource) {
        return new Builder(dataSource);
    }

    /** Configures an {@link RdqAdmin}. */
    public static final class Builder {
        private final DataSource dataSource;
        private String schema = PgStore.DEFAULT_SCHEMA;

        private Builder(DataSource ds) {
            this.dataSource = Objects.requireNonNull(ds, "RdqAdmin.builder: dataSource is null");
        }

        /** The PostgreSQL schema holding rdq's tables; "rdq" by default. */
        public Builder schema(String s) {
            this.schema = Objects.requireNonNull(s, "RdqAdmin.Builder.schema: schema is null");
            return this;
        }

        /**
         * Checks the schema version and returns the operations.
         *
         * @throws InvalidInputException when the schema name is invalid
         * @throws SchemaVersionException when the schema is at a version this SDK does not know
         * @throws StoreException when the database cannot be reached
         */
        public RdqAdmin build() {
            RdqAdmin a = new RdqAdmin(this);
            try (Connection conn = dataSource.getConnection()) {
                a.store.checkVersion(conn);
            } catch (SQLException e) {
                throw new StoreException("rdq: admin: checking the schema version of " + a.store.schema, e);
            }
            return a;
        }
    }

    /**
     * The counts of one queue: PENDING (due or not, held by a paused handler
     * or not), IN_FLIGHT, DEAD and SUCCEEDED tasks (those finished within the
     * window asked for), and how long the longest-waiting due PENDING task has
     * waited, on the database's clock (zero when none is due).
     *
     * @param queue        the queue's name
     * @param pending      PENDING tasks
     * @param inFlight     IN_FLIGHT tasks
     * @param dead         DEAD tasks
     * @param succeeded    SUCCEEDED tasks within the window
     * @param oldestDueAge how long the oldest due PENDING task has been due
     */
    public record QueueStats(String queue, long pending, long inFlight, long dead, long succeeded,
            Duration oldestDueAge) {}

    /**
     * The counts of every queue that has tasks, ordered by name, counting every
     * retained SUCCEEDED task. Each status is read from its own index.
     *
     * @throws StoreException when the database fails
     */
    public List<QueueStats> stats() {
        return statsOf(0);
    }

    /**
     * {@link #stats()}, counting only the SUCCEEDED tasks that finished within
     * the last succeededWindow.
     *
     * @throws InvalidInputException when succeededWindow is not positive (use
     *         {@link #stats()} for every retained task)
     */
    public List<QueueStats> stats(Duration succeededWindow) {
        Objects.requireNonNull(succeededWindow, "RdqAdmin.stats: succeededWindow is null; use stats() for every retained task");
        if (succeededWindow.isZero() || succeededWindow.isNegative()) {
            throw new InvalidInputException("rdq: invalid input: RdqAdmin.stats: succeededWindow "
                    + GoDurations.format(succeededWindow) + " is not positive; use stats() for every retained task");
        }
        long micros;
        try {
            micros = succeededWindow.toNanos() / 1000;
        } catch (ArithmeticException e) {
            micros = Long.MAX_VALUE;
        }
        return statsOf(micros);
    }

    private List<QueueStats> statsOf(long windowMicros) {
        try (Connection conn = dataSource.getConnection()) {
            return store.stats(conn, windowMicros);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: stats: " + e.getMessage(), e);
        }
    }

    /**
     * Pauses a queue: no worker, Go's or Java's, claims its tasks until it is
     * resumed, across restarts; running executions finish. Pausing writes a
     * "pause" audit entry naming the actor and the reason in the same
     * statement; pausing a paused queue changes nothing and writes none.
     *
     * @return true when the queue was running and is now paused
     * @throws InvalidInputException when the queue name is invalid, or the actor or the reason is empty
     */
    public boolean pauseQueue(String queue, String actor, String reason) {
        return setPaused(true, queue, actor, reason);
    }

    /**
     * Resumes a paused queue and wakes the workers listening on the schema.
     * Resuming writes a "resume" audit entry naming the actor and the reason
     * in the same statement; resuming a queue that is not paused changes
     * nothing and writes none.
     *
     * @return true when the queue was paused and now runs
     * @throws InvalidInputException when the queue name is invalid, or the actor or the reason is empty
     */
    public boolean resumeQueue(String queue, String actor, String reason) {
        return setPaused(false, queue, actor, reason);
    }

    private boolean setPaused(boolean pause, String queue, String actor, String reason) {
        String method = pause ? "RdqAdmin.pauseQueue" : "RdqAdmin.resumeQueue";
        Limits.validateName("queue", Objects.requireNonNull(queue, method + ": queue is null"));
        requireText(method, "actor", actor, "say who is acting");
        requireText(method, "reason", reason, "say why (a ticket, an incident)");
        String filter;
        try {
            filter = JSON.writeValueAsString(Map.of("queue", queue));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("rdq: encoding the audit filter", e);
        }
        try (Connection conn = dataSource.getConnection()) {
            return store.setQueuePaused(conn, pause, queue, actor, reason, filter);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: " + (pause ? "pause" : "resume") + " queue " + queue + ": "
                    + e.getMessage(), e);
        }
    }

    /**
     * The names of the paused queues, sorted.
     *
     * @throws StoreException when the database fails
     */
    public List<String> pausedQueues() {
        try (Connection conn = dataSource.getConnection()) {
            return store.pausedQueues(conn);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: paused queues: " + e.getMessage(), e);
        }
    }

    private static void requireText(String method, String what, String v, String hint) {
        if (v == null || v.isBlank()) {
            throw new InvalidInputException("rdq: invalid input: " + method + ": the " + what + " is "
                    + (v == null ? "null" : "empty") + "; " + hint);
        }
    }
}
