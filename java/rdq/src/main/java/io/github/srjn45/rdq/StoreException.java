package io.github.srjn45.rdq;

/** A database call failed; the cause is the driver's exception. */
public class StoreException extends RdqException {
    private static final long serialVersionUID = 1L;

    /** Creates the exception for an operation and its cause. */
    public StoreException(String message, Throwable cause) {
        super(message, cause);
    }
}
