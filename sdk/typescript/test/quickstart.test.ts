// README.md's quickstart is examples/quickstart.ts, and it runs against
// rdq-server started with examples/rdq-server.json.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { it } from "node:test";

import { repoRoot, serverBinary, startServer, stores } from "./harness.js";

const sdk = join(repoRoot, "sdk/typescript");

it("README.md shows examples/quickstart.ts and examples/rdq-server.json as they are", () => {
  const readme = readFileSync(join(sdk, "README.md"), "utf8");
  for (const [file, lang] of [["examples/quickstart.ts", "ts"], ["examples/rdq-server.json", "json"]] as const) {
    const text = readFileSync(join(sdk, file), "utf8");
    assert.ok(readme.includes("```" + lang + "\n" + text + "```"), `README.md must hold ${file} verbatim in a ${lang} block`);
  }
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((ok) => s.listen(0, "127.0.0.1", ok));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((ok) => s.close(() => ok()));
  return port;
}

const binary = serverBinary();
it("the quickstart submits a task that fails once and then succeeds", { skip: binary ? false : "needs Go (CI=true fails instead)" }, async () => {
  const store = stores[0]!.open()!;
  const port = await freePort();
  const config = JSON.parse(readFileSync(join(sdk, "examples/rdq-server.json"), "utf8")) as {
    listen: string;
    grpc_listen: string;
    callback: { allow: string[] };
    queues: Record<string, { url: string }>;
  };
  config.listen = "127.0.0.1:0";
  config.grpc_listen = "127.0.0.1:0";
  config.callback.allow = [`127.0.0.1:${port}`];
  config.queues["orders"]!.url = `http://127.0.0.1:${port}/hooks/orders`;
  const server = await startServer({ binary: binary!, databaseUrl: store.url, receiverPort: port, queues: {}, config: JSON.stringify(config) });
  try {
    const child = spawn(process.execPath, [join(sdk, "build/examples/quickstart.js")], {
      env: { ...process.env, RDQ_GRPC_URL: server.grpcUrl, RDQ_RECEIVER_PORT: String(port) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    const code = await new Promise<number | null>((ok) => child.once("exit", ok));
    assert.equal(code, 0, out);
    assert.match(out, /charging order 42, attempt 1\n/);
    assert.match(out, /attempt 1: RETRYABLE_FAILURE .*the bank timed out/);
    assert.match(out, /attempt 2: SUCCESS/);
    assert.match(out, /task \S+ SUCCEEDED\n$/);
  } finally {
    await server.stop();
    store.drop();
  }
});
