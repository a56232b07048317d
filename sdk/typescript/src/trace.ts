import { context as otelContext, isSpanContextValid, trace, TraceFlags, type Context, type SpanContext } from "@opentelemetry/api";

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * traceHeaders returns the W3C trace context (traceparent, and tracestate
 * when there is one) of the span active in ctx, or {} when there is none.
 */
export function traceHeaders(ctx: Context = otelContext.active()): Record<string, string> {
  const sc = trace.getSpanContext(ctx);
  if (!sc || !isSpanContextValid(sc)) {
    return {};
  }
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, "0");
  const out: Record<string, string> = { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}` };
  const state = sc.traceState?.serialize();
  if (state) {
    out["tracestate"] = state;
  }
  return out;
}

/**
 * remoteContext returns ctx with the remote span a W3C traceparent names
 * as its parent, or ctx itself when traceparent is absent or malformed.
 */
export function remoteContext(ctx: Context, traceparent: string | undefined): Context {
  const m = traceparent ? TRACEPARENT.exec(traceparent.trim().toLowerCase()) : null;
  if (!m) {
    return ctx;
  }
  const sc: SpanContext = {
    traceId: m[1]!,
    spanId: m[2]!,
    traceFlags: parseInt(m[3]!, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  return isSpanContextValid(sc) ? trace.setSpanContext(ctx, sc) : ctx;
}
