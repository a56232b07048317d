import { timingSafeEqual } from "node:crypto";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { run, type Handler, type Logger } from "./execution.js";
import {
  ExecuteResponseSchema,
  HandlerService,
  type ExecuteRequest,
  type ExecuteResponse,
} from "./gen/rdq/v1/handler_pb.js";

/** Options of a gRPC HandlerService host. */
export interface HandlerServiceOptions {
  /**
   * Runs each execution, by handler name ("*" for any); an execution of a
   * handler not listed is answered permanent, so a misrouted task is
   * dead-lettered rather than retried forever.
   */
  handlers: Record<string, Handler>;
  /**
   * The bearer token the caller must send as "authorization: Bearer ..."
   * metadata (rdq-server's per-queue auth metadata). Calls without it are
   * refused with UNAUTHENTICATED. Empty or absent: no check (use mutual
   * TLS instead).
   */
  token?: string;
  /**
   * Bounds an execution when the call carries no deadline; 30 000 ms by
   * default. With a deadline, the handler's signal ends at the deadline.
   */
  defaultDeadlineMs?: number;
  log?: Logger;
}

const encoder = new TextEncoder();

function tokenMatches(header: string | null, token: string): boolean {
  const want = encoder.encode(`Bearer ${token}`);
  const got = encoder.encode(header ?? "");
  return got.length === want.length && timingSafeEqual(got, want);
}

/**
 * handlerRoutes registers rdq.v1.HandlerService on a Connect router, for
 * connectNodeAdapter, @connectrpc/connect-express or connect-fastify. The
 * outcome contract is that of the HTTP receiver: returned → success,
 * PermanentError → permanent, RetryAfterError → retry_after, anything else
 * → retryable with the error's name, message and stack.
 */
export function handlerRoutes(opts: HandlerServiceOptions): (router: ConnectRouter) => void {
  const defaultDeadlineMs = opts.defaultDeadlineMs ?? 30_000;
  return (router) => {
    router.service(HandlerService, {
      async execute(req: ExecuteRequest, ctx: HandlerContext): Promise<ExecuteResponse> {
        if (opts.token && !tokenMatches(ctx.requestHeader.get("authorization"), opts.token)) {
          throw new ConnectError("rdq: missing or wrong bearer token in the call's authorization metadata", Code.Unauthenticated);
        }
        const handler = opts.handlers[req.handler] ?? opts.handlers["*"];
        if (!handler) {
          return create(ExecuteResponseSchema, {
            outcome: {
              case: "permanent",
              value: { errorType: "unknown_handler", message: `this HandlerService has no handler ${JSON.stringify(req.handler)}`, stack: "" },
            },
          });
        }
        const remaining = ctx.timeoutMs();
        const deadlineMs = remaining === undefined ? defaultDeadlineMs : Math.max(0, remaining);
        const outcome = await run(
          handler,
          {
            id: req.id,
            queue: req.queue,
            handler: req.handler,
            attempt: req.attempt,
            life: req.life,
            leaseToken: req.leaseToken,
            contentType: req.contentType,
            headers: { ...req.headers },
            payload: req.payload,
          },
          { traceparent: ctx.requestHeader.get("traceparent") ?? undefined, signal: ctx.signal, deadlineMs, log: opts.log },
        );
        switch (outcome.kind) {
          case "success":
            return create(ExecuteResponseSchema, { outcome: { case: "success", value: {} } });
          case "permanent":
            return create(ExecuteResponseSchema, { outcome: { case: "permanent", value: outcome } });
          case "retryAfter":
            return create(ExecuteResponseSchema, {
              outcome: { case: "retryAfter", value: { delayMs: BigInt(Math.ceil(outcome.delayMs)), failure: outcome } },
            });
          case "retryable":
            return create(ExecuteResponseSchema, { outcome: { case: "retryable", value: outcome } });
        }
      },
    });
  };
}

/** A running HandlerService host. */
export interface HandlerServer {
  /** The address it listens on, such as "127.0.0.1:50051". */
  address: string;
  /** Stops accepting calls and waits for the running ones. */
  close(): Promise<void>;
}

/** TLS of a HandlerService host: PEM key and certificate, and for mutual TLS the CA of the callers' certificates. */
export interface HandlerTLS {
  key: string | Buffer;
  cert: string | Buffer;
  /** With ca, callers must present a certificate it signed (mutual TLS). */
  ca?: string | Buffer;
}

/**
 * serveHandlers hosts HandlerService over gRPC at host:port (port 0 picks
 * a free one): over TLS with tls (mutual TLS when tls.ca is given), else
 * over cleartext HTTP/2 (h2c), for a caller on a trusted network.
 */
export async function serveHandlers(
  opts: HandlerServiceOptions & { host?: string; port?: number; tls?: HandlerTLS },
): Promise<HandlerServer> {
  const adapter = connectNodeAdapter({ routes: handlerRoutes(opts), grpc: true, connect: false, grpcWeb: false });
  const server: http2.Http2Server | http2.Http2SecureServer = opts.tls
    ? http2.createSecureServer(
        {
          key: opts.tls.key,
          cert: opts.tls.cert,
          ...(opts.tls.ca ? { ca: opts.tls.ca, requestCert: true, rejectUnauthorized: true } : {}),
        },
        adapter,
      )
    : http2.createServer(adapter);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s: http2.ServerHttp2Session) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  return {
    address: `${addr.address}:${addr.port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        for (const s of sessions) {
          s.close();
        }
      }),
  };
}
