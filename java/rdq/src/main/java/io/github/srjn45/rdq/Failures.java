package io.github.srjn45.rdq;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.UndeclaredThrowableException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * How failures are classified, described and grouped: the same rules as Go's
 * {@code rdq.ErrorTypeOf}, {@code rdq.Describe}, {@code rdq.NormalizeMessage} and
 * {@code rdq.Fingerprint}, held to the shared vectors under {@code testdata/conformance}.
 */
public final class Failures {
    /** Cap on a recorded message, in UTF-8 bytes. */
    public static final int MAX_MESSAGE_BYTES = 4 << 10;
    /** Cap on a recorded stack trace, in UTF-8 bytes. */
    public static final int MAX_STACK_BYTES = 64 << 10;

    private Failures() {}

    /** The cause chain of t, t first, without repeats. */
    private static Iterable<Throwable> chain(Throwable t) {
        java.util.List<Throwable> out = new java.util.ArrayList<>();
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable e = t; e != null && seen.add(e); e = e.getCause()) {
            out.add(e);
        }
        return out;
    }

    /** Whether t or any exception in its cause chain is a {@link PermanentException}. */
    public static boolean isPermanent(@Nullable Throwable t) {
        for (Throwable e : chain(t)) {
            if (e instanceof PermanentException) {
                return true;
            }
        }
        return false;
    }

    /** The delay a {@link SnoozeException} in t's cause chain asks for, if there is one. */
    public static Optional<Duration> snoozeOf(@Nullable Throwable t) {
        if (t == null) {
            return Optional.empty();
        }
        for (Throwable e : chain(t)) {
            if (e instanceof SnoozeException s) {
                return Optional.of(s.after());
            }
        }
        return Optional.empty();
    }

    /** The delay a {@link RetryAfterException} in t's cause chain asks for, if there is one. */
    public static Optional<Duration> retryAfterOf(@Nullable Throwable t) {
        if (t == null) {
            return Optional.empty();
        }
        for (Throwable e : chain(t)) {
            if (e instanceof RetryAfterException r) {
                return Optional.of(r.after());
            }
        }
        return Optional.empty();
    }

    /**
     * Whether t only wraps its cause: {@link PermanentException} and
     * {@link RetryAfterException} with a cause, and the JDK's wrappers of
     * another thread's or a reflective call's exception.
     */
    private static boolean isPlainWrapper(Throwable t) {
        if (t.getCause() == null) {
            return false;
        }
        return t instanceof PermanentException || t instanceof RetryAfterException
                || t instanceof ExecutionException || t instanceof CompletionException
                || t instanceof InvocationTargetException || t instanceof UndeclaredThrowableException;
    }

    /**
     * Names the type of a failure for grouping and filtering: the first non-empty
     * {@link ErrorTyped#errorType()} in the cause chain, otherwise the class name
     * (for example "java.net.ConnectException") of the first exception that is
     * not a plain wrapper. Empty for null.
     */
    public static String errorTypeOf(@Nullable Throwable t) {
        if (t == null) {
            return "";
        }
        for (Throwable e : chain(t)) {
            if (e instanceof ErrorTyped typed) {
                String s = typed.errorType();
                if (s != null && !s.isEmpty()) {
                    return s;
                }
            }
        }
        Throwable e = t;
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        while (isPlainWrapper(e) && seen.add(e)) {
            e = e.getCause();
        }
        return e.getClass().getName();
    }

    /** The text of a failure: its message, or "" when it has none. */
    static String messageOf(Throwable t) {
        String m = t.getMessage();
        return m == null ? "" : m;
    }

    /**
     * Turns t into a failure: its type, capped message, capped stack trace and
     * fingerprint, with text made storable (see {@link #cleanText}). Null gives null.
     */
    public static @Nullable Failure describe(@Nullable Throwable t) {
        if (t == null) {
            return null;
        }
        String type = cleanText(errorTypeOf(t));
        String message = truncate(cleanText(messageOf(t)), MAX_MESSAGE_BYTES);
        String stack = "";
        if (!(t instanceof HandlerTimeoutException)) {
            StringWriter sw = new StringWriter();
            t.printStackTrace(new PrintWriter(sw));
            stack = truncate(cleanText(sw.toString()), MAX_STACK_BYTES);
        }
        return new Failure(type, message, stack, fingerprint(type, message));
    }

    /** The synthetic failure a store records when it reclaims a task whose lease expired. */
    public static Failure leaseExpired() {
        String type = "lease_expired";
        String msg = "lease expired before the worker finished; the execution was lost";
        return new Failure(type, msg, "", fingerprint(type, msg));
    }

    /**
     * Makes s storable as text by any backend: unpaired surrogates (Java's form
     * of invalid UTF-8) become U+FFFD, one per run, and NUL characters the
     * visible escape {@code \x00}.
     */
    public static String cleanText(String s) {
        boolean clean = true;
        for (int i = 0; i < s.length() && clean; i++) {
            char c = s.charAt(i);
            if (c == 0 || Character.isSurrogate(c)) {
                clean = false;
            }
        }
        if (clean) {
            return s;
        }
        StringBuilder sb = new StringBuilder(s.length() + 8);
        boolean inBad = false;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                sb.append(c).append(s.charAt(i + 1));
                i++;
                inBad = false;
                continue;
            }
            if (Character.isSurrogate(c)) {
                if (!inBad) {
                    sb.append('\uFFFD');
                }
                inBad = true;
                continue;
            }
            inBad = false;
            if (c == 0) {
                sb.append("\\x00");
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }

    private static String truncationMark(int dropped) {
        return "…[truncated " + dropped + " bytes]";
    }

    /**
     * Caps s at limit UTF-8 bytes, cutting at a character boundary and appending
     * a mark such as "…[truncated 1234 bytes]" that states exactly how many bytes
     * were dropped; the result, mark included, is at most limit bytes when limit
     * leaves room for the mark, otherwise the mark alone. s must be clean text.
     */
    public static String truncate(String s, int limit) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        if (b.length <= limit) {
            return s;
        }
        int keep = Math.max(limit, 0);
        while (true) {
            int markLen = truncationMark(b.length - keep).getBytes(StandardCharsets.UTF_8).length;
            int room = Math.max(limit - markLen, 0);
            if (keep <= room) {
                return new String(b, 0, keep, StandardCharsets.UTF_8) + truncationMark(b.length - keep);
            }
            keep = room;
            while (keep > 0 && (b[keep] & 0xC0) == 0x80) {
                keep--;
            }
        }
    }

    // The regular expressions of the default normalisation, the same as Go's
    // (outcome.go): ASCII classes, greedy quantifiers and alternation only,
    // which match the same text in RE2 and java.util.regex.
    private static final Pattern FP_HTTP_VERSION = Pattern.compile("http/[0-9][0-9.]*");
    private static final Pattern FP_TOKEN = Pattern.compile("[a-z0-9_]+(?:[-.+@][a-z0-9_]+)*");
    private static final Pattern FP_STATUS = Pattern.compile("[1-5][0-9][0-9]");
    private static final Pattern FP_UUID = Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    private static final Pattern FP_NUMBER = Pattern.compile("[0-9]+(?:\\.[0-9]+)*");
    private static final Pattern FP_HEX = Pattern.compile("0x[0-9a-f]+|[0-9a-f]{8,}");
    private static final Pattern FP_SPACE = Pattern.compile("[\\t\\n\\x0B\\f\\r ]+");
    private static final Set<String> STATUS_WORDS = Set.of("status", "code", "http", "statuscode", "status_code",
            "returned", "response");

    // Go's letterPairCost (outcome.go): how unlike English a pair of letters
    // is, row (start of a word, a to z) by column (a to z, end of a word), one
    // hexadecimal digit each. The letters-only id rule reads it.
    static final String LETTER_PAIR_COST = ""
            + "45444456487545548434556688f"
            + "8544875a5a7344a5a3436586695"
            + "4656467745a3784684464889593"
            + "375737645d445737955356997c3"
            + "5664377939b67756755757777a1"
            + "574366687b955375634476747a2"
            + "475543783f945636a45559887b3"
            + "576737754b96744694455889a92"
            + "377628984d86683795545a8a693"
            + "5645555a9a844235a544a5a7d65"
            + "386537795d876636d73739589d3"
            + "487626574c9665677746686a8a2"
            + "477526783d84873797555778593"
            + "357627894f865733985648998d3"
            + "484436385a6676479743669a7a3"
            + "6644756a6b654254d3544557ab4"
            + "385637765e746845934458887d3"
            + "666588988eb4778675581978972"
            + "486527684b665547954467896c3"
            + "575738754c667755764359785a2"
            + "486737843ea6784694455978592"
            + "545645694ca443748343aa96d95"
            + "365526774f96565366457867d84"
            + "376637843c86743684467988c82"
            + "453544874bb66864865375866a2"
            + "776858985c964473f644b768871"
            + "476719984be77847e6786765763";
    private static final int ID_MIN_LETTERS = 8;
    private static final int ID_COST_EIGHTHS = 39;
    private static final int ID_MIN_VOWELLESS = 6;
    private static final String[] MASKS = {"<email>", "<uuid>", "<n>", "<hex>", "<id>"};

    /**
     * Strips what varies between occurrences of one failure from a message,
     * exactly as Go's {@code rdq.NormalizeMessage} does (its doc comment states
     * the algorithm; testdata/fingerprints.json is the golden table both
     * implementations reproduce): ASCII case folded, "http/1.1" read as "http",
     * then each token of letters, digits and underscores joined by - . + @
     * masked: status codes after a status word kept, e-mails "&lt;email&gt;",
     * UUIDs "&lt;uuid&gt;", numbers "&lt;n&gt;", hex "&lt;hex&gt;", other tokens
     * with a digit or a run of letters unlike English "&lt;id&gt;"; runs of white
     * space become one space, trimmed; quoted values holding a mask become
     * "&lt;v&gt;".
     */
    public static String normalizeMessage(String msg) {
        msg = asciiLower(msg);
        msg = FP_HTTP_VERSION.matcher(msg).replaceAll("http");
        StringBuilder b = new StringBuilder(msg.length());
        Matcher m = FP_TOKEN.matcher(msg);
        String prev = "";
        int last = 0;
        while (m.find()) {
            String tok = m.group();
            b.append(msg, last, m.start());
            b.append(maskToken(tok, prev));
            prev = tok;
            last = m.end();
        }
        b.append(msg, last, msg.length());
        String out = FP_SPACE.matcher(b).replaceAll(" ");
        int start = 0;
        int end = out.length();
        while (start < end && out.charAt(start) == ' ') {
            start++;
        }
        while (end > start && out.charAt(end - 1) == ' ') {
            end--;
        }
        out = out.substring(start, end);
        if (out.indexOf('"') >= 0 || out.indexOf('\'') >= 0 || out.indexOf('`') >= 0) {
            out = maskQuoted(out);
        }
        return out;
    }

    // Step 5 of Go's NormalizeMessage: quoted values that hold a mask.
    private static String maskQuoted(String s) {
        StringBuilder b = null;
        int last = 0;
        for (int i = 0; i < s.length(); i++) {
            char q = s.charAt(i);
            if (q != '"' && q != '\'' && q != '`') {
                continue;
            }
            // Go counts the bytes of the value in UTF-8.
            int j = i + 1;
            int bytes = 0;
            while (j < s.length()) {
                char c = s.charAt(j);
                if (c == q || c == '/' || isSpace(c)) {
                    break;
                }
                bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : Character.isSurrogate(c) ? 2 : 3;
                if (bytes > 64) {
                    break;
                }
                j++;
            }
            if (j >= s.length() || s.charAt(j) != q || j == i + 1) {
                continue;
            }
            String inner = s.substring(i + 1, j);
            for (String m : MASKS) {
                if (!inner.equals(m) && inner.contains(m)) {
                    if (b == null) {
                        b = new StringBuilder(s.length());
                    }
                    b.append(s, last, i + 1).append("<v>");
                    last = j;
                    break;
                }
            }
            i = j;
        }
        if (b == null) {
            return s;
        }
        return b.append(s, last, s.length()).toString();
    }

    private static boolean isSpace(char c) {
        return c == '\t' || c == '\n' || c == 0x0B || c == '\f' || c == '\r' || c == ' ';
    }

    // The letters-only id rule of Go's NormalizeMessage.
    private static boolean hasIdLetters(String tok) {
        if (tok.length() < ID_MIN_VOWELLESS) {
            return false;
        }
        for (int i = 0; i < tok.length(); ) {
            char c = tok.charAt(i);
            if (c < 'a' || c > 'z') {
                i++;
                continue;
            }
            int j = i;
            while (j < tok.length() && tok.charAt(j) >= 'a' && tok.charAt(j) <= 'z') {
                j++;
            }
            if (lettersLookLikeId(tok, i, j)) {
                return true;
            }
            i = j;
        }
        return false;
    }

    private static boolean lettersLookLikeId(String tok, int from, int to) {
        int n = to - from;
        if (n < ID_MIN_VOWELLESS) {
            return false;
        }
        boolean vowel = false;
        for (int i = from; i < to; i++) {
            if ("aeiouy".indexOf(tok.charAt(i)) >= 0) {
                vowel = true;
                break;
            }
        }
        if (!vowel) {
            return true;
        }
        if (n < ID_MIN_LETTERS) {
            return false;
        }
        int cost = 0;
        int row = 0;
        for (int i = from; i < to; i++) {
            int col = tok.charAt(i) - 'a';
            cost += pairCost(row, col);
            row = col + 1;
        }
        cost += pairCost(row, 26);
        return 8 * cost >= ID_COST_EIGHTHS * (n + 1);
    }

    private static int pairCost(int row, int col) {
        return Character.digit(LETTER_PAIR_COST.charAt(row * 27 + col), 16);
    }

    private static String maskToken(String tok, String prev) {
        if (FP_STATUS.matcher(tok).matches() && STATUS_WORDS.contains(prev)) {
            return tok;
        }
        if (tok.indexOf('@') >= 0) {
            return "<email>";
        }
        if (FP_UUID.matcher(tok).matches()) {
            return "<uuid>";
        }
        if (FP_NUMBER.matcher(tok).matches()) {
            return "<n>";
        }
        if (FP_HEX.matcher(tok).matches()) {
            return "<hex>";
        }
        for (int i = 0; i < tok.length(); i++) {
            char c = tok.charAt(i);
            if (c >= '0' && c <= '9') {
                return "<id>";
            }
        }
        if (hasIdLetters(tok)) {
            return "<id>";
        }
        return tok;
    }

    private static String asciiLower(String s) {
        char[] c = null;
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch >= 'A' && ch <= 'Z') {
                if (c == null) {
                    c = s.toCharArray();
                }
                c[i] = (char) (ch + ('a' - 'A'));
            }
        }
        return c == null ? s : new String(c);
    }

    /**
     * A short, stable identifier of a failure's cause: the first 8 bytes, in
     * lower-case hex, of the SHA-256 of the error type, a NUL byte and the
     * normalized message, as Go's {@code rdq.Fingerprint}.
     */
    public static String fingerprint(String errorType, String message) {
        return hashFingerprint(errorType + "\0" + normalizeMessage(message));
    }

    /** The first 8 bytes, in lower-case hex, of the SHA-256 of text's UTF-8 bytes. */
    static String hashFingerprint(String text) {
        try {
            byte[] sum = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
            StringBuilder sb = new StringBuilder(16);
            for (int i = 0; i < 8; i++) {
                sb.append(Character.forDigit((sum[i] >> 4) & 0xF, 16)).append(Character.forDigit(sum[i] & 0xF, 16));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every Java platform", e);
        }
    }
}
