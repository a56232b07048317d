package io.github.srjn45.rdq;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

/**
 * The worker's metrics on a Micrometer registry, named so that a Prometheus
 * registry exports exactly the Go worker's metrics: the counter
 * {@code rdq.worker.attempts} becomes {@code rdq_worker_attempts_total}, the
 * timer {@code rdq.worker.handler.duration} becomes
 * {@code rdq_worker_handler_duration_seconds}, and so on, with the same tags
 * (queue, outcome, handler). Only loaded when a registry is configured.
 */
final class MicrometerMetrics implements Metrics {
    private final MeterRegistry registry;
    private final Map<List<String>, Counter> counters = new ConcurrentHashMap<>();
    private final Map<List<String>, Timer> timers = new ConcurrentHashMap<>();
    private final Map<List<String>, java.util.concurrent.atomic.AtomicInteger> gauges = new ConcurrentHashMap<>();

    MicrometerMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    private Counter counter(String name, String help, String... tags) {
        return counters.computeIfAbsent(key(name, tags),
                k -> Counter.builder(name).description(help).tags(tags).register(registry));
    }

    private Timer timer(String name, String help, String... tags) {
        return timers.computeIfAbsent(key(name, tags),
                k -> Timer.builder(name).description(help).tags(tags).register(registry));
    }

    private static List<String> key(String name, String... tags) {
        String[] k = new String[tags.length + 1];
        k[0] = name;
        System.arraycopy(tags, 0, k, 1, tags.length);
        return List.of(k);
    }

    @Override
    public void attempt(String queue, Outcome outcome) {
        counter("rdq.worker.attempts", "Attempts recorded by this worker, by outcome.", "queue", queue, "outcome",
                outcome.name()).increment();
    }

    @Override
    public void deadLettered(String queue) {
        counter("rdq.worker.dead_lettered", "Tasks this worker moved to the dead-letter queue.", "queue", queue)
                .increment();
    }

    @Override
    public void handlerDuration(String queue, String handler, long nanos) {
        timer("rdq.worker.handler.duration", "How long handlers ran.", "queue", queue, "handler", handler)
                .record(nanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void claimDuration(String queue, long nanos) {
        timer("rdq.worker.claim.duration", "How long claims took.", "queue", queue).record(nanos,
                TimeUnit.NANOSECONDS);
    }

    @Override
    public void reclaimed(String queue) {
        counter("rdq.worker.reclaimed", "Expired leases this worker reclaimed.", "queue", queue).increment();
    }

    @Override
    public void leaseLost(String queue) {
        counter("rdq.worker.leases_lost", "Executions whose lease was lost.", "queue", queue).increment();
    }

    @Override
    public void released(String queue) {
        counter("rdq.worker.released", "Tasks released at shutdown without an attempt.", "queue", queue).increment();
    }

    @Override
    public void snoozed(String queue) {
        counter("rdq.worker.snoozed", "Tasks snoozed without spending an attempt.", "queue", queue).increment();
    }

    @Override
    public void resultDropped(String queue) {
        counter("rdq.worker.results_dropped", "Results given up because they could not be written.", "queue", queue)
                .increment();
    }

    @Override
    public void purged(long n) {
        counter("rdq.worker.purged", "Succeeded tasks purged after their retention by this worker.").increment(n);
    }

    @Override
    public void breakerState(String queue, String handler, int state) {
        gauges.computeIfAbsent(key("rdq.worker.breaker_state", queue, handler), k -> {
            java.util.concurrent.atomic.AtomicInteger v = new java.util.concurrent.atomic.AtomicInteger();
            Gauge.builder("rdq.worker.breaker_state", v, java.util.concurrent.atomic.AtomicInteger::get)
                    .description("Circuit breaker state by queue and handler, as this worker last saw it: 0 closed, 1 open, 2 half-open.")
                    .tags("queue", queue, "handler", handler).strongReference(true).register(registry);
            return v;
        }).set(state);
    }

    @Override
    public void breakerTransition(String queue, String handler, String to) {
        counter("rdq.worker.breaker_transitions",
                "Circuit breaker transitions this worker made, by queue, handler and new state (open, half_open, closed).",
                "queue", queue, "handler", handler, "to", to).increment();
    }

    @Override
    public void inFlight(String queue, IntSupplier inFlight) {
        Gauge.builder("rdq.worker.in_flight", inFlight, s -> s.getAsInt())
                .description("Executions in flight.").tags("queue", queue).strongReference(true).register(registry);
    }
}
