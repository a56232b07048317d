package io.github.srjn45.rdq.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.WorkerStats;
import io.github.srjn45.rdq.examples.virtualthreads.VirtualThreadsWorker;
import io.github.srjn45.rdq.testkit.Schemas;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The virtual-threads example, on Java 21 or newer, against the real database. */
class VirtualThreadsWorkerTest {
    DataSource ds;
    String schema;

    @BeforeEach
    void setUp() throws Exception {
        ds = Schemas.testDataSource();
        schema = Schemas.create(ds);
    }

    @AfterEach
    void tearDown() throws Exception {
        Schemas.drop(ds, schema);
    }

    @Test
    void handlersBlockOnVirtualThreadsUpToTheQueuesConcurrency() throws Exception {
        int n = 600;
        int concurrency = 300;
        Set<Long> threadIds = ConcurrentHashMap.newKeySet();
        AtomicInteger running = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicInteger notVirtual = new AtomicInteger();
        // The first 300 handlers block until all 300 run at once: only possible
        // when the worker runs the queue's whole concurrency in parallel.
        CountDownLatch allAtOnce = new CountDownLatch(concurrency);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        WorkerStats stats = VirtualThreadsWorker.run(ds, schema, n, concurrency, ctx -> {
            if (!Thread.currentThread().isVirtual()) {
                notVirtual.incrementAndGet();
            }
            threadIds.add(Thread.currentThread().threadId());
            int now = running.incrementAndGet();
            most.accumulateAndGet(now, Math::max);
            try {
                allAtOnce.countDown();
                if (!allAtOnce.await(60, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("fewer than " + concurrency + " handlers ran at once");
                }
            } finally {
                running.decrementAndGet();
            }
        }, new PrintStream(out, true, StandardCharsets.UTF_8));
        assertEquals(n, stats.succeeded());
        assertEquals(0, stats.retried(), "no handler waited in vain for the others");
        assertEquals(0, notVirtual.get(), "every handler on a virtual thread");
        assertEquals(concurrency, most.get(), "the queue's concurrency at once, never more");
        assertTrue(threadIds.size() >= concurrency, threadIds.size() + " virtual threads");
        assertTrue(out.toString(StandardCharsets.UTF_8).startsWith(n + " tasks, up to " + concurrency + " at once"), out.toString());
    }
}
