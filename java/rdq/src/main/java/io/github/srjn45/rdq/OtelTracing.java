package io.github.srjn45.rdq;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import io.opentelemetry.context.propagation.TextMapPropagator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The SDK's spans on OpenTelemetry, as Go's worker makes them: a CONSUMER
 * span "rdq.execute HANDLER" per execution with the attributes rdq.task_id,
 * rdq.queue, rdq.handler, rdq.attempt, rdq.life and rdq.worker_id, then
 * rdq.outcome, parented by the W3C trace context of the task's headers; and a
 * PRODUCER span "rdq.submit" per submission whose context the task headers
 * carry. Only loaded when an OpenTelemetry instance is configured.
 */
final class OtelTracing implements Tracing {
    static final String INSTRUMENTATION = "io.github.srjn45.rdq";
    private static final TextMapPropagator W3C = W3CTraceContextPropagator.getInstance();
    private static final AttributeKey<String> TASK_ID = AttributeKey.stringKey("rdq.task_id");
    private static final AttributeKey<String> QUEUE = AttributeKey.stringKey("rdq.queue");
    private static final AttributeKey<String> HANDLER = AttributeKey.stringKey("rdq.handler");
    private static final AttributeKey<Long> ATTEMPT = AttributeKey.longKey("rdq.attempt");
    private static final AttributeKey<Long> LIFE = AttributeKey.longKey("rdq.life");
    private static final AttributeKey<String> WORKER_ID = AttributeKey.stringKey("rdq.worker_id");
    private static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("rdq.outcome");
    private static final AttributeKey<Long> TASKS = AttributeKey.longKey("rdq.tasks");
    private static final AttributeKey<String> EXCEPTION_TYPE = AttributeKey.stringKey("exception.type");
    private static final AttributeKey<String> EXCEPTION_MESSAGE = AttributeKey.stringKey("exception.message");

    private static final TextMapGetter<Map<String, String>> HEADERS = new TextMapGetter<>() {
        @Override
        public Iterable<String> keys(Map<String, String> carrier) {
            return carrier.keySet();
        }

        @Override
        public String get(Map<String, String> carrier, String key) {
            return carrier == null ? null : carrier.get(key);
        }
    };

    private final Tracer tracer;

    OtelTracing(OpenTelemetry otel) {
        this.tracer = otel.getTracer(INSTRUMENTATION);
    }

    @Override
    public Execution execution(Task t, String queue, int attempt, String workerId) {
        Context parent = W3C.extract(Context.root(), t.headers(), HEADERS);
        Span span = tracer.spanBuilder("rdq.execute " + t.handler()).setParent(parent).setSpanKind(SpanKind.CONSUMER)
                .setAttribute(TASK_ID, t.id().toString()).setAttribute(QUEUE, queue)
                .setAttribute(HANDLER, t.handler()).setAttribute(ATTEMPT, (long) attempt)
                .setAttribute(LIFE, (long) t.life()).setAttribute(WORKER_ID, workerId).startSpan();
        return new Execution() {
            @Override
            public AutoCloseable makeCurrent() {
                return span.makeCurrent();
            }

            @Override
            public void outcome(String outcome) {
                span.setAttribute(OUTCOME, outcome);
            }

            @Override
            public void failure(String type, String message) {
                span.addEvent("exception", Attributes.of(EXCEPTION_TYPE, type, EXCEPTION_MESSAGE, message));
                span.setStatus(StatusCode.ERROR, message);
            }

            @Override
            public void error(String status) {
                span.setStatus(StatusCode.ERROR, status);
            }

            @Override
            public void end() {
                span.end();
            }
        };
    }

    @Override
    public Submission submission(List<String> queues, List<String> handlers) {
        String name = "rdq.submit";
        var b = tracer.spanBuilder(name).setSpanKind(SpanKind.PRODUCER).setAttribute(TASKS, (long) queues.size());
        if (!queues.isEmpty() && queues.stream().allMatch(queues.get(0)::equals)) {
            b.setAttribute(QUEUE, queues.get(0));
        }
        if (handlers.size() == 1) {
            b.setAttribute(HANDLER, handlers.get(0));
        }
        Span span = b.startSpan();
        Map<String, String> carrier = new LinkedHashMap<>();
        W3C.inject(Context.current().with(span), carrier, (m, k, v) -> m.put(k, v));
        return new Submission() {
            @Override
            public Map<String, String> headers() {
                return carrier;
            }

            @Override
            public void tasks(List<String> ids) {
                if (ids.size() == 1) {
                    span.setAttribute(TASK_ID, ids.get(0));
                }
            }

            @Override
            public void failed(Throwable err) {
                span.setStatus(StatusCode.ERROR, String.valueOf(err.getMessage()));
            }

            @Override
            public void end() {
                span.end();
            }
        };
    }
}
