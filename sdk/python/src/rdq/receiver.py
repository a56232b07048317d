"""A receiver of rdq's HTTP callbacks, as an ASGI application."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from standardwebhooks.webhooks import Webhook

from .execution import Execution, Handler, run

log = logging.getLogger("rdq")

#: The prefix of a secret in the Standard Webhooks form: "whsec_" + base64 of the key.
SECRET_PREFIX = "whsec_"

#: The largest body a receiver reads, as rdq's Go receiver: two payloads of 1 MiB.
MAX_BODY_BYTES = 2 << 20

#: The media type of the structured failure body a receiver answers a failed
#: execution with; rdq records its error_type, message and stack as the
#: attempt's (see rdq's callback package, version FAILURE_VERSION).
FAILURE_CONTENT_TYPE = "application/vnd.rdq.failure+json"

#: The version of the failure body this receiver answers.
FAILURE_VERSION = 1

#: The most rdq records of an error type, a message and a stack, in UTF-8
#: bytes; a failure body is cut to them.
MAX_ERROR_TYPE_BYTES = 256
MAX_MESSAGE_BYTES = 4 << 10
MAX_STACK_BYTES = 64 << 10

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _webhook(secret: str | bytes) -> Webhook:
    if isinstance(secret, str) and secret.startswith(SECRET_PREFIX):
        try:
            key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(
                f"rdq: a secret starting with whsec_ must go on in standard base64 ({exc}); "
                "copy it again from rdq-server's config"
            ) from exc
    else:
        key = secret.encode() if isinstance(secret, str) else bytes(secret)
    if not key:
        raise ValueError(
            "rdq: the receiver's secret is empty; give the queue's callback secret from rdq-server's config"
        )
    return Webhook(key)


def raw_member(doc: str, name: str) -> str | None:
    """The text of member name of the object at depth 2 of JSON document doc
    (a member of "data" in a callback message), exactly as written, or None.
    doc must be valid JSON."""
    key = json.dumps(name)
    depth = 0
    start = -1
    i = 0
    n = len(doc)
    while i < n:
        c = doc[i]
        if c == '"':
            j = i + 1
            while doc[j] != '"':
                j += 2 if doc[j] == "\\" else 1
            if depth == 2 and start < 0 and doc[i : j + 1] == key and doc[:i].rstrip()[-1:] in ("{", ","):
                k = doc.index(":", j + 1)
                start = k + 1
                while doc[start] in " \t\r\n":
                    start += 1
                i = k + 1
                continue
            i = j
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if start >= 0 and depth == 1:
                return doc[start:i].rstrip()
        elif c == "," and depth == 2 and start >= 0:
            return doc[start:i].rstrip()
        i += 1
    return None


def _cut(s: str, limit: int) -> str:
    """The start of s within limit UTF-8 bytes as rdq's Go rdq.Truncate cuts
    it: at a character boundary, with a mark stating how many bytes were
    dropped ("…[truncated 1234 bytes]"), mark included."""
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= limit:
        return s
    keep = limit
    while True:
        mark = f"…[truncated {len(b) - keep} bytes]"
        room = max(limit - len(mark.encode()), 0)
        if keep <= room:
            return b[:keep].decode("utf-8", "surrogatepass") + mark
        keep = room
        while keep > 0 and b[keep] & 0xC0 == 0x80:
            keep -= 1


def failure_body(error_type: str, message: str, stack: str) -> dict[str, Any]:
    """The failure body of an error: its type, message and stack, each cut
    to what rdq records, so the body stays within what the caller reads."""
    return {
        "version": FAILURE_VERSION,
        "error_type": _cut(error_type, MAX_ERROR_TYPE_BYTES),
        "message": _cut(message, MAX_MESSAGE_BYTES),
        "stack": _cut(stack, MAX_STACK_BYTES),
    }


def _payload(body: str, data: dict[str, Any]) -> bytes:
    if "payload_base64" in data:
        return base64.b64decode(data["payload_base64"])
    if "payload" not in data:
        return b""
    # A JSON payload is in the body byte for byte as submitted; json.dumps
    # of the parsed value could change it, so its text is cut out.
    raw = raw_member(body, "payload")
    return (raw if raw is not None else json.dumps(data["payload"])).encode()


class CallbackReceiver:
    """An ASGI application that receives rdq's HTTP callbacks.

    It verifies each request's Standard Webhooks signature with the
    standardwebhooks library (the queue's secret, raw or "whsec_...";
    timestamps within 5 minutes; the body must name the signed webhook-id),
    answering 401 otherwise (400 for a signed body that is not an rdq
    message, 413 for one too large), which rdq records as a permanent
    failure. It then runs the handler and answers with the status rdq reads
    as its outcome: returned -> 204; PermanentError -> 422; RetryAfterError
    -> 503 with Retry-After (whole seconds, rounded up); anything else ->
    500. A failure's body is the structured failure body
    (FAILURE_CONTENT_TYPE) with the exception's class name, message and
    traceback, which rdq records as the attempt's error type, message and
    stack. A handler still running after ``deadline`` seconds (keep it under
    the queue's callback timeout) is cancelled and answered as a retryable
    "timeout".

    Mount it in Starlette or FastAPI with ``app.mount("/hooks/orders",
    receiver)`` or ``rdq.starlette.callback_route``.
    """

    def __init__(self, secret: str | bytes, handler: Handler, *, deadline: float = 8.0) -> None:
        self._webhook = _webhook(secret)
        self._handler = handler
        self._deadline = deadline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            raise RuntimeError(f"rdq: CallbackReceiver serves HTTP, not {scope['type']}")
        status, body, extra = await self._handle(scope, receive)
        headers = (
            extra
            if any(k == b"content-type" for k, _ in extra)
            else [(b"content-type", b"text/plain; charset=utf-8"), *extra]
        )
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if status == 204 else body.encode()})

    async def _read(self, receive: Receive) -> bytes | None:
        """Returns the body, or None once it is larger than MAX_BODY_BYTES;
        raises _DisconnectedError if the caller goes away first."""
        chunks: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise _DisconnectedError
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(chunks)

    async def _handle(self, scope: Scope, receive: Receive) -> tuple[int, str, list[tuple[bytes, bytes]]]:
        if scope["method"] != "POST":
            return 405, "rdq callbacks are POST requests", [(b"allow", b"POST")]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length", "0") or "0"
        if not (declared.isascii() and declared.isdigit()):
            return 400, "content-length is not a number", []
        if int(declared) > MAX_BODY_BYTES:
            return 413, f"callback body is larger than {MAX_BODY_BYTES} bytes", []
        try:
            raw = await self._read(receive)
        except _DisconnectedError:
            return 400, "the caller went away before sending the whole body", []
        if raw is None:
            return 413, f"callback body is larger than {MAX_BODY_BYTES} bytes", []
        signed = {h: headers.get(h, "") for h in ("webhook-id", "webhook-timestamp", "webhook-signature")}
        try:
            body = raw.decode()
            self._webhook.verify(body, signed, json_parse=False)
        except Exception as exc:  # the library raises several types for malformed headers
            log.warning("rdq callback refused: signature: %s", exc, extra={"webhook_id": signed["webhook-id"][:64]})
            return 401, f"callback signature refused: {exc}", []
        try:
            msg = json.loads(body)
        except ValueError:
            return 400, "the signed body is not JSON", []
        data = msg.get("data") if isinstance(msg, dict) else None
        if (
            not isinstance(msg, dict)
            or msg.get("type") != "rdq.task"
            or not isinstance(data, dict)
            or data.get("id") != signed["webhook-id"]
        ):
            return 400, "the signed body is not an rdq.task message for webhook-id", []
        task = Execution(
            id=data["id"],
            queue=data.get("queue", ""),
            handler=data.get("handler", ""),
            attempt=int(data.get("attempt", 0)),
            life=int(data.get("life", 0)),
            lease_token=int(data.get("lease_token", 0)),
            content_type=data.get("content_type", ""),
            headers=dict(data.get("headers") or {}),
            payload=_payload(body, data),
        )
        outcome = await run(self._handler, task, headers.get("traceparent"), self._deadline)
        if outcome.kind == "success":
            return 204, "", []
        # ASCII JSON: lone surrogates and control characters travel as escapes.
        failure = json.dumps(failure_body(outcome.error_type, outcome.message, outcome.stack))
        extra = [(b"content-type", FAILURE_CONTENT_TYPE.encode()), (b"x-content-type-options", b"nosniff")]
        if outcome.kind == "permanent":
            return 422, failure, extra
        if outcome.kind == "retry_after":
            return 503, failure, [*extra, (b"retry-after", str(math.ceil(outcome.delay)).encode())]
        return 500, failure, extra


class _DisconnectedError(Exception):
    """The caller went away before sending the whole body."""
