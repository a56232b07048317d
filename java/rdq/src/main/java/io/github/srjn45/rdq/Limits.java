package io.github.srjn45.rdq;

import java.nio.charset.StandardCharsets;
import java.util.Map;

/** The limits every task obeys, the same as Go's (limits.go). */
public final class Limits {
    /** Longest queue or handler name, in bytes. */
    public static final int MAX_NAME_LENGTH = 128;
    /** Largest payload, in bytes. */
    public static final int MAX_PAYLOAD_BYTES = 1 << 20;
    /** Most headers per task. */
    public static final int MAX_HEADERS = 64;
    /** Longest header name, in UTF-8 bytes. */
    public static final int MAX_HEADER_KEY_LENGTH = 128;
    /** Longest header value, in UTF-8 bytes. */
    public static final int MAX_HEADER_VALUE_LENGTH = 4 << 10;
    /** Longest idempotency key, in UTF-8 bytes. */
    public static final int MAX_IDEMPOTENCY_KEY_LENGTH = 255;
    /** Longest content type, in UTF-8 bytes. */
    public static final int MAX_CONTENT_TYPE_LENGTH = 255;

    private Limits() {}

    static String forError(String s) {
        byte[] b = utf8(s);
        if (b.length <= 64) {
            return s;
        }
        return new String(b, 0, 64, StandardCharsets.UTF_8).replace("\uFFFD", "") + "…";
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Quotes s as Go's %q does for printable text. */
    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\t' -> sb.append("\\t");
                case '\r' -> sb.append("\\r");
                default -> {
                    if (c < 0x20 || c == 0x7f) {
                        sb.append(String.format("\\x%02x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"').toString();
    }

    /**
     * Checks a queue or handler name: 1 to 128 bytes of letters, digits and
     * {@code . _ - : /}, starting with a letter or digit.
     *
     * @param what "queue" or "handler", for the message
     * @throws InvalidInputException naming what was wrong
     */
    public static void validateName(String what, String name) {
        if (name == null || name.isEmpty()) {
            throw new InvalidInputException("rdq: invalid input: " + what + " name is empty");
        }
        byte[] b = utf8(name);
        if (b.length > MAX_NAME_LENGTH) {
            throw new InvalidInputException("rdq: invalid input: " + what + " name is " + b.length
                    + " bytes; the limit is " + MAX_NAME_LENGTH);
        }
        for (int i = 0; i < b.length; i++) {
            int c = b[i] & 0xFF;
            boolean alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            if (i == 0 && !alnum) {
                throw new InvalidInputException("rdq: invalid input: " + what + " name " + quote(forError(name))
                        + " must start with a letter or digit");
            }
            if (!alnum && c != '.' && c != '_' && c != '-' && c != ':' && c != '/') {
                String ch = c < 0x80 ? "'" + (char) c + "'" : "'\uFFFD'";
                throw new InvalidInputException("rdq: invalid input: " + what + " name " + quote(forError(name))
                        + " contains " + ch + "; use letters, digits and . _ - : /");
            }
        }
    }

    private static boolean storable(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == 0) {
                return false;
            }
            if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return false;
            }
        }
        return true;
    }

    /**
     * Checks the submitter-controlled fields of a task against the limits.
     *
     * @throws InvalidInputException naming the first field that is wrong
     */
    public static void validateTask(String queue, String handler, byte[] payload, String contentType,
            Map<String, String> headers, String idempotencyKey) {
        validateName("queue", queue);
        validateName("handler", handler);
        if (payload != null && payload.length > MAX_PAYLOAD_BYTES) {
            throw new InvalidInputException("rdq: invalid input: payload is " + payload.length
                    + " bytes; the limit is " + MAX_PAYLOAD_BYTES
                    + ": store large data elsewhere and submit a reference");
        }
        contentType = contentType == null ? "" : contentType;
        idempotencyKey = idempotencyKey == null ? "" : idempotencyKey;
        int ctLen = utf8(contentType).length;
        if (ctLen > MAX_CONTENT_TYPE_LENGTH) {
            throw new InvalidInputException("rdq: invalid input: content type is " + ctLen
                    + " bytes; the limit is " + MAX_CONTENT_TYPE_LENGTH);
        }
        int keyLen = utf8(idempotencyKey).length;
        if (keyLen > MAX_IDEMPOTENCY_KEY_LENGTH) {
            throw new InvalidInputException("rdq: invalid input: idempotency key is " + keyLen
                    + " bytes; the limit is " + MAX_IDEMPOTENCY_KEY_LENGTH);
        }
        if (!storable(idempotencyKey)) {
            throw new InvalidInputException("rdq: invalid input: idempotency key must be UTF-8 text without NUL bytes");
        }
        if (contentType.indexOf(0) >= 0) {
            throw new InvalidInputException("rdq: invalid input: content type contains a NUL byte");
        }
        if (headers == null) {
            return;
        }
        if (headers.size() > MAX_HEADERS) {
            throw new InvalidInputException("rdq: invalid input: " + headers.size() + " headers; the limit is "
                    + MAX_HEADERS);
        }
        for (Map.Entry<String, String> e : headers.entrySet()) {
            String k = e.getKey() == null ? "" : e.getKey();
            String v = e.getValue() == null ? "" : e.getValue();
            if (k.isEmpty() || utf8(k).length > MAX_HEADER_KEY_LENGTH || !storable(k)) {
                throw new InvalidInputException("rdq: invalid input: header name " + quote(forError(k))
                        + " must be 1 to " + MAX_HEADER_KEY_LENGTH + " bytes of UTF-8 text without NUL bytes");
            }
            if (utf8(v).length > MAX_HEADER_VALUE_LENGTH || !storable(v)) {
                throw new InvalidInputException("rdq: invalid input: header " + quote(forError(k))
                        + " value must be at most " + MAX_HEADER_VALUE_LENGTH
                        + " bytes of UTF-8 text without NUL bytes");
            }
        }
    }
}
