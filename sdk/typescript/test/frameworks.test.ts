// The fetch-style receiver in Express and Fastify, as README.md shows it.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import express from "express";
import Fastify from "fastify";

import { createReceiver, nodeHandler, type Execution } from "../src/index.js";
import { repoRoot } from "./harness.js";

interface Vector {
  secret: string;
  id: string;
  timestamp: number;
  body: string;
  signature: string;
  payload: string;
}

const v = (JSON.parse(readFileSync(join(repoRoot, "testdata/conformance/callbacks.json"), "utf8")) as { vectors: Vector[] }).vectors[0]!;

async function post(url: string, signature = v.signature): Promise<number> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "webhook-id": v.id, "webhook-timestamp": String(v.timestamp), "webhook-signature": signature },
    body: v.body,
  });
  await res.arrayBuffer();
  return res.status;
}

describe("the receiver in web frameworks", () => {
  const realNow = Date.now;
  const seen: Execution[] = [];
  const receiver = createReceiver({ secret: v.secret, handler: (t) => void seen.push(t) });
  let expressServer: Server;
  const fastify = Fastify();
  let expressUrl = "";
  let fastifyUrl = "";

  before(async () => {
    // The vector was signed at its timestamp; the clock is set a minute later.
    Date.now = () => (v.timestamp + 60) * 1000;

    const app = express();
    app.post("/hooks/orders", nodeHandler(receiver)); // before express.json(), which would consume the body
    app.use(express.json());
    expressServer = app.listen(0, "127.0.0.1");
    await new Promise((ok) => expressServer.once("listening", ok));
    expressUrl = `http://127.0.0.1:${(expressServer.address() as AddressInfo).port}/hooks/orders`;

    fastify.addContentTypeParser("application/json", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    fastify.post("/hooks/orders", async (req, reply) => {
      const res = await receiver(
        new Request(`http://${req.hostname}${req.url}`, {
          method: "POST",
          headers: req.headers as Record<string, string>,
          body: req.body as Buffer,
        }),
      );
      return reply.code(res.status).headers(Object.fromEntries(res.headers)).send(Buffer.from(await res.arrayBuffer()));
    });
    fastifyUrl = `${await fastify.listen({ port: 0, host: "127.0.0.1" })}/hooks/orders`;
  });

  after(async () => {
    Date.now = realNow;
    await new Promise((ok) => expressServer.close(ok));
    expressServer.closeAllConnections();
    await fastify.close();
  });

  for (const [name, url] of [["Express", () => expressUrl], ["Fastify", () => fastifyUrl]] as const) {
    it(`runs a signed callback in ${name} and refuses a tampered one`, async () => {
      const before = seen.length;
      assert.equal(await post(url()), 204);
      assert.equal(seen.length, before + 1);
      assert.equal(Buffer.from(seen.at(-1)!.payload).toString("base64"), v.payload);
      assert.equal(await post(url(), v.signature.replace("v1,", "v1,A")), 401);
      assert.equal(seen.length, before + 1);
    });
  }
});
