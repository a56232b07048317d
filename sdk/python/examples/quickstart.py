import asyncio
import json
import os

import uvicorn

from rdq import CallbackReceiver, Execution, RdqClient

env = os.environ
GRPC = env.get("RDQ_GRPC_ADDR", "127.0.0.1:9090")


# The handler: rdq-server POSTs each attempt here, signed. This one fails
# the first attempt, so the task is retried, then succeeds.
async def charge(task: Execution) -> None:
    order = json.loads(task.payload)
    print(f"charging order {order['order']}, attempt {task.attempt}", flush=True)
    if task.attempt == 1:
        raise ConnectionError("the bank timed out")


async def main() -> None:
    receiver = CallbackReceiver(env.get("RDQ_CALLBACK_SECRET", "dev-only-callback-secret-change-me"), charge)
    port = int(env.get("RDQ_RECEIVER_PORT", "9200"))
    http = uvicorn.Server(uvicorn.Config(receiver, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(http.serve())
    while not http.started:
        await asyncio.sleep(0.05)

    # The producer submits; the operator watches the task until it is done.
    async with (
        RdqClient(GRPC, env.get("RDQ_SUBMITTER_TOKEN", "dev-submitter-change-me-eQARNuyd8TUys086A0FlB7W6")) as shop,
        RdqClient(GRPC, env.get("RDQ_OPERATOR_TOKEN", "dev-operator-change-me-caHfrMSWTiwafjcpBNiaCpAD")) as oncall,
    ):
        submitted = await shop.submit("orders", "charge", {"order": 42})
        while True:
            await asyncio.sleep(0.2)
            found = await oncall.get_task(submitted.task.id)
            if found.task.status in ("SUCCEEDED", "DEAD"):
                break
        for a in found.history:
            print(f"attempt {a.number}: {a.outcome} {a.message.splitlines()[0] if a.message else ''}")
        print(f"task {found.task.id} {found.task.status}")
    http.should_exit = True
    await serving


asyncio.run(main())
