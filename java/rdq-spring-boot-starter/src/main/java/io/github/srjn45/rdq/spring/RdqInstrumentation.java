package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Worker;

/**
 * Hands the application's observability beans to the auto-configured client and
 * worker. Each implementation is declared only when its library is on the class
 * path (Micrometer, OpenTelemetry), so that neither is needed to use the
 * starter, and no type of theirs appears here; the beans themselves are looked
 * up when the client and worker are built, after every auto-configuration has
 * declared its own.
 */
interface RdqInstrumentation {
    /** Applies the instrumentation to the worker's builder. */
    void worker(Worker.Builder builder);

    /** Applies the instrumentation to the client's builder. */
    default void client(RdqClient.Builder builder) {}
}
