package io.github.srjn45.rdq.spring;

import static org.junit.jupiter.api.Assertions.fail;

import java.net.URI;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HexFormat;
import java.util.function.BooleanSupplier;
import org.postgresql.ds.PGSimpleDataSource;
import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * The test database, RDQ_TEST_DATABASE_URL as for the Go tests and the SDK's
 * (a postgres:// URL), and fresh schema names on it.
 */
public final class TestDatabase {
    private TestDatabase() {}

    private static URI uri() {
        String u = System.getenv("RDQ_TEST_DATABASE_URL");
        return URI.create(u == null || u.isEmpty() ? "postgres://postgres@127.0.0.1:5432/test" : u);
    }

    /** The JDBC URL of the test database. */
    public static String jdbcUrl() {
        URI u = uri();
        String path = u.getPath() == null ? "" : u.getPath().replaceFirst("^/", "");
        return "jdbc:postgresql://" + (u.getHost() == null ? "127.0.0.1" : u.getHost()) + ":"
                + (u.getPort() < 0 ? 5432 : u.getPort()) + "/" + (path.isEmpty() ? "postgres" : path);
    }

    /** The user of the test database. */
    public static String user() {
        String info = uri().getUserInfo();
        return info == null ? "postgres" : info.split(":", 2)[0];
    }

    /** The password of the test database, empty when none. */
    public static String password() {
        String info = uri().getUserInfo();
        String[] parts = info == null ? new String[0] : info.split(":", 2);
        return parts.length == 2 ? parts[1] : "";
    }

    /** A data source on the test database, outside any Spring context. */
    public static PGSimpleDataSource dataSource() {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(jdbcUrl());
        ds.setUser(user());
        ds.setPassword(password());
        return ds;
    }

    /** A schema name no other test uses. */
    public static String newSchemaName() {
        byte[] b = new byte[8];
        new SecureRandom().nextBytes(b);
        return "rdqspring_" + HexFormat.of().formatHex(b);
    }

    /**
     * Registers the test database as the application's {@code spring.datasource},
     * and schema as rdq's, migrated at start.
     */
    public static void register(DynamicPropertyRegistry r, String schema) {
        r.add("spring.datasource.url", TestDatabase::jdbcUrl);
        r.add("spring.datasource.username", TestDatabase::user);
        r.add("spring.datasource.password", TestDatabase::password);
        r.add("rdq.schema", () -> schema);
        r.add("rdq.migrate", () -> "true");
    }

    /** Drops schema and everything in it. */
    public static void drop(String schema) throws SQLException {
        try (Connection c = dataSource().getConnection(); Statement st = c.createStatement()) {
            st.execute("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
        }
    }

    /** Waits until cond holds, failing with what after a minute: a bound for a stuck test, not a timing. */
    public static void await(String what, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofMinutes(1).toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out waiting until " + what);
            }
            Thread.sleep(10);
        }
    }
}
