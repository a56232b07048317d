package io.github.srjn45.rdq.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Status;
import io.github.srjn45.rdq.Task;
import io.github.srjn45.rdq.TaskContext;
import io.github.srjn45.rdq.spring.app.TestApp;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The worker bound to the context: a stop, by the lifecycle or by closing the
 * context, waits for running handlers up to rdq.worker.shutdown-timeout, then
 * interrupts them and releases their tasks without counting an attempt; the
 * health indicator goes DOWN once the worker is stopped.
 */
class LifecycleTest {
    String schema;
    ConfigurableApplicationContext ctx;
    TestApp.Blocking blocking;

    @BeforeEach
    void start() {
        schema = TestDatabase.newSchemaName();
        ctx = new SpringApplicationBuilder(TestApp.class).properties(
                "spring.datasource.url=" + TestDatabase.jdbcUrl(),
                "spring.datasource.username=" + TestDatabase.user(),
                "spring.datasource.password=" + TestDatabase.password(),
                "rdq.schema=" + schema,
                "rdq.migrate=true",
                "rdq.worker.poll-interval=50ms",
                "rdq.worker.shutdown-timeout=100ms").run();
        blocking = ctx.getBean(TestApp.Blocking.class);
    }

    @AfterEach
    void drop() throws Exception {
        ctx.close();
        TestDatabase.drop(schema);
    }

    @Test
    void stoppingTheLifecycleInterruptsAfterTheShutdownTimeoutAndReleasesTheTask() throws Exception {
        RdqWorkerLifecycle lifecycle = ctx.getBean(RdqWorkerLifecycle.class);
        assertEquals(Duration.ofMillis(100), lifecycle.shutdownTimeout());
        UUID id = startBlockingTask();
        lifecycle.stop();
        assertFalse(lifecycle.isRunning());
        assertReleased(id);

        Health h = ctx.getBean(RdqHealthIndicator.class).health();
        assertEquals(org.springframework.boot.actuate.health.Status.DOWN, h.getStatus(), h.toString());
        assertEquals(false, h.getDetails().get("workerRunning"));

        IllegalStateException again = assertThrows(IllegalStateException.class, lifecycle::start);
        assertTrue(again.getMessage().contains("runs once"), again.getMessage());
        assertFalse(lifecycle.isRunning());
    }

    @Test
    void closingTheContextStopsTheWorkerGracefully() throws Exception {
        RdqWorkerLifecycle lifecycle = ctx.getBean(RdqWorkerLifecycle.class);
        assertTrue(lifecycle.isRunning());
        UUID id = startBlockingTask();
        ctx.close();
        assertFalse(lifecycle.isRunning());
        assertReleased(id);
    }

    private UUID startBlockingTask() throws InterruptedException {
        UUID id = ctx.getBean(RdqClient.class).submit(NewTask.builder("slow", "blocks").build()).task().id();
        assertTrue(blocking.started.await(1, TimeUnit.MINUTES), "the handler started");
        assertEquals(id, blocking.ids.poll());
        return id;
    }

    /** The blocked handler was interrupted for the stop and its task is due again, no attempt counted. */
    private void assertReleased(UUID id) throws InterruptedException {
        assertEquals(TaskContext.CancelReason.STOPPING, blocking.interrupted.poll(1, TimeUnit.MINUTES));
        RdqClient outside = RdqClient.builder(TestDatabase.dataSource()).schema(schema).build();
        Task t = outside.get(id).orElseThrow();
        assertEquals(Status.PENDING, t.status());
        assertEquals(0, t.attempts());
        assertEquals(0, outside.history(id).size());
    }
}
