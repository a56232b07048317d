package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertThrows;

import java.net.URL;
import java.net.URLClassLoader;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The SDK on its compile dependencies alone (the PostgreSQL driver, Jackson,
 * SLF4J): without Micrometer and OpenTelemetry on the class path, a client
 * submits and a worker with a circuit breaker runs the task.
 */
class OptionalDependenciesTest extends DbTestBase {
    private static URL location(Class<?> c) {
        return c.getProtectionDomain().getCodeSource().getLocation();
    }

    /** Runs in a class loader of the SDK and its compile dependencies only. */
    public static final class Driver {
        private Driver() {}

        /** Submits a task to schema at url and runs it on a worker; returns its ID once it succeeded. */
        public static String run(String url, String user, String password, String schema) throws Exception {
            PGSimpleDataSource ds = new PGSimpleDataSource();
            ds.setURL(url);
            ds.setUser(user);
            ds.setPassword(password);
            RdqClient client = RdqClient.builder(ds).schema(schema).build();
            UUID id = client.submit(NewTask.builder("q", "h").build()).task().id();
            Worker w = Worker.builder(ds).schema(schema).pollInterval(Duration.ofMillis(50))
                    .queue("q", QueueConfig.builder().breaker(Breaker.defaults()).build())
                    .handle("h", ctx -> { })
                    .build();
            w.start();
            try {
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (client.get(id).orElseThrow().status() != Status.SUCCEEDED) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("task " + id + " did not succeed within 30s");
                    }
                    Thread.sleep(20);
                }
            } finally {
                w.stop(Duration.ofSeconds(5));
            }
            return id.toString();
        }
    }

    @Test
    void aClientAndAWorkerRunWithoutMicrometerOrOpenTelemetry() throws Exception {
        URL[] path = {location(Worker.class), location(Driver.class), location(org.postgresql.Driver.class),
            location(com.fasterxml.jackson.databind.ObjectMapper.class),
            location(com.fasterxml.jackson.core.JsonFactory.class),
            location(com.fasterxml.jackson.annotation.JsonProperty.class), location(org.slf4j.LoggerFactory.class)};
        try (URLClassLoader sdk = new URLClassLoader(path, ClassLoader.getPlatformClassLoader())) {
            assertThrows(ClassNotFoundException.class, () -> sdk.loadClass("io.opentelemetry.api.OpenTelemetry"));
            assertThrows(ClassNotFoundException.class, () -> sdk.loadClass("io.micrometer.core.instrument.MeterRegistry"));
            String id = (String) sdk.loadClass(Driver.class.getName())
                    .getMethod("run", String.class, String.class, String.class, String.class)
                    .invoke(null, ds.getURL(), ds.getUser(), ds.getPassword(), schema);
            await(Duration.ofSeconds(5), "the task run without the optional dependencies",
                    statusIs(UUID.fromString(id), Status.SUCCEEDED));
        }
    }
}
