package io.github.srjn45.rdq.testkit;

import io.github.srjn45.rdq.Migrations;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HexFormat;
import javax.sql.DataSource;

/**
 * Test schemas for the examples' tests: a fresh schema migrated with the
 * SDK's {@link Migrations}, the checked copy of pgstore's migrations.
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

    /** Creates a randomly named schema at the latest migration and returns its name. */
    public static String create(DataSource ds) throws SQLException, IOException {
        byte[] b = new byte[8];
        new SecureRandom().nextBytes(b);
        String schema = "rdqjava_" + HexFormat.of().formatHex(b);
        Migrations.migrate(ds, schema);
        return schema;
    }

    /** Drops a schema and everything in it. */
    public static void drop(DataSource ds, String schema) throws SQLException {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
        }
    }
}
