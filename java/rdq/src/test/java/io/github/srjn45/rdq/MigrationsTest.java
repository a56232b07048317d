package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

class MigrationsTest {
    PGSimpleDataSource ds;
    String schema;

    @BeforeEach
    void setUp() {
        ds = TestDb.dataSource();
        byte[] b = new byte[8];
        new SecureRandom().nextBytes(b);
        schema = "rdqjava_mig_" + HexFormat.of().formatHex(b);
    }

    @AfterEach
    void tearDown() throws SQLException {
        TestDb.drop(ds, schema);
    }

    /** The recorded migrations of the schema, "version name" each, in order. */
    List<String> recorded(String s) throws SQLException {
        List<String> out = new ArrayList<>();
        try (Connection c = ds.getConnection(); Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("SELECT version, name FROM \"" + s
                        + "\".schema_migrations ORDER BY version")) {
            while (rs.next()) {
                out.add(rs.getInt(1) + " " + rs.getString(2));
            }
        }
        return out;
    }

    List<String> shipped() {
        return Migrations.all().stream().map(m -> m.version() + " " + m.name()).toList();
    }

    @Test
    void shipsPgstoresMigrationsUpToTheKnownVersion() {
        assertEquals(SchemaVersion.latest(), Migrations.latestVersion());
        assertEquals("0001_init.sql", Migrations.all().get(0).name());
        for (Migrations.Migration m : Migrations.all()) {
            assertTrue(m.sql().contains("{schema}."), m.name() + " has no {schema} placeholder");
        }
    }

    @Test
    void lockKeyIsPgstores() {
        // Values of pgstore's lockKey (FNV-1a 64 of "rdq/pgstore/migrate:" + schema, as int64).
        assertEquals(-2174942213228472902L, Migrations.lockKey("rdq"));
        assertEquals(-5509399541404444477L, Migrations.lockKey("rdqjava_0123456789abcdef"));
    }

    @Test
    void migratesAFreshSchemaAndAgainIsANoOp() throws Exception {
        assertEquals(Migrations.latestVersion(), Migrations.migrate(ds, schema));
        List<String> first = recorded(schema);
        assertEquals(shipped(), first);
        // The client and the worker accept the schema.
        RdqClient client = RdqClient.builder(ds).schema(schema).build();
        SubmitResult r = client.submit(NewTask.builder("q", "h").payload("x").build());
        assertFalse(r.duplicate());

        assertEquals(Migrations.latestVersion(), Migrations.migrate(ds, schema));
        assertEquals(first, recorded(schema));
        try (Connection c = ds.getConnection(); Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("SELECT count(*) FROM \"" + schema + "\".tasks")) {
            rs.next();
            assertEquals(1, rs.getInt(1), "migrating again kept the task");
        }
    }

    @Test
    void upgradesAnOlderSchema() throws Exception {
        assertEquals(2, Migrations.migrate(ds, schema, 2));
        assertEquals(shipped().subList(0, 2), recorded(schema));
        SchemaVersionException e = assertThrows(SchemaVersionException.class,
                () -> RdqClient.builder(ds).schema(schema).build());
        assertTrue(e.getMessage().contains("run Migrations.migrate"), e.getMessage());
        assertEquals(Migrations.latestVersion(), Migrations.migrate(ds, schema));
        assertEquals(shipped(), recorded(schema));
        RdqClient.builder(ds).schema(schema).build();
    }

    @Test
    void concurrentMigratesApplyEachMigrationOnce() throws Exception {
        int n = 4;
        CyclicBarrier start = new CyclicBarrier(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<Integer>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(pool.submit(() -> {
                    start.await(10, TimeUnit.SECONDS);
                    return Migrations.migrate(ds, schema);
                }));
            }
            for (Future<Integer> f : fs) {
                assertEquals(Migrations.latestVersion(), f.get(60, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
        assertEquals(shipped(), recorded(schema));
    }

    @Test
    void waitsForPgstoresMigrationLock() throws Exception {
        // A migration holding pgstore's lock for this schema, as Go's Migrate would.
        try (Connection holder = ds.getConnection()) {
            holder.setAutoCommit(false);
            long key = Migrations.lockKey(schema);
            try (PreparedStatement ps = holder.prepareStatement("SELECT pg_advisory_xact_lock(?)")) {
                ps.setLong(1, key);
                ps.executeQuery().close();
            }
            CompletableFuture<Integer> migrating = CompletableFuture.supplyAsync(() -> Migrations.migrate(ds, schema));
            try {
                DbTestBase.await(Duration.ofSeconds(20), "a backend waiting on the advisory lock", () -> {
                    if (migrating.isDone()) {
                        return true; // the assertion below reports it
                    }
                    try (Statement st = holder.createStatement();
                            ResultSet rs = st.executeQuery("SELECT count(*) FROM pg_locks"
                                    + " WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1"
                                    + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                                    + " AND classid::bigint = " + (key >>> 32)
                                    + " AND objid::bigint = " + (key & 0xffffffffL))) {
                        rs.next();
                        return rs.getInt(1) > 0;
                    } catch (SQLException e) {
                        throw new RuntimeException(e);
                    }
                });
                assertFalse(migrating.isDone(), "migrate did not wait for the lock");
            } finally {
                holder.rollback();
            }
            assertEquals(Migrations.latestVersion(), migrating.get(60, TimeUnit.SECONDS));
        }
        assertEquals(shipped(), recorded(schema));
    }

    @Test
    void refusesASchemaNewerThanItKnows() throws Exception {
        Migrations.migrate(ds, schema);
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute("INSERT INTO \"" + schema + "\".schema_migrations (version, name) VALUES (999, '0999_future.sql')");
        }
        SchemaVersionException e = assertThrows(SchemaVersionException.class, () -> Migrations.migrate(ds, schema));
        assertEquals(999, e.found());
        assertTrue(e.getMessage().contains("newer than this Java SDK knows"), e.getMessage());
    }

    @Test
    void refusesAnInvalidSchemaName() {
        assertThrows(InvalidInputException.class, () -> Migrations.migrate(ds, "Bad-Name"));
        assertThrows(InvalidInputException.class, () -> Migrations.migrate(ds, "pg_rdq"));
    }

    /**
     * The Flyway scripts, run in order in their own transactions as Flyway
     * runs them, make the default schema that Migrations.migrate makes and
     * record the same versions. They name the schema rdq, so they run in a
     * database of their own.
     */
    @Test
    void flywayScriptsMakeTheSameSchema() throws Exception {
        // Not under Flyway's default location, which an application's own setup scans.
        assertEquals(null, Migrations.class.getResource("/db/migration"));
        String db = "rdqjava_flyway_" + schema.substring(schema.length() - 16);
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
            st.execute("CREATE DATABASE " + db);
        }
        try {
            PGSimpleDataSource fds = TestDb.dataSource();
            fds.setDatabaseName(db);
            try (Connection c = fds.getConnection()) {
                c.setAutoCommit(false);
                for (Migrations.Migration m : Migrations.all()) {
                    String desc = m.name().substring(m.name().indexOf('_') + 1, m.name().length() - 4);
                    String path = "flyway/V" + m.version() + "__" + desc + ".sql";
                    try (InputStream in = Migrations.class.getResourceAsStream(path)) {
                        assertTrue(in != null, path + " is missing");
                        String sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
                        assertFalse(sql.contains("{schema}"), path);
                        assertFalse(sql.contains("${"), path + " has a Flyway placeholder");
                        try (Statement st = c.createStatement()) {
                            st.execute(sql);
                        }
                    }
                    c.commit();
                }
            }
            try (Connection c = fds.getConnection(); Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT version, name FROM rdq.schema_migrations ORDER BY version")) {
                List<String> got = new ArrayList<>();
                while (rs.next()) {
                    got.add(rs.getInt(1) + " " + rs.getString(2));
                }
                assertEquals(shipped(), got);
            }
            assertEquals(Migrations.latestVersion(), Migrations.migrate(fds));
            RdqClient.builder(fds).build().submit(NewTask.builder("q", "h").payload("x").build());
        } finally {
            try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
                st.execute("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
            }
        }
    }
}
