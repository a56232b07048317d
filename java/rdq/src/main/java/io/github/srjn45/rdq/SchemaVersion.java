package io.github.srjn45.rdq;

import java.util.Arrays;

/**
 * The database schema versions this build of the Java SDK works with. The
 * schema belongs to the Go migrations (pgstore/migrations); the SDK ships a
 * generated copy of them ({@link Migrations}). A Go test (internal/crosslang)
 * fails when the last entry is not pgstore's latest migration, so a new
 * migration is read and adopted here before it ships.
 */
public final class SchemaVersion {
    /**
     * The known versions, in increasing order: the statements this SDK runs
     * (a copy of pgstore's, checked by a Go test) need the tables and columns of
     * these versions, so any other version is refused at start.
     */
    public static final int[] KNOWN_VERSIONS = {10};

    private SchemaVersion() {}

    /** The newest version this SDK knows. */
    public static int latest() {
        return KNOWN_VERSIONS[KNOWN_VERSIONS.length - 1];
    }

    /**
     * Checks a version read from the database.
     *
     * @throws SchemaVersionException saying what to do when the version is unknown
     */
    public static void check(String schema, int found) {
        if (Arrays.stream(KNOWN_VERSIONS).anyMatch(v -> v == found)) {
            return;
        }
        if (found == 0) {
            throw new SchemaVersionException(found, "rdq: schema \"" + schema
                    + "\" has no rdq tables (version 0): create them with Migrations.migrate (or the Go "
                    + "pgstore.Migrate, or \"rdq migrate\"), then start again");
        }
        if (found < latest()) {
            throw new SchemaVersionException(found, "rdq: schema \"" + schema + "\" is at version " + found
                    + ", older than this Java SDK needs (" + latest() + "): run Migrations.migrate (or the Go "
                    + "pgstore.Migrate, or \"rdq migrate\") to bring it up to date");
        }
        throw new SchemaVersionException(found, "rdq: schema \"" + schema + "\" is at version " + found
                + ", which this Java SDK does not know (it knows " + Arrays.toString(KNOWN_VERSIONS)
                + "): upgrade the rdq Java SDK to the release matching the Go rdq that migrated it");
    }
}
