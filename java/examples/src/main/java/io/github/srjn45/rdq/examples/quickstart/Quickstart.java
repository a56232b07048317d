package io.github.srjn45.rdq.examples.quickstart;

import io.github.srjn45.rdq.Attempt;
import io.github.srjn45.rdq.ErrorTyped;
import io.github.srjn45.rdq.Migrations;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.Policy;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Status;
import io.github.srjn45.rdq.Task;
import io.github.srjn45.rdq.Worker;
import java.io.PrintStream;
import java.net.URI;
import java.time.Duration;
import java.util.UUID;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * rdq from Java end to end in a few seconds, mirroring the Go quickstart
 * (examples/quickstart): a task that fails twice and then succeeds, a task
 * that always fails and lands in the dead-letter queue with its full history,
 * and the same task succeeding in its second life once its handler is fixed
 * and the task redriven.
 *
 * <p>It migrates the schema ({@code RDQ_SCHEMA}, "rdq" by default) itself
 * with {@link Migrations#migrate(DataSource, String)}, then runs:
 *
 * <pre>
 * cd java &amp;&amp; mvn -q -pl examples -am package -DskipTests
 * RDQ_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *   java -cp "examples/target/classes:..." io.github.srjn45.rdq.examples.quickstart.Quickstart
 * </pre>
 */
public final class Quickstart {
    static final String QUEUE = "quickstart";

    private Quickstart() {}

    /** What the payment gateway throws while misconfigured; its type groups these failures in the DLQ. */
    static final class GatewayException extends RuntimeException implements ErrorTyped {
        private static final long serialVersionUID = 1L;

        GatewayException(int status) {
            super("payment gateway answered " + status + ": merchant account not configured");
        }

        @Override
        public String errorType() {
            return "gateway_error";
        }
    }

    public static void main(String[] args) throws Exception {
        String url = System.getenv().getOrDefault("RDQ_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test");
        String schema = System.getenv().getOrDefault("RDQ_SCHEMA", "rdq");
        DataSource ds = dataSource(url);
        Migrations.migrate(ds, schema); // creates or upgrades the schema; a no-op when up to date
        run(ds, schema, System.out);
    }

    /** A data source for a postgres:// URL (user and password in the URL, if any). */
    public static DataSource dataSource(String url) {
        URI u = URI.create(url);
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setServerNames(new String[] {u.getHost()});
        ds.setPortNumbers(new int[] {u.getPort() < 0 ? 5432 : u.getPort()});
        ds.setDatabaseName(u.getPath().replaceFirst("^/", ""));
        if (u.getUserInfo() != null) {
            String[] userPass = u.getUserInfo().split(":", 2);
            ds.setUser(userPass[0]);
            if (userPass.length == 2) {
                ds.setPassword(userPass[1]);
            }
        }
        return ds;
    }

    /** Runs the quickstart on ds and schema, writing what happens to out. */
    public static void run(DataSource ds, String schema, PrintStream out) throws InterruptedException {
        out.println("rdq quickstart (Java), schema " + schema);
        java.util.concurrent.atomic.AtomicBoolean fixed = new java.util.concurrent.atomic.AtomicBoolean();
        Worker worker = Worker.builder(ds)
                .schema(schema)
                .id("quickstart-java-worker")
                .queue(QUEUE, QueueConfig.builder()
                        .policy(Policy.builder().maxAttempts(3).initialBackoff(Duration.ofMillis(100))
                                .multiplier(2).jitter(0).build())
                        .concurrency(4)
                        .build())
                .pollInterval(Duration.ofMillis(25))
                // send-receipt fails on its first two attempts, then succeeds.
                .handle("send-receipt", ctx -> {
                    if (ctx.attempt() <= 2) {
                        throw new java.net.ConnectException("smtp dial: connection refused (attempt " + ctx.attempt() + ")");
                    }
                })
                // charge-card fails until the gateway is fixed.
                .handle("charge-card", ctx -> {
                    if (!fixed.get()) {
                        throw new GatewayException(503);
                    }
                })
                .build();
        worker.start();
        try {
            RdqClient client = RdqClient.builder(ds).schema(schema).id("quickstart-java").build();
            UUID receipt = client.submit(NewTask.builder(QUEUE, "send-receipt")
                    .payload("{\"order\":1001}").contentType("application/json").build()).task().id();
            UUID charge = client.submit(NewTask.builder(QUEUE, "charge-card")
                    .payload("{\"order\":1002,\"cents\":4200}").contentType("application/json").build()).task().id();

            Task r = waitFor(client, receipt, Status.SUCCEEDED);
            out.println("\n1. send-receipt " + r.status() + " after " + r.attempts() + " attempts:");
            print(out, client, receipt);

            Task c = waitFor(client, charge, Status.DEAD);
            out.println("\n2. charge-card " + c.status() + " after " + c.attempts() + " attempts; in the DLQ as "
                    + c.lastErrorType() + " (fingerprint " + c.lastErrorFingerprint() + "):");
            print(out, client, charge);

            fixed.set(true);
            client.redrive(java.util.List.of(charge), "quickstart", "gateway configured");
            Task again = waitFor(client, charge, Status.SUCCEEDED);
            out.println("\n3. gateway fixed, task redriven: charge-card " + again.status() + " in life " + again.life()
                    + ", attempt numbers continuing:");
            print(out, client, charge);
            out.println("\nWith the rdq command, a whole failure group is redriven at once:");
            out.println("  rdq dlq redrive --fingerprint " + c.lastErrorFingerprint() + " --reason \"gateway fixed\"");
        } finally {
            worker.stop(Duration.ofSeconds(10));
        }
    }

    private static Task waitFor(RdqClient client, UUID id, Status want) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (true) {
            Task t = client.get(id).orElseThrow();
            if (t.status() == want) {
                return t;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("task " + id + " is " + t.status() + ", not " + want + ", after 30s");
            }
            Thread.sleep(25);
        }
    }

    private static void print(PrintStream out, RdqClient client, UUID id) {
        for (Attempt a : client.history(id)) {
            out.printf("   attempt %d  life %d  %-17s %s%s%n", a.number(), a.life(), a.outcome(), a.errorType(),
                    a.message().isEmpty() ? "" : ": " + a.message());
        }
    }
}
