import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";

import { Webhook, WebhookVerificationError } from "standardwebhooks";

import { run, type Handler, type Logger } from "./execution.js";

/** The prefix of a secret in the Standard Webhooks form: "whsec_" + base64 of the key. */
export const SECRET_PREFIX = "whsec_";

/** The largest body a receiver reads, as rdq's Go receiver: two payloads of 1 MiB. */
export const MAX_BODY_BYTES = 2 << 20;

/**
 * The media type of the structured failure body a receiver answers a failed
 * execution with; rdq records its error_type, message and stack as the
 * attempt's (see rdq's callback package, version FAILURE_VERSION).
 */
export const FAILURE_CONTENT_TYPE = "application/vnd.rdq.failure+json";

/** The version of the failure body this receiver answers. */
export const FAILURE_VERSION = 1;

/** The most rdq records of an error type, a message and a stack, in UTF-8 bytes; a failure body is cut to them. */
export const MAX_ERROR_TYPE_BYTES = 256;
export const MAX_MESSAGE_BYTES = 4 << 10;
export const MAX_STACK_BYTES = 64 << 10;

/** The structured failure body of a callback response, version 1. */
export interface FailureBody {
  version: typeof FAILURE_VERSION;
  error_type: string;
  message: string;
  stack: string;
}

const decoder = new TextDecoder();

/**
 * cut keeps the start of s within limit UTF-8 bytes as rdq's Go
 * rdq.Truncate does: cut at a character boundary, with a mark stating how
 * many bytes were dropped ("…[truncated 1234 bytes]"), mark included.
 */
export function cut(s: string, limit: number): string {
  const bytes = encoder.encode(s);
  if (bytes.length <= limit) {
    return s;
  }
  const mark = (dropped: number) => `…[truncated ${dropped} bytes]`;
  let keep = limit;
  for (;;) {
    const room = Math.max(limit - encoder.encode(mark(bytes.length - keep)).length, 0);
    if (keep <= room) {
      return decoder.decode(bytes.subarray(0, keep)) + mark(bytes.length - keep);
    }
    keep = room;
    while (keep > 0 && (bytes[keep]! & 0xc0) === 0x80) {
      keep--;
    }
  }
}

/**
 * failureBody returns the failure body of an error: its type, message and
 * stack, each cut to what rdq records, so the body stays within what the
 * caller reads.
 */
export function failureBody(errorType: string, message: string, stack: string): FailureBody {
  return {
    version: FAILURE_VERSION,
    error_type: cut(errorType, MAX_ERROR_TYPE_BYTES),
    message: cut(message, MAX_MESSAGE_BYTES),
    stack: cut(stack, MAX_STACK_BYTES),
  };
}

function failure(status: number, o: { errorType: string; message: string; stack: string }, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(failureBody(o.errorType, o.message, o.stack)), {
    status,
    headers: { "content-type": FAILURE_CONTENT_TYPE, "x-content-type-options": "nosniff", ...headers },
  });
}

/** The signed JSON body of a callback request (see rdq's callback package). */
export interface CallbackMessage {
  type: "rdq.task";
  timestamp: string;
  data: {
    id: string;
    queue: string;
    handler: string;
    attempt: number;
    life: number;
    /** A JSON integer; read from the body's text, so every digit past 2^53 is kept. */
    lease_token: number;
    content_type?: string;
    headers?: Record<string, string>;
    payload?: unknown;
    payload_base64?: string;
  };
}

/** Options of a callback receiver. */
export interface ReceiverOptions {
  /**
   * The queue's signing secret, as rdq-server's config has it: raw, or
   * "whsec_" + base64 of the key.
   */
  secret: string | Uint8Array;
  /** Runs each verified execution. */
  handler: Handler;
  /**
   * How long the handler may run before the receiver answers a retryable
   * "timeout" failure; keep it below the queue's callback timeout (10 s
   * unless configured), so the answer arrives in time. 8 000 by default.
   */
  deadlineMs?: number;
  /** Receives a line per execution (task id, queue, attempt, outcome; never the payload). */
  log?: Logger;
}

/** A fetch-style request handler: Node's http (through nodeHandler), Express, Fastify, Deno, Bun. */
export type FetchHandler = (request: Request) => Promise<Response>;

const encoder = new TextEncoder();

function webhookOf(secret: string | Uint8Array): Webhook {
  if (typeof secret === "string" && secret.startsWith(SECRET_PREFIX)) {
    try {
      return new Webhook(secret);
    } catch (e) {
      throw new TypeError(`rdq: a secret starting with whsec_ must go on in standard base64 (${String(e)}); copy it again from rdq-server's config`);
    }
  }
  const key = typeof secret === "string" ? encoder.encode(secret) : secret;
  if (key.length === 0) {
    throw new TypeError("rdq: the receiver's secret is empty; give the queue's callback secret from rdq-server's config");
  }
  return new Webhook(key, { format: "raw" });
}

async function readBody(request: Request): Promise<Uint8Array | undefined> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) {
    return undefined;
  }
  if (!request.body) {
    return new Uint8Array();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) {
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function text(status: number, body: string, headers: Record<string, string> = {}): Response {
  return new Response(status === 204 ? null : body, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", ...headers },
  });
}

/**
 * rawMember returns the text of member name of the object at depth 2 of
 * JSON document doc (a member of "data" in a callback message), exactly as
 * it is written, or undefined. The document must be valid JSON.
 */
export function rawMember(doc: string, name: string): string | undefined {
  const key = JSON.stringify(name);
  let depth = 0;
  let start = -1;
  for (let i = 0; i < doc.length; i++) {
    const c = doc[i];
    if (c === '"') {
      let j = i + 1;
      while (doc[j] !== '"') {
        j += doc[j] === "\\" ? 2 : 1;
      }
      if (depth === 2 && start < 0 && doc.slice(i, j + 1) === key) {
        let k = j + 1;
        while (doc[k] !== ":") {
          k++;
        }
        const rest = doc.slice(k + 1);
        const isKey = doc.slice(0, i).trimEnd().endsWith("{") || doc.slice(0, i).trimEnd().endsWith(",");
        if (isKey) {
          start = k + 1 + (rest.length - rest.trimStart().length);
          i = k;
          continue;
        }
      }
      i = j;
    } else if (c === "{" || c === "[") {
      depth++;
    } else if (c === "}" || c === "]") {
      depth--;
      if (start >= 0 && depth === 1) {
        return doc.slice(start, i).trimEnd();
      }
    } else if (c === "," && depth === 2 && start >= 0) {
      return doc.slice(start, i).trimEnd();
    }
  }
  return undefined;
}

/**
 * leaseTokenOf returns the execution's fencing token as written in the
 * signed body: a JSON number loses digits past 2^53, so the integer is read
 * from the body's text. It returns undefined when the member is not a
 * non-negative integer.
 */
export function leaseTokenOf(body: string): bigint | undefined {
  const raw = rawMember(body, "lease_token");
  return raw !== undefined && /^(0|[1-9][0-9]{0,18})$/.test(raw) ? BigInt(raw) : undefined;
}

function payloadOf(body: string, data: CallbackMessage["data"]): Uint8Array {
  if (data.payload_base64 !== undefined) {
    return Buffer.from(data.payload_base64, "base64");
  }
  if (data.payload === undefined) {
    return new Uint8Array();
  }
  // A JSON payload is in the body byte for byte as submitted; re-encoding
  // the parsed value could change it (key order, number spelling), so its
  // text is cut out of the signed body.
  return encoder.encode(rawMember(body, "payload") ?? JSON.stringify(data.payload));
}

/**
 * createReceiver returns a fetch-style handler for rdq's HTTP callbacks. It
 * verifies each request's Standard Webhooks signature (webhook-id,
 * webhook-timestamp within 5 minutes, webhook-signature) with the standardwebhooks
 * library, refusing a request that fails with 401 (400 for a signed body
 * that is not an rdq message, 413 for one too large), which rdq records as
 * a permanent failure. It then runs the handler and answers with the status
 * rdq reads as its outcome: returned → 204; PermanentError → 422;
 * RetryAfterError → 503 with Retry-After (whole seconds, rounded up);
 * anything else → 500. A failure's body is the structured failure body
 * (FAILURE_CONTENT_TYPE) with the error's class name, message and stack,
 * which rdq records as the attempt's error type, message and stack.
 */
export function createReceiver(opts: ReceiverOptions): FetchHandler {
  const wh = webhookOf(opts.secret);
  const deadlineMs = opts.deadlineMs ?? 8_000;
  return async (request: Request): Promise<Response> => {
    if (request.method !== "POST") {
      return text(405, "rdq callbacks are POST requests", { allow: "POST" });
    }
    const raw = await readBody(request);
    if (!raw) {
      return text(413, `callback body is larger than ${MAX_BODY_BYTES} bytes`);
    }
    const body = Buffer.from(raw).toString("utf8");
    const headers: Record<string, string> = {};
    for (const h of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      headers[h] = request.headers.get(h) ?? "";
    }
    try {
      wh.verify(body, headers, { jsonParse: false });
    } catch (e) {
      const why = e instanceof WebhookVerificationError ? e.message : String(e);
      opts.log?.("warn", "rdq callback refused: signature", { reason: why, webhook_id: headers["webhook-id"]!.slice(0, 64) });
      return text(401, `callback signature refused: ${why}`);
    }
    let msg: CallbackMessage;
    try {
      msg = JSON.parse(body) as CallbackMessage;
    } catch {
      return text(400, "the signed body is not JSON");
    }
    const d = msg?.data;
    if (msg?.type !== "rdq.task" || typeof d !== "object" || d === null || d.id !== headers["webhook-id"]) {
      return text(400, "the signed body is not an rdq.task message for webhook-id");
    }
    const leaseToken = leaseTokenOf(body);
    if (leaseToken === undefined) {
      return text(400, "the signed body's data.lease_token is not a non-negative integer");
    }
    const outcome = await run(
      opts.handler,
      {
        id: d.id,
        queue: d.queue,
        handler: d.handler,
        attempt: d.attempt,
        life: d.life,
        leaseToken,
        contentType: d.content_type ?? "",
        headers: d.headers ?? {},
        payload: payloadOf(body, d),
      },
      { traceparent: request.headers.get("traceparent") ?? undefined, signal: request.signal, deadlineMs, log: opts.log },
    );
    switch (outcome.kind) {
      case "success":
        return text(204, "");
      case "permanent":
        return failure(422, outcome);
      case "retryAfter":
        return failure(503, outcome, { "retry-after": String(Math.ceil(outcome.delayMs / 1000)) });
      case "retryable":
        return failure(500, outcome);
    }
  };
}

/**
 * nodeHandler adapts a fetch-style handler to Node's http server and to
 * Express, which call (req, res). A body already read by a middleware
 * (express.raw() leaves a Buffer in req.body) is used as it is; a parsed
 * one cannot be verified, so mount the receiver before express.json().
 */
export function nodeHandler(handler: FetchHandler): (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => void {
  return (req, res) => {
    try {
      serveNode(handler, req, res);
    } catch (e) {
      // A request Node accepted but a Request cannot be made of (a
      // header value fetch refuses, say): the caller's fault, answered
      // without reaching the handler.
      if (!res.headersSent) {
        res.writeHead(400, { "content-type": "text/plain; charset=utf-8" });
      }
      res.end(`bad request: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
}

/** serveNode serves one request of nodeHandler; it throws on a request no Request can be made of. */
function serveNode(handler: FetchHandler, req: IncomingMessage & { body?: unknown }, res: ServerResponse): void {
  const ac = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) {
      ac.abort(new Error("the caller went away"));
    }
  });
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (typeof v === "string") {
      headers.set(k, v);
    } else if (Array.isArray(v)) {
      headers.set(k, v.join(", "));
    }
  }
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  const body: Uint8Array | ReadableStream<Uint8Array> | null = !hasBody
    ? null
    : req.body instanceof Uint8Array
      ? req.body
      : (Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>);
  const init: RequestInit & { duplex?: "half" } = { method, headers, body, signal: ac.signal };
  if (body && !(body instanceof Uint8Array)) {
    init.duplex = "half";
  }
  // The URL is made from a fixed origin: the Host header and the
  // request target are the caller's, and a bad one must not throw.
  handler(new Request(new URL(req.url ?? "/", "http://receiver.invalid"), init))
    .then(async (response) => {
      const out: Record<string, string> = {};
      response.headers.forEach((v, k) => (out[k] = v));
      res.writeHead(response.status, out);
      res.end(Buffer.from(await response.arrayBuffer()));
    })
    .catch((e: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
      }
      res.end(`receiver failed: ${e instanceof Error ? e.message : String(e)}`);
    });
}
