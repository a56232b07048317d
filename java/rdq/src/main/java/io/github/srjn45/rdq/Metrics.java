package io.github.srjn45.rdq;

import java.util.function.IntSupplier;

/**
 * What the worker reports to a metrics library: the events of Go's worker
 * metrics, by the same names and labels. The worker holds {@link #NONE}
 * unless {@link Worker.Builder#meterRegistry} configures Micrometer, so the
 * SDK runs without a metrics library on the classpath.
 */
interface Metrics {
    /** An attempt recorded with outcome (SUCCESS, RETRYABLE_FAILURE, …). */
    void attempt(String queue, Outcome outcome);

    void deadLettered(String queue);

    void handlerDuration(String queue, String handler, long nanos);

    void claimDuration(String queue, long nanos);

    void reclaimed(String queue);

    void leaseLost(String queue);

    void released(String queue);

    void snoozed(String queue);

    void resultDropped(String queue);

    void purged(long n);

    /** A handler's breaker state as this worker last saw it: 0 closed, 1 open, 2 half-open. */
    void breakerState(String queue, String handler, int state);

    /** A breaker transition this worker made, to "open", "half_open" or "closed". */
    void breakerTransition(String queue, String handler, String to);

    /** Reports a queue's executions in flight as read from inFlight. */
    void inFlight(String queue, IntSupplier inFlight);

    Metrics NONE = new Metrics() {
        @Override
        public void attempt(String queue, Outcome outcome) {}

        @Override
        public void deadLettered(String queue) {}

        @Override
        public void handlerDuration(String queue, String handler, long nanos) {}

        @Override
        public void claimDuration(String queue, long nanos) {}

        @Override
        public void reclaimed(String queue) {}

        @Override
        public void leaseLost(String queue) {}

        @Override
        public void released(String queue) {}

        @Override
        public void snoozed(String queue) {}

        @Override
        public void resultDropped(String queue) {}

        @Override
        public void purged(long n) {}

        @Override
        public void breakerState(String queue, String handler, int state) {}

        @Override
        public void breakerTransition(String queue, String handler, String to) {}

        @Override
        public void inFlight(String queue, IntSupplier inFlight) {}
    };
}
