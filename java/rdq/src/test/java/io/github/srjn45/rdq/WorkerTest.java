package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.slf4j.MDC;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;

class WorkerTest extends DbTestBase {
    static final Duration WAIT = Duration.ofSeconds(20);

    static QueueConfig fast(int maxAttempts) {
        return QueueConfig.builder().concurrency(4).policy(Policy.builder().maxAttempts(maxAttempts)
                .initialBackoff(Duration.ofMillis(10)).maxBackoff(Duration.ofMillis(50)).build()).build();
    }

    @Test
    void executesAndRecordsSuccess() throws Exception {
        AtomicInteger ran = new AtomicInteger();
        Worker w = started(worker().id("w-ok").queue("q", fast(3)).handle("h", ctx -> {
            assertEquals("payload", ctx.payloadText());
            assertEquals(1, ctx.attempt());
            ran.incrementAndGet();
        }));
        UUID id = client().submit(NewTask.builder("q", "h").payload("payload").build()).task().id();
        await(WAIT, "success", statusIs(id, Status.SUCCEEDED));
        List<Attempt> h = history(id);
        assertEquals(1, h.size());
        assertEquals(Outcome.SUCCESS, h.get(0).outcome());
        assertEquals("w-ok", h.get(0).workerId());
        assertEquals(1, h.get(0).leaseToken());
        assertEquals(1, ran.get());
        assertTrue(w.stop(Duration.ofSeconds(5)));
    }

    @Test
    void eachHandlerRunsWithItsTaskInTheMdcAndIsRunningFollowsTheLifecycle() throws Exception {
        LogCapture log = new LogCapture();
        Map<UUID, Map<String, String>> seen = new ConcurrentHashMap<>();
        Worker w = worker().queue("q", fast(2)).handle("h", ctx -> {
            Map<String, String> mdc = MDC.getCopyOfContextMap();
            seen.put(ctx.id(), mdc == null ? Map.of() : mdc);
            if (ctx.attempt() == 1 && ctx.payloadText().equals("fail-once")) {
                throw new IllegalStateException("once");
            }
        }).build();
        workers.add(w);
        assertFalse(w.isRunning(), "not started");
        w.start();
        assertTrue(w.isRunning());
        UUID a = client().submit(NewTask.builder("q", "h").payload("a").build()).task().id();
        UUID b = client().submit(NewTask.builder("q", "h").payload("fail-once").build()).task().id();
        await(WAIT, "both succeeded", () -> statusIs(a, Status.SUCCEEDED).getAsBoolean()
                && statusIs(b, Status.SUCCEEDED).getAsBoolean());
        assertEquals(Map.of(Worker.MDC_TASK_ID, a.toString(), Worker.MDC_QUEUE, "q", Worker.MDC_HANDLER, "h",
                Worker.MDC_ATTEMPT, "1"), seen.get(a));
        assertEquals(Map.of(Worker.MDC_TASK_ID, b.toString(), Worker.MDC_QUEUE, "q", Worker.MDC_HANDLER, "h",
                Worker.MDC_ATTEMPT, "2"), seen.get(b), "the retry's own attempt");
        assertTrue(w.stop(Duration.ofSeconds(5)));
        assertFalse(w.isRunning(), "stopped");
        log.close();
        String logs = log.text();
        assertTrue(logs.contains("DEBUG task succeeded task_id=" + a), "a success is logged at DEBUG:\n" + logs);
        assertTrue(logs.contains("WARN attempt failed; retry scheduled task_id=" + b), logs);
        assertFalse(logs.contains("INFO task succeeded"), "never at INFO:\n" + logs);
    }

    /** The count of a counter, 0 when it was never incremented. */
    static double count(SimpleMeterRegistry reg, String name, String... tags) {
        var c = reg.find(name).tags(tags).counter();
        return c == null ? 0 : c.count();
    }

    @Test
    void metricsCountWhatTheWorkerDidByTheGoWorkersNamesAndLabels() throws Exception {
        SimpleMeterRegistry reg = new SimpleMeterRegistry();
        CountDownLatch running = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Worker w = started(worker().queue("q", fast(2)).meterRegistry(reg)
                .handle("ok", ctx -> { })
                .handle("fail", ctx -> {
                    throw new IllegalStateException("down");
                })
                .handle("block", ctx -> {
                    running.countDown();
                    release.await();
                }));
        UUID ok = client().submit(NewTask.builder("q", "ok").build()).task().id();
        UUID fail = client().submit(NewTask.builder("q", "fail").build()).task().id();
        await(WAIT, "one success, one dead after two attempts", () -> statusIs(ok, Status.SUCCEEDED).getAsBoolean()
                && statusIs(fail, Status.DEAD).getAsBoolean());
        // Counted by the completer right after it wrote them: wait for the last count.
        await(WAIT, "the results counted", () -> count(reg, "rdq.worker.attempts", "queue", "q", "outcome", "SUCCESS") == 1
                && count(reg, "rdq.worker.attempts", "queue", "q", "outcome", "RETRYABLE_FAILURE") == 2
                && count(reg, "rdq.worker.dead_lettered", "queue", "q") == 1);
        assertEquals(0.0, count(reg, "rdq.worker.attempts", "queue", "q", "outcome", "PERMANENT_FAILURE"));
        assertEquals(1, reg.get("rdq.worker.handler.duration").tags("queue", "q", "handler", "ok").timer().count());
        assertEquals(2, reg.get("rdq.worker.handler.duration").tags("queue", "q", "handler", "fail").timer().count());
        assertTrue(reg.get("rdq.worker.claim.duration").tags("queue", "q").timer().count() >= 2, "claims timed");

        client().submit(NewTask.builder("q", "block").build());
        assertTrue(running.await(30, TimeUnit.SECONDS));
        assertEquals(1.0, reg.get("rdq.worker.in_flight").tags("queue", "q").gauge().value(), "one handler running");
        release.countDown();
        await(WAIT, "nothing in flight", () -> reg.get("rdq.worker.in_flight").gauge().value() == 0.0);
        assertTrue(w.stop(Duration.ofSeconds(5)));
    }

    /** A pool of at most max connections that fails at once, as a pool whose wait timed out, when all are out. */
    static final class BoundedDataSource extends org.postgresql.ds.PGSimpleDataSource {
        private static final long serialVersionUID = 1L;
        final AtomicInteger open = new AtomicInteger();
        private final javax.sql.DataSource real;
        private final int max;

        BoundedDataSource(javax.sql.DataSource real, int max) {
            this.real = real;
            this.max = max;
        }

        @Override
        public Connection getConnection() throws java.sql.SQLException {
            if (open.incrementAndGet() > max) {
                open.decrementAndGet();
                throw new java.sql.SQLTransientConnectionException("pool exhausted: all " + max + " connections in use");
            }
            Connection c = real.getConnection();
            java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();
            return (Connection) java.lang.reflect.Proxy.newProxyInstance(Connection.class.getClassLoader(),
                    new Class<?>[] {Connection.class}, (proxy, m, args) -> {
                        if (m.getName().equals("close") && closed.compareAndSet(false, true)) {
                            open.decrementAndGet();
                        }
                        try {
                            return m.invoke(c, args);
                        } catch (java.lang.reflect.InvocationTargetException e) {
                            throw e.getCause();
                        }
                    });
        }
    }

    @Test
    void aPoolTooSmallForTheWorkerFailsStartSayingHowManyItNeeds() throws Exception {
        BoundedDataSource small = new BoundedDataSource(ds, 3);
        Worker w = Worker.builder(small).schema(schema).queue("a").queue("b").handle("h", ctx -> { }).build();
        assertEquals(7, w.connectionsNeeded(), "two queues, heartbeats, results, notifications, maintenance, registry");
        ConnectionsUnavailableException e = assertThrows(ConnectionsUnavailableException.class, w::start);
        assertEquals(7, e.needed());
        assertEquals(3, e.obtained());
        assertTrue(e.getMessage().contains("the DataSource gave 3 of the 7 connections the worker holds while it runs"),
                e.getMessage());
        assertTrue(e.getMessage().contains("size its pool to at least 7 plus what the application uses"), e.getMessage());
        assertTrue(e.getMessage().contains("pool exhausted"), "the pool's own error: " + e.getMessage());
        assertEquals(0, small.open.get(), "every connection taken was given back");
        assertFalse(w.isRunning());

        BoundedDataSource enough = new BoundedDataSource(ds, 5);
        Worker lean = Worker.builder(enough).schema(schema).queue("a").handle("h", ctx -> { })
                .disableReclaim().disablePurge().disableRegistry()
                .pollInterval(Duration.ofMillis(100)).build();
        assertEquals(4, lean.connectionsNeeded(), "one queue, heartbeats, results, notifications");
        workers.add(lean);
        lean.start();
        UUID id = client().submit(NewTask.builder("a", "h").build()).task().id();
        await(WAIT, "success on a pool of exactly what the worker holds and one to spare", statusIs(id, Status.SUCCEEDED));
        assertTrue(lean.stop(Duration.ofSeconds(5)));
        assertEquals(0, enough.open.get(), "the worker gave every connection back at stop");
    }

    @Test
    void queueStatsCountEachQueuesShare() throws Exception {
        Worker w = started(worker().queue("a", fast(2)).queue("b", fast(2)).queue("idle", fast(2))
                .handle("ok", ctx -> { })
                .handle("bad", ctx -> {
                    throw new PermanentException(new IllegalStateException("no"));
                }));
        UUID ok1 = client().submit(NewTask.builder("a", "ok").build()).task().id();
        UUID ok2 = client().submit(NewTask.builder("a", "ok").build()).task().id();
        UUID bad = client().submit(NewTask.builder("b", "bad").build()).task().id();
        await(WAIT, "two successes and a dead task", () -> statusIs(ok1, Status.SUCCEEDED).getAsBoolean()
                && statusIs(ok2, Status.SUCCEEDED).getAsBoolean() && statusIs(bad, Status.DEAD).getAsBoolean());
        assertTrue(w.stop(Duration.ofSeconds(5)));
        Map<String, WorkerStats> per = w.queueStats();
        assertEquals(List.of("a", "b", "idle"), List.copyOf(per.keySet()));
        assertEquals(new WorkerStats(2, 2, 0, 0, 0, 0, 0, 0, 0, 0), per.get("a"));
        assertEquals(new WorkerStats(1, 0, 0, 1, 0, 0, 0, 0, 0, 0), per.get("b"));
        assertEquals(new WorkerStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0), per.get("idle"));
        WorkerStats all = w.stats();
        assertEquals(3, all.claimed());
        assertEquals(2, all.succeeded());
        assertEquals(1, all.deadLettered());
        assertTrue(all.finishStatements() >= 1, "statements are the worker's: " + all);
    }

    @Test
    void handlersRunOnASuppliedExecutorThatTheWorkerLeavesRunning() throws Exception {
        AtomicInteger n = new AtomicInteger();
        java.util.concurrent.ExecutorService app = java.util.concurrent.Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "app-exec-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        try {
            Map<UUID, String> threads = new ConcurrentHashMap<>();
            Worker w = started(worker().handlerExecutor(app).queue("q", fast(2))
                    .handle("h", ctx -> threads.put(ctx.id(), Thread.currentThread().getName())));
            UUID id = client().submit(NewTask.builder("q", "h").build()).task().id();
            await(WAIT, "success", statusIs(id, Status.SUCCEEDED));
            assertTrue(threads.get(id).startsWith("app-exec-"), "ran on " + threads.get(id));
            assertTrue(w.stop(Duration.ofSeconds(5)));
            assertFalse(app.isShutdown(), "a supplied executor is its owner's to shut down");
        } finally {
            app.shutdownNow();
        }
    }

    @Test
    void anExecutionTheExecutorRefusesIsReleasedUnrun() throws Exception {
        AtomicInteger ran = new AtomicInteger();
        Worker w = started(worker().queue("q", fast(2)).handlerExecutor(r -> {
            throw new java.util.concurrent.RejectedExecutionException("saturated");
        }).handle("h", ctx -> ran.incrementAndGet()));
        UUID id = client().submit(NewTask.builder("q", "h").build()).task().id();
        await(WAIT, "a release", () -> w.stats().released() >= 1);
        assertTrue(w.stop(Duration.ofSeconds(5)));
        Task t = task(id);
        assertEquals(Status.PENDING, t.status(), "given back");
        assertEquals(0, t.attempts(), "no attempt spent");
        assertEquals(0, history(id).size());
        assertEquals(0, ran.get());
    }

    @Test
    @org.junit.jupiter.api.condition.EnabledForJreRange(min = org.junit.jupiter.api.condition.JRE.JAVA_21)
    void handlersRunOnVirtualThreadsOnJava21() throws Exception {
        // Compiled for Java 17: Java 21's API is reached by reflection.
        java.util.concurrent.ExecutorService virtual = (java.util.concurrent.ExecutorService)
                java.util.concurrent.Executors.class.getMethod("newVirtualThreadPerTaskExecutor").invoke(null);
        java.lang.reflect.Method isVirtual = Thread.class.getMethod("isVirtual");
        try {
            Map<UUID, Boolean> onVirtual = new ConcurrentHashMap<>();
            Worker w = started(worker().handlerExecutor(virtual).queue("q", QueueConfig.builder().concurrency(500).build())
                    .handle("h", ctx -> {
                        try {
                            onVirtual.put(ctx.id(), (Boolean) isVirtual.invoke(Thread.currentThread()));
                        } catch (ReflectiveOperationException e) {
                            throw new IllegalStateException(e);
                        }
                    }));
            List<NewTask> tasks = new ArrayList<>();
            for (int i = 0; i < 1000; i++) {
                tasks.add(NewTask.builder("q", "h").build());
            }
            client().submitAll(tasks);
            await(WAIT, "1,000 tasks run", () -> w.stats().succeeded() == 1000);
            assertEquals(1000, onVirtual.size());
            assertTrue(onVirtual.values().stream().allMatch(v -> v), "every handler on a virtual thread");
            assertTrue(w.stop(Duration.ofSeconds(5)));
        } finally {
            virtual.shutdownNow();
        }
    }

    @Test
    void aTasksOwnBudgetAndTimeoutReplaceTheQueues() throws Exception {
        // The producer says per task: two attempts for one, a 50ms timeout for the other.
        UUID two = client().submit(NewTask.builder("q", "fail").maxAttempts(2).build()).task().id();
        UUID quick = client().submit(NewTask.builder("q", "hang").maxAttempts(1).timeout(Duration.ofMillis(50))
                .build()).task().id();
        started(worker().queue("q", QueueConfig.builder().concurrency(4).timeout(Duration.ofMinutes(1))
                .policy(Policy.builder().maxAttempts(10).initialBackoff(Duration.ofMillis(10))
                        .maxBackoff(Duration.ofMillis(50)).build()).build())
                .handle("fail", ctx -> {
                    throw new java.io.IOException("down");
                })
                .handle("hang", ctx -> Thread.sleep(60_000)));
        await(WAIT, "dead after its own 2 attempts", statusIs(two, Status.DEAD));
        assertEquals(2, history(two).size());
        assertEquals(OptionalInt.of(2), task(two).maxAttempts());
        await(WAIT, "dead after its own 50ms timeout", statusIs(quick, Status.DEAD));
        List<Attempt> h = history(quick);
        assertEquals(1, h.size());
        assertEquals("timeout", h.get(0).errorType());
        assertTrue(h.get(0).message().contains("50ms"), h.get(0).message());
    }

    @Test
    void aStoredBudgetOrTimeoutAboveTheQueuesBoundIsLoweredToIt() throws Exception {
        // Written by a producer that did not know the queue's bounds.
        UUID many = client().submit(NewTask.builder("q", "fail").build()).task().id();
        UUID slow = client().submit(NewTask.builder("q", "hang").build()).task().id();
        scalar("UPDATE {schema}.tasks SET max_attempts = 50 WHERE id = '" + many + "' RETURNING 1");
        scalar("UPDATE {schema}.tasks SET max_attempts = 1, timeout_us = 3600000000 WHERE id = '" + slow + "' RETURNING 1");
        started(worker().queue("q", QueueConfig.builder().concurrency(4).timeout(Duration.ofMinutes(1))
                .policy(Policy.builder().maxAttempts(10).initialBackoff(Duration.ofMillis(5))
                        .maxBackoff(Duration.ofMillis(10)).taskMaxAttempts(3)
                        .taskMaxTimeout(Duration.ofMillis(50)).build()).build())
                .handle("fail", ctx -> {
                    throw new java.io.IOException("down");
                })
                .handle("hang", ctx -> Thread.sleep(60_000)));
        await(WAIT, "dead after the queue's bound of 3 attempts", statusIs(many, Status.DEAD));
        assertEquals(3, history(many).size());
        await(WAIT, "dead after the queue's bound of 50ms", statusIs(slow, Status.DEAD));
        assertTrue(history(slow).get(0).message().contains("50ms"), history(slow).get(0).message());
    }

    @Test
    void aSnoozeWaitsWithoutSpendingAnAttempt() throws Exception {
        AtomicInteger runs = new AtomicInteger();
        Worker w = started(worker().queue("q", fast(2)).handle("later", ctx -> {
            if (runs.incrementAndGet() <= 3) {
                throw new SnoozeException(Duration.ofMillis(20));
            }
        }));
        UUID id = client().submit(NewTask.builder("q", "later").build()).task().id();
        await(WAIT, "success after three snoozes", statusIs(id, Status.SUCCEEDED));
        Task t = task(id);
        assertEquals(3, t.snoozes());
        assertEquals(1, t.attempts(), "snoozes spend no attempt");
        List<Attempt> h = history(id);
        assertEquals(1, h.size(), "snoozes add nothing to the history: " + h);
        assertEquals(Outcome.SUCCESS, h.get(0).outcome());
        assertEquals(1, h.get(0).number());
        assertEquals(4, runs.get());
        assertEquals(3, w.stats().snoozed());
    }

    @Test
    void aSnoozeWaitsForItsDelay() throws Exception {
        started(worker().queue("q", fast(2)).handle("later", ctx -> {
            throw new SnoozeException(Duration.ofHours(1));
        }));
        UUID id = client().submit(NewTask.builder("q", "later").build()).task().id();
        await(WAIT, "snoozed", () -> {
            try {
                return task(id).snoozes() == 1 && task(id).status() == Status.PENDING;
            } catch (java.sql.SQLException e) {
                throw new RuntimeException(e);
            }
        });
        Task t = task(id);
        assertEquals(0, t.attempts());
        long due = Duration.between(t.updatedAt(), t.nextAttemptAt()).toMinutes();
        assertEquals(60, due, "due an hour after the snooze, on the database's clock");
    }

    @Test
    void snoozesBeyondThePolicysLimitSpendAttempts() throws Exception {
        AtomicInteger runs = new AtomicInteger();
        started(worker().queue("q", QueueConfig.builder().policy(Policy.builder().maxAttempts(2).maxSnoozes(1)
                .initialBackoff(Duration.ofMillis(10)).build()).build()).handle("forever", ctx -> {
                    runs.incrementAndGet();
                    throw new SnoozeException(Duration.ofMillis(10));
                }));
        UUID id = client().submit(NewTask.builder("q", "forever").build()).task().id();
        await(WAIT, "dead: a task that never stops snoozing reaches the dead-letter queue", statusIs(id, Status.DEAD));
        Task t = task(id);
        assertEquals(1, t.snoozes());
        assertEquals(2, t.attempts());
        assertEquals("snoozed", t.lastErrorType());
        assertTrue(t.lastErrorMessage().contains("already snoozed 1 times"), t.lastErrorMessage());
        List<Attempt> h = history(id);
        assertEquals(2, h.size());
        assertEquals(Outcome.RETRYABLE_FAILURE, h.get(0).outcome());
        assertEquals(3, runs.get(), "one snooze, then two attempts");
    }

    @Test
    void startWithoutHandlersIsRefused() throws Exception {
        UUID id = client().submit(NewTask.builder("deploy", "b").build()).task().id();
        Worker w = worker().queue("deploy").queue("emails").build();
        workers.add(w);
        InvalidInputException e = assertThrows(InvalidInputException.class, w::start);
        assertTrue(e.getMessage().contains("no handler is registered"), e.getMessage());
        assertTrue(e.getMessage().contains("deploy, emails"), e.getMessage());
        // It did not start: a handler may still be registered, and then it runs.
        w.handle("b", ctx -> { });
        w.start();
        await(WAIT, "run once a handler is registered", statusIs(id, Status.SUCCEEDED));
    }

    @Test
    void aWorkerRegistersWhileItRuns() throws Exception {
        Worker w = started(worker().id("w-reg").registryInterval(Duration.ofMillis(50))
                .queue("a", QueueConfig.builder().concurrency(3).build()).queue("b").handle("y", ctx -> { })
                .handle("x", ctx -> { }));
        await(WAIT, "registered", () -> registered("w-reg"));
        try (Connection c = ds.getConnection(); var st = c.createStatement();
                var rs = st.executeQuery("SELECT queues, handlers, slots, pid, version FROM \"" + schema
                        + "\".workers WHERE id = 'w-reg'")) {
            assertTrue(rs.next());
            assertEquals(List.of("a", "b"), List.of((Object[]) rs.getArray(1).getArray()));
            assertEquals(List.of("x", "y"), List.of((Object[]) rs.getArray(2).getArray()));
            assertEquals(3 + QueueConfig.DEFAULT_CONCURRENCY, rs.getInt(3));
            assertEquals(ProcessHandle.current().pid(), rs.getLong(4));
            assertTrue(rs.getString(5).startsWith("java "), rs.getString(5));
        }
        long seen = scalar("SELECT (extract(epoch FROM last_seen) * 1000000)::bigint FROM {schema}.workers WHERE id = 'w-reg'");
        await(WAIT, "refreshed", () -> {
            try {
                return scalar("SELECT (extract(epoch FROM last_seen) * 1000000)::bigint FROM {schema}.workers WHERE id = 'w-reg'") > seen;
            } catch (java.sql.SQLException e) {
                throw new RuntimeException(e);
            }
        });
        assertTrue(w.stop(Duration.ofSeconds(5)));
        assertFalse(registered("w-reg"), "deregistered at stop");

        Worker off = started(worker().id("w-off").disableRegistry().queue("a").handle("x", ctx -> { }));
        UUID id = client().submit(NewTask.builder("a", "x").build()).task().id();
        await(WAIT, "ran", statusIs(id, Status.SUCCEEDED));
        assertFalse(registered("w-off"), "a worker with the registry disabled does not register");
        off.stop(Duration.ofSeconds(5));
    }

    private boolean registered(String workerId) {
        try {
            return scalar("SELECT count(*) FROM {schema}.workers WHERE id = '" + workerId + "'") == 1;
        } catch (java.sql.SQLException e) {
            throw new RuntimeException(e);
        }
    }

    @Test
    void retriesThenSucceedsWithAttemptsNumberedInOrder() throws Exception {
        started(worker().queue("q", fast(5)).handle("flaky", ctx -> {
            if (ctx.attempt() < 3) {
                throw new java.io.IOException("temporary failure " + ctx.attempt());
            }
        }));
        UUID id = client().submit(NewTask.builder("q", "flaky").build()).task().id();
        await(WAIT, "success after retries", statusIs(id, Status.SUCCEEDED));
        List<Attempt> h = history(id);
        assertEquals(3, h.size());
        for (int i = 0; i < 3; i++) {
            assertEquals(i + 1, h.get(i).number());
            assertEquals(i + 1, h.get(i).leaseToken(), "fencing tokens strictly increase");
        }
        assertEquals("java.io.IOException", h.get(0).errorType());
        assertEquals("temporary failure 1", h.get(0).message());
        assertTrue(h.get(0).stack().contains("WorkerTest"), "the stack trace is recorded");
        assertEquals(Outcome.SUCCESS, h.get(2).outcome());
    }

    /** An exception naming its own type. */
    static final class QuotaException extends RuntimeException implements ErrorTyped {
        private static final long serialVersionUID = 1L;

        QuotaException(String m) {
            super(m);
        }

        @Override
        public String errorType() {
            return "quota_exceeded";
        }
    }

    @Test
    void outcomesFollowThePolicy() throws Exception {
        started(worker().queue("q", fast(2))
                .handle("perm", ctx -> {
                    throw new PermanentException(new IllegalArgumentException("invalid order 42"));
                })
                .handle("always", ctx -> {
                    throw new QuotaException("quota exceeded for tenant 7");
                })
                .handle("error", ctx -> {
                    throw new StackOverflowError("deep");
                }));
        RdqClient c = client();
        UUID perm = c.submit(NewTask.builder("q", "perm").build()).task().id();
        UUID always = c.submit(NewTask.builder("q", "always").build()).task().id();
        UUID unknown = c.submit(NewTask.builder("q", "nobody").build()).task().id();
        UUID error = c.submit(NewTask.builder("q", "error").build()).task().id();
        for (UUID id : List.of(perm, always, error)) {
            await(WAIT, "dead", statusIs(id, Status.DEAD));
        }
        Task p = task(perm);
        assertEquals(1, p.attempts(), "a permanent failure dead-letters at once");
        assertEquals("java.lang.IllegalArgumentException", p.lastErrorType());
        assertEquals(Outcome.PERMANENT_FAILURE, history(perm).get(0).outcome());
        Task a = task(always);
        assertEquals(2, a.attempts(), "exhausted after max attempts");
        assertEquals("quota_exceeded", a.lastErrorType());
        assertEquals(Outcome.RETRYABLE_FAILURE, history(always).get(1).outcome());
        // No worker runs "nobody": its task waits, its budget untouched, for one that does.
        Task u = task(unknown);
        assertEquals(Status.PENDING, u.status(), "a task of a handler the worker lacks is not claimed");
        assertEquals(0, u.attempts());
        assertEquals(0, u.leaseToken());
        assertEquals("java.lang.StackOverflowError", task(error).lastErrorType());
        assertEquals(3, scalar("SELECT sum(n) FROM {schema}.dead_counts"), "dead_counts maintained by finish");
    }

    @Test
    void retryAfterOverridesTheBackoff() throws Exception {
        started(worker().queue("q", fast(3)).handle("limited", ctx -> {
            if (ctx.attempt() == 1) {
                throw new RetryAfterException(Duration.ofSeconds(30), "rate limited");
            }
        }));
        UUID id = client().submit(NewTask.builder("q", "limited").build()).task().id();
        await(WAIT, "first attempt recorded", () -> {
            try {
                return task(id).attempts() == 1 && task(id).status() == Status.PENDING;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        Task t = task(id);
        long in = Duration.between(history(id).get(0).finishedAt(), t.nextAttemptAt()).toMillis();
        assertTrue(in >= 29_900 && in <= 30_100, "retry due 30s after the failure, got " + in + "ms");
    }

    @Test
    void timeoutFailsTheAttemptWithTypeTimeout() throws Exception {
        started(worker().queue("q", QueueConfig.builder().timeout(Duration.ofMillis(200))
                .policy(Policy.builder().maxAttempts(1).build()).build()).handle("slow", ctx -> Thread.sleep(60_000)));
        UUID id = client().submit(NewTask.builder("q", "slow").build()).task().id();
        await(WAIT, "dead by timeout", statusIs(id, Status.DEAD));
        Attempt a = history(id).get(0);
        assertEquals("timeout", a.errorType());
        assertEquals("handler timed out after 200ms", a.message());
    }

    @Test
    void concurrencyIsBoundedAndClaimsFillFreeSlots() throws Exception {
        AtomicInteger now = new AtomicInteger();
        AtomicInteger peak = new AtomicInteger();
        started(worker().queue("q", QueueConfig.builder().concurrency(3).build()).handle("h", ctx -> {
            int n = now.incrementAndGet();
            peak.accumulateAndGet(n, Math::max);
            Thread.sleep(30);
            now.decrementAndGet();
        }));
        List<NewTask> batch = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            batch.add(NewTask.builder("q", "h").build());
        }
        client().submitAll(batch);
        await(WAIT, "all succeeded", () -> {
            try {
                return scalar("SELECT count(*) FROM {schema}.tasks WHERE status = 'SUCCEEDED'") == 60;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        assertTrue(peak.get() <= 3, "at most 3 handlers at once, saw " + peak.get());
        assertEquals(3, peak.get(), "the slots were used");
    }

    @Test
    void notificationsWakeTheWorkerLongBeforeItsPoll() throws Exception {
        CountDownLatch first = new CountDownLatch(1);
        CountDownLatch second = new CountDownLatch(1);
        Worker w = Worker.builder(ds).schema(schema).pollInterval(Duration.ofMinutes(10))
                .disableReclaim().disablePurge().queue("q")
                .handle("first", ctx -> first.countDown())
                .handle("second", ctx -> second.countDown()).build();
        workers.add(w);
        w.start();
        RdqClient c = client();
        c.submit(NewTask.builder("q", "first").build());
        assertTrue(first.await(10, TimeUnit.SECONDS), "the first task runs");
        await(WAIT, "the first task's result written", () -> w.stats().succeeded() == 1);
        // The fetch loop has claimed and now waits for its 10-minute poll; only
        // a notification can wake it for the second task.
        c.submit(NewTask.builder("q", "second").build());
        assertTrue(second.await(10, TimeUnit.SECONDS), "woken by NOTIFY, not the 10-minute poll");
    }

    @Test
    void pollingFindsRetriesThatNoNotificationAnnounces() throws Exception {
        UUID id = client().submit(NewTask.builder("q", "h").delay(Duration.ofMillis(500)).build()).task().id();
        started(worker().queue("q").handle("h", ctx -> { }));
        await(WAIT, "delayed task run by polling", statusIs(id, Status.SUCCEEDED));
    }

    @Test
    void heartbeatsKeepALongExecutionsLease() throws Exception {
        started(worker().reclaimInterval(Duration.ofMillis(100)).queue("q", QueueConfig.builder()
                .lease(Duration.ofMillis(600)).heartbeatInterval(Duration.ofMillis(100)).build())
                .handle("long", ctx -> Thread.sleep(2_500)));
        UUID id = client().submit(NewTask.builder("q", "long").build()).task().id();
        await(WAIT, "success", statusIs(id, Status.SUCCEEDED));
        List<Attempt> h = history(id);
        assertEquals(1, h.size(), "no LEASE_EXPIRED: the lease was extended: " + h);
        assertEquals(Outcome.SUCCESS, h.get(0).outcome());
    }

    @Test
    void expiredLeasesAreReclaimedWithLeaseExpiredNumberedPastTheHistory() throws Exception {
        RdqClient c = client();
        UUID id = c.submit(NewTask.builder("q", "h").firstFailure(new RuntimeException("at submit")).build())
                .task().id();
        // A worker that claims the task and dies: its lease expires.
        try (Connection conn = ds.getConnection()) {
            conn.setAutoCommit(true);
            try (var st = conn.createStatement()) {
                st.execute("UPDATE \"" + schema + "\".tasks SET next_attempt_at = now()");
            }
            List<Task> claimed = store.claim(conn, "q", 1, 50_000, "ghost", new String[] {"h"});
            assertEquals(1, claimed.size());
        }
        AtomicInteger token = new AtomicInteger();
        started(worker().id("rescuer").reclaimInterval(Duration.ofMillis(100)).queue("q", fast(5))
                .handle("h", ctx -> token.set((int) ctx.leaseToken())));
        await(WAIT, "reclaimed and run", statusIs(id, Status.SUCCEEDED));
        List<Attempt> h = history(id);
        assertEquals(3, h.size(), h.toString());
        assertEquals(Outcome.RETRYABLE_FAILURE, h.get(0).outcome());
        assertEquals(2, h.get(1).number());
        assertEquals(Outcome.LEASE_EXPIRED, h.get(1).outcome());
        assertEquals("ghost", h.get(1).workerId(), "the lost execution's worker");
        assertEquals(1, h.get(1).leaseToken(), "the lost execution's token");
        assertEquals("lease_expired", h.get(1).errorType());
        assertEquals(3, h.get(2).number());
        assertEquals(Outcome.SUCCESS, h.get(2).outcome());
        assertEquals(3, token.get(), "claim 1, reclaim 2, execution 3");
    }

    @Test
    void gracefulStopReleasesUnfinishedTasksWithoutAnAttempt() throws Exception {
        CountDownLatch started = new CountDownLatch(1);
        List<TaskContext.CancelReason> reasons = new ArrayList<>();
        Worker w = started(worker().queue("q").handle("stuck", ctx -> {
            started.countDown();
            try {
                Thread.sleep(60_000);
            } finally {
                reasons.add(ctx.cancelReason().orElseThrow());
            }
        }));
        UUID id = client().submit(NewTask.builder("q", "stuck").build()).task().id();
        assertTrue(started.await(10, TimeUnit.SECONDS));
        assertFalse(w.stop(Duration.ofMillis(200)), "the handler did not finish within the grace period");
        Task t = task(id);
        assertEquals(Status.PENDING, t.status());
        assertEquals(0, t.attempts(), "released without counting an attempt");
        assertEquals(0, history(id).size());
        assertEquals(List.of(TaskContext.CancelReason.STOPPING), reasons);
        assertEquals(1, w.stats().released());
        assertThrows(IllegalStateException.class, w::start, "a worker runs once");
    }

    @Test
    void logsNameTasksButNeverPayloads() throws Exception {
        UUID id;
        String logs;
        try (LogCapture log = new LogCapture()) {
            started(worker().queue("q", fast(1)).handle("h", ctx -> {
                throw new IllegalStateException("cannot process");
            }));
            id = client().submit(NewTask.builder("q", "h").payload("SECRET-CARD-4242").build()).task().id();
            await(WAIT, "dead", statusIs(id, Status.DEAD));
            workers.get(0).stop(Duration.ofSeconds(5));
            logs = log.text();
        }
        assertTrue(logs.contains("ERROR task dead-lettered task_id=" + id), logs);
        assertFalse(logs.contains("SECRET-CARD-4242"), "no payload at any level, DEBUG included:\n" + logs);
    }

    @Test
    void invalidConfigurationIsRejected() {
        InvalidInputException e = assertThrows(InvalidInputException.class, () -> QueueConfig.builder().concurrency(0));
        assertTrue(e.getMessage().contains("QueueConfig.Builder.concurrency(0) is not positive (leave it unset for 10)"),
                e.getMessage());
        assertThrows(InvalidInputException.class, () -> QueueConfig.builder().concurrency(-1));
        e = assertThrows(InvalidInputException.class,
                () -> QueueConfig.builder().lease(Duration.ofSeconds(1)).heartbeatInterval(Duration.ofSeconds(2)).build());
        assertTrue(e.getMessage().contains("QueueConfig.Builder.heartbeatInterval(2s) must be shorter than the lease (1s)"),
                e.getMessage());
        for (var set : List.<java.util.function.Function<Duration, QueueConfig.Builder>>of(
                QueueConfig.builder()::lease, QueueConfig.builder()::heartbeatInterval, QueueConfig.builder()::timeout)) {
            e = assertThrows(InvalidInputException.class, () -> set.apply(Duration.ZERO));
            assertTrue(e.getMessage().contains("QueueConfig.Builder.") && e.getMessage().contains("(0s) is not positive"),
                    e.getMessage());
            NullPointerException n = assertThrows(NullPointerException.class, () -> set.apply(null));
            assertTrue(n.getMessage().startsWith("QueueConfig.Builder."), n.getMessage());
        }
        e = assertThrows(InvalidInputException.class, () -> QueueConfig.builder().timeout(Duration.ofSeconds(-1)));
        assertTrue(e.getMessage().contains("use noTimeout() for none"), e.getMessage());
        // Unset settings are the defaults; noTimeout is the one way to no timeout.
        QueueConfig d = QueueConfig.defaults();
        assertEquals(QueueConfig.DEFAULT_CONCURRENCY, d.concurrency());
        assertEquals(QueueConfig.DEFAULT_LEASE, d.lease());
        assertEquals(QueueConfig.DEFAULT_LEASE.dividedBy(3), d.heartbeatInterval());
        assertEquals(java.util.Optional.of(QueueConfig.DEFAULT_TIMEOUT), d.timeout());
        assertEquals(java.util.Optional.empty(), QueueConfig.builder().noTimeout().build().timeout());
        assertEquals(java.util.Optional.of(Duration.ofSeconds(5)),
                QueueConfig.builder().noTimeout().timeout(Duration.ofSeconds(5)).build().timeout());
        assertThrows(InvalidInputException.class, () -> Worker.builder(ds).schema(schema).build());
        assertThrows(InvalidInputException.class, () -> Worker.builder(ds).schema(schema).queue("bad queue").build());
        e = assertThrows(InvalidInputException.class, () -> Policy.builder().multiplier(0.5));
        assertTrue(e.getMessage().contains("Policy.Builder.multiplier(0.5): use a finite number of at least 1"), e.getMessage());
        Worker w = Worker.builder(ds).schema(schema).queue("q").build();
        assertThrows(InvalidInputException.class, () -> w.handle("_bad", ctx -> { }));
        w.handle("ok", ctx -> { });
        assertThrows(IllegalStateException.class, () -> w.handle("ok", ctx -> { }));
        assertTrue(w.stop(Duration.ZERO));

        // No zero meaning "the default": each setter refuses what it cannot use, naming itself.
        Worker.Builder b = Worker.builder(ds).schema(schema);
        e = assertThrows(InvalidInputException.class, () -> b.pollInterval(Duration.ZERO));
        assertTrue(e.getMessage().contains("Worker.Builder.pollInterval(0s) is not positive; leave it unset for the default"),
                e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> b.reclaimInterval(Duration.ofSeconds(-5)));
        assertTrue(e.getMessage().contains("Worker.Builder.reclaimInterval(-5s) is not positive")
                && e.getMessage().contains("call Worker.Builder.disableReclaim() to turn it off"), e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> b.finishBatchSize(0));
        assertTrue(e.getMessage().contains("Worker.Builder.finishBatchSize(0) is less than 1"), e.getMessage());
        for (var set : List.<java.util.function.Consumer<Duration>>of(b::succeededTtl, b::finishInterval, b::keyRetention,
                b::registryInterval, b::purgeInterval)) {
            assertThrows(InvalidInputException.class, () -> set.accept(Duration.ZERO));
            NullPointerException n = assertThrows(NullPointerException.class, () -> set.accept(null));
            assertTrue(n.getMessage().startsWith("Worker.Builder."), n.getMessage());
        }
        b.disableReclaim().disableRegistry(); // turning a job off is allowed
        e = assertThrows(InvalidInputException.class, () -> b.build());
        assertTrue(e.getMessage().contains("Worker.Builder.build: no queue"), e.getMessage());
    }

    @Test
    void concurrentWorkersNeverRunATaskTwiceAtOnce() throws Exception {
        ConcurrentHashMap<UUID, AtomicInteger> active = new ConcurrentHashMap<>();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger runs = new AtomicInteger();
        Handler h = ctx -> {
            AtomicInteger a = active.computeIfAbsent(ctx.id(), k -> new AtomicInteger());
            if (a.incrementAndGet() > 1) {
                overlaps.incrementAndGet();
            }
            runs.incrementAndGet();
            Thread.sleep(2);
            a.decrementAndGet();
        };
        for (int i = 0; i < 3; i++) {
            started(worker().queue("q", QueueConfig.builder().concurrency(8).build()).handle("h", h));
        }
        List<NewTask> batch = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            batch.add(NewTask.builder("q", "h").build());
        }
        client().submitAll(batch);
        await(WAIT, "all succeeded", () -> {
            try {
                return scalar("SELECT count(*) FROM {schema}.tasks WHERE status = 'SUCCEEDED'") == 300;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        assertEquals(0, overlaps.get());
        assertEquals(300, runs.get(), "each task ran exactly once");
        // Each succeeded at its first attempt (a success is kept in the task row) and no other attempt was recorded.
        assertEquals(300, scalar("SELECT count(*) FROM {schema}.tasks WHERE status = 'SUCCEEDED' AND last_attempt_number = 1"));
        assertEquals(0, scalar("SELECT count(*) FROM {schema}.attempts"));
    }

    @Test
    void finishesAndHeartbeatsAreBatched() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger started = new AtomicInteger();
        Worker w = started(worker().finishInterval(Duration.ofMillis(200)).queue("q", QueueConfig.builder()
                .concurrency(50).lease(Duration.ofMillis(900)).heartbeatInterval(Duration.ofMillis(300)).build())
                .handle("h", ctx -> {
                    started.incrementAndGet();
                    release.await();
                }));
        List<NewTask> batch = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            batch.add(NewTask.builder("q", "h").build());
        }
        client().submitAll(batch);
        await(WAIT, "all 50 running", () -> started.get() == 50);
        long beatsBefore = w.stats().heartbeatStatements();
        await(WAIT, "three heartbeat rounds", () -> w.stats().heartbeatStatements() >= beatsBefore + 3);
        release.countDown();
        await(WAIT, "all succeeded", () -> w.stats().succeeded() == 50);
        WorkerStats st = w.stats();
        assertEquals(50, st.claimed());
        assertTrue(st.finishStatements() < 10, "50 finishes written in " + st.finishStatements() + " statements");
        // 50 leases extended per statement: far fewer statements than leases × rounds.
        assertTrue(st.heartbeatStatements() < 40, st.heartbeatStatements() + " heartbeat statements");
        assertEquals(50, scalar("SELECT count(*) FROM {schema}.tasks WHERE status = 'SUCCEEDED' AND last_attempt_number = 1"));
        assertEquals(0, scalar("SELECT count(*) FROM {schema}.attempts"));
    }
}
