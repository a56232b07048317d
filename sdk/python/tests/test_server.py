"""The SDK against a real rdq-server, on the embedded store and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from harness import REPO, Receiver, Server, Store, eventually, open_store, start_server
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import rdq
from rdq import (
    CallbackReceiver,
    DeadFilter,
    DuplicateError,
    Execution,
    ForbiddenError,
    InvalidError,
    NewTask,
    PermanentError,
    RdqClient,
    RetryAfterError,
    UnauthenticatedError,
    parse_submission,
)
from rdq.v1 import rdq_pb2

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


@dataclass
class Env:
    store: Store
    server: Server
    receiver: Receiver
    operator: RdqClient
    submitter: RdqClient
    admin: RdqClient
    seen: dict[str, list[Execution]] = field(default_factory=dict)

    async def settled(self, id: str, status: str) -> rdq.TaskHistory:
        async def probe() -> rdq.TaskHistory | None:
            t = await self.operator.get_task(id)
            return t if t.task.status == status else None

        result: rdq.TaskHistory = await eventually(
            probe, lambda: f"task {id} never became {status}\n" + "".join(self.server.log)
        )
        return result


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def env(request: pytest.FixtureRequest, server_binary: Path) -> AsyncIterator[Env]:
    store = open_store(request.param)
    receiver = Receiver()
    await receiver.start()
    server = await start_server(
        server_binary,
        store.url,
        receiver.port,
        {
            "orders": {"path": "/hooks/orders", "handlers": ["charge", "refund"], "max_attempts": 3},
            "forged": {
                "path": "/hooks/forged",
                "handlers": ["charge"],
                "secret": "another-secret-the-receiver-lacks-9f8e7d",
            },
            "other": {"path": "/hooks/other", "handlers": ["noop"]},
            "emails": {"path": "/hooks/emails", "handlers": ["send_welcome"]},
        },
    )
    e = Env(
        store,
        server,
        receiver,
        RdqClient(server.grpc, server.tokens.operator),
        RdqClient(server.grpc, server.tokens.submitter),
        RdqClient(server.grpc, server.tokens.admin),
    )

    async def handler(t: Execution) -> None:
        runs = e.seen.setdefault(t.id, [])
        runs.append(t)
        p = json.loads(t.payload)
        if p.get("permanent"):
            raise PermanentError("card number is not valid")
        if p.get("retry_after") and len(runs) == 1:
            raise RetryAfterError(p["retry_after"], "rate limited by the bank")
        if p.get("fail") or len(runs) <= p.get("fail_times", 0):
            raise ConnectionError(f"bank unreachable on attempt {t.attempt}")

    receiver.routes["/hooks/orders"] = CallbackReceiver(server.callback_secret, handler)
    receiver.routes["/hooks/forged"] = CallbackReceiver(server.callback_secret, handler)
    receiver.routes["/hooks/other"] = CallbackReceiver(server.callback_secret, lambda t: None)
    receiver.routes["/hooks/emails"] = CallbackReceiver(server.callback_secret, lambda t: None)
    try:
        yield e
    finally:
        for c in (e.operator, e.submitter, e.admin):
            await c.close()
        await server.stop()
        await receiver.stop()
        store.drop()


async def test_fails_twice_is_retried_and_succeeds(env: Env) -> None:
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("checkout") as span:
        sub = await env.submitter.submit("orders", "charge", {"order": 42, "fail_times": 2}, headers={"tenant": "acme"})
        trace_id = span.get_span_context().trace_id
    assert sub.task.status == "PENDING"
    assert sub.task.headers["traceparent"].startswith(f"00-{trace_id:032x}-")
    done = await env.settled(sub.task.id, "SUCCEEDED")
    assert [a.outcome for a in done.history] == ["RETRYABLE_FAILURE", "RETRYABLE_FAILURE", "SUCCESS"]
    assert [a.number for a in done.history] == [1, 2, 3]
    assert {a.worker_id for a in done.history} == {env.server.worker_id}
    # The receiver's failure body: the exception's class, message and traceback.
    first = done.history[0]
    assert (first.error_type, first.message) == ("ConnectionError", "bank unreachable on attempt 1")
    assert first.stack.startswith("Traceback (most recent call last):\n")
    assert "test_server.py" in first.stack and first.stack.endswith("ConnectionError: bank unreachable on attempt 1\n")
    runs = env.seen[sub.task.id]
    assert [r.attempt for r in runs] == [1, 2, 3]
    assert runs[0].headers["tenant"] == "acme"
    assert json.loads(runs[0].payload) == {"order": 42, "fail_times": 2}
    assert runs[0].lease_token < runs[1].lease_token < runs[2].lease_token
    spans = [
        s for s in exporter.get_finished_spans() if s.attributes and s.attributes.get("rdq.task.id") == sub.task.id
    ]
    assert len(spans) == 3, "one span per execution"
    assert all(s.context is not None and s.context.trace_id == trace_id for s in spans), (
        "executions continue the submitter's trace"
    )


async def test_dead_letter_find_refuse_and_redrive(env: Env) -> None:
    sub = await env.submitter.submit("orders", "refund", {"fail": True}, idempotency_key=f"refund-{env.store.name}")
    dead = await env.settled(sub.task.id, "DEAD")
    assert [a.outcome for a in dead.history] == ["RETRYABLE_FAILURE"] * 3
    assert (dead.task.last_error.type, dead.task.last_error.message) == (
        "ConnectionError",
        "bank unreachable on attempt 3",
    )
    f = DeadFilter(queue="orders", handler="refund")
    page = await env.operator.list_dead(f, page_size=10)
    assert [t.id for t in page.items] == [sub.task.id]
    assert sum(g.count for g in await env.operator.dead_groups(f)) == 1
    assert await env.operator.redrive_dry_run(filter=f) == 1
    with pytest.raises(ForbiddenError) as refused:
        await env.submitter.redrive(ids=[sub.task.id], reason="try")
    assert refused.value.code == "permission_denied"
    res = await env.operator.redrive(ids=[sub.task.id], payload=b'{"fail": false}', reason="bank is back")
    assert res.redriven == 1
    ok = await env.settled(sub.task.id, "SUCCEEDED")
    assert ok.task.life == 1
    last = ok.history[-1]
    assert (last.outcome, last.life, last.number) == ("SUCCESS", 1, 4)
    audit = await env.operator.audit(actor="oncall")
    assert any(e.reason == "bank is back" for e in audit.items)


async def test_permanent_error_dead_letters_at_once_and_purge(env: Env) -> None:
    sub = await env.submitter.submit("orders", "charge", {"permanent": True})
    dead = await env.settled(sub.task.id, "DEAD")
    assert [a.outcome for a in dead.history] == ["PERMANENT_FAILURE"]
    assert (dead.history[0].error_type, dead.history[0].message) == ("PermanentError", "card number is not valid")
    assert dead.history[0].stack.endswith("PermanentError: card number is not valid\n")
    assert await env.operator.purge(ids=[sub.task.id], reason="bad card") == 1
    with pytest.raises(rdq.NotFoundError):
        await env.operator.get_task(sub.task.id)


async def test_retry_after_is_honoured(env: Env) -> None:
    sub = await env.submitter.submit("orders", "charge", {"retry_after": 1.5})
    done = await env.settled(sub.task.id, "SUCCEEDED")
    first, second = done.history
    gap = second.started_at.ToDatetime() - first.finished_at.ToDatetime()
    assert gap >= timedelta(seconds=1), f"the second attempt started {gap} after the first; Retry-After asked 2 s"


async def test_callback_signed_with_another_secret_is_refused(env: Env) -> None:
    sub = await env.submitter.submit("forged", "charge", {"order": 1})
    dead = await env.settled(sub.task.id, "DEAD")
    assert [(a.outcome, a.error_type) for a in dead.history] == [("PERMANENT_FAILURE", "http_401")]
    assert sub.task.id not in env.seen, "the handler never saw the forged execution"


async def test_tokens_and_roles(env: Env) -> None:
    async with RdqClient(env.server.grpc, "not-a-token-of-this-server-at-all-000") as nobody:
        with pytest.raises(UnauthenticatedError):
            await nobody.submit("orders", "charge")
    with pytest.raises(ForbiddenError):
        await env.submitter.list_dead(DeadFilter(queue="orders"))
    async with RdqClient(env.server.grpc, env.server.tokens.stranger) as stranger:
        with pytest.raises(ForbiddenError):
            await stranger.submit("orders", "charge")
    with pytest.raises(InvalidError, match="no-such-handler"):
        await env.submitter.submit("orders", "no-such-handler")
    first = await env.submitter.submit("other", "noop", idempotency_key="once")
    again = await env.submitter.submit("other", "noop", idempotency_key="once")
    assert again.duplicate and again.task.id == first.task.id
    with pytest.raises(DuplicateError) as dup:
        await env.submitter.submit("other", "noop", idempotency_key="once", reject_duplicate=True)
    assert dup.value.task_id == first.task.id
    many = await env.submitter.submit_many([NewTask("other", "noop", "a"), NewTask("other", "", "b")])
    assert isinstance(many[0], rdq.Submitted)
    assert isinstance(many[1], InvalidError), many[1]


async def test_live_tasks_pause_and_resume(env: Env) -> None:
    later = await env.submitter.submit("other", "noop", delay=timedelta(hours=1))
    cancelled = await env.submitter.submit("other", "noop", delay=timedelta(hours=1))
    pending = await env.operator.list_tasks("pending", rdq_pb2.TaskFilter(queue="other"), page_size=100)
    assert later.task.id in [t.id for t in pending.items]
    assert (await env.operator.retry_now([later.task.id], "now please")).changed == 1
    await env.settled(later.task.id, "SUCCEEDED")
    assert (await env.operator.cancel([cancelled.task.id], "not needed")).changed == 1
    dead = await env.settled(cancelled.task.id, "DEAD")
    assert dead.history[-1].outcome == "CANCELLED"
    with pytest.raises(ForbiddenError):
        await env.operator.pause("other", "maintenance")
    await env.admin.pause("other", "maintenance")
    assert [q.paused for q in await env.operator.queue_stats() if q.queue == "other"] == [True]
    await env.admin.resume("other", "done")
    assert [q.paused for q in await env.operator.queue_stats() if q.queue == "other"] == [False]
    assert env.server.worker_id in [w.id for w in (await env.operator.workers()).workers]


async def test_envelope_golden_files(env: Env) -> None:
    d = REPO / "envelope" / "testdata"
    sub = await env.submitter.submit_envelope((d / "submission.json").read_text())
    t = sub.task
    assert (t.queue, t.handler, t.content_type, t.idempotency_key, t.max_attempts, t.timeout_ms) == (
        "emails",
        "send_welcome",
        "application/json",
        "signup-42",
        5,
        90000,
    )
    assert t.payload == b'{"user_id":42,"locale":"en"}'
    assert t.headers["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert 29 <= t.next_attempt_at.seconds - t.created_at.seconds <= 31, "delay_ms is 30000"
    assert parse_submission((d / "minimal.json").read_text()).handler == "send_welcome"
    invalid = sorted(d.glob("invalid_*.json"))
    assert len(invalid) >= 40
    for f in invalid:
        try:
            await env.submitter.submit_envelope(f.read_bytes())
        except InvalidError:
            continue
        pytest.fail(f"{f.name} was accepted")


def _blocking_calls(env: Env) -> None:
    with rdq.SyncRdqClient(env.server.grpc, env.server.tokens.submitter) as shop:
        sub = shop.submit("other", "noop", b"sync", delay=timedelta(hours=1), idempotency_key="sync-1")
        again = shop.submit("other", "noop", b"sync", idempotency_key="sync-1")
        assert again.duplicate and again.task.id == sub.task.id
        with pytest.raises(ForbiddenError):
            shop.list_dead(DeadFilter(queue="other"))
    with rdq.SyncRdqClient(env.server.grpc, env.server.tokens.operator) as oncall:
        found = oncall.get_task(sub.task.id)
        assert (found.task.status, found.task.payload) == ("PENDING", b"sync")
        assert oncall.cancel([sub.task.id], "sync test").changed == 1


async def test_sync_client(env: Env) -> None:
    # The blocking client runs in a thread, so this loop keeps serving callbacks.
    await asyncio.to_thread(_blocking_calls, env)
    dead = await env.settled((await env.operator.task_by_key("other", "sync-1")).task.id, "DEAD")
    assert dead.history[-1].outcome == "CANCELLED"
