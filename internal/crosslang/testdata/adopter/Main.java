package com.example.adopter;

import io.github.srjn45.rdq.DeadFilter;
import io.github.srjn45.rdq.Migrations;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.PermanentException;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqAdmin;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Task;
import io.github.srjn45.rdq.Worker;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A service adopting rdq from Maven alone: it migrates its schema, submits a
 * charge, works it on a handler that declines until the cause is fixed,
 * finds the dead task and its group, fixes the cause, redrives the group and
 * sees the task succeed, the redrive audited. Prints one line per step.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(System.getenv("JDBC_URL"));
        String schema = System.getenv("RDQ_SCHEMA");

        System.out.println("migrated: version " + Migrations.migrate(ds, schema));

        RdqClient client = RdqClient.builder(ds).schema(schema).build();
        UUID id = client.submit(NewTask.builder("payments", "charge").payload("{\"order\":1}").build()).task().id();
        System.out.println("submitted: " + id);

        AtomicBoolean cardFixed = new AtomicBoolean();
        CountDownLatch charged = new CountDownLatch(1);
        Worker worker = Worker.builder(ds).schema(schema).id("adopter")
                .queue("payments", QueueConfig.builder().concurrency(2).build())
                .pollInterval(Duration.ofMillis(50))
                .handle("charge", ctx -> {
                    if (!cardFixed.get()) {
                        throw new PermanentException("card declined");
                    }
                    charged.countDown();
                })
                .build();
        worker.start();
        try {
            RdqAdmin admin = RdqAdmin.builder(ds).schema(schema).build();
            DeadFilter payments = DeadFilter.builder().queue("payments").build();
            List<Task> dead = List.of();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (dead.isEmpty() && System.nanoTime() < until) {
                dead = admin.listDead(payments, 10).tasks();
                if (dead.isEmpty()) {
                    Thread.sleep(50);
                }
            }
            if (dead.isEmpty()) {
                throw new IllegalStateException("the task did not reach the dead-letter queue in 60s");
            }
            System.out.println("dead: " + dead.get(0).id() + " " + dead.get(0).lastErrorMessage());
            for (RdqAdmin.DeadGroup g : admin.deadGroups(payments)) {
                System.out.println("group: " + g.message() + " x" + g.count());
            }

            cardFixed.set(true);
            RdqAdmin.RedriveResult r = admin.redriveDead(payments,
                    RdqAdmin.RedriveOptions.builder("alice", "card issuer fixed").all().build());
            System.out.println("redriven: " + r.redriven());
            if (!charged.await(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the redriven task did not run in 60s");
            }
            System.out.println("charged: " + id);
            for (RdqAdmin.AuditEntry e : admin.audit(RdqAdmin.AuditQuery.builder(10).action("redrive").build())) {
                System.out.println("audit: " + e.action() + " by " + e.actor() + " of " + e.count() + ": " + e.reason());
            }
        } finally {
            worker.stop(Duration.ofSeconds(30));
        }
    }
}
