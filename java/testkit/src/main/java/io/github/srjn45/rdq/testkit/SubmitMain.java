package io.github.srjn45.rdq.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.PermanentException;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.SubmitResult;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * Submits the tasks described by the JSON lines on standard input in one call
 * (inside one JDBC transaction when RDQ_TX=1) and prints one JSON line per
 * result: {"id": ..., "duplicate": ...}. A line's fields: queue, handler,
 * payload (base64), content_type, headers, idempotency_key, delay_ms, and
 * first_failure {"message", "permanent"}.
 */
public final class SubmitMain {
    private SubmitMain() {}

    public static void main(String[] args) throws Exception {
        Env.logging();
        ObjectMapper json = new ObjectMapper();
        List<NewTask> tasks = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode n = json.readTree(line);
            NewTask.Builder b = NewTask.builder(n.get("queue").asText(), n.get("handler").asText())
                    .payload(Base64.getDecoder().decode(n.path("payload").asText("")))
                    .contentType(n.path("content_type").asText(""))
                    .idempotencyKey(n.path("idempotency_key").asText(""))
                    .delay(Duration.ofMillis(n.path("delay_ms").asLong(0)));
            for (Iterator<Map.Entry<String, JsonNode>> it = n.path("headers").fields(); it.hasNext();) {
                Map.Entry<String, JsonNode> e = it.next();
                b.header(e.getKey(), e.getValue().asText());
            }
            JsonNode ff = n.path("first_failure");
            if (!ff.isMissingNode()) {
                RuntimeException cause = new IllegalStateException(ff.path("message").asText());
                b.firstFailure(ff.path("permanent").asBoolean() ? new PermanentException(cause) : cause);
            }
            tasks.add(b.build());
        }
        var ds = Env.dataSource();
        RdqClient client = RdqClient.builder(ds).schema(Env.get("RDQ_SCHEMA", "rdq")).id("java-client").build();
        List<SubmitResult> results;
        if (Env.get("RDQ_TX", "0").equals("1")) {
            try (Connection c = ds.getConnection()) {
                c.setAutoCommit(false);
                results = client.submitAll(c, tasks);
                c.commit();
            }
        } else {
            results = client.submitAll(tasks);
        }
        for (SubmitResult r : results) {
            ObjectNode o = json.createObjectNode();
            o.put("id", r.task().id().toString());
            o.put("duplicate", r.duplicate());
            System.out.println(json.writeValueAsString(o));
        }
    }
}
