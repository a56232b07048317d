package io.github.srjn45.rdq;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.TreeMap;

/**
 * pgstore's handler pauses (pgstore/breaker.go, store.HandlerPauser): pause,
 * reopen after a failed probe, resume, probe claims and the list of paused
 * handlers, with pgstore's statements (sqlPauseHandler, sqlReopenHandler,
 * sqlHoldTasks, sqlResumeHandler, sqlUnholdTasks, sqlHoldStrays,
 * sqlClaimProbe, sqlPausedHandlers; each names its index in pgstore/sql.go)
 * and its audit entries, byte for byte. Every method runs on a connection the
 * caller owns, in the caller's transaction; nothing here commits.
 */
final class HandlerPauseSql {
    private final Sql.Stmt pauseHandler;
    private final Sql.Stmt reopenHandler;
    private final Sql.Stmt holdTasks;
    private final Sql.Stmt resumeHandler;
    private final Sql.Stmt unholdTasks;
    private final Sql.Stmt holdStrays;
    private final Sql.Stmt claimProbe;
    private final Sql.Stmt pausedHandlers;
    private final Sql.Stmt insertAudit;
    private final String channel;

    HandlerPauseSql(String quotedSchema, String channel) {
        this.pauseHandler = Sql.get("sqlPauseHandler", quotedSchema);
        this.reopenHandler = Sql.get("sqlReopenHandler", quotedSchema);
        this.holdTasks = Sql.get("sqlHoldTasks", quotedSchema);
        this.resumeHandler = Sql.get("sqlResumeHandler", quotedSchema);
        this.unholdTasks = Sql.get("sqlUnholdTasks", quotedSchema);
        this.holdStrays = Sql.get("sqlHoldStrays", quotedSchema);
        this.claimProbe = Sql.get("sqlClaimProbe", quotedSchema);
        this.pausedHandlers = Sql.get("sqlPausedHandlers", quotedSchema);
        this.insertAudit = Sql.get("sqlInsertAudit", quotedSchema);
        this.channel = channel;
    }

    /** A pause to write: pgstore's store.PauseHandlerParams. */
    record Pause(String queue, String handler, Duration coolOff, PgStore.Lease probe, String actor, String reason,
            String fingerprint, double ratio) {}

    /**
     * pgstore's PauseHandler: without a probe, pauses a handler that is not
     * paused (a cool-off of null or zero holds it until resumed); with one (a
     * failed probe's lease), pauses it again only if that probe is its current
     * one, counting a trip. Holds its waiting tasks and writes the
     * "pause_handler" audit entry. Returns whether anything changed.
     */
    boolean pause(Connection c, Pause p) throws SQLException {
        Long coolOff = p.coolOff() != null && !p.coolOff().isZero() && !p.coolOff().isNegative()
                ? p.coolOff().toNanos() / 1000 : null;
        long trips;
        PreparedStatement st = p.probe() == null
                ? pauseHandler.prepare(c, p.queue(), p.handler(), coolOff, PgStore.clean(p.actor()),
                        PgStore.clean(p.reason()), PgStore.clean(p.fingerprint()), p.ratio(), null)
                : reopenHandler.prepare(c, p.queue(), p.handler(), coolOff, PgStore.clean(p.actor()),
                        PgStore.clean(p.reason()), PgStore.clean(p.fingerprint()), p.ratio(), null, p.probe().id(),
                        p.probe().token());
        try (PreparedStatement ps = st; ResultSet rs = ps.executeQuery()) {
            if (!rs.next()) {
                return false;
            }
            trips = rs.getLong(1);
        }
        long held;
        try (PreparedStatement ps = holdTasks.prepare(c, p.queue(), p.handler()); ResultSet rs = ps.executeQuery()) {
            rs.next();
            held = rs.getLong(1);
        }
        Map<String, String> details = new TreeMap<>();
        details.put("handler", p.handler());
        details.put("trips", Long.toString(trips));
        if (!p.fingerprint().isEmpty()) {
            details.put("fingerprint", PgStore.clean(p.fingerprint()));
        }
        if (p.ratio() > 0) {
            details.put("ratio", new BigDecimal(p.ratio()).setScale(3, RoundingMode.HALF_EVEN).toPlainString());
        }
        details.put("cool_off", coolOff != null ? GoDurations.format(p.coolOff()) : "until resumed");
        audit(c, p.actor(), "pause_handler", p.queue(), p.handler(), held, p.reason(), details);
        return true;
    }

    /**
     * pgstore's ResumeHandler: deletes the pause (with a probe, only if that
     * probe is the current one), then releases the held tasks, waking the
     * queue, and writes the "resume_handler" audit entry. Returns whether the
     * handler was paused.
     */
    boolean resume(Connection c, String queue, String handler, PgStore.Lease probe, String actor, String reason)
            throws SQLException {
        long trips;
        try (PreparedStatement ps = resumeHandler.prepare(c, queue, handler, probe == null ? null : probe.id(),
                probe == null ? 0L : probe.token()); ResultSet rs = ps.executeQuery()) {
            if (!rs.next()) {
                return false;
            }
            trips = rs.getLong(1);
        }
        long released;
        try (PreparedStatement ps = unholdTasks.prepare(c, queue, handler, channel); ResultSet rs = ps.executeQuery()) {
            rs.next();
            released = rs.getLong(1);
        }
        Map<String, String> details = new TreeMap<>();
        details.put("handler", handler);
        details.put("trips", Long.toString(trips));
        if (probe != null) {
            details.put("probe", probe.id().toString());
        }
        audit(c, actor, "resume_handler", queue, handler, released, reason, details);
        return true;
    }

    private void audit(Connection c, String actor, String action, String queue, String handler, long count,
            String reason, Map<String, String> details) throws SQLException {
        String filter = "{\"handler\":" + GoJson.quote(new StringBuilder(), handler) + ",\"queue\":"
                + GoJson.quote(new StringBuilder(), queue) + "}";
        StringBuilder d = new StringBuilder("{");
        for (Map.Entry<String, String> e : details.entrySet()) { // sorted, as Go's encoding/json writes a map
            if (d.length() > 1) {
                d.append(',');
            }
            GoJson.quote(d, e.getKey()).append(':');
            GoJson.quote(d, e.getValue());
        }
        d.append('}');
        try (PreparedStatement ps = insertAudit.prepare(c, null, PgStore.clean(actor), action, filter,
                c.createArrayOf("uuid", new Object[0]), count, PgStore.clean(reason), d.toString())) {
            ps.executeUpdate();
        }
    }

    /** A probe task leased by {@link #claimProbe} and the pause it probes (half-open). */
    record Probe(Task task, RdqAdmin.HandlerPause pause) {}

    /**
     * pgstore's ClaimProbe, on c inside the caller's transaction: holds the
     * waiting tasks of the handlers due a probe that a concurrent write left
     * unheld, then leases one probe per such handler among handlers (the
     * caller's; every handler when empty).
     */
    List<Probe> claimProbe(Connection c, List<String> queues, long leaseMicros, String workerId, String[] handlers)
            throws SQLException {
        java.sql.Array qs = c.createArrayOf("text", queues.toArray());
        try (PreparedStatement ps = holdStrays.prepare(c, qs, null); ResultSet rs = ps.executeQuery()) {
            rs.next();
        }
        List<Probe> out = new ArrayList<>();
        try (PreparedStatement ps = claimProbe.prepare(c, qs, leaseMicros, null, PgStore.clean(workerId),
                c.createArrayOf("text", handlers)); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(new Probe(PgStore.scanTask(rs), scanPause(rs, PgStore.TASK_COLUMNS)));
            }
        }
        return out;
    }

    /** pgstore's PausedHandlers: the paused handlers of queue (every queue when empty), by queue and handler. */
    List<RdqAdmin.HandlerPause> paused(Connection c, String queue) throws SQLException {
        List<RdqAdmin.HandlerPause> out = new ArrayList<>();
        try (PreparedStatement ps = pausedHandlers.prepare(c, queue); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(scanPause(rs, 0));
            }
        }
        return out;
    }

    /** Reads pgstore's pauseColumns from the column after offset. */
    private static RdqAdmin.HandlerPause scanPause(ResultSet rs, int offset) throws SQLException {
        OffsetDateTime probeAt = rs.getObject(offset + 5, OffsetDateTime.class);
        double ratio = rs.getDouble(offset + 12);
        String fp = rs.getString(offset + 11);
        return new RdqAdmin.HandlerPause(rs.getString(offset + 1), rs.getString(offset + 2), rs.getString(offset + 3),
                rs.getObject(offset + 4, OffsetDateTime.class).toInstant(),
                Optional.ofNullable(probeAt).map(OffsetDateTime::toInstant), rs.getInt(offset + 6),
                rs.getString(offset + 9), rs.getString(offset + 10),
                fp == null || fp.isEmpty() ? Optional.empty() : Optional.of(fp),
                ratio > 0 ? OptionalDouble.of(ratio) : OptionalDouble.empty());
    }
}
