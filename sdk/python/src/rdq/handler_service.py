"""Hosting rdq.v1.HandlerService, the gRPC form of a callback, with grpc.aio."""

from __future__ import annotations

import hmac
import math
from collections.abc import Mapping

import grpc

from .execution import Execution, Handler, run
from .outcome import Outcome
from .v1 import handler_pb2, handler_pb2_grpc


def _response(outcome: Outcome) -> handler_pb2.ExecuteResponse:
    failure = handler_pb2.Failure(error_type=outcome.error_type, message=outcome.message, stack=outcome.stack)
    if outcome.kind == "success":
        return handler_pb2.ExecuteResponse(success=handler_pb2.Success())
    if outcome.kind == "permanent":
        return handler_pb2.ExecuteResponse(permanent=failure)
    if outcome.kind == "retry_after":
        return handler_pb2.ExecuteResponse(
            retry_after=handler_pb2.RetryAfter(delay_ms=math.ceil(outcome.delay * 1000), failure=failure)
        )
    return handler_pb2.ExecuteResponse(retryable=failure)


class HandlerServicer(handler_pb2_grpc.HandlerServiceServicer):
    """rdq.v1.HandlerService over handlers by name ("*" for any).

    The outcome contract is the HTTP receiver's: returned -> success,
    PermanentError -> permanent, RetryAfterError -> retry_after, anything
    else -> retryable with its type name, message and traceback. An
    execution of a handler not listed is answered permanent. With a token,
    calls without "authorization: Bearer <token>" metadata are refused with
    UNAUTHENTICATED. The call's deadline bounds the handler
    (``default_deadline`` seconds when the call has none).
    """

    def __init__(
        self, handlers: Mapping[str, Handler], *, token: str | None = None, default_deadline: float = 30.0
    ) -> None:
        self._handlers = dict(handlers)
        self._want = f"Bearer {token}".encode() if token else None
        self._default_deadline = default_deadline

    async def Execute(  # noqa: N802 (the generated servicer's name)
        self,
        request: handler_pb2.ExecuteRequest,
        context: grpc.aio.ServicerContext[handler_pb2.ExecuteRequest, handler_pb2.ExecuteResponse],
    ) -> handler_pb2.ExecuteResponse:
        md = {k: v for k, v in context.invocation_metadata() or ()}
        if self._want is not None:
            got = md.get("authorization", "")
            if not hmac.compare_digest(got.encode() if isinstance(got, str) else got, self._want):
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "rdq: missing or wrong bearer token in the call's authorization metadata",
                )
        handler = self._handlers.get(request.handler) or self._handlers.get("*")
        if handler is None:
            return _response(
                Outcome("permanent", "unknown_handler", f"this HandlerService has no handler {request.handler!r}")
            )
        remaining = context.time_remaining()
        deadline = self._default_deadline if remaining is None else max(0.0, remaining)
        task = Execution(
            id=request.id,
            queue=request.queue,
            handler=request.handler,
            attempt=request.attempt,
            life=request.life,
            lease_token=request.lease_token,
            content_type=request.content_type,
            headers=dict(request.headers),
            payload=request.payload,
        )
        traceparent = md.get("traceparent")
        return _response(await run(handler, task, traceparent if isinstance(traceparent, str) else None, deadline))


class HandlerServer:
    """A running HandlerService host; ``port`` is the port it listens on."""

    def __init__(self, server: grpc.aio.Server, port: int) -> None:
        self._server = server
        self.port = port

    async def stop(self, grace: float | None = 5.0) -> None:
        """Stops accepting calls and lets running ones finish for grace seconds."""
        await self._server.stop(grace)


async def serve_handlers(
    handlers: Mapping[str, Handler],
    *,
    address: str = "127.0.0.1:0",
    token: str | None = None,
    credentials: grpc.ServerCredentials | None = None,
) -> HandlerServer:
    """Hosts HandlerService at address (port 0 picks one), over TLS when
    credentials are given (grpc.ssl_server_credentials, with client
    certificates required for mutual TLS), and returns once it serves."""
    server = grpc.aio.server()
    handler_pb2_grpc.add_HandlerServiceServicer_to_server(HandlerServicer(handlers, token=token), server)
    port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"rdq: cannot listen on {address}")
    await server.start()
    return HandlerServer(server, port)
