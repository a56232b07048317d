package io.github.srjn45.rdq.testkit;

import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Worker;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
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
 * each. Warm-up rounds of the same shape (RDQ_BENCH_WARMUP tasks each, 20,000
 * by default; 0 for none) run on queues of their own until the JIT has
 * settled: until a round spent less than a tenth of its time compiling, or
 * after RDQ_BENCH_WARMUP_ROUNDS rounds (10 by default). On a small machine the
 * JIT compiles for several such rounds, and a round measured while it does
 * measures the compiler. Then the tables are analyzed, as Go's benchmark
 * does, and the measured round runs on the queue "bench" with new workers.
 * Connections are reused ({@link ReusingDataSource}), as Go's pool reuses
 * them, so the measured round runs on the warm-up's connections instead of
 * opening its own. Prints each warm-up round on stderr and, on stdout,
 * "tasks=N seconds=S tasks_per_sec=R cpu_us_per_task=C jit_ms=J" for the
 * measured round, from the first submit to the last finish written (the
 * workers stopped): C is this process's CPU time per task, J the time the JIT
 * spent compiling meanwhile.
 */
public final class BenchMain {
    private BenchMain() {}

    /** A round's figures. */
    private record Round(int tasks, double seconds, double cpuMicrosPerTask, long jitMillis) {
        /** The share of the round's time the JIT spent compiling (over all compiler threads). */
        double jitShare() {
            return jitMillis / (seconds * 1000);
        }

        @Override
        public String toString() {
            return String.format("tasks=%d seconds=%.3f tasks_per_sec=%.0f cpu_us_per_task=%.1f jit_ms=%d", tasks, seconds,
                    tasks / seconds, cpuMicrosPerTask, jitMillis);
        }
    }

    public static void main(String[] args) throws Exception {
        Env.logging();
        int n = Integer.parseInt(args.length > 0 ? args[0] : "20000");
        int warmup = Env.integer("RDQ_BENCH_WARMUP", 20_000);
        int warmupRounds = Env.integer("RDQ_BENCH_WARMUP_ROUNDS", 10);
        String schema = Env.get("RDQ_SCHEMA", "rdq");
        var ds = new ReusingDataSource(Env.dataSource());
        try {
            for (int i = 0; warmup > 0 && i < warmupRounds; i++) {
                Round r = round(ds, schema, "warmup" + i, warmup);
                System.err.println("warm-up " + (i + 1) + ": " + r);
                if (r.jitShare() < 0.1) {
                    break;
                }
            }
            analyze(ds, schema);
            System.out.println(round(ds, schema, "bench", n));
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

    /** Runs n no-op tasks through two new workers on queue. */
    private static Round round(DataSource ds, String schema, String queue, int n) throws Exception {
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        long cpu0 = os.getProcessCpuTime();
        long jit0 = jit.getTotalCompilationTime();
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
        return new Round(n, secs, (os.getProcessCpuTime() - cpu0) / 1e3 / n, jit.getTotalCompilationTime() - jit0);
    }
}
