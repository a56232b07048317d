package io.github.srjn45.rdq.spring;

import static io.github.srjn45.rdq.spring.TestDatabase.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.Attempt;
import io.github.srjn45.rdq.Migrations;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Status;
import io.github.srjn45.rdq.Task;
import io.github.srjn45.rdq.Worker;
import io.github.srjn45.rdq.spring.app.Orders;
import io.github.srjn45.rdq.spring.app.Receipts;
import io.github.srjn45.rdq.spring.app.TestApp;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The test application on the real database: properties to beans, a task
 * handled by a bean handler, a failing one retried and dead-lettered by the
 * queue policy from the properties, submissions inside Spring transactions,
 * the health indicator.
 */
@SpringBootTest(classes = {TestApp.class, StarterAppTest.DropSchema.class})
@DirtiesContext
class StarterAppTest {
    static final String SCHEMA = TestDatabase.newSchemaName();

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        TestDatabase.register(r, SCHEMA);
        // JPA is on the tests' classpath for JpaTransactionTest; this
        // application's transactions stay DataSourceTransactionManager's.
        r.add("spring.autoconfigure.exclude",
                () -> "org.springframework.boot.autoconfigure.orm.jpa.HibernateJpaAutoConfiguration,"
                        + "org.springframework.boot.autoconfigure.data.jpa.JpaRepositoriesAutoConfiguration");
        r.add("rdq.worker.id", () -> "starter-test");
        r.add("rdq.worker.poll-interval", () -> "50ms");
        r.add("rdq.queues.emails.concurrency", () -> "4");
        r.add("rdq.queues.flaky.policy.max-attempts", () -> "3");
        r.add("rdq.queues.flaky.policy.initial-backoff", () -> "10ms");
        r.add("rdq.queues.flaky.policy.jitter", () -> "0");
    }

    /** Drops the test schema once the context has stopped its worker. */
    @TestConfiguration
    static class DropSchema implements DisposableBean {
        @Override
        public void destroy() throws Exception {
            TestDatabase.drop(SCHEMA);
        }
    }

    @Autowired RdqClient client;
    @Autowired Worker worker;
    @Autowired RdqWorkerLifecycle lifecycle;
    @Autowired RdqHealthIndicator health;
    @Autowired TestApp.SendWelcome sendWelcome;
    @Autowired Orders orders;
    @Autowired Receipts receipts;
    @Autowired JdbcTemplate jdbc;

    @Test
    void propertiesBecomeBeans() {
        assertEquals("starter-test", worker.id());
        assertSame(worker, lifecycle.worker());
        assertTrue(lifecycle.isRunning(), "the worker starts with the context");
        assertEquals(Migrations.latestVersion(),
                jdbc.queryForObject("SELECT max(version) FROM \"" + SCHEMA + "\".schema_migrations", Integer.class),
                "rdq.migrate=true migrated the schema named by rdq.schema");
    }

    @Test
    void aSubmittedTaskIsHandledByItsBean() throws Exception {
        String payload = "hello " + UUID.randomUUID();
        UUID id = client.submit(NewTask.builder("emails", "send-welcome").payload(payload).build()).task().id();
        await("the handler bean ran the task", () -> sendWelcome.handled.contains(payload));
        await("the task succeeded", () -> client.get(id).map(Task::status).orElseThrow() == Status.SUCCEEDED);
    }

    @Test
    void aHandlerMethodOfATransactionalBeanRunsThroughItsProxy() throws Exception {
        UUID id = client.submit(NewTask.builder("emails", "send-receipt").build()).task().id();
        await("the handler method ran the task", () -> receipts.sent().containsKey(id));
        assertEquals(true, receipts.sent().get(id), "inside the transaction the bean's @Transactional opened");
        await("the task succeeded", () -> client.get(id).map(Task::status).orElseThrow() == Status.SUCCEEDED);
    }

    @Test
    void aHandlerMethodThrowingPermanentExceptionDeadLettersAtOnce() throws Exception {
        UUID id = client.submit(NewTask.builder("emails", "refuse-receipt").build()).task().id();
        await("the task is dead", () -> client.get(id).map(Task::status).orElseThrow() == Status.DEAD);
        List<Attempt> history = client.history(id);
        assertEquals(1, history.size(), history.toString());
        assertEquals("java.lang.IllegalArgumentException", history.get(0).errorType());
        assertEquals("no such customer", history.get(0).message());
    }

    @Test
    void aFailingTaskIsRetriedByTheQueuePolicyThenDeadLettered() throws Exception {
        UUID id = deadTask();
        List<Attempt> history = client.history(id);
        assertEquals(3, history.size(), "rdq.queues.flaky.policy.max-attempts=3: " + history);
        for (Attempt a : history) {
            assertEquals("java.lang.IllegalStateException", a.errorType());
            assertEquals("starter-test", a.workerId());
        }
    }

    @Test
    void aSubmissionInARolledBackTransactionLeavesNoTask() {
        orders.createTable(SCHEMA);
        UUID id = UUID.randomUUID();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> orders.place(SCHEMA, id, true));
        assertEquals("payment declined", e.getMessage());
        assertEquals(Optional.empty(), client.get(id));
        assertEquals(0, count("tasks", id));
        assertEquals(0, count("orders", id));
    }

    @Test
    void aSubmissionInACommittedTransactionLeavesExactlyOneTask() throws Exception {
        orders.createTable(SCHEMA);
        UUID id = UUID.randomUUID();
        orders.place(SCHEMA, id, false);
        assertEquals(1, count("tasks", id));
        assertEquals(1, count("orders", id));
        await("the committed task succeeded",
                () -> client.get(id).map(Task::status).orElseThrow() == Status.SUCCEEDED);
    }

    @Test
    void aRedriveInsideATransactionIsRefusedAndChangesNothing() throws Exception {
        UUID id = deadTask();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> orders.redriveInTransaction(id));
        assertTrue(e.getMessage().contains("outside the transaction"), e.getMessage());
        assertEquals(Status.DEAD, client.get(id).orElseThrow().status());
        assertEquals(Map.of(id, RdqClient.RedriveOutcome.REDRIVEN), client.redrive(List.of(id), "alice", "INC-1 fixed"),
                "outside a transaction the redrive runs in its own");
    }

    @Test
    void theHealthIndicatorIsUpWithTheSchemaVersionAndTheWorker() {
        Health h = health.health();
        assertEquals(org.springframework.boot.actuate.health.Status.UP, h.getStatus(), h.toString());
        assertEquals(Migrations.latestVersion(), h.getDetails().get("schemaVersion"));
        assertEquals(SCHEMA, h.getDetails().get("schema"));
        assertEquals("starter-test", h.getDetails().get("worker"));
        assertEquals(true, h.getDetails().get("workerRunning"));
        assertFalse(h.getDetails().containsKey("schemaError"));
    }

    private UUID deadTask() throws InterruptedException {
        UUID id = client.submit(NewTask.builder("flaky", "always-fails").payload("x").build()).task().id();
        await("the task is dead", () -> client.get(id).map(Task::status).orElseThrow() == Status.DEAD);
        return id;
    }

    private int count(String table, UUID id) {
        Integer n = jdbc.queryForObject("SELECT count(*) FROM \"" + SCHEMA + "\"." + table + " WHERE id = ?",
                Integer.class, id);
        return n == null ? 0 : n;
    }
}
