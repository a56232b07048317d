package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class AdminTest extends DbTestBase {
    RdqAdmin admin() {
        return RdqAdmin.builder(ds).schema(schema).build();
    }

    void exec(String sql) throws Exception {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute(sql.replace("{schema}", "\"" + schema + "\""));
        }
    }

    @Test
    void statsCountEachStatusPerQueue() throws Exception {
        RdqClient c = client();
        UUID ok = c.submit(NewTask.builder("a", "ok").build()).task().id();
        UUID bad = c.submit(NewTask.builder("a", "bad").build()).task().id();
        Worker w = started(worker().queue("a").handle("ok", ctx -> { })
                .handle("bad", ctx -> {
                    throw new PermanentException(new IllegalStateException("no"));
                }));
        await(Duration.ofSeconds(30), "a success and a dead task", () -> statusIs(ok, Status.SUCCEEDED).getAsBoolean()
                && statusIs(bad, Status.DEAD).getAsBoolean());
        w.stop(Duration.ofSeconds(5));
        UUID due = c.submit(NewTask.builder("b", "h").build()).task().id();
        c.submit(NewTask.builder("b", "h").delay(Duration.ofHours(1)).build());
        exec("UPDATE {schema}.tasks SET next_attempt_at = now() - interval '90 minutes' WHERE id = '" + due + "'");

        List<RdqAdmin.QueueStats> all = admin().stats();
        assertEquals(2, all.size(), all.toString());
        RdqAdmin.QueueStats a = all.get(0);
        assertEquals(new RdqAdmin.QueueStats("a", 0, 0, 1, 1, Duration.ZERO), a);
        RdqAdmin.QueueStats b = all.get(1);
        assertEquals("b", b.queue());
        assertEquals(2, b.pending());
        assertEquals(0, b.inFlight() + b.dead() + b.succeeded());
        assertTrue(b.oldestDueAge().compareTo(Duration.ofMinutes(90)) >= 0
                && b.oldestDueAge().compareTo(Duration.ofMinutes(100)) < 0,
                "the due task has waited 90 minutes on the database's clock: " + b.oldestDueAge());

        exec("UPDATE {schema}.tasks SET finished_at = now() - interval '2 hours' WHERE id = '" + ok + "'");
        assertEquals(0, admin().stats(Duration.ofHours(1)).get(0).succeeded(), "finished before the window");
        assertEquals(1, admin().stats(Duration.ofHours(3)).get(0).succeeded(), "finished within the window");
        assertEquals(1, admin().stats().get(0).succeeded(), "every retained success");

        InvalidInputException e = assertThrows(InvalidInputException.class, () -> admin().stats(Duration.ZERO));
        assertTrue(e.getMessage().contains("RdqAdmin.stats: succeededWindow 0s is not positive; use stats()"),
                e.getMessage());
        assertThrows(NullPointerException.class, () -> admin().stats(null));
    }

    @Test
    void aPausedQueueIsClaimedByNoWorkerUntilResumedAndBothAreAudited() throws Exception {
        RdqAdmin admin = admin();
        UUID id = client().submit(NewTask.builder("emails", "send").build()).task().id();

        assertTrue(admin.pauseQueue("emails", "alice", "INC-42 relay down"));
        assertFalse(admin.pauseQueue("emails", "bob", "again"), "already paused: nothing changes");
        assertEquals(List.of("emails"), admin.pausedQueues());
        try (Connection c = ds.getConnection()) {
            assertEquals(List.of(), store.claim(c, "emails", 10, 60_000_000L, "w", new String[] {"send"}),
                    "a paused queue's tasks are not claimed");
        }

        assertTrue(admin.resumeQueue("emails", "alice", "INC-42 fixed"));
        assertFalse(admin.resumeQueue("emails", "alice", "again"), "not paused: nothing changes");
        assertEquals(List.of(), admin.pausedQueues());
        try (Connection c = ds.getConnection()) {
            List<Task> claimed = store.claim(c, "emails", 10, 60_000_000L, "w", new String[] {"send"});
            assertEquals(1, claimed.size());
            assertEquals(id, claimed.get(0).id());
        }

        List<String> audit = new ArrayList<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT actor, action, filter, count, reason, "
                        + "coalesce(array_length(ids, 1), 0) FROM \"" + schema + "\".audit ORDER BY id");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                audit.add(rs.getString(1) + "|" + rs.getString(2) + "|" + rs.getString(3) + "|" + rs.getLong(4)
                        + "|" + rs.getString(5) + "|" + rs.getInt(6));
            }
        }
        assertEquals(List.of("alice|pause|{\"queue\":\"emails\"}|0|INC-42 relay down|0",
                "alice|resume|{\"queue\":\"emails\"}|0|INC-42 fixed|0"), audit, "one entry per change, none for no-ops");
    }

    @Test
    void misuseIsRefusedNamingTheMethod() {
        RdqAdmin admin = admin();
        InvalidInputException e = assertThrows(InvalidInputException.class, () -> admin.pauseQueue("q", "", "why"));
        assertTrue(e.getMessage().contains("RdqAdmin.pauseQueue: the actor is empty"), e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> admin.resumeQueue("q", "alice", null));
        assertTrue(e.getMessage().contains("RdqAdmin.resumeQueue: the reason is null"), e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> admin.pauseQueue("no spaces", "alice", "why"));
        assertTrue(e.getMessage().contains("queue name"), e.getMessage());
        NullPointerException n = assertThrows(NullPointerException.class, () -> admin.pauseQueue(null, "a", "b"));
        assertTrue(n.getMessage().contains("RdqAdmin.pauseQueue: queue is null"), n.getMessage());
        assertThrows(NullPointerException.class, () -> RdqAdmin.builder(null));
    }
}
