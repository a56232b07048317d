package io.github.srjn45.rdq.examples.kafka;

import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.SubmitResult;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;

/**
 * The pattern rdq exists for, with the Apache Kafka consumer: a record whose
 * processing fails is handed to rdq and its offset committed, instead of
 * blocking the partition, looping through retry topics, or parking a bare
 * payload in a DLQ topic.
 *
 * <ul>
 * <li>Each poll's failures are submitted in one round trip, each with the
 *     exception as its first failure (attempt 1 of its history; a
 *     {@link io.github.srjn45.rdq.PermanentException} goes straight to the DLQ)
 *     and an idempotency key of topic, partition and offset, so a rebalance
 *     that redelivers the records cannot submit them twice.
 * <li>Offsets are committed only after the submission is durable: a crash in
 *     between redelivers the records, and the keys make that harmless.
 * <li>An rdq {@link io.github.srjn45.rdq.Worker} runs the same processing as the
 *     handler {@link #HANDLER} on the queue's backoff schedule, and dead-letters
 *     the record with its full history when attempts run out.
 * </ul>
 */
public final class RetryingConsumer {
    /** The handler name retries run under; register {@link #handler} under it on a worker. */
    public static final String HANDLER = "kafka-record";

    /** Processes one record's value; throwing means it failed. */
    @FunctionalInterface
    public interface Processor {
        void process(String topic, byte[] key, byte[] value) throws Exception;
    }

    private final Consumer<byte[], byte[]> consumer;
    private final RdqClient rdq;
    private final String queue;
    private final Processor processor;

    /** A consumer handing the failures of processor to queue. */
    public RetryingConsumer(Consumer<byte[], byte[]> consumer, RdqClient rdq, String queue, Processor processor) {
        this.consumer = consumer;
        this.rdq = rdq;
        this.queue = queue;
        this.processor = processor;
    }

    /** What one poll did. */
    public record PollResult(int processed, int handedToRdq, int duplicates) {}

    /** Polls once, processes the records, hands the failures to rdq, then commits. */
    public PollResult pollOnce(Duration timeout) {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(timeout);
        List<NewTask> failed = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        int processed = 0;
        for (ConsumerRecord<byte[], byte[]> rec : records) {
            try {
                processor.process(rec.topic(), rec.key(), rec.value());
            } catch (Exception e) {
                failed.add(toTask(rec, e));
            }
            processed++;
            commit.put(new TopicPartition(rec.topic(), rec.partition()), new OffsetAndMetadata(rec.offset() + 1));
        }
        int dups = 0;
        if (!failed.isEmpty()) {
            for (SubmitResult r : rdq.submitAll(failed)) {
                if (r.duplicate()) {
                    dups++;
                }
            }
        }
        if (!commit.isEmpty()) {
            consumer.commitSync(commit);
        }
        return new PollResult(processed, failed.size(), dups);
    }

    private NewTask toTask(ConsumerRecord<byte[], byte[]> rec, Exception failure) {
        NewTask.Builder b = NewTask.builder(queue, HANDLER)
                .payload(rec.value() == null ? new byte[0] : rec.value())
                .contentType("application/octet-stream")
                .idempotencyKey(rec.topic() + "/" + rec.partition() + "/" + rec.offset())
                .header("kafka-topic", rec.topic())
                .header("kafka-partition", Integer.toString(rec.partition()))
                .header("kafka-offset", Long.toString(rec.offset()))
                .firstFailure(failure);
        if (rec.key() != null) {
            b.header("kafka-key", new String(rec.key(), StandardCharsets.UTF_8));
        }
        for (Header h : rec.headers()) {
            if (h.value() != null && !h.key().startsWith("kafka-")) {
                b.header(h.key(), new String(h.value(), StandardCharsets.UTF_8));
            }
        }
        return b.build();
    }

    /** The worker handler that retries a handed-over record with the same processing. */
    public static io.github.srjn45.rdq.Handler handler(Processor processor) {
        return ctx -> {
            String key = ctx.headers().get("kafka-key");
            processor.process(ctx.headers().get("kafka-topic"),
                    key == null ? null : key.getBytes(StandardCharsets.UTF_8), ctx.payload());
        };
    }
}
