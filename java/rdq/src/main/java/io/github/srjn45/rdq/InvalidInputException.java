package io.github.srjn45.rdq;

/**
 * Input that rdq rejects before anything is written: a bad name, a field over
 * its limit, an invalid envelope, an invalid policy. The message says what was
 * wrong and what to do. It is the Java counterpart of Go's {@code rdq.ErrInvalid}.
 */
public class InvalidInputException extends RdqException {
    private static final long serialVersionUID = 1L;

    /** Creates the exception; the message names the offending field. */
    public InvalidInputException(String message) {
        super(message);
    }
}
