package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The limits of Go's limits_test.go, case for case where they apply to Java. */
class LimitsTest {
    static void ok(String ct) {
        assertDoesNotThrow(() -> Limits.validateTask("q", "h", null, ct, Map.of(), ""), ct);
    }

    static void bad(String ct, String want) {
        InvalidInputException e = assertThrows(InvalidInputException.class,
                () -> Limits.validateTask("q", "h", null, ct, Map.of(), ""), ct);
        assertTrue(e.getMessage().contains(want), e.getMessage());
    }

    @Test
    void contentTypesAreMediaTypes() {
        ok("");
        ok("application/json");
        ok("text/" + "c".repeat(Limits.MAX_CONTENT_TYPE_LENGTH - 5));
        ok("text/plain; charset=\"utf-8\"");
        ok("text/plain; charset=utf-8;");
        ok("Application/JSON ; q=1");
        bad("c".repeat(Limits.MAX_CONTENT_TYPE_LENGTH + 1), "content type is 256 bytes; the limit is 255");
        bad("text/plain\0", "contains the control character U+0000");
        bad("text/plain\r\nX-Evil: 1", "contains the control character U+000D");
        bad("text/plain; a=\"b\nc\"", "control character U+000A");
        bad("json", "is not a media type");
        bad("text/plain; ;", "is not a media type");
        bad("text/plain; a=1; A=2", "is not a media type");
        bad("text/pl ain", "is not a media type");
    }

    @Test
    void namesAndHeaders() {
        assertDoesNotThrow(() -> Limits.validateName("queue", "billing/charges:v2.retry-1_x"));
        InvalidInputException e = assertThrows(InvalidInputException.class, () -> Limits.validateName("queue", "-x"));
        assertTrue(e.getMessage().contains("must start with a letter or digit"), e.getMessage());
        e = assertThrows(InvalidInputException.class,
                () -> Limits.validateTask("q", "h", null, "", Map.of("", "v"), ""));
        assertTrue(e.getMessage().contains("header name \"\" must be 1 to 128 bytes"), e.getMessage());
        e = assertThrows(InvalidInputException.class,
                () -> Limits.validateTask("q", "h", null, "", Map.of("k", "v\0"), ""));
        assertTrue(e.getMessage().contains("header \"k\" value must be at most 4096 bytes"), e.getMessage());
        e = assertThrows(InvalidInputException.class,
                () -> Limits.validateTask("q", "h", null, "", Map.of(), "k".repeat(256)));
        assertTrue(e.getMessage().contains("idempotency key is 256 bytes; the limit is 255"), e.getMessage());
    }
}
