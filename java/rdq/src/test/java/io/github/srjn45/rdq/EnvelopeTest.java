package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The envelope golden files Go wrote under envelope/testdata. */
class EnvelopeTest {
    private static Path dir() {
        return TestDb.repoRoot().resolve("envelope").resolve("testdata");
    }

    /** Indents compact JSON as Go's json.Indent(dst, src, "", "  ") does. */
    static String goIndent(String compact) {
        StringBuilder sb = new StringBuilder();
        int depth = 0;
        boolean inString = false;
        for (int i = 0; i < compact.length(); i++) {
            char c = compact.charAt(i);
            if (inString) {
                sb.append(c);
                if (c == '\\') {
                    sb.append(compact.charAt(++i));
                } else if (c == '"') {
                    inString = false;
                }
                continue;
            }
            switch (c) {
                case '"' -> {
                    inString = true;
                    sb.append(c);
                }
                case '{', '[' -> {
                    char close = c == '{' ? '}' : ']';
                    if (i + 1 < compact.length() && compact.charAt(i + 1) == close) {
                        sb.append(c).append(close);
                        i++;
                    } else {
                        depth++;
                        sb.append(c).append('\n').append("  ".repeat(depth));
                    }
                }
                case '}', ']' -> {
                    depth--;
                    sb.append('\n').append("  ".repeat(depth)).append(c);
                }
                case ',' -> sb.append(",\n").append("  ".repeat(depth));
                case ':' -> sb.append(": ");
                default -> sb.append(c);
            }
        }
        return sb.toString();
    }

    private static List<Path> files(String prefix) throws IOException {
        try (Stream<Path> s = Files.list(dir())) {
            return s.filter(p -> p.getFileName().toString().startsWith(prefix)).sorted().toList();
        }
    }

    @Test
    void validGoldenFilesRoundTripByteForByte() throws IOException {
        List<Path> valid = Stream.of("minimal.json", "submission.json", "task_pending.json", "task_dead.json",
                "task_full.json").map(dir()::resolve).toList();
        for (Path p : valid) {
            byte[] golden = Files.readAllBytes(p);
            Envelope e = Envelope.decode(golden);
            String indented = goIndent(new String(e.encode(), StandardCharsets.UTF_8)) + "\n";
            assertEquals(new String(golden, StandardCharsets.UTF_8), indented, p.getFileName() + " re-encoded");
            // The compact form decodes to the same envelope.
            Envelope again = Envelope.decode(e.encode());
            assertArrayEquals(e.encode(), again.encode(), p.getFileName() + " compact round trip");
        }
    }

    @Test
    void goldenValuesDecodeAsGoDoes() throws IOException {
        Envelope e = Envelope.decode(Files.readAllBytes(dir().resolve("task_full.json")));
        Task t = e.task();
        assertEquals("billing/charges", t.queue());
        assertEquals("charge.card:v2", t.handler());
        assertArrayEquals(new byte[] {0x00, 0x01, (byte) 0xfe, (byte) 0xff, 'r', 'd', 'q', (byte) 0x80}, t.payload());
        assertEquals(Status.IN_FLIGHT, t.status());
        assertEquals(4, t.leaseToken());
        assertEquals(1, t.life());
        assertEquals("<café & crème>", t.headers().get("x-note"));
        assertEquals(123_456_789, t.updatedAt().getNano());
        assertEquals(4, e.history().size());
        assertEquals(Outcome.LEASE_EXPIRED, e.history().get(3).outcome());
        assertEquals(Failures.leaseExpired().fingerprint(), t.lastErrorFingerprint());
        Envelope s = Envelope.decode(Files.readAllBytes(dir().resolve("submission.json")));
        assertEquals(30_000, s.delay().toMillis());
        assertEquals("signup-42", s.task().idempotencyKey());
        assertEquals(OptionalInt.of(5), s.task().maxAttempts());
        assertEquals(Optional.of(Duration.ofSeconds(90)), s.task().timeout());
        assertEquals(OptionalInt.of(Policy.UNLIMITED), t.maxAttempts());
        assertEquals(Optional.of(Duration.ofMillis(2500)), t.timeout());
        assertEquals(2, t.snoozes());
    }

    @Test
    void everyInvalidFileIsRejectedWithGosError() throws IOException {
        JsonNode expected = new ObjectMapper().readTree(Files.readAllBytes(dir().resolve("expected_errors.json")));
        List<Path> invalid = files("invalid_");
        assertEquals(expected.size(), invalid.size(), "one expected error per invalid file");
        for (Path p : invalid) {
            String name = p.getFileName().toString();
            JsonNode want = expected.get(name);
            assertTrue(want != null, name + " has no expected error");
            InvalidInputException ex = assertThrows(InvalidInputException.class,
                    () -> Envelope.decode(Files.readAllBytes(p)), name);
            assertTrue(ex.getMessage().contains(want.asText()),
                    name + ": error \"" + ex.getMessage() + "\" does not contain \"" + want.asText() + "\"");
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = expected.fields(); it.hasNext();) {
            String name = it.next().getKey();
            assertTrue(Files.exists(dir().resolve(name)), name + " listed but missing");
        }
    }

    @Test
    void generatedLimitsAreEnforced() {
        String big = "{\"version\":1,\"queue\":\"q\",\"handler\":\"h\",\"payload\":\""
                + java.util.Base64.getEncoder().encodeToString(new byte[Limits.MAX_PAYLOAD_BYTES + 1]) + "\"}";
        InvalidInputException ex = assertThrows(InvalidInputException.class,
                () -> Envelope.decode(big.getBytes(StandardCharsets.UTF_8)));
        assertTrue(ex.getMessage().contains("payload is 1048577 bytes; the limit is 1048576"), ex.getMessage());
        byte[] huge = new byte[Envelope.MAX_ENVELOPE_BYTES + 1];
        ex = assertThrows(InvalidInputException.class, () -> Envelope.decode(huge));
        assertTrue(ex.getMessage().contains("the limit is 16777216"), ex.getMessage());
        ex = assertThrows(InvalidInputException.class,
                () -> Envelope.decode(new byte[] {'{', '"', (byte) 0xff, '"', ':', '1', '}'}));
        assertTrue(ex.getMessage().contains("not valid UTF-8"), ex.getMessage());
    }
}
