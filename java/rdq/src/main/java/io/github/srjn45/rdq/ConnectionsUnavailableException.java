package io.github.srjn45.rdq;

/**
 * {@link Worker#start} could not take, at once, every connection the worker
 * holds while it runs: its {@code DataSource} (typically a pool too small
 * for the worker and the application together) gave {@link #obtained()} of
 * {@link #needed()}. Nothing was started; the connections taken were given
 * back. The cause is the driver's or the pool's exception.
 */
public final class ConnectionsUnavailableException extends RdqException {
    private static final long serialVersionUID = 1L;

    private final int needed;
    private final int obtained;

    ConnectionsUnavailableException(String message, int needed, int obtained, Throwable cause) {
        super(message, cause);
        this.needed = needed;
        this.obtained = obtained;
    }

    /** How many connections the worker holds while it runs. */
    public int needed() {
        return needed;
    }

    /** How many the DataSource gave before it failed. */
    public int obtained() {
        return obtained;
    }
}
