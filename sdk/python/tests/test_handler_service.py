"""The gRPC HandlerService host, called by this package's own generated stub."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from harness import REPO

from rdq import Execution, HandlerServer, PermanentError, RetryAfterError, serve_handlers
from rdq.v1 import handler_pb2, handler_pb2_grpc

TOKEN = "handler-token-0123456789abcdefghijkl"
AUTH = (("authorization", f"Bearer {TOKEN}"),)
seen: list[Execution] = []
cancelled = asyncio.Event()


async def slow(t: Execution) -> None:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.set()
        raise


def raises(e: Exception) -> object:
    def handler(t: Execution) -> None:
        raise e

    return handler


@pytest.fixture(scope="module")
async def stub() -> AsyncIterator[handler_pb2_grpc.HandlerServiceStub]:
    server: HandlerServer = await serve_handlers(
        {
            "ok": seen.append,
            "permanent": raises(PermanentError("account closed")),  # type: ignore[dict-item]
            "later": raises(RetryAfterError(1.5, "rate limited")),  # type: ignore[dict-item]
            "broken": raises(LookupError("cannot read the order")),  # type: ignore[dict-item]
            "slow": slow,
        },
        token=TOKEN,
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield handler_pb2_grpc.HandlerServiceStub(ch)
    await server.stop(None)


def request(handler: str) -> handler_pb2.ExecuteRequest:
    return handler_pb2.ExecuteRequest(
        id="0190f3a0-0000-7000-8000-000000000001",
        queue="orders",
        handler=handler,
        attempt=2,
        life=1,
        lease_token=9007199254740993,
        content_type="application/json",
        headers={"tenant": "acme"},
        payload=b'{"order":42}',
    )


async def test_success_with_the_execution_as_sent(stub: handler_pb2_grpc.HandlerServiceStub) -> None:
    res = await stub.Execute(request("ok"), metadata=AUTH)
    assert res.WhichOneof("outcome") == "success"
    t = seen[-1]
    assert (t.id, t.attempt, t.life, t.lease_token) == ("0190f3a0-0000-7000-8000-000000000001", 2, 1, 9007199254740993)
    assert t.headers == {"tenant": "acme"}
    assert t.payload == b'{"order":42}'


async def test_outcomes(stub: handler_pb2_grpc.HandlerServiceStub) -> None:
    p = await stub.Execute(request("permanent"), metadata=AUTH)
    assert p.WhichOneof("outcome") == "permanent"
    assert (p.permanent.error_type, p.permanent.message) == ("PermanentError", "account closed")
    r = await stub.Execute(request("later"), metadata=AUTH)
    assert r.WhichOneof("outcome") == "retry_after"
    assert (r.retry_after.delay_ms, r.retry_after.failure.message) == (1500, "rate limited")
    b = await stub.Execute(request("broken"), metadata=AUTH)
    assert b.WhichOneof("outcome") == "retryable"
    assert (b.retryable.error_type, b.retryable.message) == ("LookupError", "cannot read the order")
    assert "test_handler_service.py" in b.retryable.stack
    u = await stub.Execute(request("nobody"), metadata=AUTH)
    assert (u.WhichOneof("outcome"), u.permanent.error_type) == ("permanent", "unknown_handler")


@pytest.mark.parametrize(
    "md", [(), (("authorization", "Bearer wrong-token-0123456789abcdefghijk"),), (("authorization", TOKEN),)]
)
async def test_refuses_calls_without_the_token(
    stub: handler_pb2_grpc.HandlerServiceStub, md: tuple[tuple[str, str], ...]
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Execute(request("ok"), metadata=md)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_deadline_cancels_the_handler(stub: handler_pb2_grpc.HandlerServiceStub) -> None:
    try:
        res = await stub.Execute(request("slow"), metadata=AUTH, timeout=0.3)
        # The host saw the deadline first: a retryable timeout.
        assert (res.WhichOneof("outcome"), res.retryable.error_type) == ("retryable", "timeout")
    except grpc.aio.AioRpcError as err:
        # The caller saw it first: both are a failed attempt.
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await asyncio.wait_for(cancelled.wait(), timeout=30)


async def test_mutual_tls() -> None:
    tls = REPO / "sdk" / "testdata" / "tls"
    ca, key, cert = ((tls / n).read_bytes() for n in ("ca.pem", "server.key", "server.pem"))
    creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
    server = await serve_handlers({"ok": seen.append}, credentials=creds, token=TOKEN)
    try:
        target = f"127.0.0.1:{server.port}"
        client = grpc.ssl_channel_credentials(ca, (tls / "client.key").read_bytes(), (tls / "client.pem").read_bytes())
        async with grpc.aio.secure_channel(target, client) as ch:
            res = await handler_pb2_grpc.HandlerServiceStub(ch).Execute(request("ok"), metadata=AUTH, timeout=30)
            assert res.WhichOneof("outcome") == "success"
        async with grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(ca)) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await handler_pb2_grpc.HandlerServiceStub(ch).Execute(request("ok"), metadata=AUTH, timeout=30)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE, "a caller without a client certificate is refused"
    finally:
        await server.stop(None)
