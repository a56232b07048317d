package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.fail;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.postgresql.ds.PGSimpleDataSource;

/** A fresh migrated schema per test on the real test database. */
abstract class DbTestBase {
    PGSimpleDataSource ds;
    String schema;
    PgStore store;
    final List<Worker> workers = new ArrayList<>();

    @BeforeEach
    void createSchema() throws Exception {
        ds = TestDb.dataSource();
        schema = TestDb.newSchema(ds);
        store = new PgStore(schema);
    }

    @AfterEach
    void dropSchema() throws Exception {
        for (Worker w : workers) {
            w.stop(Duration.ofSeconds(5));
        }
        TestDb.drop(ds, schema);
    }

    RdqClient client() {
        return RdqClient.builder(ds).schema(schema).build();
    }

    Worker.Builder worker() {
        return Worker.builder(ds).schema(schema).pollInterval(Duration.ofMillis(100))
                .disablePurge().disableReclaim();
    }

    Worker started(Worker.Builder b) {
        Worker w = b.build();
        workers.add(w);
        w.start();
        return w;
    }

    Task task(UUID id) throws SQLException {
        try (Connection c = ds.getConnection()) {
            return store.get(c, id);
        }
    }

    List<Attempt> history(UUID id) throws SQLException {
        try (Connection c = ds.getConnection()) {
            return store.attempts(c, id);
        }
    }

    long scalar(String sql) throws SQLException {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement(sql.replace("{schema}", "\"" + schema + "\""));
                ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /** Polls cond every 20ms until it holds, failing after timeout. */
    static void await(Duration timeout, String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + timeout + " waiting for: " + what);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail("interrupted");
            }
        }
    }

    BooleanSupplier statusIs(UUID id, Status s) {
        return () -> {
            try {
                Task t = task(id);
                return t != null && t.status() == s;
            } catch (SQLException e) {
                throw new RuntimeException(e);
            }
        };
    }
}
