package io.github.srjn45.rdq.spring;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.datasource.DelegatingDataSource;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The data source of the auto-configured {@link io.github.srjn45.rdq.RdqClient}:
 * inside a Spring-managed transaction on the target data source it hands out
 * that transaction's connection (as Spring's {@code TransactionAwareDataSourceProxy}
 * does), so a submission commits or rolls back with the transaction; outside
 * one, a connection of its own, closed after the call.
 *
 * <p>Unlike that proxy, a joined connection refuses {@code commit},
 * {@code rollback} and {@code setAutoCommit}: a client call that manages its
 * own transaction ({@code RdqClient.redrive}) would otherwise commit the
 * caller's transaction half-way. It fails instead, before changing anything,
 * with a message saying to call it outside the transaction.
 */
final class TransactionJoiningDataSource extends DelegatingDataSource {
    TransactionJoiningDataSource(DataSource target) {
        super(target);
    }

    @Override
    public Connection getConnection() throws SQLException {
        DataSource target = obtainTargetDataSource();
        Connection c = DataSourceUtils.doGetConnection(target);
        boolean joined = TransactionSynchronizationManager.isActualTransactionActive()
                && DataSourceUtils.isConnectionTransactional(c, target);
        return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(),
                new Class<?>[] {Connection.class}, new Joined(c, target, joined));
    }

    private static final class Joined implements InvocationHandler {
        private final Connection target;
        private final DataSource dataSource;
        private final boolean joined;
        private boolean closed;

        Joined(Connection target, DataSource dataSource, boolean joined) {
            this.target = target;
            this.dataSource = dataSource;
            this.joined = joined;
        }

        @Override
        public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
            switch (method.getName()) {
                case "equals":
                    return proxy == args[0];
                case "hashCode":
                    return System.identityHashCode(proxy);
                case "toString":
                    return "rdq transaction-joining connection to " + target;
                case "close":
                    if (!closed) {
                        closed = true;
                        DataSourceUtils.doReleaseConnection(target, dataSource);
                    }
                    return null;
                case "isClosed":
                    return closed || target.isClosed();
                case "commit":
                case "rollback":
                case "setAutoCommit":
                    if (joined) {
                        throw new IllegalStateException("rdq: this RdqClient call runs its own transaction, and was called inside "
                                + "a Spring-managed transaction that it would commit half-way: call it outside the transaction "
                                + "(for example from a method annotated @Transactional(propagation = Propagation.NOT_SUPPORTED)); "
                                + "nothing was changed");
                    }
                    break;
                default:
                    break;
            }
            if (closed) {
                throw new SQLException("rdq: connection " + method.getName() + " after close");
            }
            try {
                return method.invoke(target, args);
            } catch (InvocationTargetException e) {
                throw e.getTargetException();
            }
        }
    }
}
