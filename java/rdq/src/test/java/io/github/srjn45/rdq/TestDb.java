package io.github.srjn45.rdq;

import java.net.URI;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HexFormat;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The test database (RDQ_TEST_DATABASE_URL, as for the Go tests) and fresh
 * schemas migrated with the SDK's own {@link Migrations}, a checked copy of
 * pgstore's.
 */
final class TestDb {
    private TestDb() {}

    static String url() {
        String u = System.getenv("RDQ_TEST_DATABASE_URL");
        return u == null || u.isEmpty() ? "postgres://postgres@127.0.0.1:5432/test" : u;
    }

    /** Converts a postgres:// URL to a JDBC data source. */
    static PGSimpleDataSource dataSource() {
        URI u = URI.create(url());
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setServerNames(new String[] {u.getHost() == null ? "127.0.0.1" : u.getHost()});
        ds.setPortNumbers(new int[] {u.getPort() < 0 ? 5432 : u.getPort()});
        String path = u.getPath() == null ? "" : u.getPath().replaceFirst("^/", "");
        ds.setDatabaseName(path.isEmpty() ? "postgres" : path);
        String info = u.getUserInfo();
        if (info != null) {
            String[] parts = info.split(":", 2);
            ds.setUser(parts[0]);
            if (parts.length == 2) {
                ds.setPassword(parts[1]);
            }
        }
        return ds;
    }

    static Path repoRoot() {
        String td = System.getProperty("rdq.testdata");
        if (td != null) {
            return Path.of(td).toAbsolutePath().normalize().getParent();
        }
        return Path.of("../..").toAbsolutePath().normalize();
    }

    static Path testdata() {
        return repoRoot().resolve("testdata");
    }

    /** Creates a schema migrated to the latest Go migration (or only up to {@code upTo}). */
    static String newSchema(DataSource ds, int upTo) {
        byte[] b = new byte[8];
        new SecureRandom().nextBytes(b);
        String schema = "rdqjava_" + HexFormat.of().formatHex(b);
        migrate(ds, schema, upTo);
        return schema;
    }

    static String newSchema(DataSource ds) {
        return newSchema(ds, Integer.MAX_VALUE);
    }

    static void migrate(DataSource ds, String schema, int upTo) {
        Migrations.migrate(ds, schema, upTo);
    }

    static void drop(DataSource ds, String schema) throws SQLException {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
        }
    }
}
