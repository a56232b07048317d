// The gRPC HandlerService host, called by this package's own generated client.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { ExecuteRequestSchema, HandlerService } from "../src/gen/rdq/v1/handler_pb.js";
import { PermanentError, RetryAfterError, serveHandlers, type Execution, type HandlerServer } from "../src/index.js";
import { repoRoot } from "./harness.js";

const token = "handler-token-0123456789abcdefghijkl";
const auth = { headers: { authorization: `Bearer ${token}` } };
const request = (handler: string) =>
  create(ExecuteRequestSchema, {
    id: "0190f3a0-0000-7000-8000-000000000001",
    queue: "orders",
    handler,
    attempt: 2,
    life: 1,
    leaseToken: 9007199254740993n,
    contentType: "application/json",
    headers: { tenant: "acme" },
    payload: new TextEncoder().encode('{"order":42}'),
  });

describe("HandlerService host", () => {
  let server: HandlerServer;
  let client: Client<typeof HandlerService>;
  const seen: Execution[] = [];
  let aborted: Promise<unknown> | undefined;

  before(async () => {
    server = await serveHandlers({
      token,
      handlers: {
        ok: (t) => {
          seen.push(t);
        },
        permanent: () => {
          throw new PermanentError("account closed");
        },
        later: () => {
          throw new RetryAfterError(1500, "rate limited");
        },
        broken: () => {
          const e = new TypeError("cannot read the order");
          throw e;
        },
        slow: (t) => {
          aborted = new Promise((ok) => t.signal.addEventListener("abort", () => ok(t.signal.reason), { once: true }));
          return new Promise<void>(() => {}); // never settles by itself
        },
      },
    });
    client = createClient(HandlerService, createGrpcTransport({ baseUrl: `http://${server.address}` }));
  });

  after(async () => {
    await server.close();
  });


  it("answers success when the handler returns, with the execution as sent", async () => {
    const res = await client.execute(request("ok"), auth);
    assert.equal(res.outcome.case, "success");
    const t = seen.at(-1)!;
    assert.equal(t.id, "0190f3a0-0000-7000-8000-000000000001");
    assert.equal(t.leaseToken, 9007199254740993n, "a lease token past 2^53 keeps every digit");
    assert.equal(t.attempt, 2);
    assert.equal(t.life, 1);
    assert.equal(t.headers["tenant"], "acme");
    assert.equal(new TextDecoder().decode(t.payload), '{"order":42}');
  });

  it("maps PermanentError, RetryAfterError and any other error to their outcomes", async () => {
    const p = await client.execute(request("permanent"), auth);
    assert.equal(p.outcome.case, "permanent");
    assert.equal(p.outcome.value?.errorType, "PermanentError");
    assert.equal(p.outcome.value?.message, "account closed");

    const r = await client.execute(request("later"), auth);
    assert.equal(r.outcome.case, "retryAfter");
    assert.equal(r.outcome.value?.delayMs, 1500n);
    assert.equal(r.outcome.value?.failure?.message, "rate limited");

    const b = await client.execute(request("broken"), auth);
    assert.equal(b.outcome.case, "retryable");
    assert.equal(b.outcome.value?.errorType, "TypeError");
    assert.equal(b.outcome.value?.message, "cannot read the order");
    assert.match(b.outcome.value?.stack ?? "", /handlerservice\.test\.js/, "the stack reaches the handler");

    const u = await client.execute(request("nobody"), auth);
    assert.equal(u.outcome.case, "permanent");
    assert.equal(u.outcome.value?.errorType, "unknown_handler");
  });

  it("refuses a call without the bearer token, or with another", async () => {
    for (const headers of [{}, { authorization: "Bearer wrong-token-0123456789abcdefghijk" }, { authorization: token }]) {
      await assert.rejects(client.execute(request("ok"), { headers }), (e: unknown) => {
        assert.ok(e instanceof ConnectError);
        assert.equal(e.code, Code.Unauthenticated);
        return true;
      });
    }
  });

  it("ends the handler's signal at the call's deadline and answers", async () => {
    const res = await client.execute(request("slow"), { ...auth, timeoutMs: 300 }).then(
      (r) => r.outcome,
      (e: unknown) => e,
    );
    const reason = await aborted!;
    assert.ok(reason instanceof Error, `the handler's signal ended: ${String(reason)}`);
    // Either side may see the deadline first; both are a failed attempt.
    if (res instanceof ConnectError) {
      assert.equal(res.code, Code.DeadlineExceeded);
    } else {
      const outcome = res as { case?: string; value?: { errorType?: string } };
      assert.equal(outcome.case, "retryable");
      assert.equal(outcome.value?.errorType, "timeout");
    }
  });
});

describe("HandlerService host over mutual TLS", () => {
  const tls = join(repoRoot, "sdk/testdata/tls");
  const pem = (name: string) => readFileSync(join(tls, name));

  it("answers a caller with a client certificate and refuses one without", async () => {
    let runs = 0;
    const server = await serveHandlers({ token, handlers: { ok: () => void runs++ }, tls: { key: pem("server.key"), cert: pem("server.pem"), ca: pem("ca.pem") } });
    try {
      const baseUrl = `https://${server.address}`;
      const withCert = createClient(
        HandlerService,
        createGrpcTransport({ baseUrl, nodeOptions: { ca: pem("ca.pem"), key: pem("client.key"), cert: pem("client.pem") } }),
      );
      const res = await withCert.execute(request("ok"), auth);
      assert.equal(res.outcome.case, "success");
      const without = createClient(HandlerService, createGrpcTransport({ baseUrl, nodeOptions: { ca: pem("ca.pem") } }));
      await assert.rejects(without.execute(request("ok"), auth), (e: unknown) => {
        assert.ok(e instanceof ConnectError, String(e));
        // The handshake fails; connect-node reports it as unavailable or internal.
        assert.ok([Code.Unavailable, Code.Internal].includes(e.code), e.message);
        assert.match(e.message, /certificate required/, "a caller without a client certificate is refused");
        return true;
      });
      assert.equal(runs, 1, "only the caller with a certificate reached the handler");
    } finally {
      await server.close();
    }
  });
});
