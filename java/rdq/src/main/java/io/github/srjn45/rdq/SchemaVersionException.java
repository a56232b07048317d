package io.github.srjn45.rdq;

/**
 * The database schema is at a version this build of the Java SDK does not
 * know: not migrated yet, migrated by an older rdq, or by a newer one. The
 * message says which and what to do.
 */
public class SchemaVersionException extends RdqException {
    private static final long serialVersionUID = 1L;
    private final int found;

    /** Creates the exception for the version found in the database. */
    public SchemaVersionException(int found, String message) {
        super(message);
        this.found = found;
    }

    /** The schema version found in the database; 0 when never migrated. */
    public int found() {
        return found;
    }
}
