package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.Migrations;
import java.util.Objects;
import javax.sql.DataSource;
import org.springframework.beans.factory.InitializingBean;

/**
 * Creates or upgrades rdq's schema when the bean is initialized, with
 * {@link Migrations#migrate(DataSource, String)} (the SDK's copy of the Go
 * migrations, under their advisory lock, so instances starting together
 * migrate once). The auto-configuration creates it when {@code rdq.migrate=true}
 * and creates the client and the worker after it.
 */
public final class RdqSchemaMigration implements InitializingBean {
    private final DataSource dataSource;
    private final String schema;
    private volatile int version;

    /** Migrates schema on dataSource at initialization. */
    public RdqSchemaMigration(DataSource dataSource, String schema) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        this.schema = Objects.requireNonNull(schema, "schema");
    }

    @Override
    public void afterPropertiesSet() {
        version = Migrations.migrate(dataSource, schema);
    }

    /** The schema version the migration left; 0 before it ran. */
    public int version() {
        return version;
    }
}
