"""A blocking RdqClient, for code without an event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import grpc

from .client import RdqClient

P = ParamSpec("P")
R = TypeVar("R")


def _blocking(
    method: Callable[Concatenate[RdqClient, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[SyncRdqClient, P], R]:
    def call(self: SyncRdqClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return asyncio.run_coroutine_threadsafe(method(self._client, *args, **kwargs), self._loop).result()

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class SyncRdqClient:
    """RdqClient's methods, blocking: each runs on an event loop of the
    client's own thread. Same arguments, results and errors as RdqClient;
    safe to call from several threads. Use it as a context manager, or call
    close()."""

    def __init__(
        self,
        target: str,
        token: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rdq-sync-client", daemon=True)
        self._thread.start()

        async def make() -> RdqClient:
            return RdqClient(target, token, credentials=credentials, timeout=timeout)

        try:
            self._client = asyncio.run_coroutine_threadsafe(make(), self._loop).result()
        except BaseException:
            self._stop()
            raise

    def __enter__(self) -> SyncRdqClient:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel and ends the client's thread."""
        if self._loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result()
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    submit = _blocking(RdqClient.submit)
    submit_envelope = _blocking(RdqClient.submit_envelope)
    submit_many = _blocking(RdqClient.submit_many)
    get_task = _blocking(RdqClient.get_task)
    task_by_key = _blocking(RdqClient.task_by_key)
    list_dead = _blocking(RdqClient.list_dead)
    dead_groups = _blocking(RdqClient.dead_groups)
    redrive = _blocking(RdqClient.redrive)
    redrive_dry_run = _blocking(RdqClient.redrive_dry_run)
    purge = _blocking(RdqClient.purge)
    list_tasks = _blocking(RdqClient.list_tasks)
    retry_now = _blocking(RdqClient.retry_now)
    cancel = _blocking(RdqClient.cancel)
    pause = _blocking(RdqClient.pause)
    resume = _blocking(RdqClient.resume)
    queue_stats = _blocking(RdqClient.queue_stats)
    breakers = _blocking(RdqClient.breakers)
    set_breaker = _blocking(RdqClient.set_breaker)
    audit = _blocking(RdqClient.audit)
    workers = _blocking(RdqClient.workers)
