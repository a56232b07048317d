package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The shared vectors under testdata/conformance, which the Go core writes and checks too. */
class ConformanceTest {
    private static JsonNode read(String name) throws IOException {
        return new ObjectMapper().readTree(Files.readAllBytes(TestDb.testdata().resolve("conformance").resolve(name)));
    }

    /**
     * The Java policy of a vector's Go policy: Go's zero fields are the Java
     * builder's unset settings, its Unlimited is unlimitedAttempts() and its
     * NoJitter (-1) is jitter(0).
     */
    static Policy policy(JsonNode p) {
        Policy.Builder b = Policy.builder();
        int maxAttempts = p.get("max_attempts").asInt();
        if (maxAttempts == -1) {
            b.unlimitedAttempts();
        } else if (maxAttempts != 0) {
            b.maxAttempts(maxAttempts);
        }
        long initial = p.get("initial_backoff_ns").asLong();
        if (initial != 0) {
            b.initialBackoff(Duration.ofNanos(initial));
        }
        double multiplier = p.get("multiplier").asDouble();
        if (multiplier != 0) {
            b.multiplier(multiplier);
        }
        long max = p.get("max_backoff_ns").asLong();
        if (max != 0) {
            b.maxBackoff(Duration.ofNanos(max));
        }
        double jitter = p.get("jitter").asDouble();
        if (jitter == -1) {
            b.jitter(0);
        } else if (jitter != 0) {
            b.jitter(jitter);
        }
        return b.build();
    }

    /** An error type of its own, as a Go error with an ErrorType method. */
    static final class TypedException extends RuntimeException implements ErrorTyped {
        private static final long serialVersionUID = 1L;
        private final String type;

        TypedException(String type, String message) {
            super(message);
            this.type = type;
        }

        @Override
        public String errorType() {
            return type;
        }
    }

    static Throwable error(JsonNode e) {
        String kind = e.get("kind").asText();
        String message = e.path("message").asText("");
        Duration after = Duration.ofNanos(e.path("retry_after_ns").asLong(0));
        RuntimeException base = kind.endsWith("typed") ? new TypedException(e.get("type").asText(), message)
                : new RuntimeException(message);
        return switch (kind) {
            case "none", "lease_expired" -> null;
            case "permanent", "permanent_typed" -> new PermanentException(base);
            case "retry_after" -> new RetryAfterException(after, base);
            case "permanent_retry_after" -> new PermanentException(new RetryAfterException(after, base));
            default -> base;
        };
    }

    @Test
    void backoffScheduleMatchesGo() throws IOException {
        int steps = 0;
        for (JsonNode c : read("backoff.json").get("cases")) {
            Policy p = policy(c.get("policy"));
            for (JsonNode s : c.get("steps")) {
                int n = s.get("attempt").asInt();
                double u = s.get("u").asDouble();
                String where = c.get("name").asText() + " attempt " + n + " u " + u;
                assertEquals(s.get("delay_ns").asLong(), p.delayNanos(n), where + ": delay");
                assertEquals(s.get("jittered_ns").asLong(), p.jitteredDelayNanos(n, u), where + ": jittered delay");
                assertEquals(s.get("exhausted").asBoolean(), p.exhausted(n), where + ": exhausted");
                steps++;
            }
        }
        assertTrue(steps > 50, "the backoff vectors hold " + steps + " steps");
    }

    @Test
    void classificationMatchesGo() throws IOException {
        int cases = 0;
        for (JsonNode c : read("classification.json").get("cases")) {
            Policy p = policy(c.get("policy"));
            int n = c.get("attempt").asInt();
            double u = c.get("u").asDouble();
            JsonNode e = c.get("error");
            JsonNode x = c.get("expect");
            String where = c.get("name").asText();
            Decision d;
            Failure f;
            if (e.get("kind").asText().equals("lease_expired")) {
                d = p.decideLeaseExpired(n, u);
                f = Failures.leaseExpired();
            } else {
                Throwable err = error(e);
                d = p.decide(n, err, u);
                f = Failures.describe(err);
            }
            assertEquals(x.get("outcome").asText(), d.outcome().name(), where + ": outcome");
            assertEquals(x.get("dead").asBoolean(), d.dead(), where + ": dead");
            assertEquals(x.get("retry_in_ns").asLong(), d.retryIn().toNanos(), where + ": retry in");
            if (x.has("error_type")) {
                assertEquals(x.get("error_type").asText(), f.type(), where + ": error type");
                assertEquals(x.get("fingerprint").asText(), f.fingerprint(), where + ": fingerprint");
            }
            cases++;
        }
        assertTrue(cases >= 15, "the classification vectors hold " + cases + " cases");
    }

    @Test
    void fingerprintsMatchGosGoldenTable() throws IOException {
        JsonNode golden = new ObjectMapper().readTree(Files.readAllBytes(TestDb.testdata().resolve("fingerprints.json")));
        java.util.Map<String, String> byGroup = new java.util.HashMap<>();
        java.util.Map<String, String> groupOf = new java.util.HashMap<>();
        int cases = 0;
        for (JsonNode c : golden.get("cases")) {
            String type = c.get("error_type").asText();
            String msg = c.get("message").asText();
            String group = c.get("group").asText();
            assertEquals(c.get("normalized").asText(), Failures.normalizeMessage(msg), "normalize " + msg);
            String fp = Failures.fingerprint(type, msg);
            assertEquals(c.get("fingerprint").asText(), fp, "fingerprint " + msg);
            String prev = byGroup.putIfAbsent(group, fp);
            assertTrue(prev == null || prev.equals(fp), "group " + group + " shares a fingerprint");
            String other = groupOf.putIfAbsent(fp, group);
            assertTrue(other == null || other.equals(group), "groups " + other + " and " + group + " differ");
            cases++;
        }
        assertTrue(cases >= 50, "the golden table holds " + cases + " cases");
    }

    @Test
    void aPolicyCanFingerprintItsOwnFailures() {
        Policy p = Policy.builder().fingerprint((type, msg) -> msg.startsWith("tenant") ? "tenant-failure" : null).build();
        Failure a = p.describe(new RuntimeException("tenant 7 over quota"));
        Failure b = p.describe(new IllegalStateException("tenant 9 suspended"));
        assertEquals(a.fingerprint(), b.fingerprint());
        assertEquals(Failures.hashFingerprint("tenant-failure"), a.fingerprint());
        Failure other = p.describe(new RuntimeException("disk full"));
        assertEquals(Failures.fingerprint("java.lang.RuntimeException", "disk full"), other.fingerprint());
        Failure thrown = Policy.builder().fingerprint((t, m) -> {
            throw new IllegalStateException("bug in the hook");
        }).build().describe(new RuntimeException("x 1"));
        assertEquals(Failures.fingerprint("java.lang.RuntimeException", "x 1"), thrown.fingerprint());
    }

    @Test
    void errorTypeIsTheClassNameUnlessTheExceptionSaysOtherwise() {
        assertEquals("java.lang.IllegalStateException", Failures.errorTypeOf(new IllegalStateException("x")));
        assertEquals("java.lang.IllegalStateException",
                Failures.errorTypeOf(new PermanentException(new IllegalStateException("x"))));
        assertEquals("java.net.ConnectException", Failures.errorTypeOf(
                new java.util.concurrent.ExecutionException(new RetryAfterException(Duration.ZERO,
                        new java.net.ConnectException("refused")))));
        assertEquals("io.github.srjn45.rdq.PermanentException", Failures.errorTypeOf(new PermanentException("bad")));
        assertEquals("quota", Failures.errorTypeOf(new RuntimeException("wrapped", new TypedException("quota", "q"))));
        assertEquals("timeout", Failures.errorTypeOf(new HandlerTimeoutException(Duration.ofSeconds(30))));
        assertEquals("handler timed out after 30s", new HandlerTimeoutException(Duration.ofSeconds(30)).getMessage());
        assertEquals("handler timed out after 1m0s", new HandlerTimeoutException(Duration.ofMinutes(1)).getMessage());
        assertEquals("handler timed out after 1.5s", new HandlerTimeoutException(Duration.ofMillis(1500)).getMessage());
        assertEquals("handler timed out after 250ms", new HandlerTimeoutException(Duration.ofMillis(250)).getMessage());
        assertTrue(Failures.isPermanent(new RuntimeException(new PermanentException("p"))));
        assertFalse(Failures.isPermanent(new RuntimeException("r")));
    }

    @Test
    void describeCapsAndCleansText() {
        String big = "é".repeat(5000); // 10,000 bytes
        Failure f = Failures.describe(new RuntimeException(big + "\0\uD800"));
        byte[] b = f.message().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(b.length <= Failures.MAX_MESSAGE_BYTES, "message is " + b.length + " bytes");
        assertTrue(f.message().endsWith("bytes]"), f.message().substring(f.message().length() - 30));
        Failure g = Failures.describe(new RuntimeException("a\0b\uD800c"));
        assertEquals("a\\x00b\uFFFDc", g.message());
        assertEquals("…[truncated 5 bytes]", Failures.truncate("hello", 3));
        assertEquals("hello", Failures.truncate("hello", 5));
    }
}
