// Starts a real rdq-server, built from this repository, for the tests.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import type { FetchHandler } from "../src/index.js";
import { nodeHandler } from "../src/index.js";

/** The repository's root: this file is sdk/typescript/build/test/harness.js once compiled. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

/** A fresh random token or secret, long and random enough for rdq-server. */
export function secret(): string {
  return randomBytes(24).toString("base64url");
}

let built: string | undefined;

/**
 * serverBinary builds rdq-server (examples/rdq-server) once per process
 * and returns its path, or undefined when Go is absent outside CI.
 */
export function serverBinary(): string | undefined {
  if (built) {
    return built;
  }
  const out = join(repoRoot, "sdk/typescript/build/bin/rdq-server");
  const res = spawnSync("go", ["build", "-o", out, "./examples/rdq-server"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
  if (res.error || res.status !== 0) {
    if (process.env["CI"] === "true") {
      throw new Error(`building rdq-server failed: ${res.error?.message ?? `exit ${res.status}`}`);
    }
    return undefined;
  }
  built = out;
  return out;
}

/** A store for a server: the embedded SQLite file or a PostgreSQL schema of its own. */
export interface StoreKind {
  name: "sqlite" | "postgres";
  /** The RDQ_DATABASE_URL of a new store, and how to remove it. */
  open(): { url: string; drop(): void } | undefined;
}

export const stores: StoreKind[] = [
  {
    name: "sqlite",
    open() {
      const dir = mkdtempSync(join(tmpdir(), "rdq-ts-"));
      return { url: `sqlite:${join(dir, "rdq.db")}`, drop: () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: "postgres",
    open() {
      const base = process.env["RDQ_TEST_DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test";
      const schema = `sdk_ts_${randomBytes(6).toString("hex")}`;
      const probe = spawnSync("psql", [base, "-Atc", "select 1"], { encoding: "utf8" });
      if (probe.error || probe.status !== 0) {
        if (process.env["CI"] === "true") {
          throw new Error(`PostgreSQL at ${base} is not reachable with psql: ${probe.stderr || probe.error?.message}`);
        }
        return undefined;
      }
      const url = new URL(base);
      url.searchParams.set("schema", schema);
      return {
        url: url.toString(),
        drop: () => {
          spawnSync("psql", [base, "-qc", `drop schema if exists ${schema} cascade`], { stdio: "ignore" });
        },
      };
    },
  },
];

/** A queue of the test server's config. */
export interface QueueConfig {
  /** The path on the receiver the queue's callbacks go to. */
  path: string;
  handlers: string[];
  maxAttempts?: number;
  /** This queue's own signing secret; the config's callback secret when absent. */
  secret?: string;
  timeout?: string;
  /** Overrides the callback URL (a HandlerService, say); the receiver's path otherwise. */
  url?: string;
}

/** A principal's token, by role. */
export interface Tokens {
  submitter: string;
  operator: string;
  admin: string;
  /** A submitter on the queue "other" only. */
  stranger: string;
}

/** A running rdq-server with a receiver it calls back. */
export interface TestServer {
  grpcUrl: string;
  restUrl: string;
  tokens: Tokens;
  callbackSecret: string;
  workerId: string;
  /** The log the server wrote, for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

/** A receiver on a free loopback port that routes by path to fetch-style handlers. */
export interface TestReceiver {
  port: number;
  routes: Map<string, FetchHandler>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<TestReceiver> {
  const routes = new Map<string, FetchHandler>();
  const server: Server = createServer((req, res) => {
    const h = routes.get((req.url ?? "/").split("?")[0]!);
    if (!h) {
      res.writeHead(404).end("no such receiver");
      return;
    }
    nodeHandler(h)(req, res);
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  return {
    port: (server.address() as AddressInfo).port,
    routes,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

/** configJSON writes the server's configuration, as README.md documents it. */
export function configJSON(opts: {
  receiverPort: number;
  queues: Record<string, QueueConfig>;
  tokens: Tokens;
  callbackSecret: string;
  workerId: string;
  extraAllow?: string[];
}): string {
  const queues: Record<string, unknown> = {};
  for (const [name, q] of Object.entries(opts.queues)) {
    queues[name] = {
      url: q.url ?? `http://127.0.0.1:${opts.receiverPort}${q.path}`,
      handlers: q.handlers,
      max_attempts: q.maxAttempts ?? 5,
      initial_backoff: "50ms",
      max_backoff: "200ms",
      concurrency: 4,
      timeout: q.timeout ?? "10s",
      ...(q.secret ? { secret: q.secret } : {}),
    };
  }
  return JSON.stringify(
    {
      listen: "127.0.0.1:0",
      grpc_listen: "127.0.0.1:0",
      worker_id: opts.workerId,
      callback: {
        secret: opts.callbackSecret,
        allow: [`127.0.0.1:${opts.receiverPort}`, ...(opts.extraAllow ?? [])],
        allow_addrs: ["127.0.0.1"],
        timeout: "10s",
      },
      queues,
      principals: [
        { name: "shop", token: opts.tokens.submitter, grants: Object.keys(opts.queues).map((q) => ({ queue: q, role: "submitter" })) },
        { name: "oncall", token: opts.tokens.operator, grants: [{ queue: "*", role: "operator" }] },
        { name: "root", token: opts.tokens.admin, grants: [{ queue: "*", role: "admin" }] },
        { name: "stranger", token: opts.tokens.stranger, grants: [{ queue: "other", role: "submitter" }] },
      ],
    },
    null,
    2,
  );
}

/**
 * startServer runs rdq-server with queues calling back receiverPort, on
 * the store at databaseUrl, and waits until it serves.
 */
export async function startServer(opts: {
  binary: string;
  databaseUrl: string;
  receiverPort: number;
  queues: Record<string, QueueConfig>;
  extraAllow?: string[];
  /** A configuration of its own instead of the one made from queues (run with -dev). */
  config?: string;
}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "rdq-ts-server-"));
  const tokens: Tokens = { submitter: secret(), operator: secret(), admin: secret(), stranger: secret() };
  const callbackSecret = secret();
  const workerId = `ts-sdk-${randomBytes(3).toString("hex")}`;
  const cfgPath = join(dir, "config.json");
  writeFileSync(cfgPath, opts.config ?? configJSON({ ...opts, tokens, callbackSecret, workerId }));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("RDQ_")) {
      env[k] = v;
    }
  }
  env["RDQ_DATABASE_URL"] = opts.databaseUrl;
  const child: ChildProcess = spawn(opts.binary, ["-config", cfgPath, "-grace", "2s", ...(opts.config ? ["-dev"] : [])], { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const serving = new Promise<{ rest: string; grpc: string }>((ok, fail) => {
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      log += chunk;
      const m = /msg="rdq-server serving" rest=(\S+) grpc=(\S+)/.exec(log);
      if (m) {
        ok({ rest: m[1]!, grpc: m[2]! });
      }
    });
    child.once("exit", (code) => fail(new Error(`rdq-server exited (${code}) before serving:\n${log}`)));
  });
  const addr = await serving;
  const exited = new Promise<void>((ok) => child.once("exit", () => ok()));
  return {
    grpcUrl: `http://${addr.grpc}`,
    restUrl: `http://${addr.rest}`,
    tokens,
    callbackSecret,
    workerId,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * eventually calls probe until it returns a value other than undefined,
 * and fails with describe()'s text when it has not after timeoutMs: a
 * bound on a wait for a condition, not a timed assertion.
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, describe: () => string, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (let delay = 20; ; delay = Math.min(delay * 2, 250)) {
    const v = await probe();
    if (v !== undefined) {
      return v;
    }
    if (Date.now() > until) {
      throw new Error(`condition not met within ${timeoutMs} ms: ${describe()}`);
    }
    await new Promise((ok) => setTimeout(ok, delay));
  }
}

