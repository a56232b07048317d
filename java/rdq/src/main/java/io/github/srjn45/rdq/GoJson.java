package io.github.srjn45.rdq;

/** JSON strings written as Go's encoding/json writes them, so audit text is byte-equal across languages. */
final class GoJson {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    /**
     * Appends s as a quoted JSON string: quote, backslash, \n, \r and \t
     * escaped short; other control characters, &lt;, &gt;, &amp;, U+2028 and
     * U+2029 as \\u00XX; an unpaired surrogate as U+FFFD (Go's replacement of
     * invalid UTF-8).
     */
    static StringBuilder quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == '\u2028' || c == '\u2029') {
                        sb.append("\\u").append(HEX[c >> 12 & 0xF]).append(HEX[c >> 8 & 0xF])
                                .append(HEX[c >> 4 & 0xF]).append(HEX[c & 0xF]);
                    } else if (Character.isHighSurrogate(c) && i + 1 < s.length()
                            && Character.isLowSurrogate(s.charAt(i + 1))) {
                        sb.append(c).append(s.charAt(++i));
                    } else if (Character.isSurrogate(c)) {
                        sb.append("\ufffd");
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"');
    }

    private GoJson() {}
}
