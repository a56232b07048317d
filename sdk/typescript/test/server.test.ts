// The SDK against a real rdq-server, on the embedded store and on PostgreSQL.
import { strict as assert } from "node:assert";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

import {
  ForbiddenError,
  InvalidError,
  DuplicateError,
  PermanentError,
  RdqClient,
  RetryAfterError,
  UnauthenticatedError,
  createReceiver,
  parseSubmission,
  type Execution,
  type Task,
} from "../src/index.js";
import {
  eventually,
  repoRoot,
  serverBinary,
  startReceiver,
  startServer,
  stores,
  type TestReceiver,
  type TestServer,
} from "./harness.js";

const exporter = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));

const decoder = new TextDecoder();

/** A handler's exception; its class name is the attempt's error type. */
class BankError extends Error {}

for (const kind of stores) {
  describe(`rdq-server on ${kind.name}`, () => {
    const binary = serverBinary();
    const store = binary ? kind.open() : undefined;
    const skip = !binary || !store ? "needs Go and the store (set CI=true to fail instead)" : false;
    let receiver: TestReceiver;
    let server: TestServer;
    let operator: RdqClient;
    let submitter: RdqClient;
    const seen = new Map<string, Execution[]>();

    const record = (t: Execution) => {
      seen.set(t.id, [...(seen.get(t.id) ?? []), t]);
      return seen.get(t.id)!.length;
    };

    before(async () => {
      if (skip) {
        return;
      }
      receiver = await startReceiver();
      server = await startServer({
        binary: binary!,
        databaseUrl: store!.url,
        receiverPort: receiver.port,
        queues: {
          orders: { path: "/hooks/orders", handlers: ["charge", "refund"], maxAttempts: 3 },
          forged: { path: "/hooks/forged", handlers: ["charge"], secret: "another-secret-the-receiver-lacks-9f8e7d" },
          other: { path: "/hooks/other", handlers: ["noop"] },
          emails: { path: "/hooks/emails", handlers: ["send_welcome"] },
        },
      });
      const handler = async (t: Execution) => {
        const n = record(t);
        const p = JSON.parse(decoder.decode(t.payload)) as { failTimes?: number; fail?: boolean; permanent?: boolean; retryAfterMs?: number };
        if (p.permanent) {
          throw new PermanentError("card number is not valid");
        }
        if (p.retryAfterMs && n === 1) {
          throw new RetryAfterError(p.retryAfterMs, "rate limited by the bank");
        }
        if (p.fail || n <= (p.failTimes ?? 0)) {
          throw new BankError(`bank unreachable on attempt ${t.attempt}`);
        }
      };
      receiver.routes.set("/hooks/orders", createReceiver({ secret: server.callbackSecret, handler }));
      receiver.routes.set("/hooks/forged", createReceiver({ secret: server.callbackSecret, handler }));
      receiver.routes.set("/hooks/other", createReceiver({ secret: server.callbackSecret, handler: () => {} }));
      receiver.routes.set("/hooks/emails", createReceiver({ secret: server.callbackSecret, handler: () => {} }));
      operator = new RdqClient({ baseUrl: server.grpcUrl, token: server.tokens.operator });
      submitter = new RdqClient({ baseUrl: server.grpcUrl, token: server.tokens.submitter });
    });

    after(async () => {
      await server?.stop();
      await receiver?.close();
      store?.drop();
    });

    const settled = (id: string, status: string) =>
      eventually(
        async () => {
          const t = await operator.getTask(id);
          return t.task.status === status ? t : undefined;
        },
        () => `task ${id} never became ${status}\n${server.log()}`,
      );

    it("submits a task that fails twice, is retried and succeeds, with every attempt in its history", { skip }, async () => {
      const tracer = trace.getTracer("test");
      const { task, traceId } = await tracer.startActiveSpan("checkout", async (span) => {
        const r = await submitter.submit({ queue: "orders", handler: "charge", payload: { order: 42, failTimes: 2 }, headers: { tenant: "acme" } });
        span.end();
        return { task: r.task, traceId: span.spanContext().traceId };
      });
      assert.equal(task.status, "PENDING");
      assert.match(task.headers["traceparent"] ?? "", new RegExp(`^00-${traceId}-`));
      const done = await settled(task.id, "SUCCEEDED");
      const outcomes = done.history.map((a) => a.outcome);
      assert.deepEqual(outcomes, ["RETRYABLE_FAILURE", "RETRYABLE_FAILURE", "SUCCESS"]);
      assert.deepEqual(done.history.map((a) => a.number), [1, 2, 3]);
      for (const a of done.history) {
        assert.equal(a.workerId, server.workerId);
      }
      // The receiver's failure body: the exception's class, message and stack.
      const first = done.history[0]!;
      assert.deepEqual([first.errorType, first.message], ["BankError", "bank unreachable on attempt 1"]);
      assert.match(first.stack, /bank unreachable on attempt 1\n\s+at .*server\.test\.js/);
      const runs = seen.get(task.id)!;
      assert.deepEqual(runs.map((r) => r.attempt), [1, 2, 3]);
      assert.equal(runs[0]!.headers["tenant"], "acme");
      assert.deepEqual(JSON.parse(decoder.decode(runs[0]!.payload)), { order: 42, failTimes: 2 });
      assert.ok(runs[2]!.leaseToken > runs[1]!.leaseToken && runs[1]!.leaseToken > runs[0]!.leaseToken, "fencing tokens grow");
      const spans = exporter.getFinishedSpans().filter((s) => s.attributes["rdq.task.id"] === task.id);
      assert.equal(spans.length, 3, "one span per execution");
      for (const s of spans) {
        assert.equal(s.spanContext().traceId, traceId, "the execution continues the submitter's trace");
      }
    });

    it("dead-letters a task that always fails, finds it, refuses a submitter's redrive and redrives it with a fixed payload", { skip }, async () => {
      const { task } = await submitter.submit({ queue: "orders", handler: "refund", payload: { fail: true }, idempotencyKey: `refund-${kind.name}` });
      const dead = await settled(task.id, "DEAD");
      assert.deepEqual(dead.history.map((a) => a.outcome), ["RETRYABLE_FAILURE", "RETRYABLE_FAILURE", "RETRYABLE_FAILURE"]);
      assert.equal(dead.task.lastError?.type, "BankError");
      assert.equal(dead.task.lastError?.message, "bank unreachable on attempt 3");

      const page = await operator.listDead({ queue: "orders", handler: "refund" }, { pageSize: 10 });
      assert.deepEqual(page.items.map((t: Task) => t.id), [task.id]);
      const groups = await operator.deadGroups({ queue: "orders", handler: "refund" });
      assert.equal(groups.reduce((n, g) => n + g.count, 0n), 1n);
      assert.equal(await operator.redriveDryRun({ filter: { queue: "orders", handler: "refund" } }), 1n);

      await assert.rejects(submitter.redrive({ ids: [task.id], reason: "try" }), (e: unknown) => {
        assert.ok(e instanceof ForbiddenError, String(e));
        assert.equal(e.code, "permission_denied");
        return true;
      });
      const res = await operator.redrive({ ids: [task.id], payload: JSON.stringify({ fail: false }), reason: "bank is back" });
      assert.equal(res.redriven, 1n);
      const ok = await settled(task.id, "SUCCEEDED");
      assert.equal(ok.task.life, 1);
      const last = ok.history.at(-1)!;
      assert.equal(last.outcome, "SUCCESS");
      assert.equal(last.life, 1);
      assert.equal(last.number, 4, "attempt numbers go on across lives");
      const audit = await operator.audit({ actor: "oncall" });
      assert.ok(audit.items.some((e) => e.actor === "oncall" && e.reason === "bank is back"), "the redrive is audited with its actor");
    });

    it("sends a PermanentError straight to the dead-letter queue, and purges it", { skip }, async () => {
      const { task } = await submitter.submit({ queue: "orders", handler: "charge", payload: { permanent: true } });
      const dead = await settled(task.id, "DEAD");
      assert.equal(dead.history.length, 1);
      assert.equal(dead.history[0]!.outcome, "PERMANENT_FAILURE");
      assert.deepEqual([dead.history[0]!.errorType, dead.history[0]!.message], ["PermanentError", "card number is not valid"]);
      assert.match(dead.history[0]!.stack, /card number is not valid\n\s+at /);
      assert.equal(await operator.purge({ ids: [task.id], reason: "bad card" }), 1n);
      await assert.rejects(operator.getTask(task.id), /not found|not_found/i);
    });

    it("waits at least the RetryAfterError's delay before the next attempt", { skip }, async () => {
      const { task } = await submitter.submit({ queue: "orders", handler: "charge", payload: { retryAfterMs: 1500 } });
      const done = await settled(task.id, "SUCCEEDED");
      assert.equal(done.history.length, 2);
      const [first, second] = done.history;
      const gap = Number(second!.startedAt!.seconds - first!.finishedAt!.seconds);
      assert.ok(gap >= 1, `second attempt started ${gap}s after the first ended; Retry-After asked 2s (rounded up)`);
    });

    it("refuses a callback signed with another secret: the task is dead-lettered, never run", { skip }, async () => {
      const { task } = await submitter.submit({ queue: "forged", handler: "charge", payload: { order: 1 } });
      const dead = await settled(task.id, "DEAD");
      assert.equal(dead.history.length, 1);
      assert.equal(dead.history[0]!.outcome, "PERMANENT_FAILURE");
      assert.equal(dead.history[0]!.errorType, "http_401");
      assert.equal(seen.get(task.id), undefined, "the handler never saw the forged execution");
    });

    it("honours tokens and roles, and says what was wrong", { skip }, async () => {
      const nobody = new RdqClient({ baseUrl: server.grpcUrl, token: "not-a-token-of-this-server-at-all-000" });
      await assert.rejects(nobody.submit({ queue: "orders", handler: "charge" }), UnauthenticatedError);
      await assert.rejects(submitter.listDead({ queue: "orders" }), ForbiddenError);
      const stranger = new RdqClient({ baseUrl: server.grpcUrl, token: server.tokens.stranger });
      await assert.rejects(stranger.submit({ queue: "orders", handler: "charge" }), ForbiddenError);
      await assert.rejects(submitter.submit({ queue: "orders", handler: "no-such-handler" }), (e: unknown) => {
        assert.ok(e instanceof InvalidError, String(e));
        assert.match(e.message, /no-such-handler/);
        return true;
      });
      const first = await submitter.submit({ queue: "other", handler: "noop", idempotencyKey: "once" });
      const again = await submitter.submit({ queue: "other", handler: "noop", idempotencyKey: "once" });
      assert.equal(again.duplicate, true);
      assert.equal(again.task.id, first.task.id);
      await assert.rejects(submitter.submit({ queue: "other", handler: "noop", idempotencyKey: "once" }, { rejectDuplicate: true }), (e: unknown) => {
        assert.ok(e instanceof DuplicateError);
        assert.equal(e.taskId, first.task.id);
        return true;
      });
      const many = await submitter.submitMany([
        { queue: "other", handler: "noop", payload: "a" },
        { queue: "other", handler: "", payload: "b" },
      ]);
      assert.ok(many[0]!.task, "the valid item is accepted");
      assert.ok(many[1]!.error instanceof InvalidError, `the invalid item is refused on its own: ${String(many[1]!.error)}`);
    });

    it("submits the envelope golden submission as it says, and refuses every invalid envelope", { skip }, async () => {
      const dir = join(repoRoot, "envelope/testdata");
      const { task } = await submitter.submitEnvelope(readFileSync(join(dir, "submission.json"), "utf8"));
      assert.deepEqual(
        [task.queue, task.handler, task.contentType, task.idempotencyKey, task.maxAttempts, task.timeoutMs],
        ["emails", "send_welcome", "application/json", "signup-42", 5, 90000n],
      );
      assert.equal(new TextDecoder().decode(task.payload), '{"user_id":42,"locale":"en"}');
      assert.equal(task.headers["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
      const due = Number(task.nextAttemptAt!.seconds - task.createdAt!.seconds);
      assert.ok(due >= 29 && due <= 31, `due ${due}s after creation; delay_ms is 30000`);
      for (const name of readdirSync(dir).filter((f) => f.startsWith("invalid_"))) {
        await assert.rejects(submitter.submitEnvelope(readFileSync(join(dir, name), "utf8")), InvalidError, name);
      }
    });

    it("lists, retries now and cancels live tasks; pauses and resumes a queue", { skip }, async () => {
      const later = await submitter.submit({ queue: "other", handler: "noop", delayMs: 3_600_000 });
      const cancelled = await submitter.submit({ queue: "other", handler: "noop", delayMs: 3_600_000 });
      const pending = await operator.listTasks("pending", { queue: "other" }, { pageSize: 100 });
      assert.ok(pending.items.some((t) => t.id === later.task.id));
      assert.equal((await operator.retryNow([later.task.id], "now please")).changed, 1n);
      await settled(later.task.id, "SUCCEEDED");
      assert.equal((await operator.cancel([cancelled.task.id], "not needed")).changed, 1n);
      const dead = await settled(cancelled.task.id, "DEAD");
      assert.equal(dead.history.at(-1)!.outcome, "CANCELLED");

      await assert.rejects(operator.pause("other", "maintenance"), ForbiddenError, "pausing needs the admin role");
      const admin = new RdqClient({ baseUrl: server.grpcUrl, token: server.tokens.admin });
      await admin.pause("other", "maintenance");
      assert.equal((await operator.queueStats()).find((q) => q.queue === "other")?.paused, true);
      await admin.resume("other", "done");
      assert.equal((await operator.queueStats()).find((q) => q.queue === "other")?.paused, false);
      assert.ok(Array.isArray(await operator.breakers("other")));
      const workers = await operator.workers();
      assert.ok(workers.workers.some((w) => w.id === server.workerId));
    });
  });
}

describe("envelope golden files", () => {
  const dir = join(repoRoot, "envelope/testdata");
  const invalid = readdirSync(dir).filter((f) => f.startsWith("invalid_"));

  it("reads every submission document and refuses or leaves to the server every invalid one", async () => {
    for (const name of ["submission.json", "minimal.json"]) {
      const spec = parseSubmission(readFileSync(join(dir, name), "utf8"));
      assert.equal(spec.queue, "emails", name);
    }
    const sub = parseSubmission(readFileSync(join(dir, "submission.json"), "utf8"));
    assert.equal(new TextDecoder().decode(sub.payload), '{"user_id":42,"locale":"en"}');
    assert.deepEqual([sub.idempotencyKey, sub.maxAttempts, sub.timeoutMs, sub.delayMs], ["signup-42", 5, 90000n, 30000n]);
    assert.equal(sub.headers["tenant"], "acme");
    assert.ok(invalid.length >= 40);
  });
});
