package io.github.srjn45.rdq;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;

/**
 * Creates and upgrades rdq's schema from Java, without the Go tooling.
 *
 * <p>The migrations shipped in this jar are a copy of the Go store's
 * ({@code pgstore/migrations}), generated from them and checked by a Go test,
 * and {@link #migrate(DataSource, String)} applies them exactly as
 * {@code pgstore.Migrate} does: in one transaction, under the same advisory
 * lock, recording each version in the schema's {@code schema_migrations}
 * table. Go, Java and the {@code rdq migrate} command therefore agree on which
 * migrations ran, and may migrate the same schema at the same time.
 *
 * <p>For Flyway, the jar also holds the same migrations for the default
 * schema as versioned scripts under {@code classpath:io/github/srjn45/rdq/flyway}, each
 * recording its version in {@code rdq.schema_migrations} too.
 */
public final class Migrations {
    private static final String DIR = "migrations/";
    private static final List<Migration> ALL = load();

    private Migrations() {}

    /** One shipped migration: version, file name (NNNN_description.sql) and body with {schema} placeholders. */
    record Migration(int version, String name, String sql) {}

    private static List<Migration> load() {
        List<Migration> ms = new ArrayList<>();
        try (InputStream in = Migrations.class.getResourceAsStream(DIR + "index.txt")) {
            if (in == null) {
                throw new IllegalStateException("rdq: the migrations index is missing from the jar");
            }
            BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            for (String name = r.readLine(); name != null; name = r.readLine()) {
                if (name.isBlank()) {
                    continue;
                }
                int v = Integer.parseInt(name.substring(0, name.indexOf('_')));
                if (!ms.isEmpty() && v <= ms.get(ms.size() - 1).version()) {
                    throw new IllegalStateException("rdq: migration " + name + " is out of order");
                }
                try (InputStream body = Migrations.class.getResourceAsStream(DIR + name)) {
                    if (body == null) {
                        throw new IllegalStateException("rdq: migration " + name + " is missing from the jar");
                    }
                    ms.add(new Migration(v, name, new String(body.readAllBytes(), StandardCharsets.UTF_8)));
                }
            }
        } catch (IOException e) {
            throw new IllegalStateException("rdq: reading the migrations", e);
        }
        if (ms.isEmpty()) {
            throw new IllegalStateException("rdq: the jar holds no migrations");
        }
        return List.copyOf(ms);
    }

    /** The shipped migrations, in version order. */
    static List<Migration> all() {
        return ALL;
    }

    /** The schema version {@link #migrate} brings a schema to: the last shipped migration's. */
    public static int latestVersion() {
        return ALL.get(ALL.size() - 1).version();
    }

    /**
     * Migrates the default schema, {@code rdq}.
     *
     * @see #migrate(DataSource, String)
     */
    public static int migrate(DataSource ds) {
        return migrate(ds, PgStore.DEFAULT_SCHEMA);
    }

    /**
     * Creates the schema if needed and applies every shipped migration not
     * applied yet, each recorded in the schema's {@code schema_migrations}
     * table, as {@code pgstore.Migrate} does.
     *
     * <p>It runs in one transaction holding a transaction-scoped advisory lock
     * keyed on the schema (the Go store's key), so any number of processes, Go
     * or Java, may migrate at once: one applies the migrations, the others wait
     * and then find nothing to do. Calling it again is a no-op. A failed
     * migration rolls back entirely.
     *
     * @param schema the schema holding rdq's tables; null or empty for {@code rdq}
     * @return the schema's version afterwards, {@link #latestVersion()}
     * @throws InvalidInputException when the schema name is not one pgstore accepts
     * @throws SchemaVersionException when the schema is newer than this SDK knows
     * @throws StoreException when the database fails
     */
    public static int migrate(DataSource ds, @Nullable String schema) {
        return migrate(ds, schema, Integer.MAX_VALUE);
    }

    /** Migrates up to version {@code upTo} (inclusive); tests use it to make old schemas. */
    static int migrate(DataSource ds, String schema, int upTo) {
        String name = schema == null || schema.isEmpty() ? PgStore.DEFAULT_SCHEMA : schema;
        PgStore.validateSchema(name);
        try (Connection c = ds.getConnection()) {
            boolean auto = c.getAutoCommit();
            c.setAutoCommit(false);
            try {
                int v = migrate(c, name, upTo);
                c.commit();
                return v;
            } catch (SQLException | RuntimeException e) {
                try {
                    c.rollback();
                } catch (SQLException re) {
                    e.addSuppressed(re);
                }
                throw e;
            } finally {
                c.setAutoCommit(auto);
            }
        } catch (SQLException e) {
            throw new StoreException("rdq: migrating schema " + name + ": " + e.getMessage(), e);
        }
    }

    private static int migrate(Connection c, String schema, int upTo) throws SQLException {
        String q = "\"" + schema + "\"";
        try (PreparedStatement ps = Sql.get("sqlMigrateLock", q).prepare(c, lockKey(schema));
                ResultSet rs = ps.executeQuery()) {
            rs.next();
        }
        // Creating needs the CREATE privilege on the database even when the
        // schema exists, so a schema an administrator made is not created again.
        boolean exists;
        try (PreparedStatement ps = Sql.get("sqlSchemaExists", q).prepare(c, schema);
                ResultSet rs = ps.executeQuery()) {
            rs.next();
            exists = rs.getBoolean(1);
        }
        try (Statement st = c.createStatement()) {
            if (!exists) {
                st.execute(Sql.get("sqlCreateSchema", q).jdbc);
            }
            st.execute(Sql.get("sqlCreateMigrationsTable", q).jdbc);
        }
        int current;
        try (PreparedStatement ps = Sql.get("sqlCurrentVersion", q).prepare(c); ResultSet rs = ps.executeQuery()) {
            rs.next();
            current = rs.getInt(1);
        }
        if (current > latestVersion()) {
            throw new SchemaVersionException(current, "rdq: schema \"" + schema + "\" is at version " + current
                    + ", newer than this Java SDK knows (" + latestVersion()
                    + "): upgrade the rdq Java SDK to the release matching the rdq that migrated it");
        }
        Sql.Stmt record = Sql.get("sqlRecordVersion", q);
        for (Migration m : ALL) {
            if (m.version() <= current || m.version() > upTo) {
                continue;
            }
            try (Statement st = c.createStatement()) {
                st.execute(m.sql().replace("{schema}", q));
            } catch (SQLException e) {
                throw new SQLException("applying migration " + m.name() + ": " + e.getMessage(),
                        e.getSQLState(), e);
            }
            try (PreparedStatement ps = record.prepare(c, m.version(), m.name())) {
                ps.executeUpdate();
            }
            current = m.version();
        }
        return current;
    }

    /**
     * The advisory lock that serializes migrations of one schema: pgstore's
     * key, the 64-bit FNV-1a hash of {@code "rdq/pgstore/migrate:" + schema}.
     */
    static long lockKey(String schema) {
        long h = 0xcbf29ce484222325L;
        for (byte b : ("rdq/pgstore/migrate:" + schema).getBytes(StandardCharsets.UTF_8)) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        return h;
    }
}
