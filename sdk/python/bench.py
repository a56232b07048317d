"""Throughput of the SDK's own work: the receiver verifying and dispatching
signed callbacks in process, and submissions to a real rdq-server on the
embedded store (one at a time, and in batches of 100).

    .venv/bin/python bench.py      (RDQ_BENCH_N sets the number of tasks, 2000 by default)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from standardwebhooks.webhooks import Webhook

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "src"), str(HERE / "tests")]

from harness import REPO, Receiver, open_store, start_server  # noqa: E402

from rdq import CallbackReceiver, NewTask, RdqClient  # noqa: E402

N = int(os.environ.get("RDQ_BENCH_N", "2000"))


def report(name: str, count: int, seconds: float) -> None:
    print(f"{name:<34} {count} in {seconds * 1000:.0f} ms: {count / seconds:.0f}/s")


async def receiver_bench() -> None:
    secret = "bench-secret-0123456789abcdefghij"
    wh = Webhook(secret.encode())
    app = CallbackReceiver(secret, lambda t: None)
    requests = []
    for i in range(N):
        id = f"0190f3a0-5e1c-7c2a-9b1e-{i:012d}"
        data = {"id": id, "queue": "orders", "handler": "charge", "attempt": 1, "life": 0, "lease_token": i + 1}
        body = json.dumps(
            {"type": "rdq.task", "timestamp": "2024-06-01T12:00:00Z", "data": {**data, "payload": {"order": i}}}
        )
        now = datetime.now(tz=UTC)
        headers = {
            "webhook-id": id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": wh.sign(id, now, body),
        }
        requests.append((body, headers))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as c:
        start = time.perf_counter()
        for body, headers in requests:
            if (await c.post("/hooks", content=body, headers=headers)).status_code != 204:
                raise SystemExit("refused")
        report("receiver: verify and run (ASGI)", N, time.perf_counter() - start)


async def submit_bench() -> None:
    binary = HERE / ".build" / "rdq-server"
    subprocess.run(["go", "build", "-o", str(binary), "./examples/rdq-server"], cwd=REPO, check=True)
    store = open_store("sqlite")
    receiver = Receiver()
    await receiver.start()
    server = await start_server(
        binary, store.url, receiver.port, {"bench": {"path": "/hooks/bench", "handlers": ["noop"]}}
    )
    try:
        # Delayed, so the server's worker stays out of the measurement.
        async with RdqClient(server.grpc, server.tokens.submitter) as client:
            start = time.perf_counter()
            for _ in range(N):
                await client.submit("bench", "noop", {"order": 1}, delay=timedelta(hours=1))
            report("submit, one at a time (SQLite)", N, time.perf_counter() - start)
            task = NewTask("bench", "noop", {"order": 1}, delay=timedelta(hours=1))
            start = time.perf_counter()
            for i in range(0, N, 100):
                await client.submit_many([task] * min(100, N - i))
            report("submit_many, 100 a call (SQLite)", N, time.perf_counter() - start)
    finally:
        await server.stop()
        await receiver.stop()
        store.drop()


async def main() -> None:
    await receiver_bench()
    await submit_bench()


asyncio.run(main())
