package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.ConnectException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class BreakerTest extends DbTestBase {
    static final Duration WAIT = Duration.ofSeconds(60);

    RdqAdmin admin() {
        return RdqAdmin.builder(ds).schema(schema).build();
    }

    /** Retries far away, so each task fails once within a test. */
    static Policy slowRetries() {
        return Policy.builder().maxAttempts(50).initialBackoff(Duration.ofHours(1)).jitter(0).build();
    }

    List<RdqAdmin.AuditEntry> handlerAudit() {
        List<RdqAdmin.AuditEntry> out = new ArrayList<>(admin().audit(RdqAdmin.AuditQuery.builder(100).build()));
        out.removeIf(e -> !e.action().endsWith("_handler"));
        java.util.Collections.reverse(out); // oldest first
        return out;
    }

    /** The handler's pause state read by the handler itself: empty when it is not paused. */
    Optional<String> pauseState(String queue, String handler) {
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(
                "SELECT state FROM \"" + schema + "\".paused_handlers WHERE queue = ? AND handler = ?")) {
            ps.setString(1, queue);
            ps.setString(2, handler);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? Optional.of(rs.getString(1)) : Optional.empty();
            }
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void defaultsAreGosAndBadSettingsAreRefusedByName() {
        Breaker b = Breaker.defaults();
        assertEquals(Duration.ofMinutes(1), b.window());
        assertEquals(10, b.minFailedTasks());
        assertEquals(0.5, b.failureRatio());
        assertEquals(Duration.ofSeconds(30), b.coolOff());
        assertEquals(Duration.ofMinutes(10), b.maxCoolOff());
        assertEquals(Duration.ofSeconds(30), b.coolOff(1));
        assertEquals(Duration.ofSeconds(60), b.coolOff(2));
        assertEquals(Duration.ofSeconds(480), b.coolOff(5));
        assertEquals(Duration.ofMinutes(10), b.coolOff(6), "capped at maxCoolOff");
        assertEquals(Optional.empty(), QueueConfig.defaults().breaker(), "a queue has no breaker unless set");

        String m = assertThrows(InvalidInputException.class, () -> Breaker.builder().failureRatio(0)).getMessage();
        assertTrue(m.contains("Breaker.Builder.failureRatio: 0.0 is outside (0, 1]"), m);
        m = assertThrows(InvalidInputException.class, () -> Breaker.builder().minFailedTasks(0)).getMessage();
        assertTrue(m.contains("Breaker.Builder.minFailedTasks: 0 is not positive"), m);
        m = assertThrows(InvalidInputException.class, () -> Breaker.builder().window(Duration.ZERO)).getMessage();
        assertTrue(m.contains("Breaker.Builder.window: 0s is not positive"), m);
        m = assertThrows(InvalidInputException.class,
                () -> Breaker.builder().coolOff(Duration.ofMinutes(2)).maxCoolOff(Duration.ofMinutes(1)).build()).getMessage();
        assertTrue(m.contains("maxCoolOff 1m0s is shorter than coolOff 2m0s"), m);
        assertThrows(NullPointerException.class, () -> QueueConfig.builder().breaker(null));
    }

    @Test
    void failuresOfOneCauseTripTheBreakerWhichPausesTheHandlerAsGoDoes() throws Exception {
        RdqClient client = client();
        List<UUID> charges = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            charges.add(client.submit(NewTask.builder("q", "charge").build()).task().id());
        }
        UUID other = client.submit(NewTask.builder("q", "index").delay(Duration.ofMillis(500)).build()).task().id();
        SimpleMeterRegistry reg = new SimpleMeterRegistry();
        AtomicInteger runs = new AtomicInteger();
        started(worker().meterRegistry(reg).queue("q", QueueConfig.builder().concurrency(1).policy(slowRetries())
                .breaker(Breaker.builder().minFailedTasks(3).coolOff(Duration.ofHours(1)).maxCoolOff(Duration.ofHours(2)).build())
                .build())
                .handle("charge", ctx -> {
                    runs.incrementAndGet();
                    throw new ConnectException("connection refused");
                })
                .handle("index", ctx -> { }));

        await(WAIT, "the handler paused", () -> !admin().pausedHandlers(Optional.of("q")).isEmpty());
        await(WAIT, "the queue's other handler runs on", statusIs(other, Status.SUCCEEDED));
        RdqAdmin.HandlerPause p = admin().pausedHandlers(Optional.of("q")).get(0);
        assertEquals("charge", p.handler());
        assertEquals("open", p.state());
        assertEquals(Breaker.ACTOR, p.actor());
        assertEquals(1, p.trips());
        assertTrue(p.probeAt().isPresent(), "a breaker's pause has a probe time");
        assertEquals("3 of 3 attempts failed within 1m0s, 3 distinct tasks with one cause", p.reason());
        assertEquals(1.0, p.ratio().getAsDouble());
        String fp = Failures.fingerprint("java.net.ConnectException", "connection refused");
        assertEquals(Optional.of(fp), p.fingerprint());

        assertEquals(3, runs.get(), "three distinct failures trip it; the handler runs no more");
        await(WAIT, "the three failed attempts written", () -> {
            try {
                return scalar("SELECT coalesce(sum(attempts), 0) FROM {schema}.tasks WHERE handler = 'charge'") == 3;
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        });
        assertEquals(6, scalar("SELECT count(*) FROM {schema}.tasks WHERE handler = 'charge' AND status = 'PENDING'"),
                "every task of the handler waits, its budget untouched");
        assertTrue(scalar("SELECT count(*) FROM {schema}.tasks WHERE handler = 'charge' AND held") >= 5,
                "held (a finish written while the pause committed may miss it; claims skip it all the same)");
        try (Connection c = ds.getConnection()) {
            assertEquals(List.of(), store.claim(c, "q", 10, 60_000_000L, "other", new String[] {"charge"}),
                    "no worker claims a task of the paused handler");
        }

        List<RdqAdmin.AuditEntry> audit = handlerAudit();
        assertEquals(1, audit.size(), audit.toString());
        RdqAdmin.AuditEntry a = audit.get(0);
        assertEquals("pause_handler", a.action());
        assertEquals("breaker", a.actor());
        assertEquals("{\"handler\":\"charge\",\"queue\":\"q\"}", a.filter());
        assertEquals(p.reason(), a.reason());
        assertEquals(Map.of("handler", "charge", "trips", "1", "cool_off", "1h0m0s", "fingerprint", fp, "ratio", "1.000"),
                a.details());
        assertEquals(1.0, reg.get("rdq.worker.breaker_transitions").tags("queue", "q", "handler", "charge", "to", "open")
                .counter().count());
        assertEquals(1.0, reg.get("rdq.worker.breaker_state").tags("queue", "q", "handler", "charge").gauge().value());
    }

    @Test
    void onePoisonTaskOrManyCausesNeverTripIt() throws Exception {
        RdqClient client = client();
        UUID poison = client.submit(NewTask.builder("q", "h").build()).task().id();
        List<UUID> mixed = new ArrayList<>();
        for (String cause : List.of("red", "green", "blue", "amber")) {
            mixed.add(client.submit(NewTask.builder("q", "h").payload(cause).build()).task().id());
        }
        started(worker().queue("q", QueueConfig.builder().concurrency(1)
                .policy(Policy.builder().maxAttempts(6).initialBackoff(Duration.ofMillis(1)).jitter(0).build())
                .breaker(Breaker.builder().minFailedTasks(2).build()).build())
                .handle("h", ctx -> {
                    if (ctx.task().id().equals(poison)) {
                        throw new IllegalStateException("poison");
                    }
                    throw new IllegalStateException("cause " + ctx.payloadText()); // four causes, one task each
                }));
        await(WAIT, "every task dead", () -> {
            for (UUID id : mixed) {
                if (!statusIs(id, Status.DEAD).getAsBoolean()) {
                    return false;
                }
            }
            return statusIs(poison, Status.DEAD).getAsBoolean();
        });
        assertEquals(List.of(), admin().pausedHandlers(Optional.empty()), "no cause failed two distinct tasks");
        assertEquals(List.of(), handlerAudit());
    }

    @Test
    void aProbeRunsAloneAFailedOneReopensWithTheCoolOffDoubledAndASuccessResumes() throws Exception {
        RdqClient client = client();
        List<UUID> ids = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            ids.add(client.submit(NewTask.builder("q", "charge").build()).task().id());
        }
        AtomicBoolean failing = new AtomicBoolean(true);
        AtomicInteger probes = new AtomicInteger();
        AtomicInteger probing = new AtomicInteger();
        List<String> seen = java.util.Collections.synchronizedList(new ArrayList<>());
        started(worker().queue("q", QueueConfig.builder().concurrency(1)
                .policy(Policy.builder().maxAttempts(50).initialBackoff(Duration.ofMillis(1)).jitter(0).build())
                .breaker(Breaker.builder().minFailedTasks(2).coolOff(Duration.ofMillis(300)).build()).build())
                .handle("charge", ctx -> {
                    Optional<String> state = pauseState("q", "charge");
                    if (state.isPresent()) {
                        seen.add(state.get());
                        probes.incrementAndGet();
                        if (probing.incrementAndGet() > 1) {
                            seen.add("two probes at once");
                        }
                        try {
                            Thread.sleep(30);
                        } finally {
                            probing.decrementAndGet();
                        }
                    }
                    if (failing.get()) {
                        throw new ConnectException("connection refused");
                    }
                }));

        await(WAIT, "a failed probe reopened the pause", () -> {
            List<RdqAdmin.HandlerPause> p = admin().pausedHandlers(Optional.of("q"));
            return !p.isEmpty() && p.get(0).trips() >= 2;
        });
        failing.set(false);
        await(WAIT, "every task succeeded after a probe resumed the handler", () -> {
            for (UUID id : ids) {
                if (!statusIs(id, Status.SUCCEEDED).getAsBoolean()) {
                    return false;
                }
            }
            return true;
        });
        assertEquals(List.of(), admin().pausedHandlers(Optional.empty()));

        List<RdqAdmin.AuditEntry> audit = handlerAudit();
        RdqAdmin.AuditEntry first = audit.get(0);
        assertEquals("pause_handler", first.action());
        assertEquals("300ms", first.details().get("cool_off"));
        RdqAdmin.AuditEntry reopen = audit.get(1);
        assertEquals("pause_handler", reopen.action());
        assertEquals("probe failed with the same cause; tripped because " + first.reason(), reopen.reason());
        assertEquals("600ms", reopen.details().get("cool_off"), "the cool-off doubles per failed probe");
        assertEquals("2", reopen.details().get("trips"));
        assertEquals(first.details().get("fingerprint"), reopen.details().get("fingerprint"));
        RdqAdmin.AuditEntry last = audit.get(audit.size() - 1);
        assertEquals("resume_handler", last.action());
        assertEquals("breaker", last.actor());
        assertEquals("probe succeeded", last.reason());
        assertTrue(last.details().containsKey("probe"), last.details().toString());
        assertTrue(ids.contains(UUID.fromString(last.details().get("probe"))), "the probe is one of the handler's tasks");
        for (RdqAdmin.AuditEntry e : audit.subList(1, audit.size() - 1)) {
            assertEquals("pause_handler", e.action(), "between the trip and the resume only reopenings: " + audit);
        }

        assertFalse(seen.contains("open"), "no task ran while the handler was open: " + seen);
        assertFalse(seen.contains("two probes at once"), seen.toString());
        assertEquals(audit.size() - 1, probes.get(),
                "one probe per cool-off: each failed probe reopened the pause, the last resumed it: " + audit);
    }
}
