package io.github.srjn45.rdq;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * pgstore's operations statements: those on live tasks (by idempotency key,
 * retry now, cancel), which are static, and the dead-letter and audit ones,
 * which are templates rendered per call:
 * pgstore/sql.go's sqlListDead, sqlCountDead, sqlRedriveDead and sqlPurgeDead
 * with their fragments, taken from pgstore-sql.json, and rendered here as
 * pgstore's stmt type and its deadFilter method render them in
 * pgstore/admin.go and pgstore/sql.go: each set filter field one condition
 * with one parameter, in the same order with the same casts, so every
 * combination of fields is the statement Go runs and is served by the index
 * pgstore's comments name. Every method runs on a connection the caller
 * owns, in its transaction mode; nothing here commits or rolls back.
 */
final class DeadSql {
    private static final Pattern NAME = Pattern.compile("\\{[a-z_]+\\}");

    private final String listDead;
    private final String listDeadAfter;
    private final String countDead;
    private final String redriveDead;
    private final String redriveDeadLifeLimit;
    private final String redriveDeadAtLimit;
    private final String purgeDead;
    private final String purgeDeadDropKeys;
    private final String deadGroups;
    private final String listAudit;
    private final String listTasks;
    private final String listTasksHeld;
    private final String listTasksWaiting;
    private final Sql.Stmt taskByKey;
    private final Sql.Stmt liveLock;
    private final Sql.Stmt retryNow;
    private final Sql.Stmt cancel;
    private final Sql.Stmt insertAudit;
    private final Sql.Stmt redriveLock;
    private final Sql.Stmt redrivePayload;
    private final Sql.Stmt redriveIds;
    private final String channel;
    private final HandlerPauseSql pauses;

    DeadSql(String quotedSchema, String channel) {
        this.listDead = schema("sqlListDead", quotedSchema);
        this.listDeadAfter = schema("sqlListDeadAfter", quotedSchema);
        this.countDead = schema("sqlCountDead", quotedSchema);
        this.redriveDead = schema("sqlRedriveDead", quotedSchema);
        this.redriveDeadLifeLimit = schema("sqlRedriveDeadLifeLimit", quotedSchema);
        this.redriveDeadAtLimit = schema("sqlRedriveDeadAtLimit", quotedSchema);
        this.purgeDead = schema("sqlPurgeDead", quotedSchema);
        this.purgeDeadDropKeys = schema("sqlPurgeDeadDropKeys", quotedSchema);
        this.deadGroups = schema("sqlDeadGroups", quotedSchema);
        this.listAudit = schema("sqlListAudit", quotedSchema);
        this.listTasks = schema("sqlListTasks", quotedSchema);
        this.listTasksHeld = schema("sqlListTasksHeld", quotedSchema);
        this.listTasksWaiting = schema("sqlListTasksWaiting", quotedSchema);
        this.taskByKey = Sql.get("sqlTaskByKey", quotedSchema);
        this.liveLock = Sql.get("sqlLiveLock", quotedSchema);
        this.retryNow = Sql.get("sqlRetryNow", quotedSchema);
        this.cancel = Sql.get("sqlCancel", quotedSchema);
        this.insertAudit = Sql.get("sqlInsertAudit", quotedSchema);
        this.redriveLock = Sql.get("sqlRedriveLock", quotedSchema);
        this.redrivePayload = Sql.get("sqlRedrivePayload", quotedSchema);
        this.redriveIds = Sql.get("sqlRedriveIDs", quotedSchema);
        this.channel = channel;
        this.pauses = new HandlerPauseSql(quotedSchema, channel);
    }

    private static String schema(String name, String quotedSchema) {
        return Sql.raw(name).replace("{schema}", quotedSchema);
    }

    /** pgstore's stmt: collects parameters ($n) and fills named placeholders. */
    static final class Template {
        final List<Object> args = new ArrayList<>();
        private final Map<String, String> vars = new HashMap<>();

        /** Adds a parameter and returns its placeholder. */
        String param(Object v) {
            args.add(v);
            return "$" + args.size();
        }

        /** Names a placeholder's replacement text. */
        void set(String name, String text) {
            vars.put("{" + name + "}", text);
        }

        /**
         * Fills every set name of template, twice (a replacement may itself hold
         * set names, one level deep), as stmt.render does with a
         * strings.Replacer: names not set are left as they are.
         */
        String render(String template) {
            return replace(replace(template));
        }

        private String replace(String s) {
            Matcher m = NAME.matcher(s);
            StringBuilder sb = new StringBuilder();
            while (m.find()) {
                String v = vars.get(m.group());
                m.appendReplacement(sb, Matcher.quoteReplacement(v == null ? m.group() : v));
            }
            m.appendTail(sb);
            return sb.toString();
        }

        /** Prepares the rendered template on c with the collected parameters. */
        PreparedStatement prepare(Connection c, String name, String template) throws SQLException {
            Object[] bound = args.toArray();
            for (int i = 0; i < bound.length; i++) {
                if (bound[i] instanceof UUID[] ids) {
                    bound[i] = c.createArrayOf("uuid", ids);
                }
            }
            return new Sql.Stmt(name, render(template)).prepare(c, bound);
        }

        /**
         * pgstore's deadFilter: f as AND-ed conditions on tasks t, one parameter
         * per set field; "" when f selects every dead task.
         */
        String deadFilter(DeadFilter f) {
            StringBuilder b = new StringBuilder();
            if (!f.ids().isEmpty()) {
                b.append("\n      AND t.id = ANY(").append(param(f.ids().toArray(new UUID[0]))).append("::uuid[])");
            }
            f.queue().ifPresent(v -> b.append("\n      AND t.queue = ").append(param(PgStore.clean(v))));
            f.handler().ifPresent(v -> b.append("\n      AND t.handler = ").append(param(PgStore.clean(v))));
            f.errorType().ifPresent(v -> b.append("\n      AND t.last_error_type = ").append(param(PgStore.clean(v))));
            f.fingerprint().ifPresent(
                    v -> b.append("\n      AND t.last_error_fingerprint = ").append(param(PgStore.clean(v))));
            f.deadAfter().ifPresent(
                    v -> b.append("\n      AND t.finished_at >= ").append(param(time(v))).append("::timestamptz"));
            f.deadBefore().ifPresent(
                    v -> b.append("\n      AND t.finished_at < ").append(param(time(v))).append("::timestamptz"));
            f.messageContains().ifPresent(v -> b.append("\n      AND t.last_error_message ILIKE ")
                    .append(param("%" + likeEscape(PgStore.clean(v)) + "%")));
            f.lifeMin().ifPresent(v -> b.append("\n      AND t.life >= ").append(param(v)).append("::integer"));
            f.lifeBelow().ifPresent(v -> b.append("\n      AND t.life < ").append(param(v)).append("::integer"));
            return b.toString();
        }
    }

    /** pgstore's likeEscaper: the LIKE wildcards and the escape character taken literally. */
    static String likeEscape(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' || c == '%' || c == '_') {
                sb.append('\\');
            }
            sb.append(c);
        }
        return sb.toString();
    }

    private static OffsetDateTime time(Instant t) {
        return OffsetDateTime.ofInstant(t, ZoneOffset.UTC);
    }

    /** pgstore's ListDead: up to limit dead tasks matching f, newest dead first, strictly after the cursor when given. */
    List<Task> listDead(Connection c, DeadFilter f, Instant afterFinishedAt, UUID afterId, int limit)
            throws SQLException {
        Template st = new Template();
        st.set("filter", st.deadFilter(f));
        st.set("after", "");
        if (afterId != null) {
            st.set("after", listDeadAfter);
            st.set("cursor_at", st.param(time(afterFinishedAt)));
            st.set("cursor_id", st.param(afterId));
        }
        st.set("limit", st.param(limit));
        List<Task> out = new ArrayList<>();
        try (PreparedStatement ps = st.prepare(c, "sqlListDead", listDead); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(PgStore.scanTask(rs));
            }
        }
        return out;
    }

    /**
     * pgstore's ListTasks: up to limit tasks in state matching f, in the
     * state's order, strictly after the cursor (afterAt, afterId) when given.
     * The statement is pgstore's listTasksQuery renders: sqlListTasksWaiting
     * for the waiting states without a queue (after sqlJITOff, in a
     * transaction of its own on c, rolled back), sqlListTasksHeld for the
     * waiting states of one queue, sqlListTasks for the others.
     */
    List<Task> listTasks(Connection c, RdqAdmin.TaskState state, TaskFilter f, Instant afterAt, UUID afterId, int limit)
            throws SQLException {
        Template st = new Template();
        String cond;
        String column;
        String order;
        String cmp;
        switch (state) {
            case PENDING -> {
                cond = "t.status = 'PENDING' AND t.attempts = 0";
                column = "next_attempt_at";
                order = "t.next_attempt_at, t.id";
                cmp = ">";
            }
            case RETRYING -> {
                cond = "t.status = 'PENDING' AND t.attempts > 0";
                column = "next_attempt_at";
                order = "t.next_attempt_at, t.id";
                cmp = ">";
            }
            case IN_FLIGHT -> {
                cond = "t.status = 'IN_FLIGHT'";
                column = "lease_expires_at";
                order = "t.lease_expires_at, t.id";
                cmp = ">";
            }
            default -> {
                cond = "t.status = 'SUCCEEDED'";
                column = "finished_at";
                order = "t.finished_at DESC, t.id DESC";
                cmp = "<";
            }
        }
        st.set("state", cond);
        st.set("order", order);
        st.set("filter", st.deadFilter(f.conditions));
        String after = "";
        if (afterId != null) {
            after = "\n  AND (t." + column + ", t.id) " + cmp + " (" + st.param(time(afterAt)) + "::timestamptz, "
                    + st.param(afterId) + "::uuid)";
        }
        st.set("after", after);
        st.set("limit", st.param(limit));
        boolean waiting = state == RdqAdmin.TaskState.PENDING || state == RdqAdmin.TaskState.RETRYING;
        if (waiting && f.queue().isEmpty()) {
            boolean auto = c.getAutoCommit();
            c.setAutoCommit(false);
            try {
                try (java.sql.Statement s = c.createStatement()) {
                    s.execute(Sql.raw("sqlJITOff"));
                }
                return tasks(st, c, "sqlListTasksWaiting", listTasksWaiting);
            } finally {
                c.rollback();
                c.setAutoCommit(auto);
            }
        }
        return waiting ? tasks(st, c, "sqlListTasksHeld", listTasksHeld) : tasks(st, c, "sqlListTasks", listTasks);
    }

    private static List<Task> tasks(Template st, Connection c, String name, String template) throws SQLException {
        List<Task> out = new ArrayList<>();
        try (PreparedStatement ps = st.prepare(c, name, template); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(PgStore.scanTask(rs));
            }
        }
        return out;
    }

    /**
     * Counts the dead tasks matching f with sqlCountDead. (pgstore answers the
     * filters of queue, handler, error type and fingerprint alone from its
     * dead_counts summary instead, with the same result.)
     */
    long countDead(Connection c, DeadFilter f) throws SQLException {
        Template st = new Template();
        st.set("filter", st.deadFilter(f));
        try (PreparedStatement ps = st.prepare(c, "sqlCountDead", countDead); ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /** The result of one chunk of a redrive: how many moved, how many matching tasks the life cap keeps dead. */
    record Chunk(long redriven, long atLimit) {}

    /**
     * pgstore's RedriveDead: redrives up to limit dead tasks matching f in one
     * statement that writes the "redrive" audit entry when any moved.
     */
    Chunk redriveDead(Connection c, DeadFilter f, int limit, long delayMicros, long spreadMicros, int maxLife,
            String actor, String reason, String detailsJson) throws SQLException {
        Template st = new Template();
        st.set("filter", st.deadFilter(f));
        st.set("limit", st.param(limit));
        st.set("now", st.param(null));
        st.set("details", st.param(detailsJson));
        st.set("delay", st.param(delayMicros));
        st.set("spread", st.param(spreadMicros));
        st.set("actor", st.param(PgStore.clean(actor)));
        st.set("filter_json", st.param(f.toJson()));
        st.set("reason", st.param(PgStore.clean(reason)));
        st.set("channel", st.param(channel));
        if (maxLife > 0) {
            st.set("max_life", st.param(maxLife));
            st.set("life_limit", redriveDeadLifeLimit);
            st.set("at_limit", redriveDeadAtLimit);
        } else {
            st.set("life_limit", "");
            st.set("at_limit", "0::bigint");
        }
        try (PreparedStatement ps = st.prepare(c, "sqlRedriveDead", redriveDead); ResultSet rs = ps.executeQuery()) {
            rs.next();
            return new Chunk(rs.getLong(1), rs.getLong(2));
        }
    }

    /**
     * pgstore's PurgeDead with the action "purge": deletes up to limit dead
     * tasks matching f with their history, frees their idempotency keys, and
     * writes the audit entry in the same statement when any were deleted.
     */
    long purgeDead(Connection c, DeadFilter f, int limit, String actor, String reason) throws SQLException {
        Template st = new Template();
        st.set("filter", st.deadFilter(f));
        st.set("limit", st.param(limit));
        st.set("actor", st.param(PgStore.clean(actor)));
        st.set("action", st.param("purge"));
        st.set("filter_json", st.param(f.toJson()));
        st.set("reason", st.param(PgStore.clean(reason)));
        st.set("keys", purgeDeadDropKeys);
        try (PreparedStatement ps = st.prepare(c, "sqlPurgeDead", purgeDead); ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /**
     * Groups the dead tasks matching f by fingerprint with sqlDeadGroups,
     * largest first. (pgstore answers the filters of queue, handler, error
     * type and fingerprint alone from its dead_counts summary instead, with
     * the same groups.)
     */
    List<RdqAdmin.DeadGroup> deadGroups(Connection c, DeadFilter f) throws SQLException {
        Template st = new Template();
        st.set("filter", st.deadFilter(f));
        List<RdqAdmin.DeadGroup> out = new ArrayList<>();
        try (PreparedStatement ps = st.prepare(c, "sqlDeadGroups", deadGroups); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(new RdqAdmin.DeadGroup(rs.getString(1), rs.getString(6), rs.getString(7), rs.getLong(2),
                        rs.getObject(3, OffsetDateTime.class).toInstant(), rs.getObject(4, OffsetDateTime.class).toInstant(),
                        rs.getObject(5, UUID.class)));
            }
        }
        return out;
    }

    /** pgstore's ListAudit: up to q's limit entries matching q, newest first; auditFilter rendered as pgstore renders it. */
    List<RdqAdmin.AuditEntry> listAudit(Connection c, RdqAdmin.AuditQuery q) throws SQLException {
        Template st = new Template();
        StringBuilder b = new StringBuilder();
        q.actor().ifPresent(v -> b.append("\n  AND a.actor = ").append(st.param(PgStore.clean(v))));
        q.action().ifPresent(v -> b.append("\n  AND a.action = ").append(st.param(PgStore.clean(v))));
        q.since().ifPresent(v -> b.append("\n  AND a.at >= ").append(st.param(time(v))).append("::timestamptz"));
        q.until().ifPresent(v -> b.append("\n  AND a.at < ").append(st.param(time(v))).append("::timestamptz"));
        q.beforeId().ifPresent(v -> b.append("\n  AND a.id < ").append(st.param(v)).append("::bigint"));
        st.set("filter", b.toString());
        st.set("limit", st.param(q.limit()));
        List<RdqAdmin.AuditEntry> out = new ArrayList<>();
        try (PreparedStatement ps = st.prepare(c, "sqlListAudit", listAudit); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                List<UUID> ids = List.of();
                java.sql.Array arr = rs.getArray(6);
                if (arr != null) {
                    ids = List.of((UUID[]) arr.getArray());
                }
                Map<String, String> details = Map.of();
                String text = rs.getString(9);
                if (text != null && !text.equals("{}")) {
                    try {
                        details = java.util.Collections.unmodifiableMap(JSON.readValue(text,
                                new com.fasterxml.jackson.core.type.TypeReference<java.util.TreeMap<String, String>>() {}));
                    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                        throw new StoreException("rdq: audit entry " + rs.getLong(1) + ": details are not a JSON object of strings", e);
                    }
                }
                List<String> queues = List.of();
                java.sql.Array qs = rs.getArray(10);
                if (qs != null) {
                    queues = List.of((String[]) qs.getArray());
                }
                out.add(new RdqAdmin.AuditEntry(rs.getLong(1), rs.getObject(2, OffsetDateTime.class).toInstant(),
                        rs.getString(3), rs.getString(4), rs.getString(5), ids, rs.getLong(7), rs.getString(8), details,
                        queues));
            }
        }
        return out;
    }

    /** pgstore's TaskByKey: the task holding key in queue, or null. */
    Task taskByKey(Connection c, String queue, String key) throws SQLException {
        try (PreparedStatement ps = taskByKey.prepare(c, PgStore.clean(queue), PgStore.clean(key));
                ResultSet rs = ps.executeQuery()) {
            return rs.next() ? PgStore.scanTask(rs) : null;
        }
    }

    /**
     * pgstore's liveAction with RetryNow's or Cancel's change, on c in the
     * caller's transaction: locks ids in id order, applies the change to the
     * PENDING ones (each once) and writes one audit entry naming them.
     * Returns each id's status before (absent when there is no such task).
     */
    Map<UUID, Status> live(Connection c, List<UUID> ids, boolean cancelThem, String actor, String reason)
            throws SQLException {
        Map<UUID, Status> found = new HashMap<>();
        try (PreparedStatement ps = liveLock.prepare(c, c.createArrayOf("uuid", ids.toArray()));
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                found.put(rs.getObject(1, UUID.class), Status.parse(rs.getString(2)));
            }
        }
        List<UUID> eligible = new ArrayList<>();
        for (UUID id : ids) {
            if (found.get(id) == Status.PENDING && !eligible.contains(id)) {
                eligible.add(id);
            }
        }
        if (eligible.isEmpty()) {
            return found;
        }
        java.sql.Array arr = c.createArrayOf("uuid", eligible.toArray());
        long moved;
        String who = PgStore.clean(actor);
        if (cancelThem) {
            String msg = Failures.cleanText(reason);
            String type = "cancelled";
            try (PreparedStatement ps = cancel.prepare(c, arr, null, type, PgStore.clean(msg),
                    PgStore.clean(Failures.fingerprint(type, "")), who); ResultSet rs = ps.executeQuery()) {
                rs.next();
                moved = rs.getLong(1);
            }
        } else {
            try (PreparedStatement ps = retryNow.prepare(c, arr, null, channel); ResultSet rs = ps.executeQuery()) {
                rs.next();
                moved = rs.getLong(1);
            }
        }
        if (moved != eligible.size()) {
            throw new StoreException("rdq: " + (cancelThem ? "cancel" : "retry now") + ": changed " + moved + " of "
                    + eligible.size() + " locked pending tasks", null);
        }
        try (PreparedStatement ps = insertAudit.prepare(c, null, who, cancelThem ? "cancel" : "retry_now", "", arr, moved,
                PgStore.clean(reason), "{}")) {
            ps.executeUpdate();
        }
        return found;
    }

    /**
     * pgstore's Redrive of one task with a payload edit, on c in the caller's
     * transaction: locks the task, and when it is DEAD replaces its payload,
     * redrives it due now and writes the "edit_payload" audit entry whose
     * details hold the SHA-256 of the old and the new payload. Returns the
     * task's status before (null when there is no such task).
     */
    Status editAndRedrive(Connection c, UUID id, byte[] payload, String actor, String reason) throws SQLException {
        java.sql.Array ids = c.createArrayOf("uuid", new Object[] {id});
        Status before = null;
        try (PreparedStatement ps = redriveLock.prepare(c, ids); ResultSet rs = ps.executeQuery()) {
            if (rs.next()) {
                before = Status.parse(rs.getString(2));
            }
        }
        if (before != Status.DEAD) {
            return before;
        }
        byte[] old;
        try (PreparedStatement ps = redrivePayload.prepare(c, id); ResultSet rs = ps.executeQuery()) {
            rs.next();
            old = rs.getBytes(1);
        }
        long moved;
        try (PreparedStatement ps = redriveIds.prepare(c, ids, 0L, 0L, payload, null, channel);
                ResultSet rs = ps.executeQuery()) {
            rs.next();
            moved = rs.getLong(1);
        }
        if (moved != 1) {
            throw new StoreException("rdq: edit and redrive: redrove " + moved + " of 1 locked dead task", null);
        }
        String details = "{\"new_sha256\":\"" + sha256(payload) + "\",\"old_sha256\":\"" + sha256(old == null ? new byte[0] : old)
                + "\"}";
        try (PreparedStatement ps = insertAudit.prepare(c, null, PgStore.clean(actor), "edit_payload", "", ids, moved,
                PgStore.clean(reason), details)) {
            ps.executeUpdate();
        }
        return before;
    }

    /**
     * pgstore's PauseHandler for an operator (no cool-off, no probe, no
     * fingerprint or ratio), on c in the caller's transaction: pauses the
     * handler unless it is paused, holds its waiting tasks and writes the
     * "pause_handler" audit entry. Returns whether it paused it.
     */
    boolean pauseHandler(Connection c, String queue, String handler, String actor, String reason) throws SQLException {
        return pauses.pause(c, new HandlerPauseSql.Pause(queue, handler, null, null, actor, reason, "", 0));
    }

    /**
     * pgstore's ResumeHandler for an operator (no probe), on c in the caller's
     * transaction: deletes the pause, then releases the held tasks (waking the
     * queue) and writes the "resume_handler" audit entry. Returns whether the
     * handler was paused.
     */
    boolean resumeHandler(Connection c, String queue, String handler, String actor, String reason) throws SQLException {
        return pauses.resume(c, queue, handler, null, actor, reason);
    }

    /** pgstore's PausedHandlers: the paused handlers of queue (every queue when empty), by queue and handler. */
    List<RdqAdmin.HandlerPause> pausedHandlers(Connection c, String queue) throws SQLException {
        return pauses.paused(c, queue);
    }

    private static String sha256(byte[] b) {
        try {
            return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256").digest(b));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();
}
