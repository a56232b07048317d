package io.github.srjn45.rdq.spring.app;

import io.github.srjn45.rdq.PermanentException;
import io.github.srjn45.rdq.TaskContext;
import io.github.srjn45.rdq.spring.RdqHandler;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.stereotype.Component;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/** Handlers as methods of a transactional bean. */
@Component
@Transactional
public class Receipts {
    private final Map<UUID, Boolean> sent = new ConcurrentHashMap<>();

    /** For each task sent, whether its handler ran inside a Spring transaction (read through the proxy). */
    public Map<UUID, Boolean> sent() {
        return sent;
    }

    /** Sends a receipt. */
    @RdqHandler(name = "send-receipt", queues = "emails")
    public void send(TaskContext ctx) {
        sent.put(ctx.id(), TransactionSynchronizationManager.isActualTransactionActive());
    }

    /** Refuses every receipt for good. */
    @RdqHandler(name = "refuse-receipt", queues = "emails")
    public void refuse(TaskContext ctx) throws PermanentException {
        throw new PermanentException(new IllegalArgumentException("no such customer"));
    }
}
