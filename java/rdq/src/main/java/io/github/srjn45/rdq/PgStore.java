package io.github.srjn45.rdq;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.TreeMap;
import java.util.UUID;
import java.util.regex.Pattern;

/**
 * The Java side of pgstore: the same statements, the same parameters, the same
 * algorithms around them (enqueue's insert-then-look-up rounds, per-item lease
 * results). Every method runs on a connection the caller owns, in its
 * transaction mode; nothing here commits or rolls back.
 */
final class PgStore {
    static final String DEFAULT_SCHEMA = "rdq";
    private static final Pattern SCHEMA = Pattern.compile("^[a-z_][a-z0-9_]{0,62}$");
    private static final int MAX_ENQUEUE_ROUNDS = 5;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** How long an idempotency key outlives its purged task, as pgstore's DefaultKeyRetention. */
    static final java.time.Duration DEFAULT_KEY_RETENTION = java.time.Duration.ofDays(7);

    final String schema;
    final String channel;
    final long keyRetentionMicros;
    private final Sql.Stmt currentVersion;
    private final Sql.Stmt enqueue;
    private final Sql.Stmt enqueueLookup;
    private final Sql.Stmt keyLookup;
    private final Sql.Stmt pruneKeys;
    private final Sql.Stmt claim;
    private final Sql.Stmt heartbeat;
    private final Sql.Stmt finish;
    private final Sql.Stmt release;
    private final Sql.Stmt snooze;
    private final Sql.Stmt registerWorker;
    private final Sql.Stmt deregisterWorker;
    private final Sql.Stmt reclaimExpired;
    private final Sql.Stmt getTask;
    private final Sql.Stmt getAttempts;
    private final Sql.Stmt purgeSucceeded;
    private final Sql.Stmt redriveLock;
    private final Sql.Stmt redriveIds;
    private final Sql.Stmt insertAudit;
    private final Sql.Stmt stats;
    private final Sql.Stmt pauseQueue;
    private final Sql.Stmt resumeQueue;
    private final Sql.Stmt pausedQueues;
    /** Handler pauses: the worker's breaker. */
    final HandlerPauseSql handlerPauses;
    final String listen;

    PgStore(String schema) {
        this(schema, DEFAULT_KEY_RETENTION);
    }

    PgStore(String schema, java.time.Duration keyRetention) {
        this.schema = schema == null || schema.isEmpty() ? DEFAULT_SCHEMA : schema;
        this.keyRetentionMicros = keyRetention.toNanos() / 1000; // positive: the builders check it
        validateSchema(this.schema);
        this.channel = channelName(this.schema);
        String q = "\"" + this.schema + "\"";
        currentVersion = Sql.get("sqlCurrentVersion", q);
        enqueue = Sql.get("sqlEnqueue", q);
        enqueueLookup = Sql.get("sqlEnqueueLookup", q);
        keyLookup = Sql.get("sqlKeyLookup", q);
        pruneKeys = Sql.get("sqlPruneKeys", q);
        claim = Sql.get("sqlClaimQueueHandlers", q);
        heartbeat = Sql.get("sqlHeartbeat", q);
        finish = Sql.get("sqlFinish", q);
        release = Sql.get("sqlRelease", q);
        snooze = Sql.get("sqlSnooze", q);
        registerWorker = Sql.get("sqlRegisterWorker", q);
        deregisterWorker = Sql.get("sqlDeregisterWorker", q);
        reclaimExpired = Sql.get("sqlReclaimExpired", q);
        getTask = Sql.get("sqlGetTask", q);
        getAttempts = Sql.get("sqlGetAttempts", q);
        purgeSucceeded = Sql.get("sqlPurgeSucceeded", q);
        redriveLock = Sql.get("sqlRedriveLock", q);
        redriveIds = Sql.get("sqlRedriveIDs", q);
        insertAudit = Sql.get("sqlInsertAudit", q);
        stats = Sql.get("sqlStats", q);
        pauseQueue = Sql.get("sqlPauseQueue", q);
        resumeQueue = Sql.get("sqlResumeQueue", q);
        pausedQueues = Sql.get("sqlPausedQueues", q);
        handlerPauses = new HandlerPauseSql(q, channel);
        listen = Sql.raw("sqlListen").replace("{channel}", "\"" + channel + "\"");
    }

    static void validateSchema(String name) {
        if (!SCHEMA.matcher(name).matches()) {
            throw new InvalidInputException("rdq: invalid input: schema " + Limits.quote(name)
                    + " must be 1 to 63 characters of lowercase letters, digits and underscores, starting with a letter or underscore");
        }
        if (name.startsWith("pg_")) {
            throw new InvalidInputException("rdq: invalid input: schema " + Limits.quote(name)
                    + ": names starting with pg_ are reserved by PostgreSQL");
        }
    }

    /** The notification channel of a schema, as pgstore names it. */
    static String channelName(String schema) {
        String name = "rdq_" + schema;
        if (name.length() <= 63) {
            return name;
        }
        try {
            byte[] sum = MessageDigest.getInstance("SHA-256").digest(schema.getBytes(StandardCharsets.UTF_8));
            return "rdq_" + HexFormat.of().formatHex(sum, 0, 16);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** pgstore's clean: unpaired surrogates and NUL characters become U+FFFD. */
    static String clean(String s) {
        if (s == null) {
            return "";
        }
        if (s.indexOf(0) < 0 && Failures.cleanText(s) == s) {
            return s;
        }
        return Failures.cleanText(s.replace('\0', '\uFFFD'));
    }

    // --- Schema -------------------------------------------------------------

    /** The schema's migration version; 0 when never migrated. */
    int version(Connection c) throws SQLException {
        try (PreparedStatement ps = currentVersion.prepare(c); ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getInt(1);
        } catch (SQLException e) {
            String state = e.getSQLState();
            if ("3F000".equals(state) || "42P01".equals(state)) {
                if (!c.getAutoCommit()) {
                    throw e; // the caller's transaction is aborted; let it see why
                }
                return 0;
            }
            throw e;
        }
    }

    void checkVersion(Connection c) throws SQLException {
        SchemaVersion.check(schema, version(c));
    }

    // --- Enqueue ------------------------------------------------------------

    /** A task to insert, validated and cleaned. */
    record NewRow(UUID id, String queue, String handler, byte[] payload, String contentType,
            Map<String, String> headers, String idempotencyKey, long delayMicros, Outcome ffOutcome,
            Failure ff, String ffWorker, long ffDurationMicros, int maxAttempts, long timeoutMicros) {}

    /** One enqueue result: the task, new or the one it duplicates. */
    record Enqueued(Task task, boolean duplicate, boolean purged) {}

    List<Enqueued> enqueue(Connection c, List<NewRow> tasks) throws SQLException {
        int n = tasks.size();
        Enqueued[] results = new Enqueued[n];
        if (n == 0) {
            return List.of();
        }
        int[] firstOf = new int[n];
        Map<UUID, Integer> byId = new HashMap<>();
        Map<List<String>, Integer> byKey = new HashMap<>();
        List<Integer> candidates = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            NewRow t = tasks.get(i);
            firstOf[i] = i;
            Integer j = byId.get(t.id());
            if (j != null) {
                firstOf[i] = j;
                continue;
            }
            if (!t.idempotencyKey().isEmpty()) {
                List<String> k = List.of(t.queue(), t.idempotencyKey());
                j = byKey.get(k);
                if (j != null) {
                    firstOf[i] = j;
                    continue;
                }
                byKey.put(k, i);
            }
            byId.put(t.id(), i);
            candidates.add(i);
        }
        List<Integer> pending = candidates;
        for (int round = 0; !pending.isEmpty(); round++) {
            if (round == MAX_ENQUEUE_ROUNDS) {
                throw new StoreException("rdq: enqueue: " + pending.size()
                        + " tasks conflicted with tasks that vanished before they could be read, " + round
                        + " times in a row", null);
            }
            Map<UUID, Task> inserted = insert(c, tasks, pending);
            List<Integer> conflicted = new ArrayList<>();
            for (int i : pending) {
                Task t = inserted.get(tasks.get(i).id());
                if (t != null) {
                    results[i] = new Enqueued(t, false, false);
                } else {
                    conflicted.add(i);
                }
            }
            if (conflicted.isEmpty()) {
                break;
            }
            Lookup found = lookup(c, tasks, conflicted);
            List<Integer> again = new ArrayList<>();
            List<Integer> unseen = new ArrayList<>();
            for (int i : conflicted) {
                Task t = found.find(tasks.get(i));
                if (t != null) {
                    results[i] = new Enqueued(t, true, false);
                } else if (!tasks.get(i).idempotencyKey().isEmpty()) {
                    unseen.add(i);
                } else {
                    again.add(i);
                }
            }
            // A key without its task: the task was purged, the key kept.
            Map<List<String>, Task> purged = lookupKeys(c, tasks, unseen);
            for (int i : unseen) {
                Task t = purged.get(List.of(tasks.get(i).queue(), tasks.get(i).idempotencyKey()));
                if (t != null) {
                    results[i] = new Enqueued(t, true, true);
                } else {
                    again.add(i);
                }
            }
            pending = again;
        }
        for (int i = 0; i < n; i++) {
            if (firstOf[i] != i) {
                results[i] = new Enqueued(results[firstOf[i]].task(), true, results[firstOf[i]].purged());
            }
        }
        return List.of(results);
    }

    private Map<UUID, Task> insert(Connection c, List<NewRow> tasks, List<Integer> idx) throws SQLException {
        int n = idx.size();
        UUID[] ids = new UUID[n];
        String[] queues = new String[n];
        String[] handlers = new String[n];
        byte[][] payloads = new byte[n][];
        String[] contentTypes = new String[n];
        String[] headers = new String[n];
        String[] keys = new String[n];
        Long[] delays = new Long[n];
        String[] outcomes = new String[n];
        String[] errTypes = new String[n];
        String[] messages = new String[n];
        String[] stacks = new String[n];
        String[] fingerprints = new String[n];
        String[] workers = new String[n];
        Long[] durations = new Long[n];
        Integer[] maxAttempts = new Integer[n];
        Long[] timeouts = new Long[n];
        for (int k = 0; k < n; k++) {
            NewRow t = tasks.get(idx.get(k));
            maxAttempts[k] = t.maxAttempts(); // 0: the queue's
            timeouts[k] = t.timeoutMicros();
            ids[k] = t.id();
            queues[k] = t.queue();
            handlers[k] = t.handler();
            payloads[k] = t.payload();
            contentTypes[k] = t.contentType();
            headers[k] = headersJson(t.headers());
            keys[k] = t.idempotencyKey().isEmpty() ? null : t.idempotencyKey();
            delays[k] = t.delayMicros();
            durations[k] = 0L;
            if (t.ffOutcome() != null) {
                outcomes[k] = t.ffOutcome().name();
                errTypes[k] = t.ff().type();
                messages[k] = t.ff().message();
                stacks[k] = t.ff().stack();
                fingerprints[k] = t.ff().fingerprint();
                workers[k] = t.ffWorker();
                durations[k] = t.ffDurationMicros();
            }
        }
        Map<UUID, Task> out = new HashMap<>();
        try (PreparedStatement ps = enqueue.prepare(c, c.createArrayOf("uuid", ids), c.createArrayOf("text", queues),
                c.createArrayOf("text", handlers), c.createArrayOf("bytea", payloads),
                c.createArrayOf("text", contentTypes), c.createArrayOf("text", headers), c.createArrayOf("text", keys),
                c.createArrayOf("bigint", delays), c.createArrayOf("text", outcomes), c.createArrayOf("text", errTypes),
                c.createArrayOf("text", messages), c.createArrayOf("text", stacks),
                c.createArrayOf("text", fingerprints), c.createArrayOf("text", workers),
                c.createArrayOf("bigint", durations), null, channel, keyRetentionMicros,
                c.createArrayOf("integer", maxAttempts), c.createArrayOf("bigint", timeouts));
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                Task t = scanTask(rs);
                out.put(t.id(), t);
            }
        }
        return out;
    }

    private interface Lookup {
        Task find(NewRow t);
    }

    private Lookup lookup(Connection c, List<NewRow> tasks, List<Integer> idx) throws SQLException {
        List<UUID> ids = new ArrayList<>();
        List<String> queues = new ArrayList<>();
        List<String> keys = new ArrayList<>();
        for (int i : idx) {
            NewRow t = tasks.get(i);
            ids.add(t.id());
            if (!t.idempotencyKey().isEmpty()) {
                queues.add(t.queue());
                keys.add(t.idempotencyKey());
            }
        }
        Map<UUID, Task> byId = new HashMap<>();
        Map<List<String>, Task> byKey = new HashMap<>();
        try (PreparedStatement ps = enqueueLookup.prepare(c, c.createArrayOf("uuid", ids.toArray()),
                c.createArrayOf("text", queues.toArray()), c.createArrayOf("text", keys.toArray()));
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                Task t = scanTask(rs);
                byId.put(t.id(), t);
                if (!t.idempotencyKey().isEmpty()) {
                    byKey.put(List.of(t.queue(), t.idempotencyKey()), t);
                }
            }
        }
        return nt -> {
            Task t = byId.get(nt.id());
            if (t != null) {
                return t;
            }
            if (!nt.idempotencyKey().isEmpty()) {
                return byKey.get(List.of(nt.queue(), nt.idempotencyKey()));
            }
            return null;
        };
    }

    /** The stubs of purged tasks holding the keys of tasks[idx], by (queue, key). */
    private Map<List<String>, Task> lookupKeys(Connection c, List<NewRow> tasks, List<Integer> idx)
            throws SQLException {
        Map<List<String>, Task> out = new HashMap<>();
        if (idx.isEmpty()) {
            return out;
        }
        String[] queues = new String[idx.size()];
        String[] keys = new String[idx.size()];
        for (int k = 0; k < idx.size(); k++) {
            queues[k] = tasks.get(idx.get(k)).queue();
            keys[k] = tasks.get(idx.get(k)).idempotencyKey();
        }
        try (PreparedStatement ps = keyLookup.prepare(c, c.createArrayOf("text", queues), c.createArrayOf("text", keys));
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                String queue = rs.getString(1);
                String key = rs.getString(2);
                Task stub = new Task(rs.getObject(3, UUID.class), queue, "", new byte[0], "", Map.of(), key, null, 0,
                        0, null, 0, null, "", instant(rs, 4), null, null, "", "", "", OptionalInt.empty(), Optional.empty(), 0);
                out.put(List.of(queue, key), stub);
            }
        }
        return out;
    }

    private static String headersJson(Map<String, String> h) {
        if (h == null || h.isEmpty()) {
            return "{}";
        }
        try {
            return JSON.writeValueAsString(new TreeMap<>(h));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("rdq: encoding headers", e);
        }
    }

    // --- Worker statements --------------------------------------------------

    /**
     * Leases up to limit due tasks of queue whose handler is one of handlers
     * (the worker's registered handlers): the tasks of other handlers are not
     * read, and wait for a worker that runs them. The claim reads the queue's
     * range of the claim index from the front (the statement's floor, $7, is
     * NULL).
     */
    List<Task> claim(Connection c, String queue, int limit, long leaseMicros, String workerId, String[] handlers)
            throws SQLException {
        List<Task> out = new ArrayList<>();
        try (PreparedStatement ps = claim.prepare(c, queue, limit,
                leaseMicros, null, clean(workerId), c.createArrayOf("text", handlers), null);
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(scanTask(rs));
            }
        }
        out.sort((a, b) -> {
            int cmp = a.nextAttemptAt().compareTo(b.nextAttemptAt());
            return cmp != 0 ? cmp : a.id().compareTo(b.id());
        });
        return out;
    }

    /** A task's lease: its ID and fencing token. */
    record Lease(UUID id, long token) {}

    /** Returns, per lease, whether it was current and is now extended. */
    boolean[] heartbeat(Connection c, List<Lease> leases, long extendMicros) throws SQLException {
        boolean[] ok = new boolean[leases.size()];
        if (leases.isEmpty()) {
            return ok;
        }
        java.util.Set<Lease> live = new java.util.HashSet<>();
        try (PreparedStatement ps = heartbeat.prepare(c, uuidArray(c, leases), tokenArray(c, leases), extendMicros,
                null); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                live.add(new Lease(rs.getObject(1, UUID.class), rs.getLong(2)));
            }
        }
        for (int i = 0; i < ok.length; i++) {
            ok[i] = live.contains(leases.get(i));
        }
        return ok;
    }

    private static java.sql.Array uuidArray(Connection c, List<Lease> leases) throws SQLException {
        return c.createArrayOf("uuid", leases.stream().map(Lease::id).toArray());
    }

    private static java.sql.Array tokenArray(Connection c, List<Lease> leases) throws SQLException {
        return c.createArrayOf("bigint", leases.stream().map(Lease::token).toArray(Long[]::new));
    }

    /** A completion for finish: the new status and, optionally, the attempt to record. */
    record Completion(Lease lease, Status status, long retryMicros, Outcome outcome, Failure failure, String workerId,
            long durationMicros) {}

    /** Returns, per completion, whether it was applied (its lease was current). */
    boolean[] finish(Connection c, List<Completion> comps) throws SQLException {
        int n = comps.size();
        boolean[] ok = new boolean[n];
        if (n == 0) {
            return ok;
        }
        UUID[] ids = new UUID[n];
        Long[] tokens = new Long[n];
        String[] statuses = new String[n];
        Long[] retries = new Long[n];
        String[] outcomes = new String[n];
        String[] errTypes = new String[n];
        String[] messages = new String[n];
        String[] stacks = new String[n];
        String[] fingerprints = new String[n];
        String[] workers = new String[n];
        Long[] durations = new Long[n];
        for (int i = 0; i < n; i++) {
            Completion cp = comps.get(i);
            ids[i] = cp.lease().id();
            tokens[i] = cp.lease().token();
            statuses[i] = cp.status().name();
            retries[i] = cp.retryMicros();
            durations[i] = 0L;
            if (cp.outcome() != null) {
                Failure f = cp.failure() == null ? new Failure("", "", "", "") : cp.failure();
                outcomes[i] = cp.outcome().name();
                errTypes[i] = clean(f.type());
                messages[i] = clean(f.message());
                stacks[i] = clean(f.stack());
                fingerprints[i] = clean(f.fingerprint());
                workers[i] = clean(cp.workerId());
                durations[i] = cp.durationMicros();
            }
        }
        try (PreparedStatement ps = finish.prepare(c, c.createArrayOf("uuid", ids), c.createArrayOf("bigint", tokens),
                c.createArrayOf("text", statuses), c.createArrayOf("bigint", retries),
                c.createArrayOf("text", outcomes), c.createArrayOf("text", errTypes),
                c.createArrayOf("text", messages), c.createArrayOf("text", stacks),
                c.createArrayOf("text", fingerprints), c.createArrayOf("text", workers),
                c.createArrayOf("bigint", durations), null, channel); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                long ord = rs.getLong(1);
                if (ord < 1 || ord > n) {
                    throw new StoreException("rdq: finish: batch position " + ord + " out of range", null);
                }
                ok[(int) ord - 1] = true;
            }
        }
        return ok;
    }

    /** Returns, per lease, whether it was current and its task is now PENDING again. */
    boolean[] release(Connection c, List<Lease> leases) throws SQLException {
        boolean[] ok = new boolean[leases.size()];
        if (leases.isEmpty()) {
            return ok;
        }
        try (PreparedStatement ps = release.prepare(c, uuidArray(c, leases), tokenArray(c, leases), null, channel);
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                long ord = rs.getLong(1);
                if (ord >= 1 && ord <= ok.length) {
                    ok[(int) ord - 1] = true;
                }
            }
        }
        return ok;
    }

    /**
     * Returns the current leases among leases to PENDING, each due after its
     * delay (µs), without recording or counting an attempt, and counts a snooze
     * on each, as pgstore's Snooze. Returns which leases were current.
     */
    boolean[] snooze(Connection c, List<Lease> leases, long[] delayMicros) throws SQLException {
        boolean[] ok = new boolean[leases.size()];
        if (leases.isEmpty()) {
            return ok;
        }
        Long[] delays = new Long[delayMicros.length];
        for (int i = 0; i < delays.length; i++) {
            delays[i] = Math.max(delayMicros[i], 0);
        }
        try (PreparedStatement ps = snooze.prepare(c, uuidArray(c, leases), tokenArray(c, leases),
                c.createArrayOf("bigint", delays), null, channel); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                long ord = rs.getLong(1);
                if (ord >= 1 && ord <= ok.length) {
                    ok[(int) ord - 1] = true;
                }
            }
        }
        return ok;
    }

    /** What a worker registers about itself in the worker registry (pgstore's workers table). */
    record Registration(String id, String host, int pid, String version, List<String> queues, List<String> handlers,
            int slots, int inFlight, long staleAfterMicros, long expireAfterMicros) {}

    /** Inserts or refreshes a worker's registry entry and removes expired entries, as pgstore's RegisterWorker. */
    void registerWorker(Connection c, Registration r) throws SQLException {
        String[] queues = r.queues().stream().map(PgStore::clean).sorted().distinct().toArray(String[]::new);
        String[] handlers = r.handlers().stream().map(PgStore::clean).sorted().distinct().toArray(String[]::new);
        try (PreparedStatement ps = registerWorker.prepare(c, clean(r.id()), clean(r.host()), r.pid(),
                clean(r.version()), c.createArrayOf("text", queues), c.createArrayOf("text", handlers), r.slots(),
                r.inFlight(), r.staleAfterMicros(), r.expireAfterMicros(), null)) {
            ps.execute();
        }
    }

    /** Removes a worker's registry entry, as pgstore's DeregisterWorker. */
    void deregisterWorker(Connection c, String id) throws SQLException {
        try (PreparedStatement ps = deregisterWorker.prepare(c, clean(id))) {
            ps.execute();
        }
    }

    List<Task> reclaimExpired(Connection c, List<String> queues, int limit, long leaseMicros, String workerId)
            throws SQLException {
        Failure f = Failures.leaseExpired();
        List<Task> out = new ArrayList<>();
        try (PreparedStatement ps = reclaimExpired.prepare(c, c.createArrayOf("text", queues.toArray()), limit,
                leaseMicros, clean(workerId), null, f.type(), f.message(), f.fingerprint());
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(scanTask(rs));
            }
        }
        return out;
    }

    /**
     * pgstore's PurgeSucceeded: deletes up to limit old SUCCEEDED tasks (their
     * idempotency keys kept for the key retention), then deletes up to limit
     * keys whose retention has passed.
     */
    long purgeSucceeded(Connection c, long olderThanMicros, int limit, String actor, String filterJson)
            throws SQLException {
        long n;
        try (PreparedStatement ps = purgeSucceeded.prepare(c, olderThanMicros, limit, null, clean(actor), filterJson);
                ResultSet rs = ps.executeQuery()) {
            rs.next();
            n = rs.getLong(1);
        }
        try (PreparedStatement ps = pruneKeys.prepare(c, keyRetentionMicros, limit, null)) {
            ps.executeUpdate();
        }
        return n;
    }

    /**
     * pgstore's Redrive of the DEAD tasks ids (no payload edit, no life cap),
     * with its audit entry, in one transaction on c: the caller commits. Returns
     * each ID's status before the redrive (null when there is no such task);
     * the DEAD ones, each counted once, are now PENDING in a new life.
     */
    Map<UUID, Status> redrive(Connection c, List<UUID> ids, long delayMicros, long spreadMicros, String actor,
            String reason) throws SQLException {
        Map<UUID, Status> found = new HashMap<>();
        try (PreparedStatement ps = redriveLock.prepare(c, c.createArrayOf("uuid", ids.toArray()));
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                found.put(rs.getObject(1, UUID.class), Status.parse(rs.getString(2)));
            }
        }
        List<UUID> eligible = new ArrayList<>();
        for (UUID id : ids) {
            if (found.get(id) == Status.DEAD && !eligible.contains(id)) {
                eligible.add(id);
            }
        }
        if (eligible.isEmpty()) {
            return found;
        }
        long moved;
        try (PreparedStatement ps = redriveIds.prepare(c, c.createArrayOf("uuid", eligible.toArray()), delayMicros,
                spreadMicros, null, null, channel); ResultSet rs = ps.executeQuery()) {
            rs.next();
            moved = rs.getLong(1);
        }
        if (moved != eligible.size()) {
            throw new StoreException("rdq: redrive: redrove " + moved + " of " + eligible.size() + " locked dead tasks", null);
        }
        try (PreparedStatement ps = insertAudit.prepare(c, null, clean(actor), "redrive", "",
                c.createArrayOf("uuid", eligible.toArray()), moved, clean(reason), "{}")) {
            ps.executeUpdate();
        }
        return found;
    }

    /** pgstore's Stats: per-queue counts, ordered by queue; windowMicros &lt;= 0 counts every retained success. */
    List<RdqAdmin.QueueStats> stats(Connection c, long windowMicros) throws SQLException {
        Map<String, long[]> counts = new TreeMap<>();
        Map<String, Duration> oldest = new HashMap<>();
        try (PreparedStatement ps = stats.prepare(c, null, windowMicros); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                String queue = rs.getString(1);
                long[] n = counts.computeIfAbsent(queue, k -> new long[4]);
                long v = rs.getLong(3);
                switch (Status.parse(rs.getString(2))) {
                    case PENDING -> {
                        n[0] = v;
                        Instant due = instant(rs, 4);
                        Instant now = instant(rs, 5);
                        if (due != null && !due.isAfter(now)) {
                            oldest.put(queue, Duration.between(due, now));
                        }
                    }
                    case IN_FLIGHT -> n[1] = v;
                    case DEAD -> n[2] = v;
                    case SUCCEEDED -> n[3] = v;
                    default -> { }
                }
            }
        }
        List<RdqAdmin.QueueStats> out = new ArrayList<>(counts.size());
        counts.forEach((q, n) -> out.add(new RdqAdmin.QueueStats(q, n[0], n[1], n[2], n[3],
                oldest.getOrDefault(q, Duration.ZERO))));
        return out;
    }

    /**
     * pgstore's PauseQueue or ResumeQueue, with its audit entry in the same
     * statement; returns whether the queue changed (and an entry was written).
     */
    boolean setQueuePaused(Connection c, boolean pause, String queue, String actor, String reason, String filterJson)
            throws SQLException {
        Sql.Stmt st = pause ? pauseQueue : resumeQueue;
        Object[] args = pause ? new Object[] {queue, clean(actor), clean(reason), filterJson}
                : new Object[] {queue, clean(actor), clean(reason), filterJson, channel};
        try (PreparedStatement ps = st.prepare(c, args); ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getLong(1) > 0;
        }
    }

    /** pgstore's PausedQueues: the paused queues' names, sorted. */
    List<String> pausedQueues(Connection c) throws SQLException {
        List<String> out = new ArrayList<>();
        try (PreparedStatement ps = pausedQueues.prepare(c); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(rs.getString(1));
            }
        }
        return out;
    }

    Task get(Connection c, UUID id) throws SQLException {
        try (PreparedStatement ps = getTask.prepare(c, id); ResultSet rs = ps.executeQuery()) {
            return rs.next() ? scanTask(rs) : null;
        }
    }

    List<Attempt> attempts(Connection c, UUID id) throws SQLException {
        List<Attempt> out = new ArrayList<>();
        try (PreparedStatement ps = getAttempts.prepare(c, id); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(new Attempt(rs.getObject(1, UUID.class), rs.getInt(2), rs.getInt(3),
                        Outcome.parse(rs.getString(4)), rs.getString(5), rs.getString(6), rs.getString(7),
                        rs.getString(8), rs.getLong(9), instant(rs, 10), instant(rs, 11)));
            }
        }
        return out;
    }

    // --- Scanning -----------------------------------------------------------

    private static Instant instant(ResultSet rs, int col) throws SQLException {
        OffsetDateTime t = rs.getObject(col, OffsetDateTime.class);
        return t == null ? null : t.toInstant();
    }

    /** How many columns pgstore's taskColumns are. */
    static final int TASK_COLUMNS = 23;

    /** Reads pgstore's taskColumns, in order. */
    static Task scanTask(ResultSet rs) throws SQLException {
        UUID id = rs.getObject(1, UUID.class);
        String headersText = rs.getString(6);
        Map<String, String> headers = Map.of();
        if (headersText != null && !headersText.equals("{}")) {
            try {
                headers = Collections.unmodifiableMap(
                        JSON.readValue(headersText, new TypeReference<LinkedHashMap<String, String>>() {}));
            } catch (JsonProcessingException e) {
                throw new StoreException("rdq: task " + id + ": headers are not a JSON object of strings", e);
            }
        }
        String key = rs.getString(7);
        byte[] payload = rs.getBytes(4);
        return new Task(id, rs.getString(2), rs.getString(3), payload == null ? new byte[0] : payload,
                rs.getString(5), headers, key == null ? "" : key, Status.parse(rs.getString(8)), rs.getInt(9),
                rs.getInt(10), instant(rs, 11), rs.getLong(12), instant(rs, 13), rs.getString(14), instant(rs, 15),
                instant(rs, 16), instant(rs, 17), rs.getString(18), rs.getString(19), rs.getString(20),
                ownMaxAttempts(rs.getInt(21)), ownTimeout(rs.getLong(22)), rs.getInt(23));
    }

    /** A task's stored attempt budget: 0 is its queue's. */
    private static OptionalInt ownMaxAttempts(int n) {
        return n == 0 ? OptionalInt.empty() : OptionalInt.of(n);
    }

    /** A task's stored timeout in microseconds: 0 is its queue's. */
    private static Optional<Duration> ownTimeout(long micros) {
        return micros == 0 ? Optional.empty() : Optional.of(Duration.ofNanos(micros * 1_000L));
    }

    static <T> T requireNonNull(T v, String what) {
        return Objects.requireNonNull(v, what);
    }
}
