package io.github.srjn45.rdq;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * pgstore's statements, as the Go code holds them in pgstore/sql.go. The
 * resource pgstore-sql.json is generated from that file, and a Go test fails
 * when it is stale, so the Java SDK runs exactly the Go store's SQL.
 */
final class Sql {
    private static final Map<String, String> STATEMENTS = load();

    private static Map<String, String> load() {
        try (InputStream in = Sql.class.getResourceAsStream("pgstore-sql.json")) {
            if (in == null) {
                throw new IllegalStateException("rdq: pgstore-sql.json is missing from the jar");
            }
            return new ObjectMapper().readValue(in, new TypeReference<Map<String, String>>() {});
        } catch (IOException e) {
            throw new IllegalStateException("rdq: reading pgstore-sql.json", e);
        }
    }

    private static final Pattern PARAM = Pattern.compile("\\$(\\d+)");

    /** A statement with {schema} filled in and $n placeholders turned into JDBC's ?. */
    static final class Stmt {
        final String name;
        final String jdbc;
        /** order[i] is n of the $n that the i-th ? stands for. */
        final int[] order;

        Stmt(String name, String sql) {
            this.name = name;
            Matcher m = PARAM.matcher(sql);
            StringBuilder sb = new StringBuilder();
            List<Integer> ord = new ArrayList<>();
            while (m.find()) {
                ord.add(Integer.parseInt(m.group(1)));
                m.appendReplacement(sb, "?");
            }
            m.appendTail(sb);
            this.jdbc = sb.toString();
            this.order = ord.stream().mapToInt(Integer::intValue).toArray();
        }

        /** Prepares the statement on c and binds args, args[n-1] being $n. */
        PreparedStatement prepare(Connection c, Object... args) throws SQLException {
            PreparedStatement ps = c.prepareStatement(jdbc);
            try {
                for (int i = 0; i < order.length; i++) {
                    Object v = args[order[i] - 1];
                    int pos = i + 1;
                    if (v == null) {
                        ps.setNull(pos, Types.OTHER);
                    } else if (v instanceof String s) {
                        ps.setString(pos, s);
                    } else if (v instanceof Integer n) {
                        ps.setInt(pos, n);
                    } else if (v instanceof Long n) {
                        ps.setLong(pos, n);
                    } else if (v instanceof byte[] b) {
                        ps.setBytes(pos, b);
                    } else if (v instanceof java.sql.Array a) {
                        ps.setArray(pos, a);
                    } else {
                        ps.setObject(pos, v);
                    }
                }
                return ps;
            } catch (SQLException | RuntimeException e) {
                ps.close();
                throw e;
            }
        }
    }

    /** The named statement for the quoted schema. */
    static Stmt get(String name, String quotedSchema) {
        String sql = STATEMENTS.get(name);
        if (sql == null) {
            throw new IllegalStateException("rdq: pgstore-sql.json has no statement " + name);
        }
        return new Stmt(name, sql.replace("{schema}", quotedSchema));
    }

    /** The raw text of a statement, for those that take no parameters. */
    static String raw(String name) {
        String sql = STATEMENTS.get(name);
        if (sql == null) {
            throw new IllegalStateException("rdq: pgstore-sql.json has no statement " + name);
        }
        return sql;
    }

    private Sql() {}
}
