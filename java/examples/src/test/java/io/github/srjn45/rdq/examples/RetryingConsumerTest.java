package io.github.srjn45.rdq.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.Attempt;
import io.github.srjn45.rdq.Outcome;
import io.github.srjn45.rdq.PermanentException;
import io.github.srjn45.rdq.Policy;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Status;
import io.github.srjn45.rdq.Task;
import io.github.srjn45.rdq.Worker;
import io.github.srjn45.rdq.examples.kafka.RetryingConsumer;
import io.github.srjn45.rdq.testkit.Schemas;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.internals.AutoOffsetResetStrategy;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The Kafka example against Kafka's MockConsumer and the real database. */
class RetryingConsumerTest {
    static final String TOPIC = "orders";
    static final TopicPartition TP = new TopicPartition(TOPIC, 0);

    DataSource ds;
    String schema;

    @BeforeEach
    void setUp() throws Exception {
        ds = Schemas.testDataSource();
        schema = Schemas.create(ds);
    }

    @AfterEach
    void tearDown() throws Exception {
        Schemas.drop(ds, schema);
    }

    static MockConsumer<byte[], byte[]> consumerWith(int records) {
        MockConsumer<byte[], byte[]> c = new MockConsumer<>(AutoOffsetResetStrategy.EARLIEST.name());
        c.assign(List.of(TP));
        c.updateBeginningOffsets(Map.of(TP, 0L));
        for (int i = 0; i < records; i++) {
            c.addRecord(new ConsumerRecord<>(TOPIC, 0, i, ("order-" + i).getBytes(StandardCharsets.UTF_8),
                    ("{\"order\":" + i + "}").getBytes(StandardCharsets.UTF_8)));
        }
        return c;
    }

    List<String> keysIn(String status) throws Exception {
        List<String> out = new ArrayList<>();
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(
                "SELECT idempotency_key FROM \"" + schema + "\".tasks WHERE status = ? ORDER BY idempotency_key")) {
            ps.setString(1, status);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out.add(rs.getString(1));
                }
            }
        }
        return out;
    }

    @Test
    void failuresAreHandedToRdqOnceAndOffsetsCommitted() throws Exception {
        RdqClient rdq = RdqClient.builder(ds).schema(schema).id("orders-consumer").build();
        // Orders 3 and 7 fail for now (the search index is down); order 5 is malformed for good.
        Set<String> down = ConcurrentHashMap.newKeySet();
        down.add("order-3");
        down.add("order-7");
        RetryingConsumer.Processor index = (topic, key, value) -> {
            String k = new String(key, StandardCharsets.UTF_8);
            if (k.equals("order-5")) {
                throw new PermanentException(new IllegalArgumentException("order 5 has no customer"));
            }
            if (down.contains(k)) {
                throw new java.io.IOException("search index unavailable");
            }
        };
        MockConsumer<byte[], byte[]> consumer = consumerWith(10);
        RetryingConsumer rc = new RetryingConsumer(consumer, rdq, "orders-retry", index);
        RetryingConsumer.PollResult r = rc.pollOnce(Duration.ofMillis(10));
        assertEquals(new RetryingConsumer.PollResult(10, 3, 0), r);
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.of(TP));
        assertEquals(10, committed.get(TP).offset(), "offsets committed past the failures");
        assertEquals(List.of("orders/0/3", "orders/0/7"), keysIn("PENDING"));
        assertEquals(List.of("orders/0/5"), keysIn("DEAD"), "a permanent failure goes straight to the DLQ");

        // A rebalance redelivers the same records: nothing is submitted twice.
        MockConsumer<byte[], byte[]> again = consumerWith(10);
        assertEquals(new RetryingConsumer.PollResult(10, 3, 3),
                new RetryingConsumer(again, rdq, "orders-retry", index).pollOnce(Duration.ofMillis(10)));
        assertEquals(2, keysIn("PENDING").size());

        // The index comes back; the worker retries the handed-over records.
        down.clear();
        Worker w = Worker.builder(ds).schema(schema).pollInterval(Duration.ofMillis(50))
                .queue("orders-retry", QueueConfig.builder().policy(Policy.builder().maxAttempts(5)
                        .initialBackoff(Duration.ofMillis(10)).build()).build())
                .handle(RetryingConsumer.HANDLER, RetryingConsumer.handler(index)).build();
        w.start();
        try {
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (keysIn("SUCCEEDED").size() < 2) {
                assertTrue(System.nanoTime() < deadline, "retries did not succeed in 30s");
                Thread.sleep(25);
            }
        } finally {
            w.stop(Duration.ofSeconds(5));
        }
        UUID id = findByKey("orders/0/3");
        Task t = rdq.get(id).orElseThrow();
        assertEquals(Status.SUCCEEDED, t.status());
        assertEquals("3", t.headers().get("kafka-offset"));
        List<Attempt> h = rdq.history(id);
        assertEquals(Outcome.RETRYABLE_FAILURE, h.get(0).outcome());
        assertEquals("java.io.IOException", h.get(0).errorType());
        assertEquals("orders-consumer", h.get(0).workerId());
        assertEquals(Outcome.SUCCESS, h.get(1).outcome());
    }

    UUID findByKey(String key) throws Exception {
        Map<String, UUID> m = new HashMap<>();
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(
                "SELECT idempotency_key, id FROM \"" + schema + "\".tasks")) {
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    m.put(rs.getString(1), rs.getObject(2, UUID.class));
                }
            }
        }
        return m.get(key);
    }
}
