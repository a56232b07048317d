package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.Worker;
import java.time.Duration;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;

/**
 * Binds a {@link Worker} to the application context: it starts the worker once
 * every singleton is created (after the schema migration, the handler beans and
 * everything they depend on) and, when the context closes, stops it gracefully
 * before any bean it uses (the data source included) is destroyed: claiming
 * stops, running handlers get the shutdown timeout to finish, then those still
 * running are interrupted and their tasks released, due at once, without
 * counting an attempt. {@link #stop()} returns when the worker has stopped.
 *
 * <p>A worker runs once: starting a stopped context again fails, saying so.
 */
public final class RdqWorkerLifecycle implements SmartLifecycle {
    /**
     * The lifecycle phase: the last to start, among the first to stop (before
     * a web server's graceful shutdown, so the stop does not wait for it).
     */
    public static final int PHASE = SmartLifecycle.DEFAULT_PHASE;

    private static final Logger LOG = LoggerFactory.getLogger(RdqWorkerLifecycle.class);

    private final Worker worker;
    private final Duration shutdownTimeout;
    private final boolean autoStartup;
    private final Object lock = new Object();
    private volatile boolean running;

    /**
     * Binds worker, stopped with the given grace period.
     *
     * @param autoStartup whether the context starts the worker
     */
    public RdqWorkerLifecycle(Worker worker, Duration shutdownTimeout, boolean autoStartup) {
        this.worker = Objects.requireNonNull(worker, "worker");
        this.shutdownTimeout = Objects.requireNonNull(shutdownTimeout, "shutdownTimeout");
        if (shutdownTimeout.isNegative()) {
            throw new IllegalArgumentException("rdq: the worker's shutdown timeout " + shutdownTimeout
                    + " is negative: give rdq.worker.shutdown-timeout a duration of zero or more");
        }
        this.autoStartup = autoStartup;
    }

    /** The worker. */
    public Worker worker() {
        return worker;
    }

    /** The grace period running handlers get at stop. */
    public Duration shutdownTimeout() {
        return shutdownTimeout;
    }

    /** Starts the worker. */
    @Override
    public void start() {
        synchronized (lock) {
            if (running) {
                return;
            }
            worker.start();
            running = true;
        }
    }

    /** Stops the worker, waiting up to the shutdown timeout for running handlers. */
    @Override
    public void stop() {
        synchronized (lock) {
            if (!running) {
                return;
            }
            boolean clean = worker.stop(shutdownTimeout);
            running = false;
            if (!clean) {
                LOG.warn("rdq worker {} stopped with handlers still running after the shutdown timeout ({}); "
                        + "their tasks were released", worker.id(), shutdownTimeout);
            }
        }
    }

    /** Whether the worker was started and has not been stopped. */
    @Override
    public boolean isRunning() {
        return running;
    }

    @Override
    public boolean isAutoStartup() {
        return autoStartup;
    }

    @Override
    public int getPhase() {
        return PHASE;
    }
}
