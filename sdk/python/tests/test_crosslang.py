"""Across languages, on PostgreSQL: Python submits; a TypeScript HTTP callback
fails twice and then succeeds; a Python handler (an HTTP callback, or a gRPC
HandlerService) dead-letters another queue's task; the Go CLI redrives it;
the histories show every attempt with the worker that ran it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import REPO, Receiver, Server, eventually, need, open_store, start_server

from rdq import CallbackReceiver, Execution, HandlerServer, PermanentError, RdqClient, TaskHistory, serve_handlers

TS_RECEIVER = REPO / "sdk" / "typescript" / "build" / "test" / "crosslang-receiver.js"
GRPC_TOKEN = "handler-token-for-rdq-server-0123456789ab"


def grpc_queue(port: int) -> dict[str, Any]:
    """The configuration of a queue whose handler is the gRPC HandlerService at port:
    a grpc:// url, with the host's token as the calls' metadata."""
    return {
        "url": f"grpc://127.0.0.1:{port}",
        "metadata": {"authorization": f"Bearer {GRPC_TOKEN}"},
        "handlers": ["refund"],
        "max_attempts": 5,
    }


@pytest.fixture(scope="module")
def rdq_cli() -> Path:
    out = REPO / "sdk" / "python" / ".build" / "rdq"
    try:
        subprocess.run(["go", "build", "-o", str(out), "./cmd/rdq"], cwd=REPO, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        need(f"Go to build the rdq command ({exc})")
    return out


class TypeScriptReceiver:
    """The TypeScript SDK's receiver, run by node (make sdk-test builds it first)."""

    def __init__(self, proc: asyncio.subprocess.Process, port: int) -> None:
        self.proc = proc
        self.port = port
        self.executions: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, secret: str) -> TypeScriptReceiver:
        if not TS_RECEIVER.exists():
            need(f"the TypeScript SDK built ({TS_RECEIVER.relative_to(REPO)}: npm test in sdk/typescript)")
        proc = await asyncio.create_subprocess_exec(
            "node", str(TS_RECEIVER), env={**os.environ, "RDQ_CALLBACK_SECRET": secret}, stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        first = await proc.stdout.readline()
        r = cls(proc, json.loads(first)["port"])
        stdout = proc.stdout

        async def read() -> None:
            while line := await stdout.readline():
                r.executions.append(json.loads(line))

        r._reader = asyncio.get_running_loop().create_task(read())
        return r

    async def stop(self) -> None:
        self.proc.terminate()
        await self.proc.wait()
        await self._reader


async def settled(client: RdqClient, server: Server, id: str, status: str) -> TaskHistory:
    async def probe() -> TaskHistory | None:
        t = await client.get_task(id)
        return t if t.task.status == status else None

    result: TaskHistory = await eventually(probe, lambda: f"task {id} never became {status}\n" + "".join(server.log))
    return result


@pytest.fixture
async def secret_and_receivers() -> AsyncIterator[tuple[str, TypeScriptReceiver, Receiver]]:
    secret = "crosslang-callback-secret-5f1e9a7c3b"
    ts = await TypeScriptReceiver.start(secret)
    py = Receiver()
    await py.start()
    try:
        yield secret, ts, py
    finally:
        await ts.stop()
        await py.stop()


@pytest.mark.parametrize("refunds_over", ["http", "grpc"])
async def test_python_submits_typescript_runs_go_redrives(
    server_binary: Path,
    rdq_cli: Path,
    secret_and_receivers: tuple[str, TypeScriptReceiver, Receiver],
    refunds_over: str,
) -> None:
    secret, ts, py = secret_and_receivers
    store = open_store("postgres")
    py_runs: list[Execution] = []

    def refund(t: Execution) -> None:
        py_runs.append(t)
        if t.life == 0:
            raise PermanentError("refund target account is closed")

    queues: dict[str, dict[str, Any]] = {
        "orders": {"url": f"http://127.0.0.1:{ts.port}/hooks/orders", "handlers": ["charge"], "max_attempts": 5},
    }
    host: HandlerServer | None = None
    allow = (f"127.0.0.1:{ts.port}",)
    if refunds_over == "http":
        py.routes["/hooks/refunds"] = CallbackReceiver(secret, refund)
        queues["refunds"] = {"path": "/hooks/refunds", "handlers": ["refund"], "max_attempts": 5}
    else:
        host = await serve_handlers({"refund": refund}, token=GRPC_TOKEN)
        queues["refunds"] = grpc_queue(host.port)
        allow += (f"127.0.0.1:{host.port}",)
    try:
        server = await start_server(
            server_binary, store.url, py.port, queues, callback_secret=secret, extra_allow=allow
        )
    except RuntimeError:
        if host is not None:
            await host.stop(None)
        store.drop()
        raise
    try:
        async with (
            RdqClient(server.grpc, server.tokens.submitter) as shop,
            RdqClient(server.grpc, server.tokens.operator) as oncall,
        ):
            charge = await shop.submit("orders", "charge", {"order": 7})
            refund_task = await shop.submit("refunds", "refund", {"order": 7})

            done = await settled(oncall, server, charge.task.id, "SUCCEEDED")
            assert [(a.number, a.outcome) for a in done.history] == [
                (1, "RETRYABLE_FAILURE"),
                (2, "RETRYABLE_FAILURE"),
                (3, "SUCCESS"),
            ]
            first = done.history[0]
            assert (first.error_type, first.message) == ("FlakyDownstream", "TypeScript receiver fails attempt 1")
            assert "crosslang-receiver" in first.stack, first.stack
            assert [e["attempt"] for e in ts.executions if e["id"] == charge.task.id] == [1, 2, 3]

            dead = await settled(oncall, server, refund_task.task.id, "DEAD")
            assert [(a.number, a.life, a.outcome) for a in dead.history] == [(1, 0, "PERMANENT_FAILURE")]

            args = ["dlq", "redrive", refund_task.task.id, "--reason", "account reopened", "--actor", "go-cli"]
            cli = await asyncio.create_subprocess_exec(
                str(rdq_cli),
                *args,
                "--database-url",
                store.url,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await cli.communicate()
            assert cli.returncode == 0, out.decode()

            redriven = await settled(oncall, server, refund_task.task.id, "SUCCEEDED")
            assert [(a.number, a.life, a.outcome) for a in redriven.history] == [
                (1, 0, "PERMANENT_FAILURE"),
                (2, 1, "SUCCESS"),
            ]
            assert [(t.attempt, t.life) for t in py_runs] == [(1, 0), (1, 1)]
            assert {a.worker_id for a in done.history + redriven.history} == {server.worker_id}
            audit = await oncall.audit(actor="go-cli")
            assert [e.reason for e in audit.items] == ["account reopened"]
    finally:
        await server.stop()
        if host is not None:
            await host.stop(None)
        store.drop()
