package io.github.srjn45.rdq.testkit;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Collection;

/**
 * An OpenTelemetry SDK whose finished spans are appended to a file as JSON
 * lines ({"name", "kind", "trace_id", "span_id", "parent_span_id",
 * "attributes"}), for the Go tests to read.
 */
final class SpanLog implements SpanExporter {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final FileOutputStream out;

    private SpanLog(String path) throws IOException {
        this.out = new FileOutputStream(path, true);
    }

    /** An SDK writing to path, exporting each span as it ends. */
    static OpenTelemetrySdk openTelemetry(String path) throws IOException {
        return OpenTelemetrySdk.builder().setTracerProvider(SdkTracerProvider.builder()
                .addSpanProcessor(SimpleSpanProcessor.create(new SpanLog(path))).build()).build();
    }

    @Override
    public synchronized CompletableResultCode export(Collection<SpanData> spans) {
        try {
            for (SpanData s : spans) {
                ObjectNode o = JSON.createObjectNode();
                o.put("name", s.getName());
                o.put("kind", s.getKind().name());
                o.put("trace_id", s.getTraceId());
                o.put("span_id", s.getSpanId());
                o.put("parent_span_id", s.getParentSpanContext().isValid() ? s.getParentSpanId() : "");
                ObjectNode a = o.putObject("attributes");
                s.getAttributes().forEach((k, v) -> a.put(k.getKey(), String.valueOf(v)));
                out.write((JSON.writeValueAsString(o) + "\n").getBytes(StandardCharsets.UTF_8));
            }
            return CompletableResultCode.ofSuccess();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public CompletableResultCode flush() {
        return CompletableResultCode.ofSuccess();
    }

    @Override
    public synchronized CompletableResultCode shutdown() {
        try {
            out.close();
        } catch (IOException e) {
            return CompletableResultCode.ofFailure();
        }
        return CompletableResultCode.ofSuccess();
    }
}
