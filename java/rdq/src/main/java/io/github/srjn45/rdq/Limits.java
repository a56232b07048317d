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
        validateContentType(contentType);
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

    private static boolean isTokenChar(char c) {
        return c > ' ' && c < 0x7f && "()<>@,;:\\\"/[]?=".indexOf(c) < 0;
    }

    private static int consumeToken(String s, int i) {
        while (i < s.length() && isTokenChar(s.charAt(i))) {
            i++;
        }
        return i;
    }

    private static boolean isSpace(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x0B || c == '\f';
    }

    /**
     * Accepts an empty content type or a media type ("type/subtype" with
     * optional parameters, as Go's mime.ParseMediaType reads it) without control
     * characters, as Go's Task.Validate does.
     */
    static void validateContentType(String ct) {
        if (ct.isEmpty()) {
            return;
        }
        for (int i = 0; i < ct.length(); i++) {
            char c = ct.charAt(i);
            if ((c < ' ' && c != '\t') || c == 0x7f) {
                throw new InvalidInputException("rdq: invalid input: content type " + quote(forError(ct))
                        + " contains the control character " + String.format("U+%04X", (int) c)
                        + "; use a media type such as application/json");
            }
        }
        if (!isMediaType(ct)) {
            throw new InvalidInputException("rdq: invalid input: content type " + quote(forError(ct))
                    + " is not a media type such as application/json or text/plain; charset=utf-8");
        }
    }

    private static boolean isMediaType(String ct) {
        int semi = ct.indexOf(';');
        String base = (semi < 0 ? ct : ct.substring(0, semi)).strip();
        int t = consumeToken(base, 0);
        if (t == 0 || t >= base.length() || base.charAt(t) != '/') {
            return false;
        }
        int st = consumeToken(base, t + 1);
        if (st == t + 1 || st != base.length()) {
            return false;
        }
        if (semi < 0) {
            return true;
        }
        String v = ct.substring(semi);
        java.util.Set<String> seen = new java.util.HashSet<>();
        int i = 0;
        while (true) {
            while (i < v.length() && isSpace(v.charAt(i))) {
                i++;
            }
            if (i >= v.length()) {
                return true;
            }
            if (v.charAt(i) != ';') {
                return false;
            }
            int j = i + 1;
            while (j < v.length() && isSpace(v.charAt(j))) {
                j++;
            }
            int k = consumeToken(v, j);
            if (k == j) {
                // A trailing ";" (with white space) is allowed, as Go allows it.
                return v.substring(i).strip().equals(";");
            }
            String key = v.substring(j, k).toLowerCase(java.util.Locale.ROOT);
            while (k < v.length() && isSpace(v.charAt(k))) {
                k++;
            }
            if (k >= v.length() || v.charAt(k) != '=') {
                return v.substring(i).strip().equals(";");
            }
            k++;
            while (k < v.length() && isSpace(v.charAt(k))) {
                k++;
            }
            int end;
            if (k < v.length() && v.charAt(k) == '"') {
                end = -1;
                for (int q = k + 1; q < v.length(); q++) {
                    char c = v.charAt(q);
                    if (c == '\\' && q + 1 < v.length()) {
                        q++;
                    } else if (c == '"') {
                        end = q + 1;
                        break;
                    }
                }
                if (end < 0) {
                    return false;
                }
            } else {
                end = consumeToken(v, k);
                if (end == k) {
                    return false;
                }
            }
            if (!seen.add(key)) {
                return false;
            }
            i = end;
        }
    }
}
