package io.github.srjn45.rdq;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.UUID;
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
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(RdqAdmin.class);

    /** How many tasks one statement of a bulk redrive or purge touches, as Go's {@code dlq.DefaultChunkSize}. */
    public static final int CHUNK_SIZE = 5000;
    /** Bounds {@link RedriveOptions.Builder#delay} and {@link RedriveOptions.Builder#spread}, as Go's {@code dlq.MaxSpread}. */
    public static final Duration MAX_SPREAD = Duration.ofDays(30);
    /** Bounds the actor of an audited operation, in bytes, as Go's {@code dlq.MaxActorLength}. */
    public static final int MAX_ACTOR_LENGTH = 128;
    /** Bounds the reason of an audited operation, in bytes, as Go's {@code dlq.MaxReasonLength}. */
    public static final int MAX_REASON_LENGTH = 1024;

    private final DataSource dataSource;
    private final PgStore store;
    private final DeadSql dead;

    private RdqAdmin(Builder b) {
        this.dataSource = b.dataSource;
        this.store = new PgStore(b.schema);
        this.dead = new DeadSql("\"" + store.schema + "\"", store.channel);
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

    // --- Handlers ----------------------------------------------------------

    /**
     * A paused handler, by hand or by a worker's breaker.
     *
     * @param queue       the handler's queue
     * @param handler     the handler
     * @param state       "open" (paused) or "half_open" (a probe task is running)
     * @param since       when the series of pauses began
     * @param probeAt     when a probe may run; empty for a pause held until resumed
     * @param trips       the pauses of this series: 1, plus one per failed probe
     * @param actor       who paused it last (a worker's breaker names its worker)
     * @param reason      why
     * @param fingerprint the failure group that tripped the breaker
     * @param ratio       the failure ratio that tripped the breaker
     */
    public record HandlerPause(String queue, String handler, String state, Instant since, Optional<Instant> probeAt,
            int trips, String actor, String reason, Optional<String> fingerprint, OptionalDouble ratio) {}

    /**
     * Pauses a handler of a queue until {@link #resumeHandler}, as an operator
     * pauses it with Go's {@code rdq} command or rdq-server (the breaker's
     * manual control): no worker, Go's or Java's, claims its tasks, which are
     * held; the queue's other handlers run on. In one transaction with a
     * "pause_handler" audit entry (the filter names queue and handler; count
     * is the tasks held; details hold the handler, the trips and cool_off
     * "until resumed"), exactly as Go writes it. Pausing a paused handler
     * changes nothing and writes no entry.
     *
     * @return true when the handler ran and is now paused
     * @throws InvalidInputException when a name is invalid, or the actor or the reason is unfit
     * @throws StoreException when the database fails
     */
    public boolean pauseHandler(String queue, String handler, String actor, String reason) {
        return handlerPaused(true, queue, handler, actor, reason);
    }

    /**
     * Resumes a paused handler, whether paused by hand or by a breaker: its
     * held tasks are released and the queue's workers woken, in one
     * transaction with a "resume_handler" audit entry (count is the tasks
     * released). Resuming a handler that is not paused changes nothing and
     * writes no entry.
     *
     * @return true when the handler was paused and now runs
     * @throws InvalidInputException when a name is invalid, or the actor or the reason is unfit
     * @throws StoreException when the database fails
     */
    public boolean resumeHandler(String queue, String handler, String actor, String reason) {
        return handlerPaused(false, queue, handler, actor, reason);
    }

    private boolean handlerPaused(boolean pause, String queue, String handler, String actor, String reason) {
        String method = pause ? "RdqAdmin.pauseHandler" : "RdqAdmin.resumeHandler";
        Limits.validateName("queue", Objects.requireNonNull(queue, method + ": queue is null"));
        Limits.validateName("handler", Objects.requireNonNull(handler, method + ": handler is null"));
        requireAudit(method, actor, reason);
        try (Connection conn = dataSource.getConnection()) {
            boolean auto = conn.getAutoCommit();
            conn.setAutoCommit(false);
            try {
                boolean changed = pause ? dead.pauseHandler(conn, queue, handler, actor, reason)
                        : dead.resumeHandler(conn, queue, handler, actor, reason);
                conn.commit();
                return changed;
            } catch (SQLException | RuntimeException e) {
                conn.rollback();
                throw e;
            } finally {
                conn.setAutoCommit(auto);
            }
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: " + (pause ? "pause" : "resume") + " handler " + queue + "/" + handler
                    + ": " + e.getMessage(), e);
        }
    }

    /**
     * The paused handlers of queue, or of every queue when queue is empty,
     * ordered by queue and handler.
     *
     * @throws StoreException when the database fails
     */
    public List<HandlerPause> pausedHandlers(Optional<String> queue) {
        Objects.requireNonNull(queue, "RdqAdmin.pausedHandlers: queue is null; use Optional.empty() for every queue");
        queue.ifPresent(q -> Limits.validateName("queue", q));
        try (Connection conn = dataSource.getConnection()) {
            return dead.pausedHandlers(conn, queue.orElse(""));
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: paused handlers: " + e.getMessage(), e);
        }
    }

    // --- Live tasks --------------------------------------------------------

    /**
     * The live states {@link #listTasks} lists, Go's {@code store.TaskState},
     * each in its order.
     */
    public enum TaskState {
        /** PENDING tasks not yet tried in their current life, soonest due first. */
        PENDING("pending"),
        /** PENDING tasks with a failed attempt in their current life, waiting for their next try, soonest due first. */
        RETRYING("retrying"),
        /** IN_FLIGHT tasks, the lease expiring soonest first. */
        IN_FLIGHT("in_flight"),
        /** SUCCEEDED tasks still retained, most recently finished first. */
        SUCCEEDED("succeeded");

        private final String goName;

        TaskState(String goName) {
            this.goName = goName;
        }

        /** The state's name in Go, the console and the {@code rdq} command: pending, retrying, in_flight, succeeded. */
        public String goName() {
            return goName;
        }

        /**
         * The state named as Go names it.
         *
         * @throws InvalidInputException for another name
         */
        public static TaskState parse(String name) {
            for (TaskState s : values()) {
                if (s.goName.equals(name)) {
                    return s;
                }
            }
            throw new InvalidInputException("rdq: invalid input: task state " + Limits.quote(Limits.forError(String.valueOf(name)))
                    + "; want pending, retrying, in_flight or succeeded");
        }
    }

    /**
     * A position in a listing of one state, Go's {@code store.TaskCursor}: the
     * task's time in the state's order and its id.
     *
     * @param at the task's next attempt (pending, retrying), lease expiry (in flight) or finish (succeeded)
     * @param id the task
     */
    public record TaskCursor(Instant at, UUID id) {
        /** Checks both are set. */
        public TaskCursor {
            Objects.requireNonNull(at, "RdqAdmin.TaskCursor: at is null");
            Objects.requireNonNull(id, "RdqAdmin.TaskCursor: id is null");
        }

        /**
         * The cursor just past t in a listing of state, Go's {@code store.TaskCursorOf}.
         *
         * @throws InvalidInputException when t has no time of that state's order
         */
        public static TaskCursor after(TaskState state, Task t) {
            Objects.requireNonNull(state, "RdqAdmin.TaskCursor.after: state is null");
            Objects.requireNonNull(t, "RdqAdmin.TaskCursor.after: task is null");
            Instant at = switch (state) {
                case IN_FLIGHT -> t.leaseExpiresAt();
                case SUCCEEDED -> t.finishedAt();
                default -> t.nextAttemptAt();
            };
            if (at == null) {
                throw new InvalidInputException("rdq: invalid input: RdqAdmin.TaskCursor.after: task " + t.id()
                        + " has no place in a listing of " + state.goName() + " tasks");
            }
            return new TaskCursor(at, t.id());
        }
    }

    /**
     * One page of live tasks of one state, in the state's order.
     *
     * @param tasks the tasks of the page, at most the limit asked for
     * @param next  where the next page starts; empty when this page was the last
     */
    public record TaskPage(List<Task> tasks, Optional<TaskCursor> next) {
        /** Copies tasks. */
        public TaskPage {
            tasks = List.copyOf(tasks);
            Objects.requireNonNull(next, "RdqAdmin.TaskPage: next is null");
        }
    }

    /**
     * The first page of tasks in state matching filter, as Go's
     * {@code tasks.List} and the console's live tabs list them.
     *
     * @throws InvalidInputException when limit is not positive
     * @throws StoreException when the database fails
     */
    public TaskPage listTasks(TaskState state, TaskFilter filter, int limit) {
        return listTasks(state, filter, Optional.empty(), limit);
    }

    /**
     * The page of tasks in state matching filter that starts just past after
     * (from {@link TaskPage#next()}), or the first page when after is empty,
     * with pgstore's statement, served by the state's index. Pages are keyset
     * pages: a task that stays in the state at the same position is listed
     * once, never skipped.
     *
     * @throws InvalidInputException when limit is not positive
     * @throws StoreException when the database fails
     */
    public TaskPage listTasks(TaskState state, TaskFilter filter, Optional<TaskCursor> after, int limit) {
        Objects.requireNonNull(state, "RdqAdmin.listTasks: state is null");
        Objects.requireNonNull(filter, "RdqAdmin.listTasks: filter is null; use TaskFilter.all() for every task");
        Objects.requireNonNull(after, "RdqAdmin.listTasks: after is null; use Optional.empty() for the first page");
        if (limit < 1) {
            throw new InvalidInputException("rdq: invalid input: RdqAdmin.listTasks: limit " + limit
                    + " is not positive; ask for a page of at least one task");
        }
        try (Connection conn = dataSource.getConnection()) {
            TaskCursor c = after.orElse(null);
            List<Task> tasks = dead.listTasks(conn, state, filter, c == null ? null : c.at(), c == null ? null : c.id(),
                    limit);
            Optional<TaskCursor> next = tasks.size() == limit
                    ? Optional.of(TaskCursor.after(state, tasks.get(tasks.size() - 1))) : Optional.empty();
            return new TaskPage(tasks, next);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: list " + state.goName() + " tasks " + filter + ": " + e.getMessage(), e);
        }
    }

    /** Bounds the ids of {@link #retryNow} and {@link #cancel}, as Go's {@code tasks.MaxIDs}. */
    public static final int MAX_LIVE_IDS = 1000;

    /**
     * The task holding an idempotency key in a queue, as Go's
     * {@code tasks.ByKey}; empty when no task holds it (never submitted, or
     * its task was purged).
     *
     * @throws InvalidInputException when the queue name is invalid or the key is empty
     * @throws StoreException when the database fails
     */
    public Optional<Task> taskByKey(String queue, String key) {
        Limits.validateName("queue", Objects.requireNonNull(queue, "RdqAdmin.taskByKey: queue is null"));
        Objects.requireNonNull(key, "RdqAdmin.taskByKey: key is null");
        if (key.isEmpty()) {
            throw new InvalidInputException("rdq: invalid input: RdqAdmin.taskByKey: the key is empty; name the "
                    + "idempotency key the task was submitted with");
        }
        try (Connection conn = dataSource.getConnection()) {
            return Optional.ofNullable(dead.taskByKey(conn, queue, key));
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: task by key in queue " + queue + ": " + e.getMessage(), e);
        }
    }

    /** What {@link #retryNow} or {@link #cancel} did with each task named. */
    public enum LiveOutcome {
        /** The task was PENDING and is changed (named twice: changed once, reported twice). */
        CHANGED,
        /** There is no such task. */
        NOT_FOUND,
        /** The task is not PENDING (running, finished or dead); nothing changed. */
        NOT_PENDING
    }

    /**
     * Makes the named PENDING tasks (waiting for their first attempt or for a
     * retry) due now, keeping their attempts and history, as Go's
     * {@code tasks.RetryNow}: in one transaction that locks them, changes them,
     * wakes their queues' workers and writes one "retry_now" audit entry
     * naming the tasks changed, when any changed.
     *
     * @return each id's outcome, in the order named
     * @throws InvalidInputException when ids is empty or over {@link #MAX_LIVE_IDS}, or the actor or reason is unfit
     * @throws StoreException when the database fails; nothing changed
     */
    public Map<UUID, LiveOutcome> retryNow(List<UUID> ids, String actor, String reason) {
        return live("RdqAdmin.retryNow", false, ids, actor, reason);
    }

    /**
     * Moves the named PENDING tasks to the dead-letter queue, each with a
     * CANCELLED attempt naming the actor and the reason (error type
     * "cancelled", one fingerprint for every cancellation), as Go's
     * {@code tasks.Cancel}: in one transaction that writes one "cancel" audit
     * entry naming the tasks cancelled, when any were. Nothing is deleted: a
     * cancelled task can be redriven.
     *
     * @return each id's outcome, in the order named
     * @throws InvalidInputException when ids is empty or over {@link #MAX_LIVE_IDS}, or the actor or reason is unfit
     * @throws StoreException when the database fails; nothing changed
     */
    public Map<UUID, LiveOutcome> cancel(List<UUID> ids, String actor, String reason) {
        return live("RdqAdmin.cancel", true, ids, actor, reason);
    }

    private Map<UUID, LiveOutcome> live(String method, boolean cancel, List<UUID> ids, String actor, String reason) {
        Objects.requireNonNull(ids, method + ": ids is null");
        if (ids.isEmpty() || ids.size() > MAX_LIVE_IDS) {
            throw new InvalidInputException("rdq: invalid input: " + method + ": " + ids.size() + " task ids; name 1 to "
                    + MAX_LIVE_IDS + " (split a longer list)");
        }
        for (UUID id : ids) {
            Objects.requireNonNull(id, method + ": an id is null");
        }
        requireAudit(method, actor, reason);
        try (Connection conn = dataSource.getConnection()) {
            boolean auto = conn.getAutoCommit();
            conn.setAutoCommit(false);
            try {
                Map<UUID, Status> before = dead.live(conn, ids, cancel, actor, reason);
                conn.commit();
                Map<UUID, LiveOutcome> out = new java.util.LinkedHashMap<>();
                for (UUID id : ids) {
                    Status st = before.get(id);
                    out.put(id, st == null ? LiveOutcome.NOT_FOUND
                            : st == Status.PENDING ? LiveOutcome.CHANGED : LiveOutcome.NOT_PENDING);
                }
                return java.util.Collections.unmodifiableMap(out);
            } catch (SQLException | RuntimeException e) {
                conn.rollback();
                throw e;
            } finally {
                conn.setAutoCommit(auto);
            }
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: " + (cancel ? "cancel " : "retry now ") + ids.size() + " tasks: "
                    + e.getMessage(), e);
        }
    }

    // --- Dead-letter queue -------------------------------------------------

    /**
     * A position in the newest-dead-first listing of dead tasks: just past the
     * task that went dead at finishedAt with the given id.
     *
     * @param finishedAt when the task went dead
     * @param id         the task
     */
    public record Cursor(Instant finishedAt, UUID id) {
        /**
         * @throws NullPointerException naming the null component
         */
        public Cursor {
            Objects.requireNonNull(finishedAt, "RdqAdmin.Cursor: finishedAt is null");
            Objects.requireNonNull(id, "RdqAdmin.Cursor: id is null");
        }

        /**
         * The cursor just past t in a listing.
         *
         * @throws InvalidInputException when t is not finished (it has no place in the listing)
         */
        public static Cursor after(Task t) {
            Objects.requireNonNull(t, "RdqAdmin.Cursor.after: task is null");
            if (t.finishedAt() == null) {
                throw new InvalidInputException("rdq: invalid input: RdqAdmin.Cursor.after: task " + t.id()
                        + " is not finished; list dead tasks to page through them");
            }
            return new Cursor(t.finishedAt(), t.id());
        }
    }

    /**
     * One page of dead tasks, newest dead first (by when they went dead, then
     * by id, descending).
     *
     * @param tasks the tasks of the page, at most the limit asked for
     * @param next  where the next page starts; empty when this page was the last
     */
    public record DeadPage(List<Task> tasks, Optional<Cursor> next) {
        /** Copies tasks. */
        public DeadPage {
            tasks = List.copyOf(tasks);
            Objects.requireNonNull(next, "RdqAdmin.DeadPage: next is null");
        }
    }

    /**
     * The first page of dead tasks matching filter, as Go's {@code dlq.List}:
     * one index range scan of at most limit entries.
     *
     * @throws InvalidInputException when limit is not positive
     * @throws StoreException when the database fails
     */
    public DeadPage listDead(DeadFilter filter, int limit) {
        return listDead(filter, Optional.empty(), limit);
    }

    /**
     * The page of dead tasks matching filter that starts just past after (from
     * {@link DeadPage#next()}), or the first page when after is empty. Pages
     * are keyset pages: tasks that go dead while a listing is paged through
     * come before its cursor and are not listed; none is listed twice.
     *
     * @throws InvalidInputException when limit is not positive
     * @throws StoreException when the database fails
     */
    public DeadPage listDead(DeadFilter filter, Optional<Cursor> after, int limit) {
        Objects.requireNonNull(filter, "RdqAdmin.listDead: filter is null; use DeadFilter.all() for every dead task");
        Objects.requireNonNull(after, "RdqAdmin.listDead: after is null; use Optional.empty() for the first page");
        if (limit < 1) {
            throw new InvalidInputException("rdq: invalid input: RdqAdmin.listDead: limit " + limit
                    + " is not positive; ask for a page of at least one task");
        }
        try (Connection conn = dataSource.getConnection()) {
            Cursor c = after.orElse(null);
            List<Task> tasks = dead.listDead(conn, filter, c == null ? null : c.finishedAt(), c == null ? null : c.id(),
                    limit);
            Optional<Cursor> next = tasks.size() == limit ? Optional.of(Cursor.after(tasks.get(tasks.size() - 1)))
                    : Optional.empty();
            return new DeadPage(tasks, next);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: list dead " + filter + ": " + e.getMessage(), e);
        }
    }

    /**
     * How many dead tasks match filter.
     *
     * @throws StoreException when the database fails
     */
    public long countDead(DeadFilter filter) {
        Objects.requireNonNull(filter, "RdqAdmin.countDead: filter is null; use DeadFilter.all() for every dead task");
        try (Connection conn = dataSource.getConnection()) {
            return dead.countDead(conn, filter);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: count dead " + filter + ": " + e.getMessage(), e);
        }
    }

    /**
     * One failure group among dead tasks: those whose last errors share a
     * fingerprint.
     *
     * @param fingerprint the group's fingerprint, for {@link DeadFilter.Builder#fingerprint}
     * @param errorType   the last error type of the example
     * @param message     the last error message of the example
     * @param count       how many dead tasks are in the group
     * @param firstSeen   when the group's earliest task went dead
     * @param lastSeen    when its latest went dead
     * @param exampleId   the group's most recently dead task
     */
    public record DeadGroup(String fingerprint, String errorType, String message, long count, Instant firstSeen,
            Instant lastSeen, UUID exampleId) {}

    /**
     * The dead tasks matching filter grouped by failure fingerprint, largest
     * group first (ties by fingerprint), as Go's {@code dlq.Groups}.
     *
     * @throws StoreException when the database fails
     */
    public List<DeadGroup> deadGroups(DeadFilter filter) {
        Objects.requireNonNull(filter, "RdqAdmin.deadGroups: filter is null; use DeadFilter.all() for every dead task");
        try (Connection conn = dataSource.getConnection()) {
            return dead.deadGroups(conn, filter);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: dead groups " + filter + ": " + e.getMessage(), e);
        }
    }

    /**
     * One audited mutation, as Go's {@code store.AuditEntry}.
     *
     * @param id      increases with every entry
     * @param at      when, on the database's clock
     * @param actor   who, as the caller named them
     * @param action  "redrive", "edit_payload", "purge", "retention", "pause", "resume",
     *                "pause_handler" or "resume_handler"
     * @param filter  the selection as JSON when the mutation was by filter, else empty
     * @param ids     the tasks affected when the mutation was by id
     * @param count   how many tasks were affected
     * @param reason  the caller's explanation
     * @param details action-specific facts, e.g. a redrive's delay and spread
     * @param queues  the queues the mutation touched, sorted, each once, whatever selected
     *                the tasks; empty in entries written before schema version 10
     */
    public record AuditEntry(long id, Instant at, String actor, String action, String filter, List<UUID> ids,
            long count, String reason, Map<String, String> details, List<String> queues) {
        /** Copies ids, details and queues. */
        public AuditEntry {
            ids = List.copyOf(ids);
            details = Map.copyOf(details);
            queues = List.copyOf(queues);
        }
    }

    /**
     * Which audit entries to list, newest first, as Go's
     * {@code store.ListAuditParams}. Immutable; build one with {@link #builder(int)}.
     */
    public static final class AuditQuery {
        private final String actor;
        private final String action;
        private final Instant since;
        private final Instant until;
        private final long beforeId;
        private final int limit;

        private AuditQuery(Builder b) {
            this.actor = b.actor;
            this.action = b.action;
            this.since = b.since;
            this.until = b.until;
            this.beforeId = b.beforeId;
            this.limit = b.limit;
        }

        /**
         * A query of at most limit entries.
         *
         * @throws InvalidInputException when limit is not positive
         */
        public static Builder builder(int limit) {
            if (limit < 1) {
                throw new InvalidInputException("rdq: invalid input: AuditQuery.builder: limit " + limit
                        + " is not positive; ask for at least one entry");
            }
            return new Builder(limit);
        }

        /** Only the entries of this actor. */
        public Optional<String> actor() {
            return Optional.ofNullable(actor);
        }

        /** Only the entries of this action. */
        public Optional<String> action() {
            return Optional.ofNullable(action);
        }

        /** Only the entries written at or after this time. */
        public Optional<Instant> since() {
            return Optional.ofNullable(since);
        }

        /** Only the entries written strictly before this time. */
        public Optional<Instant> until() {
            return Optional.ofNullable(until);
        }

        /** Only the entries with a smaller id: the page after the entry with this id. */
        public OptionalLong beforeId() {
            return beforeId == 0 ? OptionalLong.empty() : OptionalLong.of(beforeId);
        }

        /** At most this many entries. */
        public int limit() {
            return limit;
        }

        /** Builds an {@link AuditQuery}; a null value throws {@link NullPointerException} naming the setter. */
        public static final class Builder {
            private final int limit;
            private String actor;
            private String action;
            private Instant since;
            private Instant until;
            private long beforeId;

            private Builder(int limit) {
                this.limit = limit;
            }

            /** Only the entries of this actor. */
            public Builder actor(String a) {
                this.actor = Objects.requireNonNull(a, "AuditQuery.Builder.actor: actor is null");
                return this;
            }

            /** Only the entries of this action, e.g. "redrive". */
            public Builder action(String a) {
                this.action = Objects.requireNonNull(a, "AuditQuery.Builder.action: action is null");
                return this;
            }

            /** Only the entries written at or after t. */
            public Builder since(Instant t) {
                this.since = Objects.requireNonNull(t, "AuditQuery.Builder.since: t is null");
                return this;
            }

            /** Only the entries written strictly before t. */
            public Builder until(Instant t) {
                this.until = Objects.requireNonNull(t, "AuditQuery.Builder.until: t is null");
                return this;
            }

            /**
             * Only the entries with an id below id: the next page after the entry with this id.
             *
             * @throws InvalidInputException when id is not positive
             */
            public Builder beforeId(long id) {
                if (id < 1) {
                    throw new InvalidInputException("rdq: invalid input: AuditQuery.Builder.beforeId: " + id
                            + " is not positive; pass the id of the last entry of the previous page");
                }
                this.beforeId = id;
                return this;
            }

            /**
             * The query.
             *
             * @throws InvalidInputException when since is not before until
             */
            public AuditQuery build() {
                if (since != null && until != null && !since.isBefore(until)) {
                    throw new InvalidInputException("rdq: invalid input: AuditQuery: since " + since
                            + " is not before until " + until + ": the range is empty");
                }
                return new AuditQuery(this);
            }
        }
    }

    /**
     * The audit entries matching query, newest first, as Go's {@code dlq.Audit}.
     *
     * @throws StoreException when the database fails
     */
    public List<AuditEntry> audit(AuditQuery query) {
        Objects.requireNonNull(query, "RdqAdmin.audit: query is null; use AuditQuery.builder(limit).build()");
        try (Connection conn = dataSource.getConnection()) {
            return dead.listAudit(conn, query);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: audit: " + e.getMessage(), e);
        }
    }

    /**
     * Replaces a dead task's payload and redrives it, due now, in one
     * transaction, as Go's {@code dlq.EditAndRedrive}: the "edit_payload" audit
     * entry names the task and holds the SHA-256 of the old and the new
     * payload (details old_sha256 and new_sha256), never the payloads.
     *
     * @return REDRIVEN, or NOT_FOUND or NOT_DEAD when nothing changed
     * @throws InvalidInputException when the payload is over {@link Limits#MAX_PAYLOAD_BYTES},
     *         or the actor or the reason is unfit
     * @throws StoreException when the database fails; nothing changed
     */
    public RdqClient.RedriveOutcome editAndRedrive(UUID id, byte[] payload, String actor, String reason) {
        Objects.requireNonNull(id, "RdqAdmin.editAndRedrive: id is null");
        Objects.requireNonNull(payload, "RdqAdmin.editAndRedrive: payload is null; use an empty array for none");
        if (payload.length > Limits.MAX_PAYLOAD_BYTES) {
            throw new InvalidInputException("rdq: invalid input: RdqAdmin.editAndRedrive: payload is " + payload.length
                    + " bytes; the limit is " + Limits.MAX_PAYLOAD_BYTES);
        }
        requireAudit("RdqAdmin.editAndRedrive", actor, reason);
        byte[] copy = payload.clone();
        try (Connection conn = dataSource.getConnection()) {
            boolean auto = conn.getAutoCommit();
            conn.setAutoCommit(false);
            try {
                Status before = dead.editAndRedrive(conn, id, copy, actor, reason);
                conn.commit();
                return before == null ? RdqClient.RedriveOutcome.NOT_FOUND
                        : before == Status.DEAD ? RdqClient.RedriveOutcome.REDRIVEN : RdqClient.RedriveOutcome.NOT_DEAD;
            } catch (SQLException | RuntimeException e) {
                conn.rollback();
                throw e;
            } finally {
                conn.setAutoCommit(auto);
            }
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: edit and redrive " + id + ": " + e.getMessage(), e);
        }
    }

    /**
     * How a redrive by filter is done, as Go's {@code dlq.RedriveOptions}.
     * Immutable; build one with {@link #builder(String, String)}, or
     * {@link #dryRun()} to only count.
     */
    public static final class RedriveOptions {
        private final String actor;
        private final String reason;
        private final boolean dryRun;
        private final boolean all;
        private final long max;
        private final Duration delay;
        private final Duration spread;
        private final int maxLife;

        private RedriveOptions(Builder b) {
            this.actor = b.actor;
            this.reason = b.reason;
            this.dryRun = b.dryRun;
            this.all = b.all;
            this.max = b.max;
            this.delay = b.delay;
            this.spread = b.spread;
            this.maxLife = b.maxLife;
        }

        /**
         * A redrive by actor (a user or service) for reason (a ticket, an
         * incident, the fix deployed), both written to the audit log.
         *
         * @throws InvalidInputException when the actor or the reason is empty, too long or holds control characters
         */
        public static Builder builder(String actor, String reason) {
            return new Builder(false, requireAudit("RedriveOptions.builder", actor, reason), reason);
        }

        /** A dry run: counts what a redrive would move and changes nothing; it needs no actor or reason. */
        public static Builder dryRun() {
            return new Builder(true, null, null);
        }

        /** Who redrives; empty for a dry run. */
        public Optional<String> actor() {
            return Optional.ofNullable(actor);
        }

        /** Why; empty for a dry run. */
        public Optional<String> reason() {
            return Optional.ofNullable(reason);
        }

        /** True when nothing is changed. */
        public boolean isDryRun() {
            return dryRun;
        }

        /** True when an empty filter may mean the whole dead-letter queue. */
        public boolean isAll() {
            return all;
        }

        /** At most this many tasks are redriven; empty for no limit. */
        public OptionalLong max() {
            return max == 0 ? OptionalLong.empty() : OptionalLong.of(max);
        }

        /** The wait before the first attempt of the new life; zero unless set. */
        public Duration delay() {
            return delay;
        }

        /** The random extra wait, in [0, spread), added to each task; zero unless set. */
        public Duration spread() {
            return spread;
        }

        /** Tasks redriven this many times or more stay dead; empty for no cap. */
        public OptionalInt maxLife() {
            return maxLife == 0 ? OptionalInt.empty() : OptionalInt.of(maxLife);
        }

        /** Builds {@link RedriveOptions}; each setter checks its value at once. */
        public static final class Builder {
            private final boolean dryRun;
            private final String actor;
            private final String reason;
            private boolean all;
            private long max;
            private Duration delay = Duration.ZERO;
            private Duration spread = Duration.ZERO;
            private int maxLife;

            private Builder(boolean dryRun, String actor, String reason) {
                this.dryRun = dryRun;
                this.actor = actor;
                this.reason = reason;
            }

            /** Lets an empty filter mean the whole dead-letter queue (refused otherwise). */
            public Builder all() {
                this.all = true;
                return this;
            }

            /**
             * Redrives at most n tasks (which ones is up to the database).
             *
             * @throws InvalidInputException when n is not positive (leave it unset for no limit)
             */
            public Builder max(long n) {
                if (n < 1) {
                    throw new InvalidInputException("rdq: invalid input: RedriveOptions.Builder.max: " + n
                            + " is not positive; leave it unset for no limit");
                }
                this.max = n;
                return this;
            }

            /**
             * Postpones the first attempt of the new life by d.
             *
             * @throws InvalidInputException when d is negative or over {@link RdqAdmin#MAX_SPREAD}
             */
            public Builder delay(Duration d) {
                this.delay = pacing("delay", d);
                return this;
            }

            /**
             * Adds a random extra wait in [0, d) to each task, so a bulk redrive is
             * not a thundering herd.
             *
             * @throws InvalidInputException when d is negative or over {@link RdqAdmin#MAX_SPREAD}
             */
            public Builder spread(Duration d) {
                this.spread = pacing("spread", d);
                return this;
            }

            /**
             * Leaves dead the tasks already redriven n times or more; they are
             * counted in {@link RedriveResult#atLimit()}.
             *
             * @throws InvalidInputException when n is not positive (leave it unset for no cap)
             */
            public Builder maxLife(int n) {
                if (n < 1) {
                    throw new InvalidInputException("rdq: invalid input: RedriveOptions.Builder.maxLife: " + n
                            + " is not positive; leave it unset for no cap");
                }
                this.maxLife = n;
                return this;
            }

            /** The options. */
            public RedriveOptions build() {
                return new RedriveOptions(this);
            }

            private static Duration pacing(String setter, Duration d) {
                Objects.requireNonNull(d, "RedriveOptions.Builder." + setter + ": duration is null");
                if (d.isNegative() || d.compareTo(MAX_SPREAD) > 0) {
                    throw new InvalidInputException("rdq: invalid input: RedriveOptions.Builder." + setter + ": "
                            + GoDurations.format(d) + " is outside 0s to " + GoDurations.format(MAX_SPREAD));
                }
                return d;
            }
        }
    }

    /**
     * What a redrive by filter did, as Go's {@code dlq.RedriveResult}.
     *
     * @param dryRun   true when nothing was changed
     * @param matched  how many dead tasks matched when the redrive started
     * @param redriven how many went back to PENDING (for a dry run, how many would)
     * @param atLimit  how many matching tasks stayed dead at the life cap
     * @param maxLife  the life cap that applied; empty for none
     */
    public record RedriveResult(boolean dryRun, long matched, long redriven, long atLimit, OptionalInt maxLife) {
        /** Checks maxLife. */
        public RedriveResult {
            Objects.requireNonNull(maxLife, "RdqAdmin.RedriveResult: maxLife is null");
        }
    }

    /**
     * Redrives the dead tasks matching filter, as Go's {@code dlq.Redrive}:
     * each goes back to PENDING in a new life (attempts reset, history and
     * last error kept), due after the delay plus its share of the spread.
     * It works in chunks of {@link #CHUNK_SIZE}, each one statement and one
     * transaction that writes its own "redrive" audit entry (actor, the filter
     * as JSON, the count, the reason, and details delay, spread and max_life)
     * exactly as Go writes it, until every task that matched at the start is
     * done, the max is reached or only tasks at the life cap are left. Tasks
     * locked by a concurrent operation are skipped. A dry run counts, and with
     * a life cap counts the tasks at the cap too, and writes nothing.
     *
     * @throws EmptyFilterException when filter is empty and the options are not {@code all()}
     * @throws StoreException when the database fails; chunks done before stay done and audited
     */
    public RedriveResult redriveDead(DeadFilter filter, RedriveOptions opts) {
        Objects.requireNonNull(filter, "RdqAdmin.redriveDead: filter is null; use DeadFilter.all() with RedriveOptions all()");
        Objects.requireNonNull(opts, "RdqAdmin.redriveDead: opts is null; use RedriveOptions.builder(actor, reason)");
        if (filter.isEmpty() && !opts.all) {
            throw new EmptyFilterException("RdqAdmin.redriveDead", "RedriveOptions.Builder.all()");
        }
        OptionalInt cap = opts.maxLife();
        long redriven = 0;
        long atLimit = 0;
        try (Connection conn = dataSource.getConnection()) {
            long matched = dead.countDead(conn, filter);
            if (opts.dryRun) {
                if (opts.maxLife > 0 && matched > 0) {
                    DeadFilter capped = filter.withLifeAtLeast(opts.maxLife);
                    atLimit = capped == null ? 0 : dead.countDead(conn, capped);
                }
                return new RedriveResult(true, matched, capMax(matched - atLimit, opts.max), atLimit, cap);
            }
            String details = "{\"delay\":\"" + GoDurations.format(opts.delay) + "\",\"max_life\":\""
                    + opts.maxLife + "\",\"spread\":\"" + GoDurations.format(opts.spread) + "\"}";
            long remaining = capMax(matched, opts.max);
            while (remaining > 0) {
                int limit = (int) Math.min(CHUNK_SIZE, remaining);
                DeadSql.Chunk c;
                try {
                    c = dead.redriveDead(conn, filter, limit, micros(opts.delay), micros(opts.spread), opts.maxLife,
                            opts.actor, opts.reason, details);
                } catch (SQLException e) {
                    logMutation("redrive", opts.actor, filter, redriven, e);
                    throw new StoreException("rdq: admin: redrive of " + filter + " stopped after " + redriven
                            + " tasks: " + e.getMessage(), e);
                }
                redriven += c.redriven();
                atLimit = c.atLimit();
                remaining -= c.redriven();
                if (c.redriven() < limit) {
                    break;
                }
            }
            logMutation("redrive", opts.actor, filter, redriven, null);
            return new RedriveResult(false, matched, redriven, atLimit, cap);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: redrive of " + filter + ": " + e.getMessage(), e);
        }
    }

    /**
     * How a purge by filter is done, as Go's {@code dlq.PurgeOptions}.
     * Immutable; build one with {@link #builder(String, String)}, or
     * {@link #dryRun()} to only count.
     */
    public static final class PurgeOptions {
        private final String actor;
        private final String reason;
        private final boolean dryRun;
        private final boolean all;
        private final long max;

        private PurgeOptions(Builder b) {
            this.actor = b.actor;
            this.reason = b.reason;
            this.dryRun = b.dryRun;
            this.all = b.all;
            this.max = b.max;
        }

        /**
         * A purge by actor for reason, both written to the audit log.
         *
         * @throws InvalidInputException when the actor or the reason is empty, too long or holds control characters
         */
        public static Builder builder(String actor, String reason) {
            return new Builder(false, requireAudit("PurgeOptions.builder", actor, reason), reason);
        }

        /** A dry run: counts what a purge would delete and deletes nothing. */
        public static Builder dryRun() {
            return new Builder(true, null, null);
        }

        /** Who purges; empty for a dry run. */
        public Optional<String> actor() {
            return Optional.ofNullable(actor);
        }

        /** Why; empty for a dry run. */
        public Optional<String> reason() {
            return Optional.ofNullable(reason);
        }

        /** True when nothing is deleted. */
        public boolean isDryRun() {
            return dryRun;
        }

        /** True when an empty filter may mean the whole dead-letter queue. */
        public boolean isAll() {
            return all;
        }

        /** At most this many tasks are deleted; empty for no limit. */
        public OptionalLong max() {
            return max == 0 ? OptionalLong.empty() : OptionalLong.of(max);
        }

        /** Builds {@link PurgeOptions}. */
        public static final class Builder {
            private final boolean dryRun;
            private final String actor;
            private final String reason;
            private boolean all;
            private long max;

            private Builder(boolean dryRun, String actor, String reason) {
                this.dryRun = dryRun;
                this.actor = actor;
                this.reason = reason;
            }

            /** Lets an empty filter mean the whole dead-letter queue (refused otherwise). */
            public Builder all() {
                this.all = true;
                return this;
            }

            /**
             * Deletes at most n tasks.
             *
             * @throws InvalidInputException when n is not positive (leave it unset for no limit)
             */
            public Builder max(long n) {
                if (n < 1) {
                    throw new InvalidInputException("rdq: invalid input: PurgeOptions.Builder.max: " + n
                            + " is not positive; leave it unset for no limit");
                }
                this.max = n;
                return this;
            }

            /** The options. */
            public PurgeOptions build() {
                return new PurgeOptions(this);
            }
        }
    }

    /**
     * What a purge by filter did, as Go's {@code dlq.PurgeResult}.
     *
     * @param dryRun  true when nothing was deleted
     * @param matched how many dead tasks matched when the purge started
     * @param purged  how many were deleted (for a dry run, how many would be)
     */
    public record PurgeResult(boolean dryRun, long matched, long purged) {}

    /**
     * Deletes the dead tasks matching filter with their history, as Go's
     * {@code dlq.Purge}: in chunks of {@link #CHUNK_SIZE}, each one statement
     * and one transaction writing its own "purge" audit entry exactly as Go
     * writes it. Their idempotency keys are freed: the same work may be
     * submitted again at once. A dry run counts and deletes nothing.
     *
     * @throws EmptyFilterException when filter is empty and the options are not {@code all()}
     * @throws StoreException when the database fails; chunks done before stay done and audited
     */
    public PurgeResult purgeDead(DeadFilter filter, PurgeOptions opts) {
        Objects.requireNonNull(filter, "RdqAdmin.purgeDead: filter is null; use DeadFilter.all() with PurgeOptions all()");
        Objects.requireNonNull(opts, "RdqAdmin.purgeDead: opts is null; use PurgeOptions.builder(actor, reason)");
        if (filter.isEmpty() && !opts.all) {
            throw new EmptyFilterException("RdqAdmin.purgeDead", "PurgeOptions.Builder.all()");
        }
        long purged = 0;
        try (Connection conn = dataSource.getConnection()) {
            long matched = dead.countDead(conn, filter);
            long total = capMax(matched, opts.max);
            if (opts.dryRun) {
                return new PurgeResult(true, matched, total);
            }
            long remaining = total;
            while (remaining > 0) {
                int limit = (int) Math.min(CHUNK_SIZE, remaining);
                long n;
                try {
                    n = dead.purgeDead(conn, filter, limit, opts.actor, opts.reason);
                } catch (SQLException e) {
                    logMutation("purge", opts.actor, filter, purged, e);
                    throw new StoreException("rdq: admin: purge of " + filter + " stopped after " + purged + " tasks: "
                            + e.getMessage(), e);
                }
                purged += n;
                remaining -= n;
                if (n < limit) {
                    break;
                }
            }
            logMutation("purge", opts.actor, filter, purged, null);
            return new PurgeResult(false, matched, purged);
        } catch (SQLException e) {
            throw new StoreException("rdq: admin: purge of " + filter + ": " + e.getMessage(), e);
        }
    }

    /**
     * Logs a bulk mutation as Go's dlq logs it: the action, the actor, the
     * filter as the audit log records it (JSON, its text escaped) and the
     * count; never a payload.
     */
    private static void logMutation(String action, String actor, DeadFilter filter, long count, Exception failure) {
        if (failure != null) {
            LOG.error("rdq: dlq mutation failed action={} actor={} filter={} count={} error={}", action, actor,
                    filter.toJson(), count, failure.toString());
        } else {
            LOG.info("rdq: dlq mutation action={} actor={} filter={} count={}", action, actor, filter.toJson(), count);
        }
    }

    private static long capMax(long n, long limit) {
        return limit > 0 && n > limit ? limit : Math.max(n, 0);
    }

    private static long micros(Duration d) {
        return d.toNanos() / 1000;
    }

    /** Go's dlq.validateAudit: returns actor once actor and reason are fit for the audit log. */
    private static String requireAudit(String method, String actor, String reason) {
        requireText(method, "actor", actor, "say who is acting");
        requireText(method, "reason", reason, "say why (a ticket, an incident, the fix that was deployed)");
        auditText(method, "actor", actor, MAX_ACTOR_LENGTH);
        auditText(method, "reason", reason, MAX_REASON_LENGTH);
        return actor;
    }

    private static void auditText(String method, String what, String s, int limit) {
        int n = s.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
        if (n > limit) {
            throw new InvalidInputException("rdq: invalid input: " + method + ": the " + what + " is " + n
                    + " bytes; the limit is " + limit);
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isISOControl(c) && c != '\t') {
                throw new InvalidInputException("rdq: invalid input: " + method + ": the " + what
                        + " contains the control character U+" + String.format("%04X", (int) c));
            }
        }
    }

    private static void requireText(String method, String what, String v, String hint) {
        if (v == null || v.isBlank()) {
            throw new InvalidInputException("rdq: invalid input: " + method + ": the " + what + " is "
                    + (v == null ? "null" : "empty") + "; " + hint);
        }
    }
}
