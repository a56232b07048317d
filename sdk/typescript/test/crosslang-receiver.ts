// A TypeScript callback receiver for the cross-language test of the Python
// SDK (sdk/python/tests/test_crosslang.py): it fails the first two
// attempts of each task and succeeds on the third, printing one JSON line
// per execution on stdout, after a first line with the port it serves.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

import { createReceiver, nodeHandler } from "../src/index.js";

const secret = process.env["RDQ_CALLBACK_SECRET"];
if (!secret) {
  throw new Error("RDQ_CALLBACK_SECRET is not set");
}
const receiver = createReceiver({
  secret,
  handler: (task) => {
    const line = { id: task.id, queue: task.queue, attempt: task.attempt, lease_token: String(task.leaseToken), payload: new TextDecoder().decode(task.payload) };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    if (task.attempt <= 2) {
      const e = new Error(`TypeScript receiver fails attempt ${task.attempt}`);
      e.name = "FlakyDownstream";
      throw e;
    }
  },
});
const server = createServer(nodeHandler(receiver)).listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
