"""Starts a real rdq-server, built from this repository, for the tests."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

REPO = Path(__file__).resolve().parents[3]
SDK = REPO / "sdk" / "python"
CI = os.environ.get("CI") == "true"


def need(what: str) -> None:
    """Skips the test for lack of what, or fails in CI."""
    if CI:
        pytest.fail(f"{what} is needed (CI=true)")
    pytest.skip(f"needs {what} (set CI=true to fail instead)")


@pytest.fixture(scope="session")
def server_binary() -> Path:
    out = SDK / ".build" / "rdq-server"
    try:
        subprocess.run(["go", "build", "-o", str(out), "./examples/rdq-server"], cwd=REPO, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        need(f"Go to build rdq-server ({exc})")
    return out


@dataclass
class Store:
    name: str
    url: str
    drop: Callable[[], None]


def open_store(kind: str) -> Store:
    if kind == "sqlite":
        d = tempfile.mkdtemp(prefix="rdq-py-")
        return Store(kind, f"sqlite:{d}/rdq.db", lambda: shutil.rmtree(d, ignore_errors=True))
    base = os.environ.get("RDQ_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    schema = f"sdk_py_{secrets.token_hex(6)}"
    if (
        shutil.which("psql") is None
        or subprocess.run(["psql", base, "-Atc", "select 1"], capture_output=True).returncode != 0
    ):
        need(f"PostgreSQL at {base} reachable with psql")
    u = urllib.parse.urlsplit(base)
    q = urllib.parse.parse_qsl(u.query) + [("schema", schema)]
    url = urllib.parse.urlunsplit(u._replace(query=urllib.parse.urlencode(q)))

    def drop() -> None:
        subprocess.run(["psql", base, "-qc", f"drop schema if exists {schema} cascade"], capture_output=True)

    return Store(kind, url, drop)


@dataclass
class Tokens:
    submitter: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    operator: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    admin: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    stranger: str = field(default_factory=lambda: secrets.token_urlsafe(24))


def config_json(
    receiver_port: int,
    queues: dict[str, dict[str, Any]],
    tokens: Tokens,
    callback_secret: str,
    worker_id: str,
    extra_allow: tuple[str, ...] = (),
) -> str:
    qs = {}
    for name, q in queues.items():
        qs[name] = {
            "url": q.get("url", f"http://127.0.0.1:{receiver_port}{q.get('path')}"),
            **({"metadata": q["metadata"]} if "metadata" in q else {}),
            "handlers": q["handlers"],
            "max_attempts": q.get("max_attempts", 5),
            "initial_backoff": "50ms",
            "max_backoff": "200ms",
            "concurrency": 4,
            "timeout": "10s",
            **({"secret": q["secret"]} if "secret" in q else {}),
        }
    return json.dumps(
        {
            "listen": "127.0.0.1:0",
            "grpc_listen": "127.0.0.1:0",
            "worker_id": worker_id,
            "callback": {
                "secret": callback_secret,
                "allow": [f"127.0.0.1:{receiver_port}", *extra_allow],
                "allow_addrs": ["127.0.0.1"],
                "timeout": "10s",
            },
            "queues": qs,
            "principals": [
                {
                    "name": "shop",
                    "token": tokens.submitter,
                    "grants": [{"queue": q, "role": "submitter"} for q in queues],
                },
                {"name": "oncall", "token": tokens.operator, "grants": [{"queue": "*", "role": "operator"}]},
                {"name": "root", "token": tokens.admin, "grants": [{"queue": "*", "role": "admin"}]},
                {"name": "stranger", "token": tokens.stranger, "grants": [{"queue": "other", "role": "submitter"}]},
            ],
        },
        indent=2,
    )


@dataclass
class Server:
    grpc: str
    rest: str
    tokens: Tokens
    callback_secret: str
    worker_id: str
    log: list[str]
    process: asyncio.subprocess.Process
    dir: str

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


async def start_server(
    binary: Path,
    database_url: str,
    receiver_port: int,
    queues: dict[str, dict[str, Any]],
    config: str | None = None,
    callback_secret: str | None = None,
    extra_allow: tuple[str, ...] = (),
) -> Server:
    """Runs rdq-server with queues calling back receiver_port (and extra_allow),
    or with a configuration of its own (config, run with -dev)."""
    d = tempfile.mkdtemp(prefix="rdq-py-server-")
    tokens = Tokens()
    callback_secret = callback_secret or secrets.token_urlsafe(24)
    worker_id = f"py-sdk-{secrets.token_hex(3)}"
    cfg = Path(d) / "config.json"
    cfg.write_text(config or config_json(receiver_port, queues, tokens, callback_secret, worker_id, extra_allow))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RDQ_")}
    env["RDQ_DATABASE_URL"] = database_url
    args = [str(binary), "-config", str(cfg), "-grace", "2s", *(["-dev"] if config else [])]
    proc = await asyncio.create_subprocess_exec(
        *args, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    log: list[str] = []
    assert proc.stderr is not None
    while True:
        line = (await proc.stderr.readline()).decode()
        if not line:
            raise RuntimeError("rdq-server exited before serving:\n" + "".join(log))
        log.append(line)
        m = re.search(r'msg="rdq-server serving" rest=(\S+) grpc=(\S+)', line)
        if m:
            break
    stderr = proc.stderr

    async def drain() -> None:
        while line := await stderr.readline():
            log.append(line.decode())

    asyncio.get_running_loop().create_task(drain())
    return Server(m.group(2), m.group(1), tokens, callback_secret, worker_id, log, proc, d)


class Receiver:
    """An ASGI server on a free loopback port routing by path to ASGI apps."""

    def __init__(self) -> None:
        self.routes: dict[str, Any] = {}
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off", interface="asgi3"))
        self._task: asyncio.Task[None] | None = None

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        h = self.routes.get(scope.get("path", ""))
        if h is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"no such receiver"})
            return
        await h(scope, receive, send)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[self.sock]))
        while not self._server.started:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task:
            await self._task


async def eventually(probe: Callable[[], Any], describe: Callable[[], str], timeout: float = 60.0) -> Any:
    """Awaits probe() until it returns something other than None; fails after timeout seconds."""
    loop = asyncio.get_running_loop()
    until = loop.time() + timeout
    delay = 0.02
    while True:
        v = await probe()
        if v is not None:
            return v
        if loop.time() > until:
            raise AssertionError(f"condition not met within {timeout} s: {describe()}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.25)


@pytest.fixture
def free_port() -> Iterator[int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    yield port


__all__ = ["AsyncIterator", "Receiver", "Server", "Store", "eventually", "open_store", "start_server"]
