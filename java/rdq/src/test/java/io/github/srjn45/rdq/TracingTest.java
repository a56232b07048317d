package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.net.ConnectException;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class TracingTest extends DbTestBase {
    static final Duration WAIT = Duration.ofSeconds(30);

    InMemorySpanExporter exporter;
    OpenTelemetrySdk otel;

    @BeforeEach
    void tracing() {
        exporter = InMemorySpanExporter.create();
        otel = OpenTelemetrySdk.builder().setTracerProvider(
                SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exporter)).build()).build();
    }

    @AfterEach
    void closeTracing() {
        otel.close();
    }

    SpanData span(String name) {
        await(WAIT, "span " + name, () -> exporter.getFinishedSpanItems().stream().anyMatch(s -> s.getName().equals(name)));
        return exporter.getFinishedSpanItems().stream().filter(s -> s.getName().equals(name)).findFirst().orElseThrow();
    }

    @Test
    void aSubmissionInASpanParentsTheExecutionSpanWithGosNameAndAttributes() throws Exception {
        RdqClient client = RdqClient.builder(ds).schema(schema).openTelemetry(otel).build();
        Span parent = otel.getTracer("test").spanBuilder("checkout").startSpan();
        UUID id;
        try (Scope s = parent.makeCurrent()) {
            id = client.submit(NewTask.builder("q", "send").header("tenant", "acme").build()).task().id();
        } finally {
            parent.end();
        }
        SpanData submit = span("rdq.submit");
        assertEquals(SpanKind.PRODUCER, submit.getKind());
        assertEquals(parent.getSpanContext().getTraceId(), submit.getTraceId());
        assertEquals(parent.getSpanContext().getSpanId(), submit.getParentSpanId());
        assertEquals("q", submit.getAttributes().get(AttributeKey.stringKey("rdq.queue")));
        assertEquals("send", submit.getAttributes().get(AttributeKey.stringKey("rdq.handler")));
        assertEquals(id.toString(), submit.getAttributes().get(AttributeKey.stringKey("rdq.task_id")));
        assertEquals(1L, submit.getAttributes().get(AttributeKey.longKey("rdq.tasks")));
        Task stored = task(id);
        assertEquals("00-" + submit.getTraceId() + "-" + submit.getSpanId() + "-01", stored.headers().get("traceparent"),
                "the W3C trace context of the submit span travels in the task's headers");
        assertEquals("acme", stored.headers().get("tenant"), "the task's own headers are kept");

        AtomicReference<SpanContext> inHandler = new AtomicReference<>();
        started(worker().id("w-trace").openTelemetry(otel).queue("q")
                .handle("send", ctx -> inHandler.set(Span.current().getSpanContext())));
        await(WAIT, "success", statusIs(id, Status.SUCCEEDED));
        SpanData exec = span("rdq.execute send");
        assertEquals(SpanKind.CONSUMER, exec.getKind());
        assertEquals(parent.getSpanContext().getTraceId(), exec.getTraceId(), "the submitter's trace continues");
        assertEquals(submit.getSpanId(), exec.getParentSpanId(), "parented by the submit span in the headers");
        assertEquals(exec.getSpanContext(), inHandler.get(), "the execution span is current in the handler");
        assertEquals(id.toString(), exec.getAttributes().get(AttributeKey.stringKey("rdq.task_id")));
        assertEquals("q", exec.getAttributes().get(AttributeKey.stringKey("rdq.queue")));
        assertEquals("send", exec.getAttributes().get(AttributeKey.stringKey("rdq.handler")));
        assertEquals(1L, exec.getAttributes().get(AttributeKey.longKey("rdq.attempt")));
        assertEquals(0L, exec.getAttributes().get(AttributeKey.longKey("rdq.life")));
        assertEquals("w-trace", exec.getAttributes().get(AttributeKey.stringKey("rdq.worker_id")));
        assertEquals("SUCCESS", exec.getAttributes().get(AttributeKey.stringKey("rdq.outcome")));
        assertEquals(StatusCode.UNSET, exec.getStatus().getStatusCode());
    }

    @Test
    void aFailedAttemptsSpanHasTheExceptionEventAndAnErrorStatus() throws Exception {
        UUID id = client().submit(NewTask.builder("q", "charge").build()).task().id();
        started(worker().openTelemetry(otel).queue("q", QueueConfig.builder()
                .policy(Policy.builder().maxAttempts(1).build()).build())
                .handle("charge", ctx -> {
                    throw new ConnectException("connection refused");
                }));
        await(WAIT, "dead", statusIs(id, Status.DEAD));
        SpanData exec = span("rdq.execute charge");
        assertFalse(exec.getParentSpanContext().isValid(), "no trace context in the headers: a root span");
        assertEquals(StatusCode.ERROR, exec.getStatus().getStatusCode());
        assertEquals("connection refused", exec.getStatus().getDescription());
        assertEquals("RETRYABLE_FAILURE", exec.getAttributes().get(AttributeKey.stringKey("rdq.outcome")));
        List<EventData> events = exec.getEvents();
        assertEquals(1, events.size(), events.toString());
        assertEquals("exception", events.get(0).getName());
        assertEquals("java.net.ConnectException", events.get(0).getAttributes().get(AttributeKey.stringKey("exception.type")));
        assertEquals("connection refused", events.get(0).getAttributes().get(AttributeKey.stringKey("exception.message")));
    }

    @Test
    void aTraceparentHeaderParentsTheSpanAndATasksOwnHeaderWins() throws Exception {
        String traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
        String spanId = "00f067aa0ba902b7";
        String given = "00-" + traceId + "-" + spanId + "-01";
        RdqClient client = RdqClient.builder(ds).schema(schema).openTelemetry(otel).build();
        Span parent = otel.getTracer("test").spanBuilder("other").startSpan();
        UUID id;
        try (Scope s = parent.makeCurrent()) {
            id = client.submit(NewTask.builder("q", "h").header("traceparent", given).build()).task().id();
        } finally {
            parent.end();
        }
        assertEquals(given, task(id).headers().get("traceparent"), "a header the task sets itself wins");
        UUID untraced = client().submit(NewTask.builder("q", "h").build()).task().id();
        assertFalse(task(untraced).headers().containsKey("traceparent"), "a client without OpenTelemetry writes none");

        started(worker().openTelemetry(otel).queue("q").handle("h", ctx -> { }));
        await(WAIT, "both ran", () -> statusIs(id, Status.SUCCEEDED).getAsBoolean()
                && statusIs(untraced, Status.SUCCEEDED).getAsBoolean());
        await(WAIT, "two execution spans",
                () -> exporter.getFinishedSpanItems().stream().filter(s -> s.getName().equals("rdq.execute h")).count() == 2);
        SpanData exec = exporter.getFinishedSpanItems().stream().filter(s -> s.getName().equals("rdq.execute h")
                && s.getAttributes().get(AttributeKey.stringKey("rdq.task_id")).equals(id.toString())).findFirst().orElseThrow();
        assertEquals(traceId, exec.getTraceId());
        assertEquals(spanId, exec.getParentSpanId());
        assertTrue(exec.getParentSpanContext().isRemote());
        SpanData root = exporter.getFinishedSpanItems().stream().filter(s -> s.getName().equals("rdq.execute h")
                && s.getAttributes().get(AttributeKey.stringKey("rdq.task_id")).equals(untraced.toString())).findFirst()
                .orElseThrow();
        assertFalse(root.getParentSpanContext().isValid());
        assertNotEquals(traceId, root.getTraceId());
    }
}
