"""W3C trace context in task headers."""

from __future__ import annotations

import re

from opentelemetry import context as otel_context
from opentelemetry import trace

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def trace_headers() -> dict[str, str]:
    """The traceparent (and tracestate) of the current span, or {} without one."""
    sc = trace.get_current_span().get_span_context()
    if not sc.is_valid:
        return {}
    out = {"traceparent": f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"}
    state = sc.trace_state.to_header() if sc.trace_state else ""
    if state:
        out["tracestate"] = state
    return out


def remote_context(traceparent: str | None) -> otel_context.Context:
    """The current context with the remote span traceparent names as parent."""
    ctx = otel_context.get_current()
    m = _TRACEPARENT.match((traceparent or "").strip().lower())
    if not m:
        return ctx
    sc = trace.SpanContext(
        trace_id=int(m.group(1), 16),
        span_id=int(m.group(2), 16),
        is_remote=True,
        trace_flags=trace.TraceFlags(int(m.group(3), 16) & trace.TraceFlags.SAMPLED),
    )
    if not sc.is_valid:
        return ctx
    return trace.set_span_in_context(trace.NonRecordingSpan(sc), ctx)
