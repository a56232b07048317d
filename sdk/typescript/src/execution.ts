import { context as otelContext, metrics, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";

import { outcomeOf, type Outcome } from "./outcome.js";
import { remoteContext } from "./trace.js";
import { VERSION } from "./version.js";

/** One execution of a task, as a handler sees it. */
export interface Execution {
  /** The task's UUID, the same for every attempt. */
  id: string;
  queue: string;
  handler: string;
  /** This attempt's number in the task's life, from 1. */
  attempt: number;
  /** 0, plus one per redrive. */
  life: number;
  /** The execution's fencing token: (id, leaseToken) names one execution. */
  leaseToken: bigint;
  contentType: string;
  headers: Record<string, string>;
  /** The payload as submitted. */
  payload: Uint8Array;
  /** Ends when the caller gives up (its deadline passed or it went away). */
  signal: AbortSignal;
}

/**
 * A Handler does the work of one execution. Returning is success; throwing
 * PermanentError dead-letters the task, RetryAfterError retries it no
 * sooner than its delay, anything else retries it by the queue's policy.
 */
export type Handler = (task: Execution) => Promise<void> | void;

/** Receives a line of the SDK's log: task id, queue, attempt and outcome, never a payload. */
export type Logger = (level: "info" | "warn" | "error", msg: string, attrs: Record<string, string | number>) => void;

const tracer = trace.getTracer("@srjn45/rdq", VERSION);
const meter = metrics.getMeter("@srjn45/rdq", VERSION);
const executions = meter.createCounter("rdq_handler_executions", {
  description: "Executions run by this process's rdq handlers, by queue, handler and outcome.",
});
const durations = meter.createHistogram("rdq_handler_duration_seconds", {
  description: "How long this process's rdq handlers ran, by queue, handler and outcome.",
  unit: "s",
});

/**
 * run executes handler on task inside a span that continues traceparent
 * (the attempt's trace context), bounded by deadlineMs: a handler still
 * running then is abandoned and its execution is a retryable "timeout".
 */
export async function run(
  handler: Handler,
  task: Omit<Execution, "signal">,
  parent: { traceparent: string | undefined; signal: AbortSignal; deadlineMs: number; log: Logger | undefined },
): Promise<Outcome> {
  const ctx = remoteContext(otelContext.active(), parent.traceparent ?? task.headers["traceparent"]);
  const attrs = {
    "rdq.task.id": task.id,
    "rdq.queue": task.queue,
    "rdq.handler": task.handler,
    "rdq.attempt": task.attempt,
    "rdq.life": task.life,
  };
  return tracer.startActiveSpan(`rdq.execute ${task.handler}`, { kind: SpanKind.CONSUMER, attributes: attrs }, ctx, async (span) => {
    const started = performance.now();
    const ac = new AbortController();
    const onAbort = () => ac.abort(parent.signal.reason);
    parent.signal.addEventListener("abort", onAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new Error(`the handler did not finish within ${parent.deadlineMs} ms`);
        err.name = "timeout";
        ac.abort(err);
        reject(err);
      }, parent.deadlineMs);
    });
    let outcome: Outcome;
    try {
      await Promise.race([Promise.resolve().then(() => handler({ ...task, signal: ac.signal })), timeout]);
      outcome = outcomeOf(undefined, false);
    } catch (e) {
      outcome = outcomeOf(e, true);
    } finally {
      clearTimeout(timer);
      parent.signal.removeEventListener("abort", onAbort);
    }
    const labels = { queue: task.queue, handler: task.handler, outcome: outcome.kind };
    executions.add(1, labels);
    durations.record((performance.now() - started) / 1000, labels);
    if (outcome.kind === "success") {
      span.setStatus({ code: SpanStatusCode.OK });
      parent.log?.("info", "rdq task succeeded", { task_id: task.id, queue: task.queue, handler: task.handler, attempt: task.attempt });
    } else {
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.message });
      span.setAttribute("rdq.outcome", outcome.kind);
      span.setAttribute("error.type", outcome.errorType);
      parent.log?.("warn", "rdq task failed", {
        task_id: task.id,
        queue: task.queue,
        handler: task.handler,
        attempt: task.attempt,
        outcome: outcome.kind,
        error_type: outcome.errorType,
        error: outcome.message,
      });
    }
    span.end();
    return outcome;
  });
}
