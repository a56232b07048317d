"""README.md's quickstart is examples/quickstart.py, and it runs against
rdq-server started with examples/rdq-server.json."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

from harness import SDK, open_store, start_server


def test_readme_shows_the_examples_verbatim() -> None:
    readme = (SDK / "README.md").read_text()
    for name, lang in (("examples/quickstart.py", "python"), ("examples/rdq-server.json", "json")):
        assert f"```{lang}\n{(SDK / name).read_text()}```" in readme, (
            f"README.md must hold {name} verbatim in a {lang} block"
        )


async def test_quickstart_runs(server_binary: Path, free_port: int) -> None:
    store = open_store("sqlite")
    config = json.loads((SDK / "examples" / "rdq-server.json").read_text())
    config["listen"] = config["grpc_listen"] = "127.0.0.1:0"
    config["callback"]["allow"] = [f"127.0.0.1:{free_port}"]
    config["queues"]["orders"]["url"] = f"http://127.0.0.1:{free_port}/hooks/orders"
    server = await start_server(server_binary, store.url, free_port, {}, config=json.dumps(config))
    try:
        env = {
            **os.environ,
            "RDQ_GRPC_ADDR": server.grpc,
            "RDQ_RECEIVER_PORT": str(free_port),
            "PYTHONPATH": str(SDK / "src"),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(SDK / "examples" / "quickstart.py"), env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
        text = out.decode()
        assert proc.returncode == 0, text
        assert "charging order 42, attempt 1\n" in text
        assert re.search(r"attempt 1: RETRYABLE_FAILURE .*the bank timed out", text)
        assert "attempt 2: SUCCESS" in text
        assert re.search(r"task \S+ SUCCEEDED\n$", text)
    finally:
        await server.stop()
        store.drop()
