package io.github.srjn45.rdq;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * One queue's circuit breaker on one worker: Go's worker breakerState. Times
 * are System.nanoTime() readings.
 */
final class BreakerState {
    /** Bounds the attempts remembered per handler, as Go's maxWindowEvents. */
    static final int MAX_WINDOW_EVENTS = 4096;

    final Breaker policy;
    private final long windowNanos;

    private final Map<String, Window> windows = new HashMap<>();
    private final Set<String> tripping = new HashSet<>();
    /** Per handler, when its evidence was last cleared: attempts started before are not counted. */
    private final Map<String, Long> since = new HashMap<>();
    /** Handlers last seen paused in the store. */
    private Set<String> known = new HashSet<>();
    /** When this worker last looked for probes; guarded by this. */
    long lastProbeNanos;
    boolean probedOnce;

    BreakerState(Breaker policy) {
        this.policy = policy;
        this.windowNanos = policy.window().toNanos();
    }

    private record Event(long at, UUID task, boolean failed, String fingerprint) {}

    /** A handler's recent attempts, oldest first, and the failed ones per fingerprint and task. */
    private static final class Window {
        final ArrayDeque<Event> events = new ArrayDeque<>();
        int failed;
        final Map<String, Map<UUID, Integer>> byFingerprint = new HashMap<>();

        void count(Event ev, int delta) {
            if (!ev.failed) {
                return;
            }
            failed += delta;
            Map<UUID, Integer> tasks = byFingerprint.computeIfAbsent(ev.fingerprint, k -> new HashMap<>());
            int n = tasks.getOrDefault(ev.task, 0) + delta;
            if (n <= 0) {
                tasks.remove(ev.task);
                if (tasks.isEmpty()) {
                    byFingerprint.remove(ev.fingerprint);
                }
            } else {
                tasks.put(ev.task, n);
            }
        }
    }

    /** A decision to trip. */
    record Trip(String handler, String fingerprint, double ratio, int failed, int total, int tasks) {}

    /**
     * Records an attempt of handler that started at started and ended at now,
     * and returns the trip it causes, or null. An attempt that started before
     * the handler's evidence was last cleared is not counted. Only a failure
     * whose fingerprint has at least minFailedTasks distinct tasks, no fewer
     * than any other fingerprint of the window, trips it.
     */
    synchronized Trip observe(long now, long started, String handler, UUID task, boolean failed, String fingerprint) {
        Long cleared = since.get(handler);
        if (cleared != null && started - cleared < 0) {
            return null;
        }
        Window win = windows.computeIfAbsent(handler, k -> new Window());
        while (!win.events.isEmpty()
                && (now - win.events.peekFirst().at > windowNanos || win.events.size() >= MAX_WINDOW_EVENTS)) {
            win.count(win.events.pollFirst(), -1);
        }
        Event ev = new Event(now, task, failed, fingerprint);
        win.events.addLast(ev);
        win.count(ev, +1);
        if (!failed || tripping.contains(handler)) {
            return null;
        }
        double ratio = (double) win.failed / win.events.size();
        if (ratio < policy.failureRatio()) {
            return null;
        }
        Map<UUID, Integer> tasks = win.byFingerprint.get(fingerprint);
        int distinct = tasks == null ? 0 : tasks.size();
        if (distinct < policy.minFailedTasks()) {
            return null;
        }
        for (Map<UUID, Integer> ts : win.byFingerprint.values()) {
            if (ts.size() > distinct) {
                return null; // another cause dominates; this failure is not its evidence
            }
        }
        tripping.add(handler);
        return new Trip(handler, fingerprint, ratio, win.failed, win.events.size(), distinct);
    }

    /** Whether this worker is tripping handler's breaker right now: its pause is being written. */
    synchronized boolean isTripping(String handler) {
        return tripping.contains(handler);
    }

    /** Whether any handler's breaker is tripping. */
    synchronized boolean anyTripping() {
        return !tripping.isEmpty();
    }

    /** Ends a trip: the evidence is cleared as of at. */
    synchronized void tripped(String handler, long at) {
        clear(handler, at);
        tripping.remove(handler);
    }

    /** Clears handler's evidence as of at, when it was resumed. */
    synchronized void resumed(String handler, long at) {
        clear(handler, at);
    }

    private void clear(String handler, long at) {
        windows.remove(handler);
        Long s = since.get(handler);
        if (s == null || at - s > 0) {
            since.put(handler, at);
        }
    }

    /** What changed in the store's list of paused handlers since the last look. */
    record Noticed(List<RdqAdmin.HandlerPause> added, List<String> gone) {}

    /**
     * Takes the store's list of paused handlers, read at at, and returns the
     * pauses new since the last call and the handlers no longer paused,
     * clearing the evidence of both as of at.
     */
    synchronized Noticed notice(List<RdqAdmin.HandlerPause> paused, long at) {
        Set<String> now = new HashSet<>();
        List<RdqAdmin.HandlerPause> added = new ArrayList<>();
        List<String> gone = new ArrayList<>();
        for (RdqAdmin.HandlerPause p : paused) {
            now.add(p.handler());
            if (!known.contains(p.handler())) {
                clear(p.handler(), at);
                added.add(p);
            }
        }
        for (String h : known) {
            if (!now.contains(h)) {
                clear(h, at);
                gone.add(h);
            }
        }
        known = now;
        return new Noticed(added, gone);
    }

    /** Whether the caller may look for probes now, at most once per interval; records the look. */
    synchronized boolean mayProbe(long now, long intervalNanos) {
        if (probedOnce && now - lastProbeNanos < intervalNanos) {
            return false;
        }
        probedOnce = true;
        lastProbeNanos = now;
        return true;
    }
}
