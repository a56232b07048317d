package io.github.srjn45.rdq;

/**
 * The base of the exceptions rdq throws. Subclasses say what went wrong:
 * {@link InvalidInputException} for input rdq rejects before writing anything,
 * {@link SchemaVersionException} for a database schema this SDK does not know,
 * {@link StoreException} for a failed database call.
 */
public class RdqException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Creates an exception with a message. */
    public RdqException(String message) {
        super(message);
    }

    /** Creates an exception with a message and a cause. */
    public RdqException(String message, Throwable cause) {
        super(message, cause);
    }
}
