package io.github.srjn45.rdq.testkit;

import io.github.srjn45.rdq.DeadFilter;
import io.github.srjn45.rdq.RdqAdmin;
import io.github.srjn45.rdq.Task;
import io.github.srjn45.rdq.TaskFilter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;

/**
 * Runs one {@link RdqAdmin} operation on RDQ_SCHEMA for the cross-language
 * tests:
 * <ul>
 * <li>{@code pause|resume <queue> <actor> <reason>} prints whether the queue changed;
 * <li>{@code stats} prints one line per queue, "queue pending in_flight dead succeeded";
 * <li>{@code list <queue> <page size>} pages through the queue's dead tasks, printing one id a line;
 * <li>{@code count <queue> <message text>} prints how many dead tasks match;
 * <li>{@code redrive <queue> <message text> dry|<actor> <reason> <max> <delay ms> <spread ms>} redrives
 *     by filter (a dry run when the actor is "dry") and prints "dry_run matched redriven at_limit";
 * <li>{@code purge <queue> dry|<actor> <reason>} purges by filter and prints "dry_run matched purged";
 * <li>{@code cancel|retry-now <actor> <reason> <id>...} prints "id outcome" a line, in the order named;
 * <li>{@code by-key <queue> <key>} prints the id of the task holding the key, or "none";
 * <li>{@code edit <id> <payload> <actor> <reason>} replaces a dead task's payload, redrives it and prints the outcome;
 * <li>{@code pause-handler|resume-handler <queue> <handler> <actor> <reason>} prints whether the handler changed;
 * <li>{@code list-tasks (<state> <queue|-> <page size>)...} prints, per listing, the ids of the live tasks in
 *     that state (of every queue for "-"), a line each, in the order of the pages, then a line "--".
 * </ul>
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
            case "list" -> {
                DeadFilter f = DeadFilter.builder().queue(args[1]).build();
                Optional<RdqAdmin.Cursor> after = Optional.empty();
                do {
                    RdqAdmin.DeadPage p = admin.listDead(f, after, Integer.parseInt(args[2]));
                    for (Task t : p.tasks()) {
                        System.out.println(t.id());
                    }
                    after = p.next();
                } while (after.isPresent());
            }
            case "count" -> System.out.println(admin.countDead(
                    DeadFilter.builder().queue(args[1]).messageContains(args[2]).build()));
            case "redrive" -> {
                DeadFilter f = DeadFilter.builder().queue(args[1]).messageContains(args[2]).build();
                RdqAdmin.RedriveOptions.Builder o = args[3].equals("dry") ? RdqAdmin.RedriveOptions.dryRun()
                        : RdqAdmin.RedriveOptions.builder(args[3], args[4]);
                o.max(Long.parseLong(args[5])).delay(Duration.ofMillis(Long.parseLong(args[6])))
                        .spread(Duration.ofMillis(Long.parseLong(args[7])));
                RdqAdmin.RedriveResult r = admin.redriveDead(f, o.build());
                System.out.println(r.dryRun() + " " + r.matched() + " " + r.redriven() + " " + r.atLimit());
            }
            case "purge" -> {
                DeadFilter f = DeadFilter.builder().queue(args[1]).build();
                RdqAdmin.PurgeOptions.Builder o = args[2].equals("dry") ? RdqAdmin.PurgeOptions.dryRun()
                        : RdqAdmin.PurgeOptions.builder(args[2], args[3]);
                RdqAdmin.PurgeResult r = admin.purgeDead(f, o.build());
                System.out.println(r.dryRun() + " " + r.matched() + " " + r.purged());
            }
            case "cancel", "retry-now" -> {
                List<UUID> ids = new ArrayList<>();
                for (int i = 3; i < args.length; i++) {
                    ids.add(UUID.fromString(args[i]));
                }
                Map<UUID, RdqAdmin.LiveOutcome> r = args[0].equals("cancel") ? admin.cancel(ids, args[1], args[2])
                        : admin.retryNow(ids, args[1], args[2]);
                r.forEach((id, o) -> System.out.println(id + " " + o));
            }
            case "by-key" -> System.out.println(admin.taskByKey(args[1], args[2]).map(t -> t.id().toString())
                    .orElse("none"));
            case "edit" -> System.out.println(admin.editAndRedrive(UUID.fromString(args[1]),
                    args[2].getBytes(java.nio.charset.StandardCharsets.UTF_8), args[3], args[4]));
            case "pause-handler" -> System.out.println(admin.pauseHandler(args[1], args[2], args[3], args[4]));
            case "resume-handler" -> System.out.println(admin.resumeHandler(args[1], args[2], args[3], args[4]));
            case "list-tasks" -> {
                for (int i = 1; i + 2 < args.length; i += 3) {
                    TaskFilter f = args[i + 1].equals("-") ? TaskFilter.all() : TaskFilter.builder().queue(args[i + 1]).build();
                    RdqAdmin.TaskState state = RdqAdmin.TaskState.parse(args[i]);
                    Optional<RdqAdmin.TaskCursor> after = Optional.empty();
                    do {
                        RdqAdmin.TaskPage p = admin.listTasks(state, f, after, Integer.parseInt(args[i + 2]));
                        for (Task t : p.tasks()) {
                            System.out.println(t.id());
                        }
                        after = p.next();
                    } while (after.isPresent());
                    System.out.println("--");
                }
            }
            default -> throw new IllegalArgumentException("AdminMain: unknown operation " + args[0]
                    + "; want pause, resume, stats, list, count, redrive, purge, cancel, retry-now, by-key, edit, pause-handler, resume-handler or list-tasks");
        }
    }
}
