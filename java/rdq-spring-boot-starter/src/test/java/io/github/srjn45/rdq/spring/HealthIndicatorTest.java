package io.github.srjn45.rdq.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.srjn45.rdq.Migrations;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.Status;

/** The health indicator DOWN when the store cannot be reached or its schema is not one the SDK knows. */
class HealthIndicatorTest {
    @Test
    void downWhenTheDatabaseCannotBeReached() {
        PGSimpleDataSource ds = TestDatabase.dataSource();
        ds.setURL("jdbc:postgresql://127.0.0.1:1/nowhere");
        ds.setConnectTimeout(5);
        Health h = new RdqHealthIndicator(ds, "rdq", null).health();
        assertEquals(Status.DOWN, h.getStatus(), h.toString());
        assertThat(h.getDetails()).containsKey("error");
    }

    @Test
    void aSchemaNameRdqDoesNotAcceptIsRefused() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdqHealthIndicator(TestDatabase.dataSource(), "x\"; DROP TABLE t; --", null));
        assertThat(e.getMessage()).contains("rdq.schema").contains("lower-case");
    }

    @Test
    void downWhenTheSchemaIsNotMigrated() {
        Health h = new RdqHealthIndicator(TestDatabase.dataSource(), TestDatabase.newSchemaName(), null).health();
        assertEquals(Status.DOWN, h.getStatus(), h.toString());
        assertEquals(0, h.getDetails().get("schemaVersion"));
        assertEquals(Migrations.latestVersion(), h.getDetails().get("sdkSchemaVersion"));
        assertThat((String) h.getDetails().get("schemaError")).contains("Migrations.migrate");
    }
}
