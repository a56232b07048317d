package io.github.srjn45.rdq;

import java.security.SecureRandom;
import java.util.UUID;

/**
 * Task IDs: UUIDv7 (RFC 9562), time-ordered and monotonic within a process,
 * generated as Go's {@code rdq.NewID} does.
 */
public final class Ids {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static long lastMs;
    private static int seq;

    private Ids() {}

    /** A new, unique, time-ordered task ID. */
    public static UUID newId() {
        byte[] id = new byte[16];
        RANDOM.nextBytes(id);
        long ms;
        int s;
        synchronized (Ids.class) {
            ms = System.currentTimeMillis();
            if (ms <= lastMs) {
                ms = lastMs;
                seq++;
                if (seq > 0x0fff) {
                    ms++;
                    seq = 0;
                }
            } else {
                seq = (((id[6] & 0xff) << 8) | (id[7] & 0xff)) & 0x07ff;
            }
            lastMs = ms;
            s = seq;
        }
        id[0] = (byte) (ms >>> 40);
        id[1] = (byte) (ms >>> 32);
        id[2] = (byte) (ms >>> 24);
        id[3] = (byte) (ms >>> 16);
        id[4] = (byte) (ms >>> 8);
        id[5] = (byte) ms;
        id[6] = (byte) (0x70 | ((s >>> 8) & 0x0f));
        id[7] = (byte) s;
        id[8] = (byte) ((id[8] & 0x3f) | 0x80);
        long hi = 0;
        long lo = 0;
        for (int i = 0; i < 8; i++) {
            hi = (hi << 8) | (id[i] & 0xff);
            lo = (lo << 8) | (id[8 + i] & 0xff);
        }
        return new UUID(hi, lo);
    }
}
