/**
 * PermanentError marks a failure retrying cannot fix: thrown (or returned
 * as the cause) from a handler, it sends the task to the dead-letter queue
 * at once.
 */
export class PermanentError extends Error {
  override name = "PermanentError";

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * RetryAfterError is a failed attempt whose next attempt is due no sooner
 * than delayMs from now (capped by rdq-server).
 */
export class RetryAfterError extends Error {
  override name = "RetryAfterError";
  readonly delayMs: number;

  constructor(delayMs: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    if (!Number.isFinite(delayMs) || delayMs < 0) {
      throw new RangeError(`rdq: RetryAfterError needs a delay of zero or more milliseconds, not ${delayMs}`);
    }
    this.delayMs = Math.min(delayMs, Number.MAX_SAFE_INTEGER); // within int64 milliseconds
  }
}

/** The outcome of one execution, as rdq records it. */
export type Outcome =
  | { kind: "success" }
  | { kind: "permanent"; errorType: string; message: string; stack: string }
  | { kind: "retryAfter"; delayMs: number; errorType: string; message: string; stack: string }
  | { kind: "retryable"; errorType: string; message: string; stack: string };

function describe(e: unknown): { errorType: string; message: string; stack: string } {
  if (e instanceof Error) {
    const stack = e.stack ?? "";
    // A subclass that does not set name has Error's: its class name says more.
    const cls = e.name === "Error" ? e.constructor?.name : undefined;
    return { errorType: cls || e.name || "Error", message: e.message, stack };
  }
  return { errorType: typeof e, message: String(e), stack: "" };
}

/**
 * outcomeOf classifies what a handler threw (undefined: it returned):
 * nothing is success, a PermanentError is permanent, a RetryAfterError is
 * retry-after, anything else is retryable with its name, message and stack.
 */
export function outcomeOf(thrown: unknown, threw: boolean): Outcome {
  if (!threw) {
    return { kind: "success" };
  }
  if (thrown instanceof PermanentError) {
    return { kind: "permanent", ...describe(thrown) };
  }
  if (thrown instanceof RetryAfterError) {
    return { kind: "retryAfter", delayMs: thrown.delayMs, ...describe(thrown) };
  }
  return { kind: "retryable", ...describe(thrown) };
}
