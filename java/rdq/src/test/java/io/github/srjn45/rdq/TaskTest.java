package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class TaskTest {
    private static Task task(OptionalInt maxAttempts, Optional<Duration> timeout) {
        return new Task(UUID.randomUUID(), "q", "h", new byte[0], "", Map.of(), "", Status.PENDING, 0, 0,
                Instant.now(), 0, null, "", Instant.now(), Instant.now(), null, "", "", "", maxAttempts, timeout, 0);
    }

    @Test
    void ownBudgetAndTimeoutOverrideTheQueuesOnlyWhenPresent() {
        Policy p = Policy.builder().maxAttempts(5).taskMaxAttempts(10).taskMaxTimeout(Duration.ofMinutes(1)).build();
        Optional<Duration> queue = Optional.of(Duration.ofSeconds(30));
        Task plain = task(OptionalInt.empty(), Optional.empty());
        assertEquals(OptionalInt.of(5), p.forTask(plain).maxAttempts());
        assertEquals(queue, p.taskTimeout(plain, queue));

        Task own = task(OptionalInt.of(3), Optional.of(Duration.ofSeconds(2)));
        assertEquals(OptionalInt.of(3), p.forTask(own).maxAttempts());
        assertEquals(Optional.of(Duration.ofSeconds(2)), p.taskTimeout(own, queue));

        Task over = task(OptionalInt.of(50), Optional.of(Duration.ofHours(1)));
        assertEquals(OptionalInt.of(10), p.forTask(over).maxAttempts(), "lowered to taskMaxAttempts");
        assertEquals(Optional.of(Duration.ofMinutes(1)), p.taskTimeout(over, queue), "lowered to taskMaxTimeout");
    }

    @Test
    void noValueStandsForTheQueuesSetting() {
        for (int n : new int[] {0, -2}) {
            InvalidInputException e = assertThrows(InvalidInputException.class,
                    () -> task(OptionalInt.of(n), Optional.empty()));
            assertTrue(e.getMessage().contains("OptionalInt.empty()"), e.getMessage());
        }
        for (Duration d : new Duration[] {Duration.ZERO, Duration.ofSeconds(-1)}) {
            InvalidInputException e = assertThrows(InvalidInputException.class,
                    () -> task(OptionalInt.empty(), Optional.of(d)));
            assertTrue(e.getMessage().contains("Optional.empty()"), e.getMessage());
        }
        assertEquals(OptionalInt.of(Policy.UNLIMITED), task(OptionalInt.of(Policy.UNLIMITED), Optional.empty()).maxAttempts());
        assertThrows(NullPointerException.class, () -> task(null, Optional.empty()));
        assertThrows(NullPointerException.class, () -> task(OptionalInt.empty(), null));
    }
}
