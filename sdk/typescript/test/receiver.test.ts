// The HTTP callback receiver, held to the signed requests Go writes in
// testdata/conformance/callbacks.json and to the failure bodies of
// testdata/conformance/callback_failures.json.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { Webhook } from "standardwebhooks";

import {
  FAILURE_CONTENT_TYPE,
  FAILURE_VERSION,
  MAX_BODY_BYTES,
  MAX_ERROR_TYPE_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_STACK_BYTES,
  PermanentError,
  RetryAfterError,
  createReceiver,
  failureBody,
  nodeHandler,
  type Execution,
  type FailureBody,
  type Handler,
} from "../src/index.js";
import { cut, leaseTokenOf, rawMember } from "../src/receiver.js";
import { repoRoot } from "./harness.js";

interface Vector {
  name: string;
  secret: string;
  id: string;
  timestamp: number;
  body: string;
  signature: string;
  payload: string;
}

const vectors = (JSON.parse(readFileSync(join(repoRoot, "testdata/conformance/callbacks.json"), "utf8")) as { vectors: Vector[] }).vectors;

interface FailureVectors {
  media_type: string;
  version: number;
  limits: { error_type_bytes: number; message_bytes: number; stack_bytes: number };
  cuts: { limit: number; text: string; want: string }[];
  vectors: {
    name: string;
    thrown?: { kind: "error" | "permanent" | "retry_after"; class: string; message: string; delay_ms?: number };
    response: { status: number; content_type: string; retry_after?: string; body: string };
  }[];
}

const failureVectors = JSON.parse(readFileSync(join(repoRoot, "testdata/conformance/callback_failures.json"), "utf8")) as FailureVectors;

function post(v: Vector, change: Partial<Pick<Vector, "id" | "body" | "signature">> & { timestamp?: string } = {}): Request {
  return new Request("http://receiver.test/hooks", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "webhook-id": change.id ?? v.id,
      "webhook-timestamp": change.timestamp ?? String(v.timestamp),
      "webhook-signature": change.signature ?? v.signature,
    },
    body: change.body ?? v.body,
  });
}

describe("callback receiver", () => {
  const realNow = Date.now;
  beforeEach(() => {
    // The vectors were signed at their timestamp; the receiver's clock is set a minute later.
    Date.now = () => (vectors[0]!.timestamp + 60) * 1000;
  });
  afterEach(() => {
    Date.now = realNow;
  });

  it("has vectors to check", () => {
    assert.ok(vectors.length >= 4);
  });

  for (const v of vectors) {
    it(`accepts and runs "${v.name}", and refuses it changed in any signed part`, async () => {
      const seen: Execution[] = [];
      const receive = createReceiver({ secret: v.secret, handler: (t) => void seen.push(t) });
      const res = await receive(post(v));
      assert.equal(res.status, 204, await res.text());
      assert.equal(seen.length, 1);
      assert.equal(Buffer.from(seen[0]!.payload).toString("base64"), v.payload, "the payload byte for byte");
      assert.equal(seen[0]!.id, v.id);

      const refused: [string, Request][] = [
        ["body", post(v, { body: v.body.replace('"queue":"orders"', '"queue":"refunds"') })],
        ["id", post(v, { id: v.id.replace(/.$/, "e") })],
        ["timestamp", post(v, { timestamp: String(v.timestamp + 1) })],
        ["signature", post(v, { signature: v.signature.replace("v1,", "v1,A") })],
        ["no signature", post(v, { signature: "" })],
      ];
      for (const [what, req] of refused) {
        const r = await receive(req);
        assert.equal(r.status, 401, `changed ${what}: ${await r.text()}`);
      }
      const other = createReceiver({ secret: "a-different-secret-entirely-0123456", handler: (t) => void seen.push(t) });
      assert.equal((await other(post(v))).status, 401, "another secret refuses it");
      assert.equal(seen.length, 1, "no refused request reached the handler");
    });
  }

  it("signs as Go does, through the standardwebhooks library", () => {
    for (const v of vectors) {
      const wh = v.secret.startsWith("whsec_") ? new Webhook(v.secret) : new Webhook(new TextEncoder().encode(v.secret), { format: "raw" });
      assert.equal(wh.sign(v.id, new Date(v.timestamp * 1000), v.body), v.signature, v.name);
    }
  });

  it("says what is wrong with a malformed whsec_ secret", () => {
    assert.throws(() => createReceiver({ secret: "whsec_not base64!", handler: () => {} }), /whsec_ .*base64/);
  });

  it("refuses a request signed more than five minutes ago", async () => {
    const v = vectors[0]!;
    Date.now = () => (v.timestamp + 301) * 1000;
    const res = await createReceiver({ secret: v.secret, handler: () => {} })(post(v));
    assert.equal(res.status, 401);
  });

  it("refuses a body signed for another id, a body too large and a method other than POST", async () => {
    const v = vectors[0]!;
    const wh = new Webhook(new TextEncoder().encode(v.secret), { format: "raw" });
    const receive = createReceiver({ secret: v.secret, handler: () => {} });
    const otherId = "0190f3a0-5e1c-7c2a-9b1e-000000000000";
    const signedForOther = await receive(post(v, { id: otherId, signature: wh.sign(otherId, new Date(v.timestamp * 1000), v.body) }));
    assert.equal(signedForOther.status, 400, "a signature is valid only with the id the body names");
    const big = "x".repeat(MAX_BODY_BYTES + 1);
    assert.equal((await receive(post(v, { body: big }))).status, 413);
    assert.equal((await receive(new Request("http://receiver.test/hooks"))).status, 405);
  });

  it("answers each outcome with the status rdq reads it by, a failure with its structured body", async () => {
    const v = vectors[0]!;
    class LedgerError extends Error {}
    const cases: [Handler, number, Partial<FailureBody> | null, string | null][] = [
      [() => {}, 204, null, null],
      [() => Promise.reject(new PermanentError("card is closed")), 422, { error_type: "PermanentError", message: "card is closed" }, null],
      [() => { throw new RetryAfterError(1200, "slow down"); }, 503, { error_type: "RetryAfterError", message: "slow down" }, "2"],
      [() => { throw new RangeError("no such order"); }, 500, { error_type: "RangeError", message: "no such order" }, null],
      [() => { throw new LedgerError("ledger is down"); }, 500, { error_type: "LedgerError", message: "ledger is down" }, null],
      [() => { throw "a string"; }, 500, { error_type: "string", message: "a string", stack: "" }, null],
    ];
    for (const [handler, status, want, retryAfter] of cases) {
      const res = await createReceiver({ secret: v.secret, handler })(post(v));
      assert.equal(res.status, status);
      assert.equal(res.headers.get("retry-after"), retryAfter);
      if (want === null) {
        assert.equal(await res.text(), "");
        continue;
      }
      assert.equal(res.headers.get("content-type"), FAILURE_CONTENT_TYPE);
      const body = (await res.json()) as FailureBody;
      assert.equal(body.version, FAILURE_VERSION);
      assert.deepEqual({ ...body, stack: want.stack ?? body.stack }, { version: 1, stack: body.stack, ...want });
      if (want.stack === undefined) {
        assert.ok(body.stack.includes(`${want.message}\n`) && /\n\s+at /.test(body.stack), `the stack is the exception's: ${body.stack}`);
      }
    }
  });

  it("answers what the failure vectors say for each thrown exception", async () => {
    const thrown = failureVectors.vectors.filter((f) => f.thrown);
    assert.ok(thrown.length >= 3, "the vectors hold thrown exceptions");
    assert.equal(failureVectors.media_type, FAILURE_CONTENT_TYPE);
    assert.equal(failureVectors.version, FAILURE_VERSION);
    assert.deepEqual(
      [failureVectors.limits.error_type_bytes, failureVectors.limits.message_bytes, failureVectors.limits.stack_bytes],
      [MAX_ERROR_TYPE_BYTES, MAX_MESSAGE_BYTES, MAX_STACK_BYTES],
    );
    const v = vectors[0]!;
    for (const f of thrown) {
      const t = f.thrown!;
      const handler: Handler = () => {
        if (t.kind === "permanent") {
          throw new PermanentError(t.message);
        }
        if (t.kind === "retry_after") {
          throw new RetryAfterError(t.delay_ms!, t.message);
        }
        const e = new Error(t.message);
        e.name = t.class;
        throw e;
      };
      const res = await createReceiver({ secret: v.secret, handler })(post(v));
      assert.equal(res.status, f.response.status, f.name);
      assert.equal(res.headers.get("content-type"), f.response.content_type, f.name);
      assert.equal(res.headers.get("retry-after"), f.response.retry_after ?? null, f.name);
      const got = (await res.json()) as FailureBody;
      const want = JSON.parse(f.response.body) as FailureBody;
      assert.deepEqual([got.version, got.error_type, got.message], [want.version, want.error_type, want.message], f.name);
      assert.ok(got.stack.includes(`${t.message}\n`) && /\n\s+at /.test(got.stack), `${f.name}: the stack is the exception's: ${got.stack}`);
    }
  });

  it("cuts a failure's type, message and stack to what rdq records, at a character boundary", () => {
    const body = failureBody("T".repeat(300), "é".repeat(3000), "s".repeat(70_000));
    const bytes = (s: string) => new TextEncoder().encode(s).length;
    assert.ok(bytes(body.error_type) <= MAX_ERROR_TYPE_BYTES && body.error_type.endsWith("T…[truncated 67 bytes]"), body.error_type);
    assert.ok(bytes(body.message) <= MAX_MESSAGE_BYTES && /é…\[truncated \d+ bytes\]$/.test(body.message), body.message.slice(-30));
    assert.ok(bytes(body.stack) <= MAX_STACK_BYTES && body.stack.startsWith("sss"));
    assert.deepEqual(failureBody("E", "short", ""), { version: 1, error_type: "E", message: "short", stack: "" });
    assert.ok(failureVectors.cuts.length > 0);
    for (const c of failureVectors.cuts) {
      assert.equal(cut(c.text, c.limit), c.want, `cut to ${c.limit} bytes as rdq.Truncate does`);
    }
  });

  it("answers a retryable timeout when the handler outlives its deadline, and ends its signal", async () => {
    const v = vectors[0]!;
    let signal: AbortSignal | undefined;
    const res = await createReceiver({
      secret: v.secret,
      deadlineMs: 50,
      handler: (t) => {
        signal = t.signal;
        return new Promise<void>(() => {});
      },
    })(post(v));
    assert.equal(res.status, 500);
    const body = (await res.json()) as FailureBody;
    assert.equal(body.error_type, "timeout");
    assert.match(body.message, /^the handler did not finish within 50 ms/);
    assert.equal(signal?.aborted, true);
  });

  it("logs each execution with its task id, queue and attempt, never its payload", async () => {
    const v = vectors[0]!;
    const lines: [string, string, Record<string, string | number>][] = [];
    const log = (level: string, msg: string, attrs: Record<string, string | number>) => void lines.push([level, msg, attrs]);
    await createReceiver({ secret: v.secret, log, handler: () => {} })(post(v));
    await createReceiver({ secret: v.secret, log, handler: () => Promise.reject(new Error("no")) })(post(v));
    assert.deepEqual(
      lines.map(([level, msg, a]) => [level, msg, a["task_id"], a["queue"], a["attempt"]]),
      [
        ["info", "rdq task succeeded", v.id, "orders", 1],
        ["warn", "rdq task failed", v.id, "orders", 1],
      ],
    );
    const payload = Buffer.from(v.payload, "base64").toString();
    assert.ok(!JSON.stringify(lines).includes(payload.slice(0, 12)), "no payload in the log");
  });

  it("cuts a JSON payload out of the body as it is written", () => {
    assert.equal(rawMember('{"data":{"a":"\\"payload\\":1","payload" : [1, "]}"] ,"z":0}}', "payload"), '[1, "]}"]');
    assert.equal(rawMember('{"data":{"payload":{"payload":2}}}', "payload"), '{"payload":2}');
    assert.equal(rawMember('{"data":{"headers":{"payload":"x"}}}', "payload"), undefined);
  });

  it("keeps every digit of a lease token past 2^53, and refuses one that is not an integer", async () => {
    const v = vectors[0]!;
    const wh = new Webhook(new TextEncoder().encode(v.secret), { format: "raw" });
    const seen: Execution[] = [];
    const receive = createReceiver({ secret: v.secret, handler: (t) => void seen.push(t) });
    const signed = (body: string) => post(v, { body, signature: wh.sign(v.id, new Date(v.timestamp * 1000), body) });
    assert.match(v.body, /"lease_token":\d+/, "the vector carries a lease token");
    const big = v.body.replace(/"lease_token":\d+/, '"lease_token":9007199254740993');
    const res = await receive(signed(big));
    assert.equal(res.status, 204, await res.text());
    assert.equal(seen[0]!.leaseToken, 9007199254740993n);
    for (const bad of ['"lease_token":-1', '"lease_token":1.5', '"lease_token":"7"', '"lease_token":1e3']) {
      const r = await receive(signed(v.body.replace(/"lease_token":\d+/, bad)));
      assert.equal(r.status, 400, `${bad}: ${await r.text()}`);
    }
    assert.equal(seen.length, 1, "no refused body reached the handler");
    assert.equal(leaseTokenOf('{"data":{"headers":{"lease_token":"1"},"lease_token" : 12 }}'), 12n);
    assert.equal(leaseTokenOf('{"data":{"id":"x"}}'), undefined);
  });

  it("refuses a timestamp in the future outside the window", async () => {
    const v = vectors[0]!;
    const wh = new Webhook(new TextEncoder().encode(v.secret), { format: "raw" });
    const seen: Execution[] = [];
    const receive = createReceiver({ secret: v.secret, handler: (t) => void seen.push(t) });
    const later = v.timestamp + 3600;
    const res = await receive(post(v, { timestamp: String(later), signature: wh.sign(v.id, new Date(later * 1000), v.body) }));
    assert.equal(res.status, 401, await res.text());
    assert.equal(seen.length, 0);
  });

  it("stops reading a body past MAX_BODY_BYTES and cancels it", async () => {
    const v = vectors[0]!;
    const chunk = new Uint8Array(64 << 10);
    let pulled = 0;
    let cancelled = false;
    const endless = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled += chunk.byteLength;
        c.enqueue(chunk);
      },
      cancel() {
        cancelled = true;
      },
    });
    const receive = createReceiver({ secret: v.secret, handler: () => {} });
    const init: RequestInit & { duplex: "half" } = { method: "POST", body: endless, duplex: "half" };
    const res = await receive(new Request("http://receiver.test/hooks", init));
    assert.equal(res.status, 413);
    assert.ok(pulled > MAX_BODY_BYTES, `${pulled} bytes pulled`);
    assert.ok(pulled <= MAX_BODY_BYTES + 4 * chunk.byteLength, `${pulled} bytes pulled, want the reading to stop near ${MAX_BODY_BYTES}`);
    assert.ok(cancelled, "the body stream is cancelled");
  });
});

describe("nodeHandler", () => {
  // rawExchange sends request as it is on a new connection to server and
  // returns what comes back until the server closes it.
  async function rawExchange(server: Server, request: string): Promise<string> {
    const { port } = server.address() as AddressInfo;
    const sock = connect(port, "127.0.0.1");
    sock.end(request);
    const parts: Buffer[] = [];
    for await (const part of sock) {
      parts.push(part as Buffer);
    }
    return Buffer.concat(parts).toString("latin1");
  }

  it("answers a bad Host header or an absolute-form target with 400, and goes on serving", async () => {
    const v = vectors[0]!;
    const seen: Execution[] = [];
    const server = createServer(nodeHandler(createReceiver({ secret: v.secret, handler: (t) => void seen.push(t) })));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const cases: [string, number, string][] = [
        ["Host [", 401, "POST /hooks HTTP/1.1\r\nHost: [\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"],
        ["target //[", 400, "POST //[/hooks HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"],
        ["absolute-form", 400, "POST http://[/hooks HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"],
      ];
      for (const [what, status, request] of cases) {
        const answer = await rawExchange(server, request);
        assert.ok(answer.startsWith(`HTTP/1.1 ${status} `), `${what}: ${answer}`);
      }
      assert.equal(seen.length, 0);
      const { port } = server.address() as AddressInfo;
      const ok = await fetch(`http://127.0.0.1:${port}/hooks`, {
        method: "POST",
        headers: { "webhook-id": v.id, "webhook-timestamp": String(v.timestamp), "webhook-signature": v.signature },
        body: v.body,
      });
      assert.equal(ok.status, 401, "the server still answers (the signature is stale on the real clock)");
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe("RetryAfterError", () => {
  it("needs a finite delay and keeps it within int64 milliseconds", () => {
    assert.throws(() => new RetryAfterError(Infinity, "never"), RangeError);
    const huge = new RetryAfterError(1e300, "later");
    assert.ok(BigInt(Math.ceil(huge.delayMs)) <= 2n ** 63n - 1n, String(huge.delayMs));
  });
});
