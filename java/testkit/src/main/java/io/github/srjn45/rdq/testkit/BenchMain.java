package io.github.srjn45.rdq.testkit;

import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Worker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java worker's end-to-end benchmark, shaped like Go's benchtest.EndToEnd:
 * submit N tasks in batches of 500 while two workers (concurrency 200 each)
 * claim them, run a no-op handler and finish them, an attempt row written for
 * each. Prints "tasks=N seconds=S tasks_per_sec=R" measured from the first
 * submit to the last finish written (the tasks all SUCCEEDED).
 */
public final class BenchMain {
    private BenchMain() {}

    public static void main(String[] args) throws Exception {
        Env.logging();
        int n = Integer.parseInt(args.length > 0 ? args[0] : "20000");
        String schema = Env.get("RDQ_SCHEMA", "rdq");
        var ds = Env.dataSource();
        RdqClient client = RdqClient.builder(ds).schema(schema).build();
        AtomicLong executed = new AtomicLong();
        CountDownLatch all = new CountDownLatch(1);
        List<Worker> workers = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            workers.add(Worker.builder(ds).schema(schema).id("bench-" + i)
                    .queue("bench", QueueConfig.builder().concurrency(200).build())
                    .pollInterval(Duration.ofMillis(50)).reclaimInterval(Worker.DISABLED).purgeInterval(Worker.DISABLED)
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
        List<NewTask> batch = new ArrayList<>(500);
        for (int i = 0; i < n; i++) {
            batch.add(NewTask.builder("bench", "noop").payload("{\"n\":1}").build());
            if (batch.size() == 500 || i == n - 1) {
                client.submitAll(batch);
                batch.clear();
            }
        }
        if (!all.await(10, TimeUnit.MINUTES)) {
            throw new IllegalStateException("only " + executed.get() + " of " + n + " tasks ran in 10 minutes");
        }
        for (Worker w : workers) {
            w.stop(Duration.ofSeconds(30)); // flushes the last finishes
        }
        double secs = (System.nanoTime() - start) / 1e9;
        System.out.printf("tasks=%d seconds=%.3f tasks_per_sec=%.0f%n", n, secs, n / secs);
    }
}
