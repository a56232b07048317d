package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class ClientTest extends DbTestBase {
    @Test
    void submitStoresEveryField() throws Exception {
        RdqClient c = client();
        SubmitResult r = c.submit(NewTask.builder("emails", "send-welcome").payload(new byte[] {0, 1, (byte) 0xff})
                .contentType("application/octet-stream").header("tenant", "acme").header("traceparent", "00-ab-cd-01")
                .idempotencyKey("signup-42").delay(Duration.ofMinutes(5)).build());
        assertFalse(r.duplicate());
        Task t = task(r.task().id());
        assertEquals(Status.PENDING, t.status());
        assertEquals("emails", t.queue());
        assertEquals("send-welcome", t.handler());
        assertEquals(3, t.payload().length);
        assertEquals("application/octet-stream", t.contentType());
        assertEquals("acme", t.headers().get("tenant"));
        assertEquals("signup-42", t.idempotencyKey());
        long delayed = Duration.between(t.createdAt(), t.nextAttemptAt()).toSeconds();
        assertEquals(300, delayed, "due five minutes after creation, on the database's clock");
        assertEquals(7, t.id().version(), "UUIDv7 ids");

        Instant at = Instant.now().plusSeconds(3600);
        Task later = c.submit(NewTask.builder("emails", "send-welcome").runAt(at).build()).task();
        long off = Math.abs(Duration.between(at, later.nextAttemptAt()).toSeconds());
        assertTrue(off < 60, "run-at honoured within a minute of clock skew, off by " + off + "s");
    }

    @Test
    void aTaskCarriesItsOwnBudgetAndTimeoutWithinTheQueuesBounds() throws Exception {
        RdqClient c = RdqClient.builder(ds).schema(schema)
                .policy("bounded", Policy.builder().taskMaxAttempts(5).taskMaxTimeout(Duration.ofSeconds(30)).build())
                .policy("open", Policy.builder().anyTaskMaxAttempts().build())
                .build();
        Task t = task(c.submit(NewTask.builder("bounded", "h").maxAttempts(5).timeout(Duration.ofSeconds(30))
                .build()).task().id());
        assertEquals(OptionalInt.of(5), t.maxAttempts());
        assertEquals(Optional.of(Duration.ofSeconds(30)), t.timeout());
        Task plain = task(c.submit(NewTask.builder("bounded", "h").build()).task().id());
        assertEquals(OptionalInt.empty(), plain.maxAttempts(), "unset: the queue's budget");
        assertEquals(Optional.empty(), plain.timeout(), "unset: the queue's timeout");
        assertEquals(OptionalInt.of(Policy.UNLIMITED), task(c.submit(NewTask.builder("open", "h").unlimitedAttempts()
                .build()).task().id()).maxAttempts());

        InvalidInputException e = assertThrows(InvalidInputException.class,
                () -> c.submit(NewTask.builder("bounded", "h").maxAttempts(6).build()));
        assertTrue(e.getMessage().contains("NewTask.Builder.maxAttempts(6) is over the queue's limit of 5"), e.getMessage());
        e = assertThrows(InvalidInputException.class,
                () -> c.submit(NewTask.builder("bounded", "h").timeout(Duration.ofSeconds(31)).build()));
        assertTrue(e.getMessage().contains("NewTask.Builder.timeout(31s) is over the queue's limit of 30s"), e.getMessage());
        // A queue without a policy given to the client has the default bounds.
        e = assertThrows(InvalidInputException.class,
                () -> c.submit(NewTask.builder("other", "h").unlimitedAttempts().build()));
        assertTrue(e.getMessage().contains("at most " + Policy.DEFAULT_TASK_MAX_ATTEMPTS + " attempts"), e.getMessage());
        e = assertThrows(InvalidInputException.class,
                () -> c.submit(NewTask.builder("other", "h").timeout(Duration.ofHours(2)).build()));
        assertTrue(e.getMessage().contains("limit of 1h0m0s"), e.getMessage());
        assertEquals(3, scalar("SELECT count(*) FROM {schema}.tasks"), "nothing refused was stored");

        e = assertThrows(InvalidInputException.class, () -> NewTask.builder("q", "h").maxAttempts(0));
        assertTrue(e.getMessage().contains("NewTask.Builder.maxAttempts(0)") && e.getMessage().contains("unlimitedAttempts()")
                && e.getMessage().contains("leave it unset"), e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> NewTask.builder("q", "h").maxAttempts(Policy.UNLIMITED));
        assertTrue(e.getMessage().contains("NewTask.Builder.maxAttempts(-1)"), e.getMessage());
        NullPointerException n = assertThrows(NullPointerException.class, () -> NewTask.builder("q", "h").header("k", null));
        assertTrue(n.getMessage().contains("NewTask.Builder.header: the value of \"k\" is null"), n.getMessage());
        n = assertThrows(NullPointerException.class, () -> NewTask.builder("q", null));
        assertTrue(n.getMessage().contains("NewTask.builder: the handler is null"), n.getMessage());
        e = assertThrows(InvalidInputException.class, () -> NewTask.builder("q", "h").timeout(Duration.ZERO));
        assertTrue(e.getMessage().contains("leave it unset"), e.getMessage());
        assertThrows(InvalidInputException.class, () -> NewTask.builder("q", "h").timeout(Duration.ofMillis(-1)));
        e = assertThrows(InvalidInputException.class, () -> Policy.builder().taskMaxAttempts(0));
        assertTrue(e.getMessage().contains("Policy.Builder.taskMaxAttempts(0)") && e.getMessage().contains("anyTaskMaxAttempts()"),
                e.getMessage());
        assertThrows(InvalidInputException.class, () -> Policy.builder().taskMaxTimeout(Duration.ZERO));
        assertThrows(InvalidInputException.class, () -> Policy.builder().maxSnoozes(-1));
        e = assertThrows(InvalidInputException.class, () -> RdqClient.builder(ds).keyRetention(Duration.ZERO));
        assertTrue(e.getMessage().contains("RdqClient.Builder.keyRetention(0s) is not positive; leave it unset for 7 days"),
                e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> RdqClient.builder(ds).id(""));
        assertTrue(e.getMessage().contains("RdqClient.Builder.id: the ID is empty"), e.getMessage());
        n = assertThrows(NullPointerException.class, () -> RdqClient.builder(ds).schema(null));
        assertTrue(n.getMessage().startsWith("RdqClient.Builder.schema: the schema is null"), n.getMessage());
        e = assertThrows(InvalidInputException.class, () -> RdqClient.builder(ds).schema("Bad-Schema").build());
        assertTrue(e.getMessage().contains("invalid input: schema \"Bad-Schema\" must be"), e.getMessage());
    }

    @Test
    void idempotencyKeyReturnsTheFirstTask() throws Exception {
        RdqClient c = client();
        NewTask t = NewTask.builder("orders", "charge").idempotencyKey("order-7").payload("a").build();
        SubmitResult first = c.submit(t);
        SubmitResult second = c.submit(NewTask.builder("orders", "charge").idempotencyKey("order-7").payload("b").build());
        assertTrue(second.duplicate());
        assertEquals(first.task().id(), second.task().id());
        // Within one batch, and per queue.
        List<SubmitResult> rs = c.submitAll(List.of(
                NewTask.builder("orders", "charge").idempotencyKey("order-8").build(),
                NewTask.builder("orders", "charge").idempotencyKey("order-8").build(),
                NewTask.builder("other", "charge").idempotencyKey("order-8").build(),
                NewTask.builder("orders", "charge").idempotencyKey("order-7").build()));
        assertFalse(rs.get(0).duplicate());
        assertTrue(rs.get(1).duplicate());
        assertEquals(rs.get(0).task().id(), rs.get(1).task().id());
        assertFalse(rs.get(2).duplicate());
        assertTrue(rs.get(3).duplicate());
        assertEquals(first.task().id(), rs.get(3).task().id());
        assertEquals(3, scalar("SELECT count(*) FROM {schema}.tasks"));
    }

    @Test
    void manyTasksInOneCall() throws Exception {
        List<NewTask> batch = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            batch.add(NewTask.builder("bulk", "h").payload("{\"n\":" + i + "}").build());
        }
        List<SubmitResult> rs = client().submitAll(batch);
        assertEquals(500, rs.size());
        assertEquals(500, scalar("SELECT count(*) FROM {schema}.tasks WHERE status = 'PENDING'"));
        assertEquals("{\"n\":499}", new String(rs.get(499).task().payload()));
    }

    @Test
    void firstFailureIsAttemptOne() throws Exception {
        RdqClient c = client();
        Task t = c.submit(NewTask.builder("q", "h").firstFailure(new java.net.ConnectException("refused 10.0.0.1"))
                .build()).task();
        assertEquals(Status.PENDING, t.status());
        assertEquals(1, t.attempts());
        assertEquals("java.net.ConnectException", t.lastErrorType());
        List<Attempt> h = history(t.id());
        assertEquals(1, h.size());
        assertEquals(1, h.get(0).number());
        assertEquals(Outcome.RETRYABLE_FAILURE, h.get(0).outcome());
        assertEquals(RdqClient.DEFAULT_ID, h.get(0).workerId());
        assertEquals(Failures.fingerprint("java.net.ConnectException", "refused 10.0.0.1"), t.lastErrorFingerprint());
    }

    @Test
    void permanentFirstFailureGoesStraightToTheDlq() throws Exception {
        RdqClient c = client();
        Task t = c.submit(NewTask.builder("q", "h")
                .firstFailure(new PermanentException(new IllegalArgumentException("bad card 4242"))).build()).task();
        assertEquals(Status.DEAD, t.status());
        assertTrue(t.finishedAt() != null);
        assertEquals(Outcome.PERMANENT_FAILURE, history(t.id()).get(0).outcome());
        // The dead-task summary is maintained in the same statement, as pgstore does.
        assertEquals(1, scalar("SELECT sum(n) FROM {schema}.dead_counts WHERE queue = 'q' AND handler = 'h'"
                + " AND error_type = 'java.lang.IllegalArgumentException'"));
    }

    @Test
    void submitInsideTheCallersTransaction() throws Exception {
        RdqClient c = client();
        try (Connection conn = ds.getConnection()) {
            conn.setAutoCommit(false);
            c.submit(conn, NewTask.builder("tx", "h").build());
            conn.rollback();
            SubmitResult kept = c.submit(conn, NewTask.builder("tx", "h").idempotencyKey("k").build());
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TEMP TABLE app_work (x int)");
            }
            assertEquals(0, scalar("SELECT count(*) FROM {schema}.tasks"), "invisible before commit");
            conn.commit();
            assertTrue(conn.getAutoCommit() == false, "auto-commit untouched");
            assertEquals(kept.task().id(), task(kept.task().id()).id());
        }
        assertEquals(1, scalar("SELECT count(*) FROM {schema}.tasks"));
    }

    @Test
    void invalidInputIsRejectedBeforeAnythingIsWritten() throws Exception {
        RdqClient c = client();
        InvalidInputException e = assertThrows(InvalidInputException.class, () -> c.submitAll(List.of(
                NewTask.builder("ok", "h").build(), NewTask.builder("my queue", "h").build())));
        assertTrue(e.getMessage().contains("task 1: rdq: invalid input: queue name \"my queue\" contains ' '"), e.getMessage());
        e = assertThrows(InvalidInputException.class,
                () -> c.submit(NewTask.builder("q", "h").payload(new byte[Limits.MAX_PAYLOAD_BYTES + 1]).build()));
        assertTrue(e.getMessage().contains("store large data elsewhere"), e.getMessage());
        e = assertThrows(InvalidInputException.class,
                () -> c.submit(NewTask.builder("q", "h").delay(Duration.ofSeconds(-1)).build()));
        assertTrue(e.getMessage().contains("delay -1s is negative"), e.getMessage());
        assertEquals(0, scalar("SELECT count(*) FROM {schema}.tasks"));
    }

    @Test
    void unknownSchemaVersionsAreRefused() throws Exception {
        int tooOld = SchemaVersion.KNOWN_VERSIONS[0] - 1;
        String older = TestDb.newSchema(ds, tooOld);
        try {
            SchemaVersionException e = assertThrows(SchemaVersionException.class,
                    () -> RdqClient.builder(ds).schema(older).build());
            assertTrue(e.getMessage().contains("older than this Java SDK needs"), e.getMessage());
            assertEquals(tooOld, e.found());
            try (Connection conn = ds.getConnection(); Statement st = conn.createStatement()) {
                st.execute("INSERT INTO \"" + schema + "\".schema_migrations (version, name) VALUES (999, '0999_future.sql')");
            }
            e = assertThrows(SchemaVersionException.class, () -> Worker.builder(ds).schema(schema).queue("q").build());
            assertTrue(e.getMessage().contains("version 999, which this Java SDK does not know"), e.getMessage());
            e = assertThrows(SchemaVersionException.class, () -> RdqClient.builder(ds).schema("rdq_never_made").build());
            assertTrue(e.getMessage().contains("has no rdq tables"), e.getMessage());
        } finally {
            TestDb.drop(ds, older);
        }
        assertNotEquals(0, SchemaVersion.KNOWN_VERSIONS.length);
    }

    @Test
    void redriveMovesDeadTasksToANewLifeWithAnAuditEntry() throws Exception {
        RdqClient c = client();
        UUID dead = c.submit(NewTask.builder("q", "h").firstFailure(new PermanentException("broken")).build()).task().id();
        UUID pending = c.submit(NewTask.builder("q", "h").build()).task().id();
        UUID missing = Ids.newId();
        assertEquals(1, scalar("SELECT coalesce(sum(n), 0) FROM {schema}.dead_counts"));
        java.util.Map<UUID, RdqClient.RedriveOutcome> r = c.redrive(List.of(dead, pending, missing, dead), "ops", "fixed");
        assertEquals(RdqClient.RedriveOutcome.REDRIVEN, r.get(dead));
        assertEquals(RdqClient.RedriveOutcome.NOT_DEAD, r.get(pending));
        assertEquals(RdqClient.RedriveOutcome.NOT_FOUND, r.get(missing));
        Task t = task(dead);
        assertEquals(Status.PENDING, t.status());
        assertEquals(1, t.life());
        assertEquals(0, t.attempts());
        assertEquals(1, history(dead).size(), "history kept");
        assertEquals(0, scalar("SELECT coalesce(sum(n), 0) FROM {schema}.dead_counts"), "counted out of the DLQ");
        assertEquals(1, scalar("SELECT count(*) FROM {schema}.audit WHERE action = 'redrive' AND actor = 'ops' AND reason = 'fixed'"));
        assertThrows(InvalidInputException.class, () -> c.redrive(List.of(dead), "ops", ""));
    }

    @Test
    void idempotencyKeysOutliveTheirPurgedTasks() throws Exception {
        RdqClient c = client();
        UUID chosen = Ids.newId();
        SubmitResult first = c.submit(NewTask.builder("q", "h").id(chosen).idempotencyKey("pay-9").build());
        assertEquals(chosen, first.task().id(), "the caller's ID");
        SubmitResult sameId = c.submit(NewTask.builder("q", "h").id(chosen).build());
        assertTrue(sameId.duplicate());
        // The task succeeds and retention purges it, keeping its key.
        try (Connection conn = ds.getConnection(); Statement st = conn.createStatement()) {
            st.execute("UPDATE \"" + schema + "\".tasks SET status = 'SUCCEEDED', finished_at = now() - interval '2 days'");
            assertEquals(1, store.purgeSucceeded(conn, Duration.ofDays(1).toNanos() / 1000, 100, "test", "{}"));
        }
        assertEquals(0, scalar("SELECT count(*) FROM {schema}.tasks"));
        SubmitResult again = c.submit(NewTask.builder("q", "h").idempotencyKey("pay-9").build());
        assertTrue(again.duplicate());
        assertTrue(again.purged(), "a duplicate of a purged task");
        assertEquals(chosen, again.task().id());
        assertEquals(0, scalar("SELECT count(*) FROM {schema}.tasks"), "the work is not run again");
        // Past the key retention the key is pruned and may be used again.
        RdqClient shortKeys = RdqClient.builder(ds).schema(schema).keyRetention(Duration.ofMillis(1)).build();
        try (Connection conn = ds.getConnection()) {
            new PgStore(schema, Duration.ofMillis(1)).purgeSucceeded(conn, 0, 100, "test", "{}");
        }
        SubmitResult fresh = shortKeys.submit(NewTask.builder("q", "h").idempotencyKey("pay-9").build());
        assertFalse(fresh.duplicate());
        assertNotEquals(chosen, fresh.task().id());
    }
}
