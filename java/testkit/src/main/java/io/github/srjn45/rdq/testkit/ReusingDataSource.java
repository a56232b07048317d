package io.github.srjn45.rdq.testkit;

import java.io.PrintWriter;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.logging.Logger;
import javax.sql.DataSource;

/**
 * A data source that keeps closed connections open for the next caller, as
 * the connection pool of a Java service (or Go's pgxpool) does, so that the
 * benchmark measures rdq rather than TCP, TLS and authentication. A connection
 * comes back with autocommit on, its open transaction rolled back and its
 * LISTENs dropped; an aborted or broken one is not kept. Unbounded: for the
 * benchmark's few connections only.
 */
final class ReusingDataSource implements DataSource {
    private final DataSource target;
    private final ConcurrentLinkedDeque<Connection> idle = new ConcurrentLinkedDeque<>();

    ReusingDataSource(DataSource target) {
        this.target = target;
    }

    @Override
    public Connection getConnection() throws SQLException {
        Connection c;
        while ((c = idle.pollFirst()) != null) {
            if (!c.isClosed()) {
                return wrap(c);
            }
        }
        return wrap(target.getConnection());
    }

    /** Closes the connections kept. */
    void closeAll() throws SQLException {
        Connection c;
        while ((c = idle.pollFirst()) != null) {
            c.close();
        }
    }

    private Connection wrap(Connection real) {
        InvocationHandler h = new InvocationHandler() {
            private volatile boolean done;

            @Override
            public Object invoke(Object proxy, Method m, Object[] args) throws Throwable {
                switch (m.getName()) {
                    case "close":
                        if (!done) {
                            done = true;
                            giveBack(real);
                        }
                        return null;
                    case "isClosed":
                        return done || real.isClosed();
                    case "abort":
                        done = true;
                        break;
                    case "equals":
                        return proxy == args[0];
                    case "hashCode":
                        return System.identityHashCode(proxy);
                    default:
                        if (done) {
                            throw new SQLException("connection closed");
                        }
                }
                try {
                    return m.invoke(real, args);
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
            }
        };
        return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, h);
    }

    private void giveBack(Connection real) throws SQLException {
        try {
            if (real.isClosed()) {
                return;
            }
            if (!real.getAutoCommit()) {
                real.rollback();
                real.setAutoCommit(true);
            }
            try (Statement st = real.createStatement()) {
                st.execute("UNLISTEN *");
            }
            idle.addFirst(real);
        } catch (SQLException e) {
            real.close();
        }
    }

    @Override
    public Connection getConnection(String user, String password) throws SQLException {
        throw new SQLFeatureNotSupportedException("ReusingDataSource: the target's user only");
    }

    @Override
    public PrintWriter getLogWriter() throws SQLException {
        return target.getLogWriter();
    }

    @Override
    public void setLogWriter(PrintWriter out) throws SQLException {
        target.setLogWriter(out);
    }

    @Override
    public void setLoginTimeout(int seconds) throws SQLException {
        target.setLoginTimeout(seconds);
    }

    @Override
    public int getLoginTimeout() throws SQLException {
        return target.getLoginTimeout();
    }

    @Override
    public Logger getParentLogger() throws SQLFeatureNotSupportedException {
        return target.getParentLogger();
    }

    @Override
    public <T> T unwrap(Class<T> iface) throws SQLException {
        return target.unwrap(iface);
    }

    @Override
    public boolean isWrapperFor(Class<?> iface) throws SQLException {
        return target.isWrapperFor(iface);
    }
}
