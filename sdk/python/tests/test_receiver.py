"""The ASGI callback receiver, held to the signed requests Go writes in
testdata/conformance/callbacks.json and to the failure bodies of
testdata/conformance/callback_failures.json."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import standardwebhooks.webhooks as swh
from harness import REPO
from starlette.applications import Starlette

from rdq import (
    FAILURE_CONTENT_TYPE,
    FAILURE_VERSION,
    MAX_BODY_BYTES,
    MAX_ERROR_TYPE_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_STACK_BYTES,
    CallbackReceiver,
    Execution,
    PermanentError,
    RetryAfterError,
    failure_body,
)
from rdq.receiver import _cut, raw_member
from rdq.starlette import callback_route

VECTORS: list[dict[str, Any]] = json.loads((REPO / "testdata" / "conformance" / "callbacks.json").read_text())[
    "vectors"
]


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The vectors were signed at their timestamp; the receiver's clock is a minute later."""
    set_clock(monkeypatch, VECTORS[0]["timestamp"] + 60)
    yield


def set_clock(monkeypatch: pytest.MonkeyPatch, unix: int) -> None:
    class Frozen(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Frozen:
            return cls.fromtimestamp(unix, tz=UTC)

    monkeypatch.setattr(swh, "datetime", Frozen)


def headers(v: dict[str, Any], **change: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "webhook-id": change.get("id", v["id"]),
        "webhook-timestamp": change.get("timestamp", str(v["timestamp"])),
        "webhook-signature": change.get("signature", v["signature"]),
    }


async def post(
    app: CallbackReceiver, v: dict[str, Any], body: str | bytes | None = None, **change: str
) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://receiver.test") as c:
        return await c.post("/hooks", content=v["body"] if body is None else body, headers=headers(v, **change))


def test_has_vectors() -> None:
    assert len(VECTORS) >= 4


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
async def test_vector_accepted_and_refused_when_changed(v: dict[str, Any]) -> None:
    seen: list[Execution] = []
    app = CallbackReceiver(v["secret"], seen.append)
    res = await post(app, v)
    assert res.status_code == 204, res.text
    assert len(seen) == 1
    assert base64.b64encode(seen[0].payload).decode() == v["payload"], "the payload byte for byte"
    assert seen[0].id == v["id"]
    for what, r in {
        "body": await post(app, v, body=v["body"].replace('"queue":"orders"', '"queue":"refunds"')),
        "id": await post(app, v, id=v["id"][:-1] + "e"),
        "timestamp": await post(app, v, timestamp=str(v["timestamp"] + 1)),
        "signature": await post(app, v, signature=v["signature"].replace("v1,", "v1,A")),
        "malformed signature": await post(app, v, signature="v1"),
        "no signature": await post(app, v, signature=""),
        "body not UTF-8": await post(app, v, body=b"\xff" + v["body"].encode()),
    }.items():
        assert r.status_code == 401, f"changed {what}: {r.text}"
    other = CallbackReceiver("a-different-secret-entirely-0123456", seen.append)
    assert (await post(other, v)).status_code == 401
    assert len(seen) == 1, "no refused request reached the handler"


def test_signs_as_go_does() -> None:
    for v in VECTORS:
        s = v["secret"]
        key = base64.b64decode(s[len("whsec_") :]) if s.startswith("whsec_") else s.encode()
        wh = swh.Webhook(key)
        assert wh.sign(v["id"], datetime.fromtimestamp(v["timestamp"], tz=UTC), v["body"]) == v["signature"], v["name"]


async def test_stale_request_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    v = VECTORS[0]
    set_clock(monkeypatch, v["timestamp"] + 301)
    assert (await post(CallbackReceiver(v["secret"], lambda t: None), v)).status_code == 401


def test_malformed_whsec_secret_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="whsec_ .*base64"):
        CallbackReceiver("whsec_not base64!", lambda t: None)


async def test_other_id_too_large_and_not_post() -> None:
    v = VECTORS[0]
    app = CallbackReceiver(v["secret"], lambda t: None)
    other = "0190f3a0-5e1c-7c2a-9b1e-000000000000"
    sig = swh.Webhook(v["secret"].encode()).sign(other, datetime.fromtimestamp(v["timestamp"], tz=UTC), v["body"])
    assert (await post(app, v, id=other, signature=sig)).status_code == 400
    assert (await post(app, v, body="x" * (MAX_BODY_BYTES + 1))).status_code == 413
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://receiver.test") as c:
        assert (await c.get("/hooks")).status_code == 405


def _raise(e: BaseException) -> Any:
    def handler(t: Execution) -> None:
        raise e

    return handler


async def test_outcomes_as_statuses() -> None:
    v = VECTORS[0]

    async def raises_async(t: Execution) -> None:
        raise PermanentError("card is closed")

    class LedgerError(Exception):
        pass

    cases: list[tuple[Any, int, tuple[str, str] | None, str | None]] = [
        (lambda t: None, 204, None, None),
        (raises_async, 422, ("PermanentError", "card is closed"), None),
        (_raise(RetryAfterError(1.2, "slow down")), 503, ("RetryAfterError", "slow down"), "2"),
        (_raise(KeyError("order")), 500, ("KeyError", "'order'"), None),
        (_raise(LedgerError("ledger is down")), 500, ("LedgerError", "ledger is down"), None),
    ]
    for handler, status, want, retry_after in cases:
        res = await post(CallbackReceiver(v["secret"], handler), v)
        assert res.status_code == status
        assert res.headers.get("retry-after") == retry_after
        if want is None:
            assert res.text == ""
            continue
        assert res.headers["content-type"] == FAILURE_CONTENT_TYPE
        body = res.json()
        assert (body["version"], body["error_type"], body["message"]) == (FAILURE_VERSION, *want)
        assert re.search(r"^Traceback \(most recent call last\):\n.*test_receiver\.py", body["stack"], re.S), body[
            "stack"
        ]


FAILURES: dict[str, Any] = json.loads((REPO / "testdata" / "conformance" / "callback_failures.json").read_text())


async def test_failure_vectors_as_answered() -> None:
    """For each thrown exception of the failure vectors, the receiver answers
    the vector's status, media type, Retry-After, version, type and message,
    with the exception's own traceback as the stack."""
    assert FAILURES["media_type"] == FAILURE_CONTENT_TYPE and FAILURES["version"] == FAILURE_VERSION
    limits = FAILURES["limits"]
    assert (limits["error_type_bytes"], limits["message_bytes"], limits["stack_bytes"]) == (
        MAX_ERROR_TYPE_BYTES,
        MAX_MESSAGE_BYTES,
        MAX_STACK_BYTES,
    )
    thrown = [f for f in FAILURES["vectors"] if "thrown" in f]
    assert len(thrown) >= 3
    v = VECTORS[0]
    for f in thrown:
        t = f["thrown"]
        exc: Exception
        if t["kind"] == "permanent":
            exc = PermanentError(t["message"])
        elif t["kind"] == "retry_after":
            exc = RetryAfterError(t["delay_ms"] / 1000, t["message"])
        else:
            exc = type(t["class"], (Exception,), {})(t["message"])
        res = await post(CallbackReceiver(v["secret"], _raise(exc)), v)
        want = f["response"]
        assert res.status_code == want["status"], f["name"]
        assert res.headers["content-type"] == want["content_type"], f["name"]
        assert res.headers.get("retry-after") == want.get("retry_after"), f["name"]
        got, body = res.json(), json.loads(want["body"])
        assert (got["version"], got["error_type"], got["message"]) == (
            body["version"],
            body["error_type"],
            body["message"],
        )
        assert got["stack"].endswith(f"{t['class']}: {t['message']}\n"), got["stack"]


def test_failure_body_is_cut_to_what_rdq_records() -> None:
    body = failure_body("T" * 300, "é" * 3000, "s" * 70_000)
    assert len(body["error_type"].encode()) <= MAX_ERROR_TYPE_BYTES
    assert body["error_type"].endswith("T…[truncated 67 bytes]"), body["error_type"]
    assert len(body["message"].encode()) <= MAX_MESSAGE_BYTES
    assert re.search(r"é…\[truncated \d+ bytes\]$", body["message"]), body["message"][-30:]
    assert len(body["stack"].encode()) <= MAX_STACK_BYTES and body["stack"].startswith("sss")
    assert failure_body("E", "short", "") == {"version": 1, "error_type": "E", "message": "short", "stack": ""}
    assert FAILURES["cuts"]
    for c in FAILURES["cuts"]:
        assert _cut(c["text"], c["limit"]) == c["want"], f"cut to {c['limit']} bytes as rdq.Truncate does"
    # A lone surrogate (undecodable bytes read with surrogateescape) still makes JSON.
    assert json.loads(json.dumps(failure_body("E", "bad \udcff byte", "")))["message"] == "bad \udcff byte"


async def test_deadline_cancels_the_handler() -> None:
    v = VECTORS[0]
    cancelled = asyncio.Event()

    async def slow(t: Execution) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    res = await post(CallbackReceiver(v["secret"], slow, deadline=0.05), v)
    assert res.status_code == 500
    body = res.json()
    assert body["error_type"] == "timeout"
    assert body["message"].startswith("the handler did not finish within 0.05 s")
    assert cancelled.is_set()


def test_raw_member() -> None:
    assert raw_member('{"data":{"a":"\\"payload\\":1","payload" : [1, "]}"] ,"z":0}}', "payload") == '[1, "]}"]'
    assert raw_member('{"data":{"payload":{"payload":2}}}', "payload") == '{"payload":2}'
    assert raw_member('{"data":{"headers":{"payload":"x"}}}', "payload") is None


async def test_starlette_route() -> None:
    v = VECTORS[0]
    seen: list[Execution] = []
    app = Starlette(routes=[callback_route("/hooks/orders", v["secret"], seen.append)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app.test") as client:
        res = await client.post("/hooks/orders", content=v["body"], headers=headers(v))
    assert res.status_code == 204, res.text
    assert [t.queue for t in seen] == ["orders"]


async def test_malformed_content_length() -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(m: dict[str, Any]) -> None:
        sent.append(m)

    app = CallbackReceiver(VECTORS[0]["secret"], lambda t: None)
    await app({"type": "http", "method": "POST", "headers": [(b"content-length", b"12abc")]}, receive, send)
    assert sent[0]["status"] == 400


async def test_logs_task_id_queue_attempt_never_payload(caplog: pytest.LogCaptureFixture) -> None:
    v = VECTORS[0]
    caplog.set_level(logging.INFO, logger="rdq")
    await post(CallbackReceiver(v["secret"], lambda t: None), v)
    await post(CallbackReceiver(v["secret"], _raise(ValueError("no"))), v)
    got = [(r.levelname, r.getMessage().split(":")[0], r.task_id, r.queue, r.attempt) for r in caplog.records]  # type: ignore[attr-defined]
    assert got == [
        ("INFO", "rdq task succeeded", v["id"], "orders", 1),
        ("WARNING", "rdq task failed", v["id"], "orders", 1),
    ]
    payload = base64.b64decode(v["payload"]).decode()
    assert all(payload[:12] not in r.getMessage() and payload[:12] not in str(r.__dict__) for r in caplog.records)


async def _answer(receive: Any, headers: list[tuple[bytes, bytes]] | None = None) -> int:
    sent: list[dict[str, Any]] = []

    async def send(m: dict[str, Any]) -> None:
        sent.append(m)

    app = CallbackReceiver(VECTORS[0]["secret"], lambda t: None)
    await app({"type": "http", "method": "POST", "headers": headers or []}, receive, send)
    status: int = sent[0]["status"]
    return status


async def test_content_length_of_non_ascii_digits() -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    assert await _answer(receive, [(b"content-length", b"\xb2")]) == 400  # a superscript two in latin-1


async def test_body_cap_applies_before_the_whole_body_is_read() -> None:
    chunk = b"x" * (64 << 10)
    pulled = 0

    async def endless() -> dict[str, Any]:
        nonlocal pulled
        pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    assert await _answer(endless) == 413
    assert MAX_BODY_BYTES < pulled <= MAX_BODY_BYTES + len(chunk)


async def test_client_disconnect_is_no_413() -> None:
    async def gone() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    assert await _answer(gone) == 400


async def test_future_timestamp_outside_the_window_refused() -> None:
    v = VECTORS[0]
    later = v["timestamp"] + 3600
    key = v["secret"].encode()
    sig = swh.Webhook(key).sign(v["id"], datetime.fromtimestamp(later, tz=UTC), v["body"])
    seen: list[Execution] = []
    res = await post(CallbackReceiver(v["secret"], seen.append), v, timestamp=str(later), signature=sig)
    assert res.status_code == 401
    assert seen == []


async def test_handler_timeout_error_is_the_handlers_failure() -> None:
    res = await post(CallbackReceiver(VECTORS[0]["secret"], _raise(TimeoutError("ledger timed out"))), VECTORS[0])
    assert res.status_code == 500
    assert res.json()["error_type"] == "TimeoutError"
    assert res.json()["message"] == "ledger timed out"


def test_retry_after_needs_a_finite_delay_and_caps_it() -> None:
    with pytest.raises(ValueError, match="finite"):
        RetryAfterError(float("inf"), "never")
    assert RetryAfterError(1e300, "later").delay * 1000 <= 2**63 - 1
