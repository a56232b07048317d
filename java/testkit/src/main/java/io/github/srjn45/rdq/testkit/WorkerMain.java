package io.github.srjn45.rdq.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.github.srjn45.rdq.Breaker;
import io.github.srjn45.rdq.ErrorTyped;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.PermanentException;
import io.github.srjn45.rdq.Policy;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.TaskContext;
import io.github.srjn45.rdq.Worker;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Map;

/**
 * A Java worker process for the cross-language tests: it runs the queues in
 * RDQ_QUEUES with the handlers below, appends one line per event to
 * RDQ_EXEC_LOG (written whole with O_APPEND, so a SIGKILL leaves whole lines),
 * prints "ready" once started, and stops gracefully when its standard input
 * closes.
 *
 * <ul>
 * <li>chaos: the Go chaos child's handler (payload {"mode","sleep_ms"}), logging
 *     "start|end ID TOKEN UNIXNANOS [ok|err|cancelled]";
 * <li>record: logs a JSON line with what it received, then succeeds;
 * <li>always-fail: fails with an IllegalStateException, unless RDQ_FIXED=1;
 * <li>typed-fail: fails once with an error naming its type "java_typed", then succeeds;
 * <li>permanent: fails permanently;
 * <li>sleep: logs start, sleeps sleep_ms from its payload on the first attempt of a life, logs end;
 * <li>relay: submits a task of handler "traced" to the queue its payload names, with
 *     a client traced by the worker's OpenTelemetry;
 * <li>dep: logs start, then fails with a ConnectException while the file
 *     java-down-QUEUE exists in RDQ_DOWN_DIR (its dependency is down), else sleeps the
 *     milliseconds its payload names and succeeds.
 * </ul>
 *
 * <p>RDQ_BREAKER_MIN_FAILED, when set, gives every queue a circuit breaker
 * tripping at that many distinct failed tasks, with a cool-off of
 * RDQ_BREAKER_COOL_OFF_MS (30000 unless set). RDQ_SPAN_LOG, when set, traces the
 * worker and relay's client with OpenTelemetry, their spans appended to that file.
 */
public final class WorkerMain {
    private WorkerMain() {}

    private static final ObjectMapper JSON = new ObjectMapper();
    private static FileOutputStream log;

    private static synchronized void write(String line) {
        try {
            log.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            System.err.println("writing the execution log: " + e);
            Runtime.getRuntime().halt(3);
        }
    }

    private static long nanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    private static void event(String kind, TaskContext ctx, String result) {
        write(kind + " " + ctx.id() + " " + ctx.leaseToken() + " " + nanos() + (result.isEmpty() ? "" : " " + result));
    }

    /** The failure type the typed-fail handler names. */
    static final class TypedFailure extends RuntimeException implements ErrorTyped {
        private static final long serialVersionUID = 1L;

        TypedFailure(String m) {
            super(m);
        }

        @Override
        public String errorType() {
            return "java_typed";
        }
    }

    public static void main(String[] args) throws Exception {
        Env.logging();
        log = new FileOutputStream(Env.get("RDQ_EXEC_LOG", "/dev/null"), true);
        boolean fixed = Env.get("RDQ_FIXED", "0").equals("1");
        Policy policy = Policy.builder()
                .maxAttempts(Env.integer("RDQ_MAX_ATTEMPTS", 4))
                .initialBackoff(Env.millis("RDQ_BACKOFF_MS", 20))
                .multiplier(2)
                .maxBackoff(Duration.ofMillis(200))
                .build();
        QueueConfig.Builder qcb = QueueConfig.builder();
        if (!Env.get("RDQ_BREAKER_MIN_FAILED", "").isEmpty()) {
            qcb.breaker(Breaker.builder().minFailedTasks(Env.integer("RDQ_BREAKER_MIN_FAILED", 10))
                    .coolOff(Env.millis("RDQ_BREAKER_COOL_OFF_MS", 30_000)).build());
        }
        QueueConfig qc = qcb
                .policy(policy)
                .concurrency(Env.integer("RDQ_CONCURRENCY", 2))
                .lease(Env.millis("RDQ_LEASE_MS", 2000))
                .heartbeatInterval(Env.millis("RDQ_HEARTBEAT_MS", 250))
                .timeout(Duration.ofSeconds(20))
                .build();
        Worker.Builder b = Worker.builder(Env.dataSource())
                .schema(Env.get("RDQ_SCHEMA", "rdq"))
                .id(Env.get("RDQ_WORKER_ID", null))
                .pollInterval(Env.millis("RDQ_POLL_MS", 50))
                .reclaimInterval(Env.millis("RDQ_RECLAIM_MS", 250))
                .purgeInterval(Worker.DISABLED)
                .finishInterval(Duration.ofMillis(5));
        for (String q : Env.get("RDQ_QUEUES", "chaos").split(",")) {
            b.queue(q, qc);
        }
        b.handle("chaos", ctx -> {
            JsonNode p = JSON.readTree(ctx.payload());
            String mode = p.path("mode").asText("ok");
            event("start", ctx, "");
            try {
                Thread.sleep(p.path("sleep_ms").asLong(0));
            } catch (InterruptedException e) {
                event("end", ctx, "cancelled");
                throw e;
            }
            RuntimeException err = switch (mode) {
                case "flaky" -> ctx.task().attempts() == 0 ? new IllegalStateException("flaky: the first attempt of a life fails") : null;
                case "always" -> new IllegalStateException("always fails (attempt " + ctx.attempt() + ")");
                case "permanent" -> new PermanentException("permanently broken");
                default -> null;
            };
            event("end", ctx, err == null ? "ok" : "err");
            if (err != null) {
                throw err;
            }
        });
        b.handle("record", ctx -> {
            ObjectNode o = JSON.createObjectNode();
            o.put("id", ctx.id().toString());
            o.put("queue", ctx.task().queue());
            o.put("payload", Base64.getEncoder().encodeToString(ctx.payload()));
            o.put("content_type", ctx.task().contentType());
            ObjectNode h = o.putObject("headers");
            for (Map.Entry<String, String> e : ctx.headers().entrySet()) {
                h.put(e.getKey(), e.getValue());
            }
            o.put("idempotency_key", ctx.task().idempotencyKey());
            o.put("attempt", ctx.attempt());
            o.put("attempts", ctx.task().attempts());
            o.put("life", ctx.task().life());
            o.put("token", ctx.leaseToken());
            o.put("worker", ctx.workerId());
            write(JSON.writeValueAsString(o));
        });
        b.handle("always-fail", ctx -> {
            if (!fixed) {
                throw new IllegalStateException("order " + ctx.id() + " cannot be processed");
            }
        });
        b.handle("typed-fail", ctx -> {
            if (ctx.attempt() == 1) {
                throw new TypedFailure("quota exceeded for tenant 7");
            }
        });
        b.handle("permanent", ctx -> {
            throw new PermanentException(new IllegalArgumentException("bad input"));
        });
        b.handle("sleep", ctx -> {
            event("start", ctx, "");
            if (ctx.task().attempts() == 0) {
                Thread.sleep(JSON.readTree(ctx.payload()).path("sleep_ms").asLong(0));
            }
            event("end", ctx, "ok");
        });
        OpenTelemetrySdk otel = null;
        RdqClient relay = null;
        if (!Env.get("RDQ_SPAN_LOG", "").isEmpty()) {
            otel = SpanLog.openTelemetry(Env.get("RDQ_SPAN_LOG", ""));
            b.openTelemetry(otel);
            relay = RdqClient.builder(Env.dataSource()).schema(Env.get("RDQ_SCHEMA", "rdq")).openTelemetry(otel).build();
        }
        RdqClient relayClient = relay;
        b.handle("relay", ctx -> {
            if (relayClient == null) {
                throw new PermanentException("relay needs RDQ_SPAN_LOG");
            }
            relayClient.submit(NewTask.builder(ctx.payloadText(), "traced").build());
        });
        Path downDir = Path.of(Env.get("RDQ_DOWN_DIR", "."));
        b.handle("dep", ctx -> {
            event("start", ctx, "");
            if (Files.exists(downDir.resolve("java-down-" + ctx.task().queue()))) {
                throw new ConnectException("connection refused");
            }
            Thread.sleep(Long.parseLong(ctx.payloadText()));
        });
        Worker w = b.build();
        w.start();
        System.out.println("ready");
        System.out.flush();
        InputStream in = System.in;
        byte[] buf = new byte[256];
        while (in.read(buf) >= 0) {
            // Wait for the parent to close our input (or die).
        }
        boolean clean = w.stop(Duration.ofSeconds(15));
        if (otel != null) {
            otel.close();
        }
        log.close();
        System.exit(clean ? 0 : 4);
    }
}
