"""One execution of a task, and how a handler runs it."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry import metrics, trace

from . import _trace
from ._version import __version__
from .outcome import SUCCESS, Outcome, outcome_of

log = logging.getLogger("rdq")

_tracer = trace.get_tracer("rdq", __version__)
_meter = metrics.get_meter("rdq", __version__)
_executions = _meter.create_counter(
    "rdq_handler_executions",
    description="Executions run by this process's rdq handlers, by queue, handler and outcome.",
)
_durations = _meter.create_histogram(
    "rdq_handler_duration_seconds",
    unit="s",
    description="How long this process's rdq handlers ran, by queue, handler and outcome.",
)


@dataclass(frozen=True)
class Execution:
    """One execution of a task, as a handler sees it.

    ``(id, lease_token)`` names the execution: use it as the idempotency
    key of side effects, since delivery is at least once.
    """

    id: str
    queue: str
    handler: str
    #: This attempt's number in the task's life, from 1.
    attempt: int
    #: 0, plus one per redrive.
    life: int
    lease_token: int
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)
    payload: bytes = b""


#: A handler does the work of one execution. Returning is success; raising
#: PermanentError dead-letters the task, RetryAfterError retries it no sooner
#: than its delay, anything else retries it by the queue's policy. It may be
#: a coroutine function or a plain function (which runs on the event loop:
#: move blocking work to asyncio.to_thread).
Handler = Callable[[Execution], Awaitable[None] | None]


async def run(handler: Handler, task: Execution, traceparent: str | None, deadline: float) -> Outcome:
    """Runs handler on task in a span continuing traceparent, bounded by deadline seconds.

    A handler still running at the deadline is cancelled, and the execution
    is a retryable "timeout".
    """
    attrs: dict[str, str | int] = {
        "rdq.task.id": task.id,
        "rdq.queue": task.queue,
        "rdq.handler": task.handler,
        "rdq.attempt": task.attempt,
        "rdq.life": task.life,
    }
    ctx = _trace.remote_context(traceparent or task.headers.get("traceparent"))
    with _tracer.start_as_current_span(
        f"rdq.execute {task.handler}", context=ctx, kind=trace.SpanKind.CONSUMER, attributes=attrs
    ) as span:
        started = time.perf_counter()

        async def call() -> None:
            try:
                result = handler(task)
                if inspect.isawaitable(result):
                    await result
            except TimeoutError as exc:  # the handler's own, not the deadline's
                raise _HandlerRaisedError(exc) from exc

        try:
            await asyncio.wait_for(call(), timeout=deadline)
            outcome = SUCCESS
        except _HandlerRaisedError as raised:
            outcome = outcome_of(raised.exc)
        except TimeoutError:
            outcome = Outcome("retryable", "timeout", f"the handler did not finish within {deadline:g} s")
        except Exception as exc:  # every failure is an outcome
            outcome = outcome_of(exc)
        labels = {"queue": task.queue, "handler": task.handler, "outcome": outcome.kind}
        _executions.add(1, labels)
        _durations.record(time.perf_counter() - started, labels)
        fields = {"task_id": task.id, "queue": task.queue, "handler": task.handler, "attempt": task.attempt}
        if outcome.kind == "success":
            span.set_status(trace.StatusCode.OK)
            log.info("rdq task succeeded", extra=fields)
        else:
            span.set_status(trace.StatusCode.ERROR, outcome.message)
            span.set_attribute("rdq.outcome", outcome.kind)
            span.set_attribute("error.type", outcome.error_type)
            log.warning(
                "rdq task failed: %s: %s",
                outcome.error_type,
                outcome.message,
                extra={**fields, "outcome": outcome.kind},
            )
        return outcome


class _HandlerRaisedError(Exception):
    """Carries a TimeoutError the handler raised past the deadline's own."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc
