package io.github.srjn45.rdq.spring.app;

import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.RdqClient;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/** An application service that stores an order and submits its task in one transaction. */
@Service
public class Orders {
    private final JdbcTemplate jdbc;
    private final RdqClient rdq;

    /** The service on the application's JdbcTemplate and the starter's client. */
    public Orders(JdbcTemplate jdbc, RdqClient rdq) {
        this.jdbc = jdbc;
        this.rdq = rdq;
    }

    /** Creates the orders table in schema. */
    public void createTable(String schema) {
        jdbc.execute("CREATE TABLE IF NOT EXISTS \"" + schema + "\".orders (id uuid PRIMARY KEY)");
    }

    /**
     * Stores an order and submits a welcome mail for it with the task ID id, then
     * fails when fail is true: the transaction rolls back.
     */
    @Transactional
    public void place(String schema, UUID id, boolean fail) {
        jdbc.update("INSERT INTO \"" + schema + "\".orders (id) VALUES (?)", id);
        rdq.submit(NewTask.builder("emails", "send-welcome").id(id).payload("order " + id).build());
        if (fail) {
            throw new IllegalStateException("payment declined");
        }
    }

    /** Redrives a task from inside a transaction. */
    @Transactional
    public Map<UUID, RdqClient.RedriveOutcome> redriveInTransaction(UUID id) {
        return rdq.redrive(List.of(id), "alice", "INC-1 fixed");
    }
}
