package io.github.srjn45.rdq.testkit;

import java.net.URI;
import java.time.Duration;
import org.postgresql.ds.PGSimpleDataSource;

/** Configuration of the testkit programs, from the environment the Go tests set. */
final class Env {
    private Env() {}

    static String get(String name, String def) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? def : v;
    }

    static int integer(String name, int def) {
        return Integer.parseInt(get(name, Integer.toString(def)));
    }

    static Duration millis(String name, long def) {
        return Duration.ofMillis(Long.parseLong(get(name, Long.toString(def))));
    }

    /** A data source for RDQ_DATABASE_URL, a postgres:// URL. */
    static PGSimpleDataSource dataSource() {
        return dataSource(get("RDQ_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"));
    }

    /** A data source for a postgres:// URL. */
    static PGSimpleDataSource dataSource(String url) {
        URI u = URI.create(url);
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
        ds.setApplicationName("rdq-java-testkit");
        return ds;
    }

    /** Quiets slf4j-simple unless RDQ_LOG_LEVEL says otherwise; call before any logger exists. */
    static void logging() {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", get("RDQ_LOG_LEVEL", "error"));
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
    }
}
