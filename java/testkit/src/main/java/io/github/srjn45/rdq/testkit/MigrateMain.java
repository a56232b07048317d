package io.github.srjn45.rdq.testkit;

import io.github.srjn45.rdq.Migrations;

/**
 * Migrates RDQ_SCHEMA on RDQ_DATABASE_URL with {@link Migrations#migrate} and
 * prints the schema's version afterwards.
 */
public final class MigrateMain {
    private MigrateMain() {}

    public static void main(String[] args) {
        Env.logging();
        System.out.println(Migrations.migrate(Env.dataSource(), Env.get("RDQ_SCHEMA", "rdq")));
    }
}
