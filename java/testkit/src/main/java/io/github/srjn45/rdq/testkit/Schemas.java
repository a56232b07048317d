package io.github.srjn45.rdq.testkit;

import java.io.IOException;
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

/**
 * Test schemas for the examples' tests: a fresh schema migrated by applying
 * the Go migration files (pgstore/migrations) in order, as pgstore.Migrate
 * does. The Java SDK has no migrations of its own; this is test support only.
 */
public final class Schemas {
    private Schemas() {}

    /** The repository root: the parent of the java/ directory holding the current module. */
    public static Path repoRoot() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isDirectory(p.resolve("pgstore/migrations"))) {
            p = p.getParent();
        }
        if (p == null) {
            throw new IllegalStateException("no pgstore/migrations above " + Path.of("").toAbsolutePath());
        }
        return p;
    }

    /** A data source on RDQ_TEST_DATABASE_URL (the Go tests' database). */
    public static DataSource testDataSource() {
        String url = System.getenv("RDQ_TEST_DATABASE_URL");
        if (url == null || url.isEmpty()) {
            url = "postgres://postgres@127.0.0.1:5432/test";
        }
        return Env.dataSource(url);
    }

    /** Creates a randomly named schema at the latest Go migration and returns its name. */
    public static String create(DataSource ds) throws SQLException, IOException {
        byte[] b = new byte[8];
        new SecureRandom().nextBytes(b);
        String schema = "rdqjava_" + HexFormat.of().formatHex(b);
        List<Path> files;
        try (Stream<Path> s = Files.list(repoRoot().resolve("pgstore/migrations"))) {
            files = s.filter(f -> f.getFileName().toString().endsWith(".sql")).sorted().toList();
        }
        String q = "\"" + schema + "\"";
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.execute("CREATE SCHEMA " + q);
                st.execute("CREATE TABLE " + q + ".schema_migrations (version integer PRIMARY KEY,"
                        + " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
            }
            for (Path f : files) {
                String name = f.getFileName().toString();
                try (Statement st = c.createStatement()) {
                    st.execute(Files.readString(f).replace("{schema}", q));
                }
                try (PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO " + q + ".schema_migrations (version, name) VALUES (?, ?)")) {
                    ps.setInt(1, Integer.parseInt(name.substring(0, name.indexOf('_'))));
                    ps.setString(2, name);
                    ps.executeUpdate();
                }
            }
            c.commit();
        }
        return schema;
    }

    /** Drops a schema and everything in it. */
    public static void drop(DataSource ds, String schema) throws SQLException {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
        }
    }
}
