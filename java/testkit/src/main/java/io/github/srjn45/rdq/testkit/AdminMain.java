package io.github.srjn45.rdq.testkit;

import io.github.srjn45.rdq.RdqAdmin;

/**
 * Runs one {@link RdqAdmin} operation on RDQ_SCHEMA for the cross-language
 * tests: {@code pause|resume <queue> <actor> <reason>} prints whether the
 * queue changed; {@code stats} prints one line per queue,
 * "queue pending in_flight dead succeeded".
 */
public final class AdminMain {
    private AdminMain() {}

    public static void main(String[] args) {
        Env.logging();
        RdqAdmin admin = RdqAdmin.builder(Env.dataSource()).schema(Env.get("RDQ_SCHEMA", "rdq")).build();
        switch (args[0]) {
            case "pause" -> System.out.println(admin.pauseQueue(args[1], args[2], args[3]));
            case "resume" -> System.out.println(admin.resumeQueue(args[1], args[2], args[3]));
            case "stats" -> {
                for (RdqAdmin.QueueStats s : admin.stats()) {
                    System.out.println(s.queue() + " " + s.pending() + " " + s.inFlight() + " " + s.dead() + " "
                            + s.succeeded());
                }
            }
            default -> throw new IllegalArgumentException("AdminMain: unknown operation " + args[0]
                    + "; want pause, resume or stats");
        }
    }
}
