package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.Migrations;
import io.github.srjn45.rdq.SchemaVersion;
import io.github.srjn45.rdq.SchemaVersionException;
import io.github.srjn45.rdq.Worker;
import io.github.srjn45.rdq.WorkerStats;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Objects;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * rdq's health: UP when the store answers, its schema is at a version this SDK
 * works with, and the worker (if the application has one) is running. DOWN
 * when the database cannot be reached or queried, when the schema's version is
 * one the SDK refuses (the detail says whether to migrate or upgrade), or when
 * the worker is not running. Details: the schema and its version, and the
 * worker's ID, state and counts since it started.
 */
public class RdqHealthIndicator extends AbstractHealthIndicator {
    /** The schema names the SDK accepts (PgStore's rule); the name is quoted into the queries below. */
    private static final Pattern SCHEMA = Pattern.compile("^[a-z_][a-z0-9_]{0,62}$");

    private final DataSource dataSource;
    private final String schema;
    private final RdqWorkerLifecycle worker;

    /**
     * A health indicator for schema on dataSource and, when worker is not
     * null, for that worker.
     *
     * @throws IllegalArgumentException when schema is not a name rdq accepts
     */
    public RdqHealthIndicator(DataSource dataSource, String schema, RdqWorkerLifecycle worker) {
        super("rdq health check failed");
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        String name = Objects.requireNonNull(schema, "schema").isEmpty() ? "rdq" : schema;
        if (!SCHEMA.matcher(name).matches()) {
            throw new IllegalArgumentException("rdq: schema name \"" + name + "\" is not one rdq uses: give lower-case "
                    + "letters, digits and underscores, starting with a letter or an underscore, at most 63 (rdq.schema)");
        }
        this.schema = name;
        this.worker = worker;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) throws Exception {
        builder.withDetail("schema", schema);
        int version = schemaVersion();
        builder.withDetail("schemaVersion", version).withDetail("sdkSchemaVersion", Migrations.latestVersion());
        boolean up = true;
        try {
            SchemaVersion.check(schema, version);
        } catch (SchemaVersionException e) {
            builder.withDetail("schemaError", e.getMessage());
            up = false;
        }
        if (worker != null) {
            Worker w = worker.worker();
            WorkerStats s = w.stats();
            builder.withDetail("worker", w.id()).withDetail("workerRunning", worker.isRunning())
                    .withDetail("claimed", s.claimed()).withDetail("succeeded", s.succeeded())
                    .withDetail("retried", s.retried()).withDetail("deadLettered", s.deadLettered())
                    .withDetail("leasesLost", s.leasesLost()).withDetail("released", s.released());
            up = up && worker.isRunning();
        }
        if (up) {
            builder.up();
        } else {
            builder.down();
        }
    }

    /** The highest migration recorded in the schema, 0 when it has none. */
    private int schemaVersion() throws Exception {
        try (Connection c = dataSource.getConnection(); Statement st = c.createStatement()) {
            try (ResultSet exists = st.executeQuery("SELECT to_regclass('\"" + schema + "\".schema_migrations') IS NOT NULL")) {
                exists.next();
                if (!exists.getBoolean(1)) {
                    return 0;
                }
            }
            try (ResultSet rs = st.executeQuery("SELECT coalesce(max(version), 0) FROM \"" + schema + "\".schema_migrations")) {
                rs.next();
                return rs.getInt(1);
            }
        }
    }
}
