package io.github.srjn45.rdq;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The test database (RDQ_TEST_DATABASE_URL, as for the Go tests) and fresh
 * schemas migrated by applying the Go migration files, as pgstore.Migrate does.
 * The Java SDK has no migrations of its own: tests read the Go ones.
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
    static String newSchema(DataSource ds, int upTo) throws SQLException, IOException {
        byte[] b = new byte[8];
        new SecureRandom().nextBytes(b);
        String schema = "rdqjava_" + HexFormat.of().formatHex(b);
        migrate(ds, schema, upTo);
        return schema;
    }

    static String newSchema(DataSource ds) throws SQLException, IOException {
        return newSchema(ds, Integer.MAX_VALUE);
    }

    static void migrate(DataSource ds, String schema, int upTo) throws SQLException, IOException {
        List<Path> files;
        try (Stream<Path> s = Files.list(repoRoot().resolve("pgstore/migrations"))) {
            files = s.filter(p -> p.getFileName().toString().endsWith(".sql")).sorted().toList();
        }
        String q = "\"" + schema + "\"";
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.execute("CREATE SCHEMA IF NOT EXISTS " + q);
                st.execute("CREATE TABLE IF NOT EXISTS " + q + ".schema_migrations (version integer PRIMARY KEY,"
                        + " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
            }
            for (Path f : files) {
                String name = f.getFileName().toString();
                int v = Integer.parseInt(name.substring(0, name.indexOf('_')));
                if (v > upTo) {
                    break;
                }
                try (Statement st = c.createStatement()) {
                    st.execute(Files.readString(f).replace("{schema}", q));
                }
                try (PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO " + q + ".schema_migrations (version, name) VALUES (?, ?)")) {
                    ps.setInt(1, v);
                    ps.setString(2, name);
                    ps.executeUpdate();
                }
            }
            c.commit();
        }
    }

    static void drop(DataSource ds, String schema) throws SQLException {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
        }
    }
}
