package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class LiveTasksTest extends DbTestBase {
    RdqAdmin admin() {
        return RdqAdmin.builder(ds).schema(schema).build();
    }

    @Test
    void retryNowMakesPendingTasksDueAndAuditsThem() throws Exception {
        RdqAdmin admin = admin();
        UUID later = client().submit(NewTask.builder("emails", "send").delay(Duration.ofHours(1)).build()).task().id();
        UUID dead = client().submit(NewTask.builder("emails", "send")
                .firstFailure(new PermanentException(new IllegalStateException("no"))).build()).task().id();
        UUID missing = UUID.randomUUID();

        Map<UUID, RdqAdmin.LiveOutcome> r = admin.retryNow(List.of(later, dead, missing, later), "alice", "INC-9");
        assertEquals(Map.of(later, RdqAdmin.LiveOutcome.CHANGED, dead, RdqAdmin.LiveOutcome.NOT_PENDING,
                missing, RdqAdmin.LiveOutcome.NOT_FOUND), r);
        assertTrue(task(later).nextAttemptAt().isBefore(Instant.now().plusSeconds(60)), "due now: " + task(later));
        RdqAdmin.AuditEntry e = admin.audit(RdqAdmin.AuditQuery.builder(10).build()).get(0);
        assertEquals(new RdqAdmin.AuditEntry(e.id(), e.at(), "alice", "retry_now", "", List.of(later), 1, "INC-9",
                Map.of(), List.of("emails")), e);

        assertEquals(Map.of(dead, RdqAdmin.LiveOutcome.NOT_PENDING), admin.retryNow(List.of(dead), "alice", "again"));
        assertEquals(1, admin.audit(RdqAdmin.AuditQuery.builder(10).build()).size(), "no change, no entry");
    }

    @Test
    void cancelDeadLettersPendingTasksWithACancelledAttempt() throws Exception {
        RdqAdmin admin = admin();
        UUID a = client().submit(NewTask.builder("orders", "charge").idempotencyKey("o-1").build()).task().id();
        UUID b = client().submit(NewTask.builder("orders", "charge").build()).task().id();

        assertEquals(Optional.of(a), admin.taskByKey("orders", "o-1").map(Task::id));
        assertEquals(Optional.empty(), admin.taskByKey("orders", "o-2"));

        Map<UUID, RdqAdmin.LiveOutcome> r = admin.cancel(List.of(a, b), "bob", "order withdrawn");
        assertEquals(Map.of(a, RdqAdmin.LiveOutcome.CHANGED, b, RdqAdmin.LiveOutcome.CHANGED), r);
        Task t = task(a);
        assertEquals(Status.DEAD, t.status());
        assertEquals("cancelled", t.lastErrorType());
        assertEquals("order withdrawn", t.lastErrorMessage());
        assertEquals(Failures.fingerprint("cancelled", ""), t.lastErrorFingerprint());
        Attempt last = history(a).get(history(a).size() - 1);
        assertEquals(Outcome.CANCELLED, last.outcome());
        assertEquals("bob", last.workerId());
        assertEquals(2, admin.countDead(DeadFilter.builder().errorType("cancelled").build()), "in the DLQ");
        assertEquals(1, admin.deadGroups(DeadFilter.builder().queue("orders").build()).size(), "one group");
        RdqAdmin.AuditEntry e = admin.audit(RdqAdmin.AuditQuery.builder(1).action("cancel").build()).get(0);
        assertEquals("bob", e.actor());
        assertEquals(2, e.count());
        assertEquals(java.util.Set.of(a, b), java.util.Set.copyOf(e.ids()));
    }

    @Test
    void editAndRedriveReplacesThePayloadAndAuditsItsHashes() throws Exception {
        RdqAdmin admin = admin();
        UUID id = client().submit(NewTask.builder("orders", "charge").payload("{\"amount\":-1}")
                .firstFailure(new PermanentException(new IllegalStateException("negative"))).build()).task().id();
        UUID live = client().submit(NewTask.builder("orders", "charge").build()).task().id();
        byte[] fixed = "{\"amount\":1}".getBytes(java.nio.charset.StandardCharsets.UTF_8);

        assertEquals(RdqClient.RedriveOutcome.REDRIVEN, admin.editAndRedrive(id, fixed, "alice", "sign fixed"));
        Task t = task(id);
        assertEquals(Status.PENDING, t.status());
        assertEquals(1, t.life());
        assertEquals("{\"amount\":1}", new String(t.payload(), java.nio.charset.StandardCharsets.UTF_8));
        RdqAdmin.AuditEntry e = admin.audit(RdqAdmin.AuditQuery.builder(1).build()).get(0);
        java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
        java.util.HexFormat hex = java.util.HexFormat.of();
        assertEquals(new RdqAdmin.AuditEntry(e.id(), e.at(), "alice", "edit_payload", "", List.of(id), 1, "sign fixed",
                Map.of("old_sha256", hex.formatHex(sha.digest("{\"amount\":-1}".getBytes(java.nio.charset.StandardCharsets.UTF_8))),
                        "new_sha256", hex.formatHex(sha.digest(fixed))), List.of("orders")), e);

        assertEquals(RdqClient.RedriveOutcome.NOT_DEAD, admin.editAndRedrive(live, fixed, "alice", "x"));
        assertEquals(RdqClient.RedriveOutcome.NOT_FOUND, admin.editAndRedrive(UUID.randomUUID(), fixed, "alice", "x"));
        assertEquals(1, admin.audit(RdqAdmin.AuditQuery.builder(10).build()).size(), "no change, no entry");
        DeadLettersTest.assertMessage("RdqAdmin.editAndRedrive: payload is 1048577 bytes; the limit is 1048576",
                () -> admin.editAndRedrive(id, new byte[Limits.MAX_PAYLOAD_BYTES + 1], "a", "r"));
    }

    @Test
    void aPausedHandlersTasksAreHeldUntilResumedAndBothAreAudited() throws Exception {
        RdqAdmin admin = admin();
        UUID c1 = client().submit(NewTask.builder("orders", "charge").build()).task().id();
        UUID c2 = client().submit(NewTask.builder("orders", "charge").build()).task().id();
        UUID refund = client().submit(NewTask.builder("orders", "refund").build()).task().id();
        String[] both = {"charge", "refund"};

        assertTrue(admin.pauseHandler("orders", "charge", "alice", "INC-7 gateway down"));
        assertEquals(false, admin.pauseHandler("orders", "charge", "bob", "again"), "paused already: no change");
        List<RdqAdmin.HandlerPause> paused = admin.pausedHandlers(Optional.empty());
        assertEquals(1, paused.size());
        RdqAdmin.HandlerPause p = paused.get(0);
        assertEquals(List.of("orders", "charge", "open", 1, "alice", "INC-7 gateway down"),
                List.of(p.queue(), p.handler(), p.state(), p.trips(), p.actor(), p.reason()));
        assertEquals(Optional.empty(), p.probeAt(), "held until resumed");
        assertEquals(paused, admin.pausedHandlers(Optional.of("orders")));
        assertEquals(List.of(), admin.pausedHandlers(Optional.of("emails")));
        try (java.sql.Connection c = ds.getConnection()) {
            assertEquals(List.of(refund), store.claim(c, "orders", 10, 60_000_000L, "w", both).stream()
                    .map(Task::id).toList(), "the paused handler's tasks are not claimed");
        }

        assertTrue(admin.resumeHandler("orders", "charge", "alice", "INC-7 fixed"));
        assertEquals(false, admin.resumeHandler("orders", "charge", "alice", "again"));
        assertEquals(List.of(), admin.pausedHandlers(Optional.empty()));
        try (java.sql.Connection c = ds.getConnection()) {
            assertEquals(java.util.Set.of(c1, c2), java.util.Set.copyOf(store.claim(c, "orders", 10, 60_000_000L, "w",
                    both).stream().map(Task::id).toList()), "resumed: claimed again");
        }
        List<RdqAdmin.AuditEntry> entries = admin.audit(RdqAdmin.AuditQuery.builder(10).build());
        assertEquals(2, entries.size(), entries.toString());
        RdqAdmin.AuditEntry resume = entries.get(0);
        RdqAdmin.AuditEntry pause = entries.get(1);
        assertEquals(new RdqAdmin.AuditEntry(pause.id(), pause.at(), "alice", "pause_handler",
                "{\"handler\":\"charge\",\"queue\":\"orders\"}", List.of(), 2, "INC-7 gateway down",
                Map.of("handler", "charge", "trips", "1", "cool_off", "until resumed"), List.of("orders")), pause);
        assertEquals(new RdqAdmin.AuditEntry(resume.id(), resume.at(), "alice", "resume_handler",
                "{\"handler\":\"charge\",\"queue\":\"orders\"}", List.of(), 2, "INC-7 fixed",
                Map.of("handler", "charge", "trips", "1"), List.of("orders")), resume);
        DeadLettersTest.assertMessage("handler name \"a b\" contains ' '",
                () -> admin.pauseHandler("orders", "a b", "x", "y"));
    }

    @Test
    void misuseIsRefused() {
        RdqAdmin admin = admin();
        DeadLettersTest.assertMessage("RdqAdmin.cancel: 0 task ids; name 1 to 1000",
                () -> admin.cancel(List.of(), "a", "r"));
        DeadLettersTest.assertMessage("RdqAdmin.retryNow: the reason is null",
                () -> admin.retryNow(List.of(UUID.randomUUID()), "a", null));
        DeadLettersTest.assertMessage("RdqAdmin.taskByKey: the key is empty", () -> admin.taskByKey("q", ""));
        assertThrows(NullPointerException.class, () -> admin.taskByKey(null, "k"));
    }
}
