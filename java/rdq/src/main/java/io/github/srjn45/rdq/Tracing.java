package io.github.srjn45.rdq;

import java.util.List;
import java.util.Map;

/**
 * What the worker and the client report to a tracing library: Go's worker
 * spans and trace-context headers. {@link #NONE} unless
 * {@code openTelemetry} configures OpenTelemetry, so the SDK runs without it
 * on the classpath.
 */
interface Tracing {
    /**
     * Starts the span of one execution of t, parented by the trace context
     * its headers carry (W3C traceparent and tracestate), if any.
     */
    Execution execution(Task t, String queue, int attempt, String workerId);

    /**
     * Starts the span of one submission of tasks (queues and handlers in
     * order), a child of the caller's current span.
     */
    Submission submission(List<String> queues, List<String> handlers);

    /** One execution's span. */
    interface Execution {
        /** Makes the span current on the calling thread until the returned scope closes. */
        AutoCloseable makeCurrent();

        /** Records the attempt's outcome (Go's rdq.outcome attribute: SUCCESS, …, SNOOZED). */
        void outcome(String outcome);

        /** Records the handler's failure, as Go does: an exception event and an error status. */
        void failure(String type, String message);

        /** Marks the span as failed without an attempt: lost, abandoned or interrupted. */
        void error(String status);

        void end();
    }

    /** One submission's span. */
    interface Submission {
        /** The trace context to write into each task's headers (none when not sampled or traced). */
        Map<String, String> headers();

        /** Records the tasks' IDs once known. */
        void tasks(List<String> ids);

        /** Marks the submission as failed. */
        void failed(Throwable err);

        void end();
    }

    Execution NO_EXECUTION = new Execution() {
        @Override
        public AutoCloseable makeCurrent() {
            return () -> { };
        }

        @Override
        public void outcome(String outcome) {}

        @Override
        public void failure(String type, String message) {}

        @Override
        public void error(String status) {}

        @Override
        public void end() {}
    };

    Submission NO_SUBMISSION = new Submission() {
        @Override
        public Map<String, String> headers() {
            return Map.of();
        }

        @Override
        public void tasks(List<String> ids) {}

        @Override
        public void failed(Throwable err) {}

        @Override
        public void end() {}
    };

    Tracing NONE = new Tracing() {
        @Override
        public Execution execution(Task t, String queue, int attempt, String workerId) {
            return NO_EXECUTION;
        }

        @Override
        public Submission submission(List<String> queues, List<String> handlers) {
            return NO_SUBMISSION;
        }
    };
}
