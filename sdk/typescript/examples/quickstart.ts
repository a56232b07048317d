import { createServer } from "node:http";

import { RdqClient, createReceiver, nodeHandler } from "@srjn45/rdq";

const env = process.env;
const shop = new RdqClient({ baseUrl: env.RDQ_GRPC_URL ?? "http://127.0.0.1:9090", token: env.RDQ_SUBMITTER_TOKEN ?? "dev-submitter-change-me-eQARNuyd8TUys086A0FlB7W6" });
const oncall = new RdqClient({ baseUrl: env.RDQ_GRPC_URL ?? "http://127.0.0.1:9090", token: env.RDQ_OPERATOR_TOKEN ?? "dev-operator-change-me-caHfrMSWTiwafjcpBNiaCpAD" });

// The handler: rdq-server POSTs each attempt here, signed. This one fails
// the first attempt, so the task is retried, then succeeds.
const receiver = createReceiver({
  secret: env.RDQ_CALLBACK_SECRET ?? "dev-only-callback-secret-change-me",
  handler: async (task) => {
    const order = JSON.parse(new TextDecoder().decode(task.payload)) as { order: number };
    console.log(`charging order ${order.order}, attempt ${task.attempt}`);
    if (task.attempt === 1) {
      throw new Error("the bank timed out");
    }
  },
});
const http = createServer(nodeHandler(receiver)).listen(Number(env.RDQ_RECEIVER_PORT ?? 9100), "127.0.0.1");

// The producer submits; the operator watches the task until it is done.
const { task } = await shop.submit({ queue: "orders", handler: "charge", payload: { order: 42 } });
let status = task.status;
while (status !== "SUCCEEDED" && status !== "DEAD") {
  await new Promise((resolve) => setTimeout(resolve, 200));
  const { task: now, history } = await oncall.getTask(task.id);
  status = now.status;
  if (status === "SUCCEEDED" || status === "DEAD") {
    for (const a of history) {
      console.log(`attempt ${a.number}: ${a.outcome} ${a.message.split("\n")[0]}`);
    }
  }
}
console.log(`task ${task.id} ${status}`);
http.close();
