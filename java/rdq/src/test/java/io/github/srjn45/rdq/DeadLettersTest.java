package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class DeadLettersTest extends DbTestBase {
    RdqAdmin admin() {
        return RdqAdmin.builder(ds).schema(schema).build();
    }

    void exec(String sql) throws Exception {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute(sql.replace("{schema}", "\"" + schema + "\""));
        }
    }

    /** Submits a task that is dead at once, its first failure permanent. */
    UUID dead(String queue, String handler, String message) {
        return client().submit(NewTask.builder(queue, handler)
                .firstFailure(new PermanentException(new IllegalStateException(message))).build()).task().id();
    }

    record Entry(String actor, String action, String filter, long count, String reason, String details) {}

    List<Entry> audit() throws Exception {
        List<Entry> out = new ArrayList<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT actor, action, filter, count, reason, details::text FROM \""
                        + schema + "\".audit ORDER BY id");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(new Entry(rs.getString(1), rs.getString(2), rs.getString(3), rs.getLong(4), rs.getString(5),
                        rs.getString(6)));
            }
        }
        return out;
    }

    @Test
    void listPagesThroughEveryMatchingDeadTaskOnceNewestFirst() throws Exception {
        Set<UUID> emails = new HashSet<>();
        for (int i = 0; i < 7; i++) {
            emails.add(dead("emails", "send", "relay 503 #" + i));
        }
        dead("orders", "charge", "card declined");
        client().submit(NewTask.builder("emails", "send").build()); // live: never listed

        RdqAdmin admin = admin();
        DeadFilter f = DeadFilter.builder().queue("emails").build();
        List<Task> seen = new ArrayList<>();
        Optional<RdqAdmin.Cursor> after = Optional.empty();
        int pages = 0;
        do {
            RdqAdmin.DeadPage p = admin.listDead(f, after, 3);
            seen.addAll(p.tasks());
            after = p.next();
            pages++;
        } while (after.isPresent());
        assertEquals(3, pages, "pages of 3, 3 and 1");
        assertEquals(emails, new HashSet<>(seen.stream().map(Task::id).toList()));
        assertEquals(7, seen.size(), "none listed twice");
        for (int i = 1; i < seen.size(); i++) {
            Task a = seen.get(i - 1);
            Task b = seen.get(i);
            int byTime = a.finishedAt().compareTo(b.finishedAt());
            assertTrue(byTime > 0 || (byTime == 0 && a.id().toString().compareTo(b.id().toString()) > 0),
                    "newest dead first: " + a + " before " + b);
        }
        assertTrue(seen.stream().allMatch(t -> t.status() == Status.DEAD && t.queue().equals("emails")));

        assertEquals(7, admin.countDead(f));
        assertEquals(8, admin.countDead(DeadFilter.all()));
        assertEquals(1, admin.countDead(DeadFilter.builder().messageContains("RELAY 503 #3").build()),
                "case-insensitive substring");
        assertEquals(0, admin.countDead(DeadFilter.builder().messageContains("503_%").build()),
                "LIKE's wildcards are taken literally");
        assertEquals(1, admin.countDead(DeadFilter.builder().handler("charge")
                .errorType("java.lang.IllegalStateException").build()));
        String fp = task(seen.get(0).id()).lastErrorFingerprint();
        assertEquals(7, admin.countDead(DeadFilter.builder().fingerprint(fp).build()),
                "the numbers in the messages do not split the group: " + fp);
        assertEquals(0, admin.countDead(DeadFilter.builder().fingerprint("00").build()));
        assertEquals(2, admin.countDead(DeadFilter.builder().ids(List.of(seen.get(0).id(), seen.get(1).id(),
                seen.get(0).id())).build()), "ids, duplicates once");
        assertEquals(8, admin.countDead(DeadFilter.builder().deadAfter(Instant.now().minusSeconds(3600))
                .deadBefore(Instant.now().plusSeconds(3600)).build()));
        assertEquals(0, admin.countDead(DeadFilter.builder().deadBefore(Instant.now().minusSeconds(3600)).build()));
        assertEquals(0, admin.countDead(DeadFilter.builder().lifeMin(1).build()), "none redriven yet");
        assertEquals(8, admin.countDead(DeadFilter.builder().lifeBelow(1).build()));

        List<RdqAdmin.DeadGroup> groups = admin.deadGroups(DeadFilter.all());
        assertEquals(2, groups.size(), groups.toString());
        RdqAdmin.DeadGroup big = groups.get(0);
        assertEquals(fp, big.fingerprint());
        assertEquals(7, big.count(), "largest first");
        assertEquals(seen.get(0).id(), big.exampleId(), "the example is the most recently dead");
        assertEquals("java.lang.IllegalStateException", big.errorType());
        assertEquals(seen.get(0).lastErrorMessage(), big.message());
        assertEquals(seen.get(seen.size() - 1).finishedAt(), big.firstSeen());
        assertEquals(seen.get(0).finishedAt(), big.lastSeen());
        assertEquals(1, groups.get(1).count());
        assertEquals(List.of(big), admin.deadGroups(DeadFilter.builder().queue("emails").messageContains("relay").build()));
    }

    @Test
    void redriveByFilterCountsInADryRunThenMovesAndAuditsAsGoDoes() throws Exception {
        List<UUID> ids = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            ids.add(dead("emails", "send", "relay <down> & 503"));
        }
        UUID other = dead("orders", "charge", "declined");
        RdqAdmin admin = admin();
        DeadFilter f = DeadFilter.builder().queue("emails").messageContains("<down> & 503").build();

        RdqAdmin.RedriveResult dry = admin.redriveDead(f, RdqAdmin.RedriveOptions.dryRun().max(4).build());
        assertEquals(new RdqAdmin.RedriveResult(true, 5, 4, 0, OptionalInt.empty()), dry);
        assertEquals(List.of(), audit(), "a dry run writes nothing");
        assertEquals(5, admin.countDead(f), "a dry run changes nothing");

        RdqAdmin.RedriveResult r;
        try (LogCapture logs = new LogCapture()) {
            r = admin.redriveDead(f, RdqAdmin.RedriveOptions.builder("alice", "INC-42 fixed")
                    .max(3).delay(Duration.ofMinutes(1)).spread(Duration.ofSeconds(90)).build());
            assertEquals("INFO rdq: dlq mutation action=redrive actor=alice filter={\"queue\":\"emails\","
                    + "\"message_contains\":\"\\u003cdown\\u003e \\u0026 503\"} count=3\n", logs.text());
        }
        assertEquals(new RdqAdmin.RedriveResult(false, 5, 3, 0, OptionalInt.empty()), r);
        assertEquals(2, admin.countDead(f));
        long moved = ids.stream().filter(id -> {
            try {
                Task t = task(id);
                return t.status() == Status.PENDING && t.life() == 1 && t.attempts() == 0
                        && t.nextAttemptAt().isAfter(Instant.now().plusSeconds(50));
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }).count();
        assertEquals(3, moved, "three PENDING in life 1, due after the delay");
        assertEquals(Status.DEAD, task(other).status());
        assertEquals(List.of(new Entry("alice", "redrive",
                "{\"queue\":\"emails\",\"message_contains\":\"\\u003cdown\\u003e \\u0026 503\"}", 3, "INC-42 fixed",
                "{\"delay\": \"1m0s\", \"spread\": \"1m30s\", \"max_life\": \"0\"}")), audit());
        assertEquals(2, scalar("SELECT coalesce(sum(n), 0) FROM {schema}.dead_counts WHERE queue = 'emails'"),
                "the redriven tasks are counted out of the summary");

        admin.purgeDead(DeadFilter.builder().queue("emails").build(), RdqAdmin.PurgeOptions.builder("bob", "spam").build());
        List<RdqAdmin.AuditEntry> all = admin.audit(RdqAdmin.AuditQuery.builder(10).build());
        assertEquals(List.of("purge", "redrive"), all.stream().map(RdqAdmin.AuditEntry::action).toList(), "newest first");
        RdqAdmin.AuditEntry redrive = all.get(1);
        assertEquals(java.util.Map.of("delay", "1m0s", "spread", "1m30s", "max_life", "0"), redrive.details());
        assertEquals(3, redrive.count());
        assertEquals(List.of(), redrive.ids());
        assertEquals(List.of("emails"), redrive.queues());
        assertEquals(List.of("emails"), all.get(0).queues(), "the purge's queue");
        assertEquals(List.of(redrive), admin.audit(RdqAdmin.AuditQuery.builder(10).actor("alice").build()));
        assertEquals(List.of(redrive), admin.audit(RdqAdmin.AuditQuery.builder(10).action("redrive").build()));
        assertEquals(List.of(redrive), admin.audit(RdqAdmin.AuditQuery.builder(10).beforeId(all.get(0).id()).build()));
        assertEquals(List.of(all.get(0)), admin.audit(RdqAdmin.AuditQuery.builder(1).build()), "the limit");
        assertEquals(all, admin.audit(RdqAdmin.AuditQuery.builder(10).since(redrive.at())
                .until(all.get(0).at().plusNanos(1000)).build()));
        assertEquals(List.of(), admin.audit(RdqAdmin.AuditQuery.builder(10).until(redrive.at()).build()));

        client().redrive(List.of(other), "carol", "by id");
        RdqAdmin.AuditEntry byId = admin.audit(RdqAdmin.AuditQuery.builder(1).build()).get(0);
        assertEquals(new RdqAdmin.AuditEntry(byId.id(), byId.at(), "carol", "redrive", "", List.of(other), 1, "by id",
                java.util.Map.of(), List.of("orders")), byId, "a redrive by id names the ids and their queue, no filter");
    }

    @Test
    void aLifeCapLeavesTasksDeadAndCountsThem() throws Exception {
        UUID again = dead("emails", "send", "boom");
        UUID fresh = dead("emails", "send", "boom");
        exec("UPDATE {schema}.tasks SET life = 2 WHERE id = '" + again + "'");
        RdqAdmin admin = admin();
        DeadFilter f = DeadFilter.builder().queue("emails").build();
        assertEquals(new RdqAdmin.RedriveResult(true, 2, 1, 1, OptionalInt.of(2)),
                admin.redriveDead(f, RdqAdmin.RedriveOptions.dryRun().maxLife(2).build()));
        assertEquals(new RdqAdmin.RedriveResult(false, 2, 1, 1, OptionalInt.of(2)),
                admin.redriveDead(f, RdqAdmin.RedriveOptions.builder("bob", "retry the young").maxLife(2).build()));
        assertEquals(Status.DEAD, task(again).status());
        assertEquals(Status.PENDING, task(fresh).status());
        assertEquals("{\"delay\": \"0s\", \"spread\": \"0s\", \"max_life\": \"2\"}", audit().get(0).details());
    }

    @Test
    void purgeDeletesTheMatchingTasksWithTheirHistoryAndFreesTheirKeys() throws Exception {
        UUID keyed = client().submit(NewTask.builder("emails", "send").idempotencyKey("k1")
                .firstFailure(new PermanentException(new IllegalStateException("x"))).build()).task().id();
        dead("emails", "send", "y");
        UUID kept = dead("orders", "charge", "z");
        RdqAdmin admin = admin();
        DeadFilter f = DeadFilter.builder().queue("emails").build();
        assertEquals(new RdqAdmin.PurgeResult(true, 2, 2), admin.purgeDead(f, RdqAdmin.PurgeOptions.dryRun().build()));
        assertEquals(2, admin.countDead(f));
        assertEquals(new RdqAdmin.PurgeResult(false, 2, 2),
                admin.purgeDead(f, RdqAdmin.PurgeOptions.builder("carol", "GDPR-7").build()));
        assertNull(task(keyed));
        assertEquals(List.of(), history(keyed), "the history goes with the task");
        assertEquals(Status.DEAD, task(kept).status());
        assertEquals(List.of(new Entry("carol", "purge", "{\"queue\":\"emails\"}", 2, "GDPR-7", "{}")), audit());
        SubmitResult again = client().submit(NewTask.builder("emails", "send").idempotencyKey("k1").build());
        assertFalse(again.duplicate(), "an operator's purge frees the key at once");
    }

    @Test
    void misuseIsRefusedSayingWhatToDo() {
        RdqAdmin admin = admin();
        EmptyFilterException e = assertThrows(EmptyFilterException.class,
                () -> admin.redriveDead(DeadFilter.all(), RdqAdmin.RedriveOptions.builder("a", "r").build()));
        assertTrue(e.getMessage().contains("RdqAdmin.redriveDead: the filter selects every dead task: narrow it, or set "
                + "RedriveOptions.Builder.all()"), e.getMessage());
        assertThrows(EmptyFilterException.class,
                () -> admin.purgeDead(DeadFilter.all(), RdqAdmin.PurgeOptions.builder("a", "r").build()));
        assertEquals(new RdqAdmin.PurgeResult(false, 0, 0),
                admin.purgeDead(DeadFilter.all(), RdqAdmin.PurgeOptions.builder("a", "r").all().build()));

        assertMessage("RedriveOptions.builder: the reason is empty",
                () -> RdqAdmin.RedriveOptions.builder("alice", " "));
        assertMessage("PurgeOptions.builder: the actor is null", () -> RdqAdmin.PurgeOptions.builder(null, "r"));
        assertMessage("DeadFilter: message text \"tab\\there\" contains the control character U+0009",
                () -> DeadFilter.builder().messageContains("tab\there"));
        assertMessage("contains the control character U+000A",
                () -> RdqAdmin.RedriveOptions.builder("alice", "line\nbreak"));
        assertMessage("RedriveOptions.Builder.max: 0 is not positive; leave it unset for no limit",
                () -> RdqAdmin.RedriveOptions.dryRun().max(0));
        assertMessage("RedriveOptions.Builder.spread: 720h0m1s is outside 0s to 720h0m0s",
                () -> RdqAdmin.RedriveOptions.dryRun().spread(Duration.ofDays(30).plusSeconds(1)));
        assertMessage("RdqAdmin.listDead: limit 0 is not positive",
                () -> admin.listDead(DeadFilter.all(), 0));
        assertMessage("DeadFilter: fingerprint \"xyz\" is not hexadecimal",
                () -> DeadFilter.builder().fingerprint("xyz"));
        assertMessage("DeadFilter: lifeBelow 2 and lifeMin 2 is an empty range (for exactly life 2, use lifeBelow 3)",
                () -> DeadFilter.builder().lifeMin(2).lifeBelow(2).build());
        assertMessage("DeadFilter: deadAfter 2026-01-02T00:00:00Z is not before deadBefore 2026-01-01T00:00:00.5Z",
                () -> DeadFilter.builder().deadAfter(Instant.parse("2026-01-02T00:00:00Z"))
                        .deadBefore(Instant.parse("2026-01-01T00:00:00.500Z")).build());
        assertMessage("DeadFilter: lifeMin 0 is not positive", () -> DeadFilter.builder().lifeMin(0));
        assertMessage("DeadFilter: the zero task id is not a task",
                () -> DeadFilter.builder().ids(List.of(new UUID(0, 0))));
        assertMessage("queue name \"bad name\" contains ' '", () -> DeadFilter.builder().queue("bad name"));
        NullPointerException npe = assertThrows(NullPointerException.class, () -> admin.countDead(null));
        assertTrue(npe.getMessage().contains("use DeadFilter.all()"), npe.getMessage());
    }

    @Test
    void theFilterIsWrittenAsGoWritesIt() {
        assertEquals("{}", DeadFilter.all().toJson());
        UUID id = UUID.fromString("0190c2a4-7a1b-7c3d-8e4f-a1b2c3d4e5f6");
        DeadFilter f = DeadFilter.builder().lifeBelow(3).messageContains("a\"b\\c\u2028<&").lifeMin(1)
                .deadBefore(Instant.parse("2026-03-01T10:00:00.120Z")).deadAfter(Instant.parse("2026-03-01T09:00:00Z"))
                .fingerprint("ab12").errorType("timeout").handler("h").queue("q").ids(List.of(id)).build();
        assertEquals("{\"ids\":[\"0190c2a4-7a1b-7c3d-8e4f-a1b2c3d4e5f6\"],\"queue\":\"q\",\"handler\":\"h\","
                + "\"error_type\":\"timeout\",\"fingerprint\":\"ab12\",\"dead_after\":\"2026-03-01T09:00:00Z\","
                + "\"dead_before\":\"2026-03-01T10:00:00.12Z\",\"message_contains\":\"a\\\"b\\\\c\\u2028\\u003c\\u0026\","
                + "\"life_min\":1,\"life_below\":3}", f.toJson());
        assertEquals(f.toJson(), f.toString());
    }

    static void assertMessage(String want, org.junit.jupiter.api.function.Executable op) {
        RuntimeException e = assertThrows(RuntimeException.class, op);
        assertTrue(e.getMessage().contains(want), "message " + e.getMessage() + " lacks " + want);
    }
}
