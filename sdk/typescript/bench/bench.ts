// Throughput of the SDK's own work: the receiver verifying and dispatching
// signed callbacks in process, and submissions to a real rdq-server on the
// embedded store (one at a time, and in batches of 100).
//
//   npm run bench      (RDQ_BENCH_N sets the number of tasks, 2000 by default)
import { Webhook } from "standardwebhooks";

import { RdqClient, createReceiver, type NewTask } from "../src/index.js";
import { serverBinary, startReceiver, startServer, stores } from "../test/harness.js";

const n = Number(process.env["RDQ_BENCH_N"] ?? 2000);

function report(name: string, count: number, ms: number): void {
  console.log(`${name.padEnd(34)} ${count} in ${ms.toFixed(0)} ms: ${Math.round((count / ms) * 1000)}/s`);
}

async function receiverBench(): Promise<void> {
  const secret = "bench-secret-0123456789abcdefghij";
  const wh = new Webhook(new TextEncoder().encode(secret), { format: "raw" });
  const receive = createReceiver({ secret, handler: () => {} });
  const requests: Request[] = [];
  for (let i = 0; i < n; i++) {
    const id = `0190f3a0-5e1c-7c2a-9b1e-${String(i).padStart(12, "0")}`;
    const body = JSON.stringify({
      type: "rdq.task",
      timestamp: new Date().toISOString(),
      data: { id, queue: "orders", handler: "charge", attempt: 1, life: 0, lease_token: i + 1, content_type: "application/json", payload: { order: i } },
    });
    const now = new Date();
    requests.push(
      new Request("http://bench/hooks", {
        method: "POST",
        headers: { "webhook-id": id, "webhook-timestamp": String(Math.floor(now.getTime() / 1000)), "webhook-signature": wh.sign(id, now, body) },
        body,
      }),
    );
  }
  const start = performance.now();
  for (const r of requests) {
    const res = await receive(r);
    if (res.status !== 204) {
      throw new Error(`status ${res.status}`);
    }
  }
  report("receiver: verify and run", n, performance.now() - start);
}

async function submitBench(): Promise<void> {
  const binary = serverBinary();
  const store = stores[0]!.open()!;
  const receiver = await startReceiver();
  const server = await startServer({ binary: binary!, databaseUrl: store.url, receiverPort: receiver.port, queues: { bench: { path: "/hooks/bench", handlers: ["noop"] } } });
  try {
    // Delayed, so the server's worker stays out of the measurement.
    const task: NewTask = { queue: "bench", handler: "noop", payload: { order: 1 }, delayMs: 3_600_000 };
    const client = new RdqClient({ baseUrl: server.grpcUrl, token: server.tokens.submitter });
    let start = performance.now();
    for (let i = 0; i < n; i++) {
      await client.submit(task);
    }
    report("submit, one at a time (SQLite)", n, performance.now() - start);
    start = performance.now();
    for (let i = 0; i < n; i += 100) {
      await client.submitMany(Array.from({ length: Math.min(100, n - i) }, () => task));
    }
    report("submitMany, 100 a call (SQLite)", n, performance.now() - start);
  } finally {
    await server.stop();
    await receiver.close();
    store.drop();
  }
}

await receiverBench();
await submitBench();
