package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.OptionalInt;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

class PolicyBuilderTest {
    @Test
    void unsetSettingsAreTheDefaults() {
        Policy p = Policy.builder().build();
        assertEquals(OptionalInt.of(Policy.DEFAULT_MAX_ATTEMPTS), p.maxAttempts());
        assertEquals(Policy.DEFAULT_INITIAL_BACKOFF, p.initialBackoff());
        assertEquals(Policy.DEFAULT_MULTIPLIER, p.multiplier());
        assertEquals(Policy.DEFAULT_MAX_BACKOFF, p.maxBackoff());
        assertEquals(Policy.DEFAULT_JITTER, p.jitter());
        assertEquals(OptionalInt.of(Policy.DEFAULT_TASK_MAX_ATTEMPTS), p.taskMaxAttempts());
    }

    @Test
    void zeroJitterIsNoJitter() {
        Policy p = Policy.builder().jitter(0).initialBackoff(Duration.ofSeconds(2)).build();
        assertEquals(0, p.jitter());
        for (double u : new double[] {0, 0.5, 0.999}) {
            assertEquals(Duration.ofSeconds(2), p.jitteredDelay(1, u), "u=" + u);
        }
        Policy full = Policy.builder().jitter(1).initialBackoff(Duration.ofSeconds(2)).build();
        assertEquals(Duration.ofSeconds(1), full.jitteredDelay(1, 0.5));
    }

    @Test
    void unlimitedIsAMethodNotAValue() {
        Policy p = Policy.builder().unlimitedAttempts().anyTaskMaxAttempts().build();
        assertEquals(OptionalInt.empty(), p.maxAttempts());
        assertEquals(OptionalInt.empty(), p.taskMaxAttempts());
        assertTrue(!p.exhausted(1_000_000));
        InvalidInputException e = assertThrows(InvalidInputException.class, () -> Policy.builder().maxAttempts(Policy.UNLIMITED));
        assertTrue(e.getMessage().contains("Policy.Builder.maxAttempts(-1)") && e.getMessage().contains("unlimitedAttempts()"),
                e.getMessage());
        e = assertThrows(InvalidInputException.class, () -> Policy.builder().maxAttempts(0));
        assertTrue(e.getMessage().contains("leave it unset for 20"), e.getMessage());
    }

    @Test
    void settersRefuseWhatTheyCannotUseNamingThemselves() {
        for (double j : new double[] {-1, 1.5, Double.NaN}) {
            InvalidInputException e = assertThrows(InvalidInputException.class, () -> Policy.builder().jitter(j));
            assertTrue(e.getMessage().contains("Policy.Builder.jitter(") && e.getMessage().contains("0 for no jitter"),
                    e.getMessage());
        }
        for (double m : new double[] {0, 0.99, Double.NaN, Double.POSITIVE_INFINITY}) {
            InvalidInputException e = assertThrows(InvalidInputException.class, () -> Policy.builder().multiplier(m));
            assertTrue(e.getMessage().contains("Policy.Builder.multiplier("), e.getMessage());
        }
        List<Function<Duration, Policy.Builder>> setters = List.of(Policy.builder()::initialBackoff,
                Policy.builder()::maxBackoff, Policy.builder()::taskMaxTimeout);
        for (Function<Duration, Policy.Builder> set : setters) {
            InvalidInputException e = assertThrows(InvalidInputException.class, () -> set.apply(Duration.ZERO));
            assertTrue(e.getMessage().contains("Policy.Builder.") && e.getMessage().contains("(0s) is not positive"),
                    e.getMessage());
            NullPointerException n = assertThrows(NullPointerException.class, () -> set.apply(null));
            assertTrue(n.getMessage().startsWith("Policy.Builder."), n.getMessage());
        }
        NullPointerException n = assertThrows(NullPointerException.class, () -> Policy.builder().classify(null));
        assertTrue(n.getMessage().startsWith("Policy.Builder.classify"), n.getMessage());
    }
}
