package io.github.srjn45.rdq;

import java.time.Duration;

/** Formats durations as Go's time.Duration.String does, so messages match. */
final class GoDurations {
    private GoDurations() {}

    static String format(Duration d) {
        long nanos;
        try {
            nanos = d.toNanos();
        } catch (ArithmeticException e) {
            nanos = d.isNegative() ? Long.MIN_VALUE : Long.MAX_VALUE;
        }
        return format(nanos);
    }

    static String format(long d) {
        if (d == 0) {
            return "0s";
        }
        boolean neg = d < 0;
        // Unsigned magnitude, as Go computes it.
        long u = neg ? -d : d;
        StringBuilder sb = new StringBuilder();
        if (Long.compareUnsigned(u, 1_000_000_000L) < 0) {
            String unit;
            int prec;
            if (u < 1_000L) {
                unit = "ns";
                prec = 0;
            } else if (u < 1_000_000L) {
                unit = "µs";
                prec = 3;
            } else {
                unit = "ms";
                prec = 6;
            }
            appendFrac(sb, u, prec);
            sb.append(unit);
        } else {
            long secsTotal = Long.divideUnsigned(u, 1_000_000_000L);
            long frac = Long.remainderUnsigned(u, 1_000_000_000L);
            long h = secsTotal / 3600;
            long m = (secsTotal / 60) % 60;
            long s = secsTotal % 60;
            if (h > 0) {
                sb.append(h).append('h');
            }
            if (h > 0 || m > 0) {
                sb.append(m).append('m');
            }
            sb.append(s);
            appendFraction(sb, frac, 9);
            sb.append('s');
        }
        return neg ? "-" + sb : sb.toString();
    }

    private static void appendFrac(StringBuilder sb, long u, int prec) {
        long pow = 1;
        for (int i = 0; i < prec; i++) {
            pow *= 10;
        }
        sb.append(u / pow);
        appendFraction(sb, u % pow, prec);
    }

    private static void appendFraction(StringBuilder sb, long frac, int prec) {
        if (prec == 0 || frac == 0) {
            return;
        }
        String digits = String.format("%0" + prec + "d", frac);
        int end = digits.length();
        while (end > 0 && digits.charAt(end - 1) == '0') {
            end--;
        }
        sb.append('.').append(digits, 0, end);
    }
}
