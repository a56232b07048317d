package io.github.srjn45.rdq.examples.virtualthreads;

import io.github.srjn45.rdq.Handler;
import io.github.srjn45.rdq.Migrations;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Worker;
import io.github.srjn45.rdq.WorkerStats;
import io.github.srjn45.rdq.examples.quickstart.Quickstart;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/**
 * A worker whose handlers run on Java 21's virtual threads
 * ({@link Worker.Builder#handlerExecutor}): a queue of concurrency 1,000 whose
 * handlers block on I/O (here a sleep standing for a partner's HTTP API)
 * without 1,000 platform threads. The worker still runs at most the queue's
 * concurrency at once, and never shuts the executor down. Built and run on
 * Java 21 or newer only (this module's {@code java21} profile):
 *
 * <pre>
 * cd java &amp;&amp; JAVA_HOME=&lt;jdk 21+&gt; mvn -q -pl examples -am package -DskipTests
 * RDQ_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *   $JAVA_HOME/bin/java -cp "examples/target/java21/classes:..." \
 *   io.github.srjn45.rdq.examples.virtualthreads.VirtualThreadsWorker
 * </pre>
 */
public final class VirtualThreadsWorker {
    /** The queue of the example's tasks. */
    public static final String QUEUE = "partner-calls";
    /** The handler name of the example's tasks. */
    public static final String HANDLER = "call-partner";

    private VirtualThreadsWorker() {}

    public static void main(String[] args) throws Exception {
        String url = System.getenv().getOrDefault("RDQ_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test");
        String schema = System.getenv().getOrDefault("RDQ_SCHEMA", "rdq");
        DataSource ds = Quickstart.dataSource(url);
        Migrations.migrate(ds, schema);
        run(ds, schema, 5_000, 1_000, ctx -> Thread.sleep(200), System.out); // 200 ms "calls"
    }

    /**
     * Submits n tasks, runs them with up to concurrency handlers at once, each
     * on a virtual thread, and returns what the worker did once all n succeeded.
     */
    public static WorkerStats run(DataSource ds, String schema, int n, int concurrency, Handler handler, PrintStream out)
            throws InterruptedException {
        List<NewTask> tasks = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            tasks.add(NewTask.builder(QUEUE, HANDLER).payload("{\"call\":" + i + "}")
                    .contentType("application/json").build());
        }
        RdqClient.builder(ds).schema(schema).build().submitAll(tasks);
        long start = System.nanoTime();
        try (ExecutorService virtual = Executors.newVirtualThreadPerTaskExecutor()) {
            Worker worker = Worker.builder(ds).schema(schema)
                    .handlerExecutor(virtual)
                    .queue(QUEUE, QueueConfig.builder().concurrency(concurrency).build())
                    .handle(HANDLER, handler)
                    .build();
            worker.start();
            try {
                while (worker.stats().succeeded() < n) {
                    TimeUnit.MILLISECONDS.sleep(50);
                }
            } finally {
                worker.stop(Duration.ofSeconds(10));
            }
            WorkerStats stats = worker.stats();
            out.printf("%d tasks, up to %d at once on virtual threads, in %d ms: %s%n", n, concurrency,
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), stats);
            return stats;
        }
    }
}
