package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class ListTasksTest extends DbTestBase {
    RdqAdmin admin() {
        return RdqAdmin.builder(ds).schema(schema).build();
    }

    UUID submit(String queue, String handler, Duration delay) {
        return client().submit(NewTask.builder(queue, handler).delay(delay).build()).task().id();
    }

    /** Claims every due task of queue and finishes each with status, a failure when retried. */
    List<UUID> claimAndFinish(String queue, Status status) throws Exception {
        try (Connection c = ds.getConnection()) {
            List<Task> claimed = store.claim(c, queue, 100, 3_600_000_000L, "w", new String[] {"h", "g"});
            if (status == null) {
                return claimed.stream().map(Task::id).toList();
            }
            List<PgStore.Completion> comps = new ArrayList<>();
            for (Task t : claimed) {
                Failure f = status == Status.PENDING
                        ? new Failure("java.net.ConnectException", "connect to 10.0.0.7 refused", "",
                                Failures.fingerprint("java.net.ConnectException", "connect to 10.0.0.7 refused"))
                        : null;
                comps.add(new PgStore.Completion(new PgStore.Lease(t.id(), t.leaseToken()), status,
                        status == Status.PENDING ? 3_600_000_000L : 0L,
                        status == Status.PENDING ? Outcome.RETRYABLE_FAILURE : Outcome.SUCCESS, f, "w", 1000L));
            }
            store.finish(c, comps);
            return claimed.stream().map(Task::id).toList();
        }
    }

    /** Every task of state matching f, page after page of size. */
    List<Task> all(RdqAdmin.TaskState state, TaskFilter f, int size) {
        List<Task> out = new ArrayList<>();
        Optional<RdqAdmin.TaskCursor> after = Optional.empty();
        do {
            RdqAdmin.TaskPage p = admin().listTasks(state, f, after, size);
            assertTrue(p.tasks().size() <= size);
            out.addAll(p.tasks());
            after = p.next();
        } while (after.isPresent());
        return out;
    }

    static List<UUID> ids(List<Task> ts) {
        return ts.stream().map(Task::id).toList();
    }

    @Test
    void eachStateIsListedInItsOrderPageAfterPageHeldTasksIncluded() throws Exception {
        List<UUID> pending = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            pending.add(submit("a", i % 2 == 0 ? "h" : "g", Duration.ofMinutes(60 - i)));
        }
        pending.add(submit("b", "h", Duration.ofMinutes(30)));
        submit("r", "h", Duration.ZERO);
        submit("r", "h", Duration.ZERO);
        List<UUID> retrying = claimAndFinish("r", Status.PENDING);
        submit("s", "h", Duration.ZERO);
        submit("s", "h", Duration.ZERO);
        submit("s", "h", Duration.ZERO);
        List<UUID> succeeded = claimAndFinish("s", Status.SUCCEEDED);
        submit("f", "h", Duration.ZERO);
        submit("f", "h", Duration.ZERO);
        List<UUID> inFlight = claimAndFinish("f", null);
        assertTrue(admin().pauseHandler("a", "g", "alice", "held tasks are listed too"));

        Comparator<Task> due = Comparator.comparing(Task::nextAttemptAt).thenComparing(Task::id);
        List<Task> expected = new ArrayList<>();
        for (UUID id : pending) {
            expected.add(task(id));
        }
        expected.sort(due);
        for (int size : new int[] {1, 2, 100}) {
            assertEquals(ids(expected), ids(all(RdqAdmin.TaskState.PENDING, TaskFilter.all(), size)),
                    "every queue's pending tasks, soonest due first, pages of " + size);
        }
        List<Task> inA = expected.stream().filter(t -> t.queue().equals("a")).toList();
        assertEquals(ids(inA), ids(all(RdqAdmin.TaskState.PENDING, TaskFilter.builder().queue("a").build(), 2)),
                "one queue's, held or not");
        assertEquals(2, all(RdqAdmin.TaskState.PENDING, TaskFilter.builder().queue("a").handler("g").build(), 1).size(),
                "the paused handler's tasks, held");

        List<Task> r = all(RdqAdmin.TaskState.RETRYING, TaskFilter.all(), 1);
        assertEquals(retrying.stream().sorted().toList(), ids(r).stream().sorted().toList());
        assertTrue(r.stream().allMatch(t -> t.attempts() == 1));
        assertEquals(ids(r), ids(all(RdqAdmin.TaskState.RETRYING,
                TaskFilter.builder().messageContains("10.0.0.7 REFUSED").errorType("java.net.ConnectException").build(), 5)));
        assertEquals(List.of(), all(RdqAdmin.TaskState.RETRYING, TaskFilter.builder().messageContains("timeout").build(), 5));

        List<Task> f = all(RdqAdmin.TaskState.IN_FLIGHT, TaskFilter.all(), 1);
        assertEquals(inFlight.stream().sorted().toList(), ids(f).stream().sorted().toList());
        List<Task> byExpiry = new ArrayList<>(f);
        byExpiry.sort(Comparator.comparing(Task::leaseExpiresAt).thenComparing(Task::id));
        assertEquals(ids(byExpiry), ids(f), "the lease expiring soonest first");

        List<Task> s = all(RdqAdmin.TaskState.SUCCEEDED, TaskFilter.all(), 2);
        assertEquals(succeeded.stream().sorted().toList(), ids(s).stream().sorted().toList());
        List<Task> newest = new ArrayList<>(s);
        newest.sort(Comparator.comparing(Task::finishedAt).thenComparing(Task::id).reversed());
        assertEquals(ids(newest), ids(s), "the most recently finished first");
        assertEquals(ids(s).subList(0, 1), ids(all(RdqAdmin.TaskState.SUCCEEDED,
                TaskFilter.builder().ids(List.of(s.get(0).id())).build(), 1)));
    }

    @Test
    void badInputIsRefusedSayingWhatToDo() {
        InvalidInputException e = assertThrows(InvalidInputException.class,
                () -> admin().listTasks(RdqAdmin.TaskState.PENDING, TaskFilter.all(), 0));
        assertTrue(e.getMessage().contains("RdqAdmin.listTasks: limit 0 is not positive"), e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> RdqAdmin.TaskState.parse("waiting"));
        assertTrue(e.getMessage().contains("want pending, retrying, in_flight or succeeded"), e.getMessage());
        assertEquals(RdqAdmin.TaskState.IN_FLIGHT, RdqAdmin.TaskState.parse("in_flight"));
        e = assertThrows(InvalidInputException.class, () -> TaskFilter.builder().messageContains(""));
        assertTrue(e.getMessage().startsWith("rdq: invalid input: TaskFilter: the message text is empty"), e.getMessage());
        assertThrows(NullPointerException.class, () -> admin().listTasks(null, TaskFilter.all(), 1));
    }
}
