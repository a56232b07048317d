package io.github.srjn45.rdq.examples.breaker;

import io.github.srjn45.rdq.Breaker;
import io.github.srjn45.rdq.Migrations;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.Policy;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqAdmin;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Status;
import io.github.srjn45.rdq.TaskFilter;
import io.github.srjn45.rdq.Worker;
import java.io.PrintStream;
import java.net.ConnectException;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A circuit breaker from Java: a payment gateway goes down, the breaker pauses
 * the charge handler after three orders failed alike, the waiting orders are
 * listed live (held, their attempts kept), and once the gateway is back one
 * probe resumes the handler and every order goes through.
 *
 * <pre>
 * cd java &amp;&amp; mvn -q -pl examples -am package -DskipTests
 * RDQ_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *   java -cp "examples/target/classes:..." io.github.srjn45.rdq.examples.breaker.BreakerExample
 * </pre>
 */
public final class BreakerExample {
    static final String QUEUE = "payments";

    private BreakerExample() {}

    public static void main(String[] args) throws Exception {
        String url = System.getenv().getOrDefault("RDQ_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test");
        String schema = System.getenv().getOrDefault("RDQ_SCHEMA", "rdq");
        DataSource ds = dataSource(url);
        Migrations.migrate(ds, schema);
        run(ds, schema, System.out);
    }

    static DataSource dataSource(String url) {
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

    /** Runs the example on ds and schema, writing what happens to out. */
    public static void run(DataSource ds, String schema, PrintStream out) throws InterruptedException {
        AtomicBoolean gatewayDown = new AtomicBoolean(true);
        Worker worker = Worker.builder(ds).schema(schema).id("breaker-example").pollInterval(Duration.ofMillis(50))
                .queue(QUEUE, QueueConfig.builder().concurrency(1)
                        .policy(Policy.builder().maxAttempts(10).initialBackoff(Duration.ofMillis(200)).build())
                        .breaker(Breaker.builder().minFailedTasks(3).coolOff(Duration.ofSeconds(1)).build())
                        .build())
                .handle("charge", ctx -> {
                    if (gatewayDown.get()) {
                        throw new ConnectException("gateway: connection refused");
                    }
                })
                .build();
        worker.start();
        try {
            RdqClient client = RdqClient.builder(ds).schema(schema).build();
            RdqAdmin admin = RdqAdmin.builder(ds).schema(schema).build();
            List<UUID> orders = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                orders.add(client.submit(NewTask.builder(QUEUE, "charge").payload("{\"order\":" + (2000 + i) + "}")
                        .build()).task().id());
            }

            waitUntil(() -> !admin.pausedHandlers(Optional.of(QUEUE)).isEmpty());
            RdqAdmin.HandlerPause p = admin.pausedHandlers(Optional.of(QUEUE)).get(0);
            out.println("1. breaker opened: " + p.queue() + "/" + p.handler() + " paused by " + p.actor() + ": " + p.reason());
            TaskFilter charges = TaskFilter.builder().queue(QUEUE).handler("charge").build();
            // The attempt that tripped the breaker is recorded right after the pause.
            waitUntil(() -> count(admin, RdqAdmin.TaskState.IN_FLIGHT, charges) == 0);
            out.println("2. waiting meanwhile: " + count(admin, RdqAdmin.TaskState.RETRYING, charges) + " retrying, "
                    + count(admin, RdqAdmin.TaskState.PENDING, charges) + " never tried");

            gatewayDown.set(false);
            waitUntil(() -> admin.pausedHandlers(Optional.of(QUEUE)).isEmpty());
            waitUntil(() -> orders.stream().allMatch(id -> client.get(id).orElseThrow().status() == Status.SUCCEEDED));
            out.println("3. gateway back: one probe succeeded, the handler resumed, all " + orders.size()
                    + " orders charged");
            List<RdqAdmin.AuditEntry> entries = new ArrayList<>(
                    admin.audit(RdqAdmin.AuditQuery.builder(10).actor(Breaker.ACTOR).build()));
            java.util.Collections.reverse(entries); // oldest first
            for (RdqAdmin.AuditEntry e : entries) {
                out.println("   audit: " + e.action() + " " + e.filter() + " " + e.reason());
            }
        } finally {
            worker.stop(Duration.ofSeconds(10));
        }
    }

    private static int count(RdqAdmin admin, RdqAdmin.TaskState state, TaskFilter f) {
        return admin.listTasks(state, f, 100).tasks().size();
    }

    private static void waitUntil(BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("not done after 60s");
            }
            Thread.sleep(25);
        }
    }
}
