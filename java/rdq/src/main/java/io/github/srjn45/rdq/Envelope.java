package io.github.srjn45.rdq;

import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The language-neutral, versioned wire shape of a task (version 1), the same
 * document Go's {@code envelope.Envelope} reads and writes; the format is documented
 * there and in {@code envelope/testdata/README.md}. Java decodes every golden
 * file Go wrote and re-encodes it byte for byte, and rejects every invalid one
 * with an {@link InvalidInputException} saying what was wrong.
 *
 * @param task    the task: its submitter-controlled fields and its state
 * @param history its attempt history, oldest first; empty when the document carries none
 * @param delay   postpones the first attempt of a submission; travels as whole milliseconds
 */
public record Envelope(Task task, List<Attempt> history, Duration delay) {
    /** The only envelope version this SDK reads and writes. */
    public static final int VERSION = 1;
    /** Largest document accepted or produced, in bytes. */
    public static final int MAX_ENVELOPE_BYTES = 16 << 20;

    private static final long MAX_WIRE_COUNT = Integer.MAX_VALUE;
    private static final long MAX_WIRE_TOKEN = (1L << 53) - 1;
    private static final long MAX_DELAY_MS = Long.MAX_VALUE / 1_000_000L;

    private static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

    /** Normalizes: history and delay never null. */
    public Envelope {
        history = history == null ? List.of() : List.copyOf(history);
        delay = delay == null ? Duration.ZERO : delay;
    }

    private static InvalidInputException invalid(String msg) {
        return new InvalidInputException("rdq: invalid input: " + msg);
    }

    // --- Validation ---------------------------------------------------------

    /**
     * Checks everything the wire format requires, the task limits included.
     *
     * @throws InvalidInputException for the first problem found
     */
    public void validate() {
        Task t = task;
        Limits.validateTask(t.queue(), t.handler(), t.payload(), t.contentType(), t.headers(), t.idempotencyKey());
        checkCount("attempts", t.attempts(), 0);
        checkCount("life", t.life(), 0);
        if (t.maxAttempts().isPresent()) {
            checkCount("max_attempts", t.maxAttempts().getAsInt(), Policy.UNLIMITED);
        }
        checkCount("snoozes", t.snoozes(), 0);
        checkToken("lease_token", t.leaseToken());
        if (delay.isNegative()) {
            throw invalid("delay " + GoDurations.format(delay) + " is negative; use 0 to make the task due now");
        }
        checkTime("next_attempt_at", t.nextAttemptAt());
        checkTime("lease_expires_at", t.leaseExpiresAt());
        checkTime("created_at", t.createdAt());
        checkTime("updated_at", t.updatedAt());
        checkTime("finished_at", t.finishedAt());
        int prev = 0;
        for (int i = 0; i < history.size(); i++) {
            Attempt a = history.get(i);
            String where = "history[" + i + "]";
            if (a.taskId() != null && !a.taskId().equals(t.id())) {
                throw invalid(where + " belongs to task " + a.taskId() + ", not " + t.id()
                        + "; an envelope carries one task's history");
            }
            checkCount(where + ".number", a.number(), 1);
            if (a.number() <= prev) {
                throw invalid(where + ".number " + a.number() + " does not follow " + prev
                        + "; list attempts by strictly increasing number");
            }
            prev = a.number();
            checkCount(where + ".life", a.life(), 0);
            if (a.outcome() == null) {
                throw invalid(where + ".outcome \"\" is not one of SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED");
            }
            checkToken(where + ".lease_token", a.leaseToken());
            checkTime(where + ".started_at", a.startedAt());
            checkTime(where + ".finished_at", a.finishedAt());
        }
    }

    private static void checkCount(String name, long v, long min) {
        if (v < min || v > MAX_WIRE_COUNT) {
            throw invalid(name + " " + v + " is out of range; use an integer from " + min + " to " + MAX_WIRE_COUNT);
        }
    }

    private static void checkToken(String name, long v) {
        if (v < 0 || v > MAX_WIRE_TOKEN) {
            throw invalid(name + " " + v + " is out of range; use an integer from 0 to 2^53-1");
        }
    }

    private static void checkTime(String name, Instant t) {
        if (t == null) {
            return;
        }
        int y = t.atOffset(ZoneOffset.UTC).getYear();
        if (y < 0 || y > 9999) {
            throw invalid(name + " has year " + y + "; RFC 3339 times need a year from 0 to 9999");
        }
    }

    // --- Encoding -----------------------------------------------------------

    /**
     * Encodes the envelope as a compact version-1 JSON document, exactly as Go's
     * {@code rdq.MarshalEnvelope} does: fields in wire order, zero values omitted,
     * header names sorted, times in UTC with only the fractional digits needed,
     * delay rounded up to whole milliseconds.
     *
     * @throws InvalidInputException if the envelope is invalid or too large
     */
    public byte[] encode() {
        validate();
        Task t = task;
        StringBuilder sb = new StringBuilder(256);
        sb.append("{\"version\":").append(VERSION);
        if (t.id() != null && !(t.id().getMostSignificantBits() == 0 && t.id().getLeastSignificantBits() == 0)) {
            field(sb, "id", t.id().toString());
        }
        field(sb, "queue", t.queue());
        field(sb, "handler", t.handler());
        if (t.payload() != null && t.payload().length > 0) {
            field(sb, "payload", Base64.getEncoder().encodeToString(t.payload()));
        }
        optional(sb, "content_type", t.contentType());
        if (t.headers() != null && !t.headers().isEmpty()) {
            List<String> keys = new ArrayList<>(t.headers().keySet());
            keys.sort(Envelope::compareUtf8);
            sb.append(",\"headers\":{");
            for (int i = 0; i < keys.size(); i++) {
                if (i > 0) {
                    sb.append(',');
                }
                string(sb, keys.get(i));
                sb.append(':');
                string(sb, t.headers().get(keys.get(i)));
            }
            sb.append('}');
        }
        optional(sb, "idempotency_key", t.idempotencyKey());
        if (t.status() != null) {
            field(sb, "status", t.status().name());
        }
        number(sb, "attempts", t.attempts());
        number(sb, "life", t.life());
        number(sb, "max_attempts", t.maxAttempts().orElse(0)); // 0 on the wire: the queue's
        number(sb, "timeout_ms", delayMillis(t.timeout().orElse(Duration.ZERO)));
        number(sb, "snoozes", t.snoozes());
        long delayMs = delayMillis(delay);
        number(sb, "delay_ms", delayMs);
        time(sb, "next_attempt_at", t.nextAttemptAt());
        number(sb, "lease_token", t.leaseToken());
        time(sb, "lease_expires_at", t.leaseExpiresAt());
        optional(sb, "lease_owner", t.leaseOwner());
        time(sb, "created_at", t.createdAt());
        time(sb, "updated_at", t.updatedAt());
        time(sb, "finished_at", t.finishedAt());
        String let = nz(t.lastErrorType());
        String lem = nz(t.lastErrorMessage());
        String lef = nz(t.lastErrorFingerprint());
        if (!let.isEmpty() || !lem.isEmpty() || !lef.isEmpty()) {
            sb.append(",\"last_error\":{");
            int mark = sb.length();
            optional(sb, "type", let);
            optional(sb, "message", lem);
            optional(sb, "fingerprint", lef);
            if (sb.length() > mark && sb.charAt(mark) == ',') {
                sb.deleteCharAt(mark);
            }
            sb.append('}');
        }
        if (!history.isEmpty()) {
            sb.append(",\"history\":[");
            for (int i = 0; i < history.size(); i++) {
                Attempt a = history.get(i);
                if (i > 0) {
                    sb.append(',');
                }
                sb.append("{\"number\":").append(a.number());
                number(sb, "life", a.life());
                field(sb, "outcome", a.outcome().name());
                optional(sb, "error_type", a.errorType());
                optional(sb, "message", a.message());
                optional(sb, "stack", a.stack());
                optional(sb, "worker_id", a.workerId());
                number(sb, "lease_token", a.leaseToken());
                time(sb, "started_at", a.startedAt());
                time(sb, "finished_at", a.finishedAt());
                sb.append('}');
            }
            sb.append(']');
        }
        sb.append('}');
        byte[] out = sb.toString().getBytes(StandardCharsets.UTF_8);
        if (out.length > MAX_ENVELOPE_BYTES) {
            throw invalid("envelope of task " + t.id() + " is " + out.length + " bytes; the limit is "
                    + MAX_ENVELOPE_BYTES + ": shorten its history");
        }
        return out;
    }

    private static long delayMillis(Duration d) {
        if (d.isZero() || d.isNegative()) {
            return 0;
        }
        long nanos;
        try {
            nanos = d.toNanos();
        } catch (ArithmeticException e) {
            return MAX_DELAY_MS;
        }
        if (nanos > Long.MAX_VALUE - 1_000_000L) {
            return MAX_DELAY_MS;
        }
        return (nanos + 999_999L) / 1_000_000L;
    }

    private static String nz(String s) {
        return s == null ? "" : s;
    }

    private static int compareUtf8(String a, String b) {
        return Arrays.compareUnsigned(a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
    }

    private static void field(StringBuilder sb, String name, String value) {
        sb.append(",\"").append(name).append("\":");
        string(sb, value);
    }

    private static void optional(StringBuilder sb, String name, String value) {
        if (value != null && !value.isEmpty()) {
            field(sb, name, value);
        }
    }

    private static void number(StringBuilder sb, String name, long v) {
        if (v != 0) {
            sb.append(",\"").append(name).append("\":").append(v);
        }
    }

    private static void time(StringBuilder sb, String name, Instant t) {
        if (t != null) {
            field(sb, name, formatTime(t));
        }
    }

    /** Formats t as Go's RFC3339Nano in UTC: only the fractional digits needed. */
    static String formatTime(Instant t) {
        LocalDateTime d = LocalDateTime.ofInstant(t, ZoneOffset.UTC);
        StringBuilder sb = new StringBuilder(32);
        sb.append(String.format("%04d-%02d-%02dT%02d:%02d:%02d", d.getYear(), d.getMonthValue(), d.getDayOfMonth(),
                d.getHour(), d.getMinute(), d.getSecond()));
        int nanos = d.getNano();
        if (nanos != 0) {
            String digits = String.format("%09d", nanos);
            int end = digits.length();
            while (digits.charAt(end - 1) == '0') {
                end--;
            }
            sb.append('.').append(digits, 0, end);
        }
        return sb.append('Z').toString();
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    /** Writes s as a JSON string escaped as Go's encoder does without HTML escaping. */
    static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\b' -> sb.append("\\b");
                case '\f' -> sb.append("\\f");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                case '\u2028', '\u2029' -> sb.append("\\u202").append(HEX[c & 0xF]);
                default -> {
                    if (c < 0x20) {
                        sb.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 0xF]);
                    } else if (Character.isHighSurrogate(c) && i + 1 < s.length()
                            && Character.isLowSurrogate(s.charAt(i + 1))) {
                        sb.append(c).append(s.charAt(++i));
                    } else if (Character.isSurrogate(c)) {
                        sb.append("\\ufffd");
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }

    // --- Decoding -----------------------------------------------------------

    /**
     * Decodes and validates a JSON envelope, as Go's {@code rdq.UnmarshalEnvelope}
     * does: unknown fields are ignored, absent and null fields are zero, times are
     * normalized to UTC.
     *
     * @throws InvalidInputException naming the offending field, for a document
     *     that is too large, not UTF-8, not a JSON object, of an unsupported
     *     version, with a field of the wrong type or value, or over a limit
     */
    public static Envelope decode(byte[] data) {
        if (data.length > MAX_ENVELOPE_BYTES) {
            throw invalid("envelope is " + data.length + " bytes; the limit is " + MAX_ENVELOPE_BYTES
                    + ": store large data elsewhere and submit a reference");
        }
        try {
            StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(data));
        } catch (CharacterCodingException e) {
            throw invalid("envelope is not valid UTF-8; JSON documents must be UTF-8 (send binary data base64-encoded in payload)");
        }
        JsonNode root;
        try {
            root = MAPPER.readTree(data);
        } catch (JsonParseException e) {
            InvalidInputException dup = duplicateKey(e);
            if (dup != null) {
                throw dup;
            }
            throw invalid("envelope is not valid JSON: " + e.getOriginalMessage() + " (at byte "
                    + e.getLocation().getByteOffset() + ")");
        } catch (JsonProcessingException e) {
            throw invalid("envelope is not valid JSON: " + e.getOriginalMessage());
        } catch (java.io.IOException e) {
            throw invalid("envelope is not valid JSON: " + e.getMessage());
        }
        if (root == null || root.isMissingNode()) {
            throw invalid("envelope is not valid JSON: unexpected end of JSON input");
        }
        if (!root.isObject()) {
            throw invalid("envelope must be a JSON object, got " + kind(root));
        }
        checkVersion(root.get("version"));
        FieldReader d = new FieldReader("");
        UUID id = null;
        String idText = d.str(root, "id");
        if (!idText.isEmpty()) {
            UUID parsed = parseId(idText);
            if (parsed == null) {
                d.fail("id " + Limits.quote(Limits.forError(idText))
                        + " is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx); omit it to have one assigned");
            } else if (parsed.getMostSignificantBits() == 0 && parsed.getLeastSignificantBits() == 0) {
                d.fail("id is the nil UUID; omit it to have one assigned");
            } else {
                id = parsed;
            }
        }
        String queue = d.str(root, "queue");
        String handler = d.str(root, "handler");
        byte[] payload = new byte[0];
        String p64 = d.str(root, "payload");
        if (!p64.isEmpty()) {
            byte[] p = strictBase64(p64);
            if (p == null) {
                d.fail("payload is not valid base64: encode the payload bytes with standard base64, RFC 4648 section 4, with padding");
            } else {
                payload = p;
            }
        }
        String contentType = d.str(root, "content_type");
        Map<String, String> headers = d.headers(root, "headers");
        String key = d.str(root, "idempotency_key");
        String statusText = d.str(root, "status");
        Status status = null;
        if (!statusText.isEmpty()) {
            try {
                status = Status.valueOf(statusText);
            } catch (IllegalArgumentException e) {
                d.fail("status " + Limits.quote(Limits.forError(statusText))
                        + " is not one of PENDING, IN_FLIGHT, SUCCEEDED, DEAD; omit it when submitting");
            }
        }
        int attempts = (int) d.integer(root, "attempts", 0, MAX_WIRE_COUNT);
        int life = (int) d.integer(root, "life", 0, MAX_WIRE_COUNT);
        int maxAttempts = (int) d.integer(root, "max_attempts", Policy.UNLIMITED, MAX_WIRE_COUNT);
        Duration timeout = Duration.ofMillis(d.integer(root, "timeout_ms", 0, MAX_DELAY_MS));
        int snoozes = (int) d.integer(root, "snoozes", 0, MAX_WIRE_COUNT);
        Duration delay = Duration.ofMillis(d.integer(root, "delay_ms", 0, MAX_DELAY_MS));
        Instant next = d.time(root, "next_attempt_at");
        long token = d.integer(root, "lease_token", 0, MAX_WIRE_TOKEN);
        Instant leaseExpires = d.time(root, "lease_expires_at");
        String owner = d.str(root, "lease_owner");
        Instant created = d.time(root, "created_at");
        Instant updated = d.time(root, "updated_at");
        Instant finished = d.time(root, "finished_at");
        String let = "";
        String lem = "";
        String lef = "";
        JsonNode le = present(root.get("last_error"));
        if (le != null && d.object("last_error", le)) {
            FieldReader ld = d.withPrefix("last_error.");
            let = ld.str(le, "type");
            lem = ld.str(le, "message");
            lef = ld.str(le, "fingerprint");
        }
        List<Attempt> history = new ArrayList<>();
        JsonNode h = present(root.get("history"));
        if (h != null && d.err == null) {
            if (!h.isArray()) {
                d.fail("history must be a JSON array of attempt objects, got " + kind(h));
            } else {
                for (int i = 0; i < h.size(); i++) {
                    String where = "history[" + i + "]";
                    JsonNode ao = h.get(i);
                    if (!d.object(where, ao)) {
                        break;
                    }
                    FieldReader ad = d.withPrefix(where + ".");
                    String taskIdText = ad.str(ao, "task_id");
                    if (!taskIdText.isEmpty()) {
                        UUID tid = parseId(taskIdText);
                        if (tid == null) {
                            ad.fail(where + ".task_id " + Limits.quote(Limits.forError(taskIdText))
                                    + " is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx); omit it, an attempt's task is the envelope's id");
                        } else if (!tid.equals(id)) {
                            ad.fail(where + ".task_id " + tid + " is not the envelope's id ("
                                    + (id == null ? "none" : id.toString()) + "); an envelope carries one task's history");
                        }
                    }
                    int number = (int) ad.integer(ao, "number", 1, MAX_WIRE_COUNT);
                    int alife = (int) ad.integer(ao, "life", 0, MAX_WIRE_COUNT);
                    String outcomeText = ad.str(ao, "outcome");
                    String errorType = ad.str(ao, "error_type");
                    String message = ad.str(ao, "message");
                    String stack = ad.str(ao, "stack");
                    String worker = ad.str(ao, "worker_id");
                    long atoken = ad.integer(ao, "lease_token", 0, MAX_WIRE_TOKEN);
                    Instant started = ad.time(ao, "started_at");
                    Instant afinished = ad.time(ao, "finished_at");
                    if (present(ao.get("number")) == null) {
                        ad.fail(ad.prefix + "number is missing; every attempt has a number from 1", true);
                    }
                    Outcome outcome = null;
                    try {
                        outcome = Outcome.valueOf(outcomeText);
                    } catch (IllegalArgumentException e) {
                        ad.fail(ad.prefix + "outcome " + Limits.quote(Limits.forError(outcomeText))
                                + " is not one of SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED", true);
                    }
                    history.add(new Attempt(id, number, alife, outcome, errorType, message, stack, worker, atoken,
                            started, afinished));
                }
            }
        }
        if (d.err != null) {
            throw d.err;
        }
        if (queue.isEmpty()) {
            throw invalid("envelope has no queue; set \"queue\" to the queue the task belongs to");
        }
        if (handler.isEmpty()) {
            throw invalid("envelope has no handler; set \"handler\" to the name the task is executed by");
        }
        Task t = new Task(id, queue, handler, payload, contentType, headers, key, status, attempts, life, next, token,
                leaseExpires, owner, created, updated, finished, let, lem, lef,
                maxAttempts == 0 ? OptionalInt.empty() : OptionalInt.of(maxAttempts),
                timeout.isZero() ? Optional.empty() : Optional.of(timeout), snoozes);
        Envelope e = new Envelope(t, history, delay);
        e.validate();
        return e;
    }

    /**
     * Go's error for a key repeated within an object (the envelope, headers,
     * last_error or a history item), or null when e is another syntax error.
     */
    private static InvalidInputException duplicateKey(JsonParseException e) {
        com.fasterxml.jackson.core.JsonParser p = e.getProcessor();
        if (e.getOriginalMessage() == null || !e.getOriginalMessage().startsWith("Duplicate field") || p == null) {
            return null;
        }
        com.fasterxml.jackson.core.JsonStreamContext ctx = p.getParsingContext();
        String key = ctx.getCurrentName();
        if (key == null) {
            String m = e.getOriginalMessage();
            int a = m.indexOf('\'');
            int b = m.lastIndexOf('\'');
            key = a >= 0 && b > a ? m.substring(a + 1, b) : "";
        }
        String where = "the envelope";
        com.fasterxml.jackson.core.JsonStreamContext parent = ctx.getParent();
        if (parent != null && parent.inObject() && parent.getParent() != null && parent.getParent().inRoot()) {
            String name = parent.getCurrentName();
            if ("headers".equals(name) || "last_error".equals(name)) {
                where = name;
            }
        } else if (parent != null && parent.inArray() && parent.getParent() != null
                && "history".equals(parent.getParent().getCurrentName())) {
            where = "history[" + parent.getCurrentIndex() + "]";
        }
        return invalid("key " + Limits.quote(Limits.forError(key)) + " appears twice in " + where
                + "; an envelope must not repeat a key within an object");
    }

    private static final Pattern UUID_PATTERN = Pattern.compile(
            "([0-9a-fA-F]{8})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{12})");

    /** Parses the canonical 36-character UUID form (either case); null if it is not one. */
    static UUID parseId(String s) {
        Matcher m = UUID_PATTERN.matcher(s);
        if (!m.matches()) {
            return null;
        }
        return UUID.fromString(s);
    }

    private static byte[] strictBase64(String s) {
        String compact = s.replace("\r", "").replace("\n", "");
        try {
            byte[] p = Base64.getDecoder().decode(compact);
            if (!Base64.getEncoder().encodeToString(p).equals(compact)) {
                return null;
            }
            return p;
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    private static void checkVersion(JsonNode v) {
        v = present(v);
        if (v == null) {
            throw invalid("envelope has no version; set \"version\": " + VERSION);
        }
        if (v.isInt() && v.intValue() == 1) {
            return;
        }
        if (v.isNumber()) {
            throw invalid("unsupported envelope version " + Limits.forError(v.asText())
                    + "; this decoder reads version " + VERSION + ", written as the JSON number " + VERSION
                    + ": upgrade rdq to read newer envelopes");
        }
        throw invalid("envelope version must be the JSON number " + VERSION + ", got " + kind(v));
    }

    private static JsonNode present(JsonNode n) {
        return n == null || n.isNull() || n.isMissingNode() ? null : n;
    }

    static String kind(JsonNode n) {
        if (n == null || n.isMissingNode()) {
            return "nothing";
        }
        if (n.isObject()) {
            return "an object";
        }
        if (n.isArray()) {
            return "an array";
        }
        if (n.isTextual()) {
            return "a string";
        }
        if (n.isBoolean()) {
            return "a boolean";
        }
        if (n.isNull()) {
            return "null";
        }
        if (n.isNumber()) {
            return "a number";
        }
        return "invalid JSON";
    }

    private static final Pattern RFC3339 = Pattern.compile(
            "(\\d{4})-(\\d{2})-(\\d{2})[Tt](\\d{2}):(\\d{2}):(\\d{2})(\\.\\d{1,9})?([Zz]|[+-]\\d{2}:\\d{2})");

    /** Parses an RFC 3339 time as Go's time.Parse(time.RFC3339Nano) does; null if it is not one. */
    static Instant parseTime(String s) {
        Matcher m = RFC3339.matcher(s);
        if (!m.matches()) {
            return null;
        }
        try {
            String frac = m.group(7) == null ? "" : m.group(7);
            String zone = m.group(8).equalsIgnoreCase("z") ? "Z" : m.group(8);
            String iso = m.group(1) + "-" + m.group(2) + "-" + m.group(3) + "T" + m.group(4) + ":" + m.group(5) + ":"
                    + m.group(6) + frac + zone;
            return java.time.OffsetDateTime.parse(iso).toInstant();
        } catch (DateTimeParseException e) {
            return null;
        }
    }

    /** Reads fields, remembering the first error, as Go's fieldDecoder does. */
    private static final class FieldReader {
        final String prefix;
        InvalidInputException err;
        private final FieldReader parent;

        FieldReader(String prefix) {
            this(prefix, null);
        }

        private FieldReader(String prefix, FieldReader parent) {
            this.prefix = prefix;
            this.parent = parent;
        }

        FieldReader withPrefix(String p) {
            return new FieldReader(p, root());
        }

        private FieldReader root() {
            return parent == null ? this : parent;
        }

        boolean failed() {
            return root().err != null;
        }

        void fail(String msg) {
            FieldReader r = root();
            if (r.err == null) {
                r.err = invalid(msg);
            }
        }

        void fail(String msg, boolean unused) {
            fail(msg);
        }

        boolean object(String name, JsonNode n) {
            if (failed()) {
                return false;
            }
            if (!n.isObject()) {
                fail(name + " must be a JSON object, got " + kind(n));
                return false;
            }
            return true;
        }

        String str(JsonNode obj, String key) {
            JsonNode n = present(obj.get(key));
            if (n == null || failed()) {
                return "";
            }
            if (!n.isTextual()) {
                fail(Limits.forError(prefix + key) + " must be a JSON string, got " + kind(n));
                return "";
            }
            return n.textValue();
        }

        long integer(JsonNode obj, String key, long min, long max) {
            JsonNode n = present(obj.get(key));
            if (n == null || failed()) {
                return 0;
            }
            if (!n.isNumber()) {
                fail(prefix + key + " must be a JSON number, got " + kind(n));
                return 0;
            }
            if (!n.isIntegralNumber() || !n.canConvertToLong()) {
                fail(prefix + key + " " + Limits.forError(n.asText()) + " is not a whole number from " + min + " to "
                        + max);
                return 0;
            }
            long v = n.longValue();
            if (v < min || v > max) {
                fail(prefix + key + " " + v + " is out of range; use a whole number from " + min + " to " + max);
                return 0;
            }
            return v;
        }

        Instant time(JsonNode obj, String key) {
            String s = str(obj, key);
            if (s.isEmpty() || failed()) {
                return null;
            }
            Instant t = parseTime(s);
            if (t == null) {
                fail(prefix + key + " " + Limits.quote(Limits.forError(s))
                        + " is not an RFC 3339 time such as 2024-06-01T12:00:00Z");
            }
            return t;
        }

        Map<String, String> headers(JsonNode obj, String key) {
            JsonNode n = present(obj.get(key));
            if (n == null || failed()) {
                return Map.of();
            }
            if (!object(key, n)) {
                return Map.of();
            }
            if (n.size() == 0) {
                return Map.of();
            }
            if (n.size() > Limits.MAX_HEADERS) {
                fail(n.size() + " headers; the limit is " + Limits.MAX_HEADERS);
                return Map.of();
            }
            Map<String, String> h = new LinkedHashMap<>();
            FieldReader hd = withPrefix(key + ".");
            for (Iterator<String> it = n.fieldNames(); it.hasNext();) {
                String k = it.next();
                h.put(k, hd.str(n, k));
            }
            return Collections.unmodifiableMap(h);
        }
    }
}
