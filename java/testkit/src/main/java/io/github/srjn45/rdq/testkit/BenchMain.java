package io.github.srjn45.rdq.testkit;

import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Worker;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;

/**
 * The Java worker's end-to-end benchmark, shaped like Go's benchtest.EndToEnd:
 * submit N tasks in batches of 500 while two workers (concurrency 200 each)
 * claim them, run a no-op handler and finish them, an attempt row written for
 * each. A first round of the same shape on the queue "warmup"
 * (RDQ_BENCH_WARMUP tasks, 20,000 by default; 0 for none) lets the JIT compile
 * the hot path before the measured round on the queue "bench", whose workers
 * are new; then the tables are analyzed, as Go's benchmark does. Connections
 * are reused ({@link ReusingDataSource}), as Go's pool reuses them, so the
 * measured round runs on the warm-up's connections instead of opening its
 * own. Prints "tasks=N seconds=S tasks_per_sec=R" for the measured round,
 * from the first submit to the last finish written (the workers stopped).
 */
public final class BenchMain {
    private BenchMain() {}

    public static void main(String[] args) throws Exception {
        Env.logging();
        int n = Integer.parseInt(args.length > 0 ? args[0] : "20000");
        int warmup = Env.integer("RDQ_BENCH_WARMUP", 20_000);
        String schema = Env.get("RDQ_SCHEMA", "rdq");
        var ds = new ReusingDataSource(Env.dataSource());
        try {
            if (warmup > 0) {
                round(ds, schema, "warmup", warmup);
            }
            analyze(ds, schema);
            double secs = round(ds, schema, "bench", n);
            System.out.printf("tasks=%d seconds=%.3f tasks_per_sec=%.0f%n", n, secs, n / secs);
        } finally {
            ds.closeAll();
        }
    }

    /**
     * Updates the planner's statistics of the tables the round writes, as Go's
     * benchmark does after its warm-up (workload.Analyze): without them the
     * claim may be planned for the empty table the schema started as.
     */
    private static void analyze(DataSource ds, String schema) throws Exception {
        try (Connection conn = ds.getConnection(); java.sql.Statement st = conn.createStatement()) {
            for (String table : new String[] {"tasks", "attempts"}) {
                st.execute("ANALYZE \"" + schema + "\"." + table);
            }
        }
    }

    /** Runs n no-op tasks through two new workers on queue; returns the seconds it took. */
    private static double round(DataSource ds, String schema, String queue, int n) throws Exception {
        RdqClient client = RdqClient.builder(ds).schema(schema).build();
        AtomicLong executed = new AtomicLong();
        CountDownLatch all = new CountDownLatch(1);
        List<Worker> workers = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            workers.add(Worker.builder(ds).schema(schema).id(queue + "-" + i)
                    .queue(queue, QueueConfig.builder().concurrency(200).build())
                    .pollInterval(Duration.ofMillis(50)).disableReclaim().disablePurge()
                    .handle("noop", ctx -> {
                        if (executed.incrementAndGet() == n) {
                            all.countDown();
                        }
                    }).build());
        }
        long start = System.nanoTime();
        for (Worker w : workers) {
            w.start();
        }
        // One connection for every batch, as Go's client gets from its pool.
        try (Connection conn = ds.getConnection()) {
            List<NewTask> batch = new ArrayList<>(500);
            for (int i = 0; i < n; i++) {
                batch.add(NewTask.builder(queue, "noop").payload("{\"n\":1}").build());
                if (batch.size() == 500 || i == n - 1) {
                    client.submitAll(conn, batch);
                    batch.clear();
                }
            }
        }
        if (!all.await(10, TimeUnit.MINUTES)) {
            throw new IllegalStateException("only " + executed.get() + " of " + n + " tasks ran in 10 minutes on " + queue);
        }
        for (Worker w : workers) {
            w.stop(Duration.ofSeconds(30)); // flushes the last finishes
        }
        double secs = (System.nanoTime() - start) / 1e9;
        try (Connection conn = ds.getConnection();
                PreparedStatement ps = conn.prepareStatement("SELECT count(*) FROM \"" + schema
                        + "\".tasks WHERE queue = ? AND status = 'SUCCEEDED'")) {
            ps.setString(1, queue);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long succeeded = rs.getLong(1);
                if (succeeded != n || executed.get() != n) {
                    throw new IllegalStateException(succeeded + " succeeded and " + executed.get() + " executions for "
                            + n + " tasks on " + queue);
                }
            }
        }
        return secs;
    }
}
