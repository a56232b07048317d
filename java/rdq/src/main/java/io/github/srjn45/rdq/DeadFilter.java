package io.github.srjn45.rdq;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.UUID;

/**
 * A selection of dead tasks, as Go's {@code dlq.Filter}: every field that is
 * set must match (AND). An empty filter selects every dead task; the bulk
 * operations of {@link RdqAdmin} refuse it unless told it means the whole
 * dead-letter queue. Immutable; build one with {@link #builder()}.
 *
 * <pre>{@code
 * DeadFilter f = DeadFilter.builder().queue("emails").messageContains("503").build();
 * }</pre>
 */
public final class DeadFilter {
    /** Bounds {@link Builder#ids}, as Go's {@code dlq.MaxFilterIDs}. */
    public static final int MAX_IDS = 10_000;
    /** Bounds {@link Builder#errorType}, in bytes, as Go's {@code dlq.MaxErrorTypeLength}. */
    public static final int MAX_ERROR_TYPE_LENGTH = 256;
    /** Bounds {@link Builder#fingerprint}, in hexadecimal digits. */
    public static final int MAX_FINGERPRINT_LENGTH = 64;
    /** Bounds {@link Builder#messageContains}, in bytes. */
    public static final int MAX_MESSAGE_LENGTH = 1024;

    private static final Instant MIN_TIME = Instant.parse("1970-01-01T00:00:00Z");
    private static final Instant MAX_TIME = Instant.parse("9999-12-31T23:59:59.999999999Z");

    private static final DeadFilter ALL = new DeadFilter(new Builder());

    private final List<UUID> ids;
    private final String queue;
    private final String handler;
    private final String errorType;
    private final String fingerprint;
    private final Instant deadAfter;
    private final Instant deadBefore;
    private final String messageContains;
    private final int lifeMin;
    private final int lifeBelow;

    private DeadFilter(Builder b) {
        this.ids = List.copyOf(b.ids);
        this.queue = b.queue;
        this.handler = b.handler;
        this.errorType = b.errorType;
        this.fingerprint = b.fingerprint;
        this.deadAfter = b.deadAfter;
        this.deadBefore = b.deadBefore;
        this.messageContains = b.messageContains;
        this.lifeMin = b.lifeMin;
        this.lifeBelow = b.lifeBelow;
    }

    /** A builder of a filter with no field set. */
    public static Builder builder() {
        return new Builder();
    }

    /** The filter that selects every dead task. */
    public static DeadFilter all() {
        return ALL;
    }

    /** The tasks named, in the order given, each once; empty when the filter names none. */
    public List<UUID> ids() {
        return ids;
    }

    /** The queue the tasks must be in. */
    public Optional<String> queue() {
        return Optional.ofNullable(queue);
    }

    /** The handler the tasks must have. */
    public Optional<String> handler() {
        return Optional.ofNullable(handler);
    }

    /** The type of the tasks' last error, matched exactly. */
    public Optional<String> errorType() {
        return Optional.ofNullable(errorType);
    }

    /** The fingerprint of the tasks' last error (a failure group). */
    public Optional<String> fingerprint() {
        return Optional.ofNullable(fingerprint);
    }

    /** The tasks went dead at or after this time. */
    public Optional<Instant> deadAfter() {
        return Optional.ofNullable(deadAfter);
    }

    /** The tasks went dead strictly before this time. */
    public Optional<Instant> deadBefore() {
        return Optional.ofNullable(deadBefore);
    }

    /** A case-insensitive substring of the tasks' last error message. */
    public Optional<String> messageContains() {
        return Optional.ofNullable(messageContains);
    }

    /** The tasks' life (how many times each was redriven) is at least this. */
    public OptionalInt lifeMin() {
        return lifeMin == 0 ? OptionalInt.empty() : OptionalInt.of(lifeMin);
    }

    /** The tasks' life is strictly below this. */
    public OptionalInt lifeBelow() {
        return lifeBelow == 0 ? OptionalInt.empty() : OptionalInt.of(lifeBelow);
    }

    /** True when no field is set: the filter selects every dead task. */
    public boolean isEmpty() {
        return ids.isEmpty() && queue == null && handler == null && errorType == null && fingerprint == null
                && deadAfter == null && deadBefore == null && messageContains == null && lifeMin == 0
                && lifeBelow == 0;
    }

    /** This filter with lifeMin raised to at least min (for counting the tasks at a life cap). */
    DeadFilter withLifeAtLeast(int min) {
        Builder b = toBuilder();
        b.lifeMin = Math.max(lifeMin, min);
        if (lifeBelow > 0 && lifeBelow <= b.lifeMin) {
            return null;
        }
        return new DeadFilter(b);
    }

    private Builder toBuilder() {
        Builder b = new Builder();
        b.ids.addAll(ids);
        b.queue = queue;
        b.handler = handler;
        b.errorType = errorType;
        b.fingerprint = fingerprint;
        b.deadAfter = deadAfter;
        b.deadBefore = deadBefore;
        b.messageContains = messageContains;
        b.lifeMin = lifeMin;
        b.lifeBelow = lifeBelow;
        return b;
    }

    /**
     * The filter as the audit log records it, byte for byte what Go's
     * {@code store.DeadFilter.MarshalJSON} writes: the set fields only, in
     * snake_case, in Go's field order, times in UTC RFC 3339 with the
     * fraction's trailing zeros cut, strings escaped as Go's encoding/json
     * escapes them. The empty filter is "{}".
     */
    String toJson() {
        StringBuilder sb = new StringBuilder("{");
        if (!ids.isEmpty()) {
            field(sb, "ids").append('[');
            for (int i = 0; i < ids.size(); i++) {
                if (i > 0) {
                    sb.append(',');
                }
                sb.append('"').append(ids.get(i)).append('"');
            }
            sb.append(']');
        }
        string(sb, "queue", queue);
        string(sb, "handler", handler);
        string(sb, "error_type", errorType);
        string(sb, "fingerprint", fingerprint);
        if (deadAfter != null) {
            field(sb, "dead_after").append('"').append(rfc3339(deadAfter)).append('"');
        }
        if (deadBefore != null) {
            field(sb, "dead_before").append('"').append(rfc3339(deadBefore)).append('"');
        }
        string(sb, "message_contains", messageContains);
        if (lifeMin > 0) {
            field(sb, "life_min").append(lifeMin);
        }
        if (lifeBelow > 0) {
            field(sb, "life_below").append(lifeBelow);
        }
        return sb.append('}').toString();
    }

    private static StringBuilder field(StringBuilder sb, String name) {
        if (sb.length() > 1) {
            sb.append(',');
        }
        return sb.append('"').append(name).append("\":");
    }

    private static void string(StringBuilder sb, String name, String v) {
        if (v != null) {
            GoJson.quote(field(sb, name), v);
        }
    }

    private static final DateTimeFormatter SECONDS = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss")
            .withZone(ZoneOffset.UTC);

    /** Go's time.RFC3339Nano of t in UTC. */
    static String rfc3339(Instant t) {
        StringBuilder sb = new StringBuilder(SECONDS.format(t));
        int nanos = t.getNano();
        if (nanos != 0) {
            String frac = String.format("%09d", nanos);
            int end = frac.length();
            while (frac.charAt(end - 1) == '0') {
                end--;
            }
            sb.append('.').append(frac, 0, end);
        }
        return sb.append('Z').toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof DeadFilter f && toJson().equals(f.toJson());
    }

    @Override
    public int hashCode() {
        return toJson().hashCode();
    }

    /** The filter as the audit log records it, e.g. {@code {"queue":"emails"}}. */
    @Override
    public String toString() {
        return toJson();
    }

    /**
     * Builds a {@link DeadFilter}. Each setter checks its value at once and
     * throws {@link InvalidInputException} saying what was wrong; a null value
     * throws {@link NullPointerException} naming the setter. Leave a field unset
     * for no condition on it.
     */
    public static final class Builder {
        private final LinkedHashSet<UUID> ids = new LinkedHashSet<>();
        private String queue;
        private String handler;
        private String errorType;
        private String fingerprint;
        private Instant deadAfter;
        private Instant deadBefore;
        private String messageContains;
        private int lifeMin;
        private int lifeBelow;

        private Builder() {}

        /** Limits the selection to these tasks (duplicates count once; at most {@link #MAX_IDS}). */
        public Builder ids(Collection<UUID> taskIds) {
            Objects.requireNonNull(taskIds, "DeadFilter.Builder.ids: taskIds is null");
            List<UUID> copy = new ArrayList<>(taskIds.size());
            for (UUID id : taskIds) {
                Objects.requireNonNull(id, "DeadFilter.Builder.ids: an id is null");
                if (id.getMostSignificantBits() == 0 && id.getLeastSignificantBits() == 0) {
                    throw invalid("the zero task id is not a task");
                }
                copy.add(id);
            }
            LinkedHashSet<UUID> all = new LinkedHashSet<>(ids);
            all.addAll(copy);
            if (all.size() > MAX_IDS) {
                throw invalid(all.size() + " task ids; the limit is " + MAX_IDS
                        + " (select by another field, or split the list)");
            }
            ids.clear();
            ids.addAll(all);
            return this;
        }

        /** The queue the tasks must be in. */
        public Builder queue(String name) {
            Objects.requireNonNull(name, "DeadFilter.Builder.queue: name is null");
            Limits.validateName("queue", name);
            this.queue = name;
            return this;
        }

        /** The handler the tasks must have. */
        public Builder handler(String name) {
            Objects.requireNonNull(name, "DeadFilter.Builder.handler: name is null");
            Limits.validateName("handler", name);
            this.handler = name;
            return this;
        }

        /** The type of the tasks' last error, e.g. {@code java.net.ConnectException}. */
        public Builder errorType(String type) {
            Objects.requireNonNull(type, "DeadFilter.Builder.errorType: type is null");
            this.errorType = text("error type", type, MAX_ERROR_TYPE_LENGTH);
            return this;
        }

        /** The fingerprint of the tasks' last error, hexadecimal, as the groups list it. */
        public Builder fingerprint(String hex) {
            Objects.requireNonNull(hex, "DeadFilter.Builder.fingerprint: hex is null");
            if (hex.isEmpty()) {
                throw invalid("the fingerprint is empty; leave it unset to match every fingerprint");
            }
            if (hex.length() > MAX_FINGERPRINT_LENGTH) {
                throw invalid("fingerprint is " + hex.length() + " characters; the limit is " + MAX_FINGERPRINT_LENGTH);
            }
            for (int i = 0; i < hex.length(); i++) {
                char c = hex.charAt(i);
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
                    throw invalid("fingerprint " + Limits.quote(Limits.forError(hex))
                            + " is not hexadecimal (copy it from the groups)");
                }
            }
            this.fingerprint = hex;
            return this;
        }

        /** The tasks went dead at or after t. */
        public Builder deadAfter(Instant t) {
            this.deadAfter = time("deadAfter", t);
            return this;
        }

        /** The tasks went dead strictly before t. */
        public Builder deadBefore(Instant t) {
            this.deadBefore = time("deadBefore", t);
            return this;
        }

        /** A case-insensitive substring of the tasks' last error message. */
        public Builder messageContains(String text) {
            Objects.requireNonNull(text, "DeadFilter.Builder.messageContains: text is null");
            this.messageContains = text("message text", text, MAX_MESSAGE_LENGTH);
            return this;
        }

        /** The tasks' life is at least n (1 selects tasks that died again after a redrive). */
        public Builder lifeMin(int n) {
            this.lifeMin = life("lifeMin", n);
            return this;
        }

        /** The tasks' life is strictly below n (1 selects tasks never redriven). */
        public Builder lifeBelow(int n) {
            this.lifeBelow = life("lifeBelow", n);
            return this;
        }

        /**
         * The filter.
         *
         * @throws InvalidInputException when the bounds select nothing: deadAfter
         *         not before deadBefore, or lifeBelow not above lifeMin
         */
        public DeadFilter build() {
            if (deadAfter != null && deadBefore != null && !deadAfter.isBefore(deadBefore)) {
                throw invalid("deadAfter " + rfc3339(deadAfter) + " is not before deadBefore " + rfc3339(deadBefore)
                        + ": the range is empty (swap the bounds?)");
            }
            if (lifeBelow > 0 && lifeBelow <= lifeMin) {
                throw invalid("lifeBelow " + lifeBelow + " and lifeMin " + lifeMin + " is an empty range (for exactly life "
                        + lifeMin + ", use lifeBelow " + (lifeMin + 1) + ")");
            }
            return new DeadFilter(this);
        }

        private static String text(String what, String s, int limit) {
            if (s.isEmpty()) {
                throw invalid("the " + what + " is empty; leave it unset for no condition");
            }
            int n = s.getBytes(StandardCharsets.UTF_8).length;
            if (n > limit) {
                throw invalid(what + " is " + n + " bytes; the limit is " + limit);
            }
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (Character.isISOControl(c)) {
                    throw invalid(what + " " + Limits.quote(Limits.forError(s)) + " contains the control character U+"
                            + String.format("%04X", (int) c));
                }
                if (Character.isSurrogate(c) && !(Character.isHighSurrogate(c) && i + 1 < s.length()
                        && Character.isLowSurrogate(s.charAt(i + 1)))
                        && !(Character.isLowSurrogate(c) && i > 0 && Character.isHighSurrogate(s.charAt(i - 1)))) {
                    throw invalid(what + " holds an unpaired surrogate: it is not valid Unicode");
                }
            }
            return s;
        }

        private static Instant time(String setter, Instant t) {
            Objects.requireNonNull(t, "DeadFilter.Builder." + setter + ": t is null");
            if (t.isBefore(MIN_TIME) || t.isAfter(MAX_TIME)) {
                throw invalid(setter + " " + t + " is outside the years 1970 to 9999");
            }
            return t;
        }

        private static int life(String setter, int n) {
            if (n < 1) {
                throw invalid(setter + " " + n + " is not positive"
                        + " (a task's life counts its redrives; leave it unset for no bound)");
            }
            return n;
        }

        private static InvalidInputException invalid(String what) {
            return new InvalidInputException("rdq: invalid input: DeadFilter: " + what);
        }
    }
}
