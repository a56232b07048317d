"""The client of rdq-server's RdqService: producer and operator."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import Generic, Literal, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from . import _trace
from .envelope import parse_submission
from .errors import DuplicateError, RdqError, error_of_code, from_rpc_error
from .v1 import rdq_pb2, rdq_pb2_grpc

T = TypeVar("T")

LiveState = Literal["pending", "retrying", "in_flight", "succeeded"]


@dataclass(frozen=True)
class FirstFailure:
    """A failure the caller already had, recorded as the task's attempt 1."""

    message: str
    error_type: str = ""


@dataclass(frozen=True)
class NewTask:
    """A task to submit.

    The payload is bytes as they are, a str as UTF-8, anything else as JSON
    (with content type application/json unless one is given).
    ``headers`` travel with the task; traceparent is added from the current
    OpenTelemetry span when absent.
    """

    queue: str
    handler: str
    payload: object = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotency_key: str = ""
    #: Run no sooner than this from now.
    delay: timedelta = timedelta(0)
    #: A failure the caller already had; an exception is recorded with its type name.
    first_failure: FirstFailure | BaseException | None = None
    #: Overrides the queue's maximum attempts for this task (0: the queue's).
    max_attempts: int = 0
    #: Overrides the queue's handler timeout for this task.
    timeout: timedelta = timedelta(0)

    def spec(self) -> rdq_pb2.TaskSpec:
        """The TaskSpec of this task."""
        p = self.payload
        if isinstance(p, bytes | bytearray | memoryview):
            payload, ct = bytes(p), "application/octet-stream" if p else ""
        elif isinstance(p, str):
            payload, ct = p.encode(), "text/plain; charset=utf-8"
        else:
            payload, ct = json.dumps(p, separators=(",", ":")).encode(), "application/json"
        ff = None
        if isinstance(self.first_failure, BaseException):
            ff = rdq_pb2.FailureSpec(error_type=type(self.first_failure).__name__, message=str(self.first_failure))
        elif self.first_failure is not None:
            ff = rdq_pb2.FailureSpec(error_type=self.first_failure.error_type, message=self.first_failure.message)
        return rdq_pb2.TaskSpec(
            version=1,
            queue=self.queue,
            handler=self.handler,
            payload=payload,
            content_type=self.content_type if self.content_type is not None else ct,
            headers={**_trace.trace_headers(), **self.headers},
            idempotency_key=self.idempotency_key,
            delay_ms=max(0, round(self.delay.total_seconds() * 1000)),
            first_failure=ff,
            max_attempts=self.max_attempts,
            timeout_ms=max(0, round(self.timeout.total_seconds() * 1000)),
        )


@dataclass(frozen=True)
class Submitted:
    """A submitted task, and whether it already existed under its idempotency key."""

    task: rdq_pb2.Task
    duplicate: bool


@dataclass(frozen=True)
class TaskHistory:
    """A task with every attempt of every life, oldest first."""

    task: rdq_pb2.Task
    history: list[rdq_pb2.Attempt]


@dataclass(frozen=True)
class Page(Generic[T]):
    """A page of a listing; pass next_page_token back for the next ("" on the last)."""

    items: list[T]
    next_page_token: str


def _ms(d: timedelta) -> int:
    return max(0, round(d.total_seconds() * 1000))


def _ts(t: datetime | None) -> Timestamp | None:
    if t is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(t)
    return ts


def _duplicate(task: rdq_pb2.Task) -> DuplicateError:
    return DuplicateError(
        f"rdq: queue {task.queue} already holds task {task.id} under idempotency key {task.idempotency_key!r}; "
        "use another key for new work, or read the existing task",
        task.id,
    )


class RdqClient:
    """Talks to rdq-server's RdqService over gRPC (grpc.aio).

    It submits tasks (the producer) and reads and operates the dead-letter
    queue, live tasks, pauses and breakers (the operator); what it may do
    is its token's role on each queue (submitter < operator < admin). Every
    method raises an RdqError subclass when the server refuses or cannot
    answer. Use it as an async context manager, or call close().

    target is "host:port" of the gRPC listener; credentials, when given,
    make the channel TLS (grpc.ssl_channel_credentials). A channel of your
    own may be passed instead, and is not closed by close().
    """

    def __init__(
        self,
        target: str,
        token: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float = 30.0,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        if not token:
            raise ValueError("rdq: the token is empty; give the bearer token of a principal from rdq-server's config")
        self._own = channel is None
        if channel is None:
            channel = grpc.aio.secure_channel(target, credentials) if credentials else grpc.aio.insecure_channel(target)
        self._channel = channel
        self._stub = rdq_pb2_grpc.RdqServiceStub(channel)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout

    async def __aenter__(self) -> RdqClient:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel the client made."""
        if self._own:
            await self._channel.close(None)

    async def _call(self, method: Callable[..., Awaitable[T]], request: object) -> T:
        try:
            return await method(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from err

    async def submit(
        self,
        queue: str,
        handler: str,
        payload: object = b"",
        *,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
        idempotency_key: str = "",
        delay: timedelta = timedelta(0),
        first_failure: FirstFailure | BaseException | None = None,
        max_attempts: int = 0,
        timeout: timedelta = timedelta(0),
        reject_duplicate: bool = False,
    ) -> Submitted:
        """Submits one task and returns it as stored.

        A second submission with a taken idempotency key returns the task
        holding it with ``duplicate`` set, or raises DuplicateError with
        reject_duplicate.
        """
        task = NewTask(
            queue,
            handler,
            payload,
            content_type,
            dict(headers or {}),
            idempotency_key,
            delay,
            first_failure,
            max_attempts,
            timeout,
        )
        res = await self._call(self._stub.Submit, rdq_pb2.SubmitRequest(task=task.spec()))
        if res.duplicate and reject_duplicate:
            raise _duplicate(res.task)
        return Submitted(res.task, res.duplicate)

    async def submit_envelope(self, doc: str | bytes, *, reject_duplicate: bool = False) -> Submitted:
        """Submits a task written as a submission in rdq's JSON wire envelope (as
        another rdq client or a message from a broker carries it), raising
        InvalidError for an invalid one before it is sent (see
        parse_submission). traceparent is added from the current span when the
        envelope has none."""
        spec = parse_submission(doc)
        headers = {**_trace.trace_headers(), **spec.headers}
        spec.headers.clear()
        spec.headers.update(headers)
        res = await self._call(self._stub.Submit, rdq_pb2.SubmitRequest(task=spec))
        if res.duplicate and reject_duplicate:
            raise _duplicate(res.task)
        return Submitted(res.task, res.duplicate)

    async def submit_many(
        self, tasks: Sequence[NewTask], *, reject_duplicate: bool = False
    ) -> list[Submitted | RdqError]:
        """Submits tasks in one call; each is accepted (Submitted) or refused (an RdqError) on its own, in order."""
        res = await self._call(self._stub.SubmitBatch, rdq_pb2.SubmitBatchRequest(tasks=[t.spec() for t in tasks]))
        out: list[Submitted | RdqError] = []
        for r in res.results:
            if r.HasField("error"):
                out.append(error_of_code(r.error.code, r.error.message))
            elif r.duplicate and reject_duplicate:
                out.append(_duplicate(r.task))
            else:
                out.append(Submitted(r.task, r.duplicate))
        return out

    async def get_task(self, id: str) -> TaskHistory:
        """A task, live or dead, with its whole history."""
        res = await self._call(self._stub.GetTask, rdq_pb2.GetTaskRequest(id=id))
        return TaskHistory(res.task, list(res.history))

    async def task_by_key(self, queue: str, key: str) -> TaskHistory:
        """The task holding an idempotency key on a queue, with its history."""
        res = await self._call(self._stub.TaskByKey, rdq_pb2.TaskByKeyRequest(queue=queue, key=key))
        return TaskHistory(res.task, list(res.history))

    async def list_dead(
        self, filter: rdq_pb2.DeadFilter | None = None, *, page_size: int = 0, page_token: str = ""
    ) -> Page[rdq_pb2.Task]:
        """Dead tasks matching filter, newest first."""
        res = await self._call(
            self._stub.ListDead, rdq_pb2.ListDeadRequest(filter=filter, page_size=page_size, page_token=page_token)
        )
        return Page(list(res.tasks), res.next_page_token)

    async def dead_groups(self, filter: rdq_pb2.DeadFilter | None = None) -> list[rdq_pb2.Group]:
        """The dead tasks matching filter, grouped by failure fingerprint."""
        return list((await self._call(self._stub.DeadGroups, rdq_pb2.DeadGroupsRequest(filter=filter))).groups)

    async def redrive(
        self,
        *,
        reason: str,
        ids: Sequence[str] = (),
        filter: rdq_pb2.DeadFilter | None = None,
        all: bool = False,
        payload: bytes | None = None,
        delay: timedelta = timedelta(0),
        spread: timedelta = timedelta(0),
        max_life: int = 0,
    ) -> rdq_pb2.RedriveResponse:
        """Gives dead tasks (by ids, filter or all) a new life with their policy reset, audited with reason.

        payload replaces the payload of the redriven tasks; spread spreads
        them over a window; max_life skips tasks at that life or beyond.
        """
        req = rdq_pb2.RedriveRequest(
            ids=list(ids),
            filter=filter,
            all=all,
            delay_ms=_ms(delay),
            spread_ms=_ms(spread),
            max_life=max_life,
            reason=reason,
        )
        if payload is not None:
            req.payload = payload
        return await self._call(self._stub.Redrive, req)

    async def redrive_dry_run(
        self, *, ids: Sequence[str] = (), filter: rdq_pb2.DeadFilter | None = None, all: bool = False, max_life: int = 0
    ) -> int:
        """Counts the dead tasks a redrive would select, changing nothing."""
        if ids:
            n = 0
            for id in ids:
                t = (await self.get_task(id)).task
                n += t.status == "DEAD" and (not max_life or t.life < max_life)
            return n
        if filter is None and not all:
            raise ValueError("rdq: a redrive selects tasks by ids, filter or all; give one")
        f = rdq_pb2.DeadFilter()
        if filter is not None:
            f.CopyFrom(filter)
        if max_life:
            f.life_below = max_life
        return sum(g.count for g in await self.dead_groups(f))

    async def purge(
        self, *, reason: str, ids: Sequence[str] = (), filter: rdq_pb2.DeadFilter | None = None, all: bool = False
    ) -> int:
        """Deletes dead tasks for good, audited with reason; returns how many."""
        res = await self._call(
            self._stub.Purge, rdq_pb2.PurgeRequest(ids=list(ids), filter=filter, all=all, reason=reason)
        )
        return res.purged

    async def list_tasks(
        self, state: LiveState, filter: rdq_pb2.TaskFilter | None = None, *, page_size: int = 0, page_token: str = ""
    ) -> Page[rdq_pb2.Task]:
        """Live tasks in a state, with the DLQ's filters and paging."""
        res = await self._call(
            self._stub.ListTasks,
            rdq_pb2.ListTasksRequest(state=state, filter=filter, page_size=page_size, page_token=page_token),
        )
        return Page(list(res.tasks), res.next_page_token)

    async def retry_now(self, ids: Sequence[str], reason: str) -> rdq_pb2.ChangeTasksResponse:
        """Makes waiting tasks due at once."""
        return await self._call(self._stub.RetryTasks, rdq_pb2.ChangeTasksRequest(ids=list(ids), reason=reason))

    async def cancel(self, ids: Sequence[str], reason: str) -> rdq_pb2.ChangeTasksResponse:
        """Sends waiting tasks to the dead-letter queue with a CANCELLED attempt, audited."""
        return await self._call(self._stub.CancelTasks, rdq_pb2.ChangeTasksRequest(ids=list(ids), reason=reason))

    async def pause(self, queue: str, reason: str) -> None:
        """Stops every worker claiming from queue until resume (admin)."""
        await self._call(self._stub.PauseQueue, rdq_pb2.PauseQueueRequest(queue=queue, reason=reason))

    async def resume(self, queue: str, reason: str) -> None:
        """Lets workers claim from queue again (admin)."""
        await self._call(self._stub.ResumeQueue, rdq_pb2.ResumeQueueRequest(queue=queue, reason=reason))

    async def queue_stats(self, succeeded_window: timedelta = timedelta(0)) -> list[rdq_pb2.QueueStat]:
        """Each queue's tasks counted by state."""
        res = await self._call(
            self._stub.QueueStats, rdq_pb2.QueueStatsRequest(succeeded_window_ms=_ms(succeeded_window))
        )
        return list(res.queues)

    async def breakers(self, queue: str = "") -> list[rdq_pb2.Breaker]:
        """The circuit breakers of queue ("" for every queue)."""
        return list((await self._call(self._stub.ListBreakers, rdq_pb2.ListBreakersRequest(queue=queue))).breakers)

    async def set_breaker(
        self,
        queue: str,
        handler: str,
        state: Literal["open", "closed"],
        *,
        reason: str,
        cool_off: timedelta = timedelta(0),
    ) -> bool:
        """Opens or closes a (queue, handler) breaker by hand; returns whether it changed."""
        req = rdq_pb2.SetBreakerRequest(
            queue=queue, handler=handler, state=state, cool_off_ms=_ms(cool_off), reason=reason
        )
        return (await self._call(self._stub.SetBreaker, req)).changed

    async def audit(
        self,
        *,
        actor: str = "",
        action: str = "",
        since: datetime | None = None,
        until: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[rdq_pb2.AuditEntry]:
        """Audit entries, newest first."""
        req = rdq_pb2.ListAuditRequest(
            actor=actor, action=action, since=_ts(since), until=_ts(until), page_size=page_size, page_token=page_token
        )
        res = await self._call(self._stub.ListAudit, req)
        return Page(list(res.entries), res.next_page_token)

    async def workers(self, queue: str = "") -> rdq_pb2.ListWorkersResponse:
        """The registered workers, and the handlers no running worker serves."""
        return await self._call(self._stub.ListWorkers, rdq_pb2.ListWorkersRequest(queue=queue))
