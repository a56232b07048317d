import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, type CallOptions, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { parseSubmission } from "./envelope.js";
import { DuplicateError, RdqError, errorOfCode, toRdqError } from "./errors.js";
import {
  RdqService,
  TaskSpecSchema,
  type Attempt,
  type AuditEntry,
  type Breaker,
  type ChangeTasksResponse,
  type DeadFilterSchema,
  type Group,
  type QueueStat,
  type RedriveResponse,
  type SubmitBatchResponse,
  type Task,
  type TaskFilterSchema,
  type ListWorkersResponse,
} from "./gen/rdq/v1/rdq_pb.js";
import { traceHeaders } from "./trace.js";

/** Options of an RdqClient. */
export interface ClientOptions {
  /**
   * The bearer token of the principal the client acts as; its roles per
   * queue decide what it may do.
   */
  token: string;
  /**
   * The base URL of rdq-server's gRPC listener, such as
   * "http://127.0.0.1:9090" (h2c) or "https://rdq.example.com:9090".
   * Ignored when transport is given.
   */
  baseUrl?: string;
  /**
   * The transport of the calls; by default gRPC over HTTP/2 to baseUrl.
   * Any @connectrpc/connect transport works (for example a Connect
   * transport, once the server speaks that protocol).
   */
  transport?: Transport;
  /** The deadline of each call in milliseconds; 30 000 by default. */
  timeoutMs?: number;
}

/** A failure the caller already had, recorded as the task's attempt 1. */
export interface FirstFailure {
  /** Groups failures, such as "timeout" or "http_503"; empty reads as "error". */
  errorType?: string;
  message: string;
}

/** A task to submit. */
export interface NewTask {
  queue: string;
  /** The stable name of the handler that runs the task. */
  handler: string;
  /**
   * The payload: bytes as they are, a string as UTF-8, anything else as
   * JSON (with contentType "application/json" unless one is given).
   */
  payload?: Uint8Array | string | unknown;
  contentType?: string;
  /** Headers that travel with the task. traceparent is added from the active span when absent. */
  headers?: Record<string, string>;
  /** Unique per queue while the task exists: a second submission with it is a duplicate. */
  idempotencyKey?: string;
  /** Run no sooner than this many milliseconds from now. */
  delayMs?: number;
  /**
   * A failure the caller already had: attempt 1 of the task. An Error is
   * recorded with its name as the error type.
   */
  firstFailure?: FirstFailure | Error;
  /** Overrides the queue's maximum number of attempts for this task. */
  maxAttempts?: number;
  /** Overrides the queue's handler timeout for this task. */
  timeoutMs?: number;
}

/** Options of a submission. */
export interface SubmitOptions {
  /** Throw DuplicateError when the idempotency key is already taken, instead of returning the holder. */
  rejectDuplicate?: boolean;
  signal?: AbortSignal;
}

/** The result of a submission: the task, and whether it already existed under the idempotency key. */
export interface Submitted {
  task: Task;
  duplicate: boolean;
}

/** One item of submitMany: the task, or the error that refused it. */
export type SubmittedItem = (Submitted & { error?: undefined }) | { task?: undefined; duplicate?: undefined; error: RdqError };

/** A task with every attempt of every life, oldest first. */
export interface TaskHistory {
  task: Task;
  history: Attempt[];
}

/** A page of a listing; pass nextPageToken back for the next page ("" when there is none). */
export interface Page<T> {
  items: T[];
  nextPageToken: string;
}

/** Paging of a listing. */
export interface PageOptions {
  pageSize?: number;
  pageToken?: string;
}

/** Filters dead tasks; every field set must match. */
export type DeadFilter = MessageInitShape<typeof DeadFilterSchema>;
/** Filters live tasks; every field set must match. */
export type TaskFilter = MessageInitShape<typeof TaskFilterSchema>;

/** What to redrive and how. Exactly one of ids, filter or all selects the tasks. */
export interface RedriveOptions {
  ids?: string[];
  filter?: DeadFilter;
  all?: boolean;
  /** Replaces the payload of the redriven task(s). */
  payload?: Uint8Array | string;
  delayMs?: number;
  /** Spreads the redriven tasks over this many milliseconds. */
  spreadMs?: number;
  /** Redrives only tasks whose life is below this. */
  maxLife?: number;
  /** Recorded in the audit log. */
  reason: string;
}

/** The live states of ListTasks. */
export type LiveState = "pending" | "retrying" | "in_flight" | "succeeded";

const encoder = new TextEncoder();

function payloadOf(t: NewTask): { payload: Uint8Array; contentType: string } {
  const p = t.payload;
  if (p === undefined) {
    return { payload: new Uint8Array(), contentType: t.contentType ?? "" };
  }
  if (p instanceof Uint8Array) {
    return { payload: p, contentType: t.contentType ?? "application/octet-stream" };
  }
  if (typeof p === "string") {
    return { payload: encoder.encode(p), contentType: t.contentType ?? "text/plain; charset=utf-8" };
  }
  return { payload: encoder.encode(JSON.stringify(p)), contentType: t.contentType ?? "application/json" };
}

function specOf(t: NewTask) {
  const { payload, contentType } = payloadOf(t);
  const headers = { ...traceHeaders(), ...t.headers };
  let firstFailure: { errorType: string; message: string } | undefined;
  if (t.firstFailure instanceof Error) {
    firstFailure = { errorType: t.firstFailure.name, message: t.firstFailure.message };
  } else if (t.firstFailure) {
    firstFailure = { errorType: t.firstFailure.errorType ?? "", message: t.firstFailure.message };
  }
  return create(TaskSpecSchema, {
    version: 1,
    queue: t.queue,
    handler: t.handler,
    payload,
    contentType,
    headers,
    idempotencyKey: t.idempotencyKey ?? "",
    delayMs: BigInt(Math.max(0, Math.round(t.delayMs ?? 0))),
    firstFailure,
    maxAttempts: t.maxAttempts ?? 0,
    timeoutMs: BigInt(Math.max(0, Math.round(t.timeoutMs ?? 0))),
  });
}

function duplicate(task: Task): DuplicateError {
  return new DuplicateError(
    `rdq: queue ${task.queue} already holds task ${task.id} under idempotency key ${JSON.stringify(task.idempotencyKey)}; ` +
      "use another key for new work, or read the existing task",
    task.id,
  );
}

/**
 * RdqClient talks to rdq-server's RdqService: it submits tasks (the
 * producer) and reads and operates the dead-letter queue, live tasks,
 * pauses and breakers (the operator). Every method throws an RdqError
 * subclass when the server refuses or cannot answer. close() ends nothing
 * the transport shares: the default transport closes its connections when
 * idle.
 */
export class RdqClient {
  readonly #rpc: Client<typeof RdqService>;
  readonly #timeoutMs: number;

  constructor(opts: ClientOptions) {
    if (!opts.token) {
      throw new TypeError("rdq: ClientOptions.token is empty; give the bearer token of a principal from rdq-server's config");
    }
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${opts.token}`);
      return next(req);
    };
    let transport = opts.transport;
    if (!transport) {
      if (!opts.baseUrl) {
        throw new TypeError('rdq: ClientOptions needs baseUrl (such as "http://127.0.0.1:9090") or a transport');
      }
      transport = createGrpcTransport({ baseUrl: opts.baseUrl, interceptors: [auth] });
    } else {
      const given = transport;
      transport = {
        unary: (method, signal, timeoutMs, header, input, contextValues) => {
          const h = new Headers(header);
          h.set("authorization", `Bearer ${opts.token}`);
          return given.unary(method, signal, timeoutMs, h, input, contextValues);
        },
        stream: (method, signal, timeoutMs, header, input, contextValues) => {
          const h = new Headers(header);
          h.set("authorization", `Bearer ${opts.token}`);
          return given.stream(method, signal, timeoutMs, h, input, contextValues);
        },
      };
    }
    this.#rpc = createClient(RdqService, transport);
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
  }

  #opts(signal?: AbortSignal): CallOptions {
    return signal ? { timeoutMs: this.#timeoutMs, signal } : { timeoutMs: this.#timeoutMs };
  }

  async #call<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (e) {
      throw toRdqError(e);
    }
  }

  /** submit submits one task and returns it as stored. */
  async submit(task: NewTask, opts: SubmitOptions = {}): Promise<Submitted> {
    const res = await this.#call(() => this.#rpc.submit({ task: specOf(task) }, this.#opts(opts.signal)));
    if (!res.task) {
      throw new RdqError("rdq: the server answered a submission without its task", "internal", 13);
    }
    if (res.duplicate && opts.rejectDuplicate) {
      throw duplicate(res.task);
    }
    return { task: res.task, duplicate: res.duplicate };
  }

  /**
   * submitEnvelope submits a task written as a submission in rdq's JSON
   * wire envelope (as another rdq client or a message from a broker
   * carries it), refusing an invalid one with an InvalidError before it is
   * sent (see parseSubmission). traceparent is added from the active span
   * when the envelope has none.
   */
  async submitEnvelope(doc: string, opts: SubmitOptions = {}): Promise<Submitted> {
    const spec = parseSubmission(doc);
    spec.headers = { ...traceHeaders(), ...spec.headers };
    const res = await this.#call(() => this.#rpc.submit({ task: spec }, this.#opts(opts.signal)));
    if (!res.task) {
      throw new RdqError("rdq: the server answered a submission without its task", "internal", 13);
    }
    if (res.duplicate && opts.rejectDuplicate) {
      throw duplicate(res.task);
    }
    return { task: res.task, duplicate: res.duplicate };
  }

  /**
   * submitMany submits tasks in one call; each item is accepted or refused
   * on its own, in the order given.
   */
  async submitMany(tasks: NewTask[], opts: SubmitOptions = {}): Promise<SubmittedItem[]> {
    const res: SubmitBatchResponse = await this.#call(() =>
      this.#rpc.submitBatch({ tasks: tasks.map(specOf) }, this.#opts(opts.signal)),
    );
    return res.results.map((r): SubmittedItem => {
      if (r.error) {
        return { error: errorOfCode(r.error.code, r.error.message) };
      }
      if (!r.task) {
        return { error: new RdqError("rdq: the server answered a submission without its task", "internal", 13) };
      }
      if (r.duplicate && opts.rejectDuplicate) {
        return { error: duplicate(r.task) };
      }
      return { task: r.task, duplicate: r.duplicate };
    });
  }

  /** getTask returns a task, live or dead, with its whole history. */
  async getTask(id: string, signal?: AbortSignal): Promise<TaskHistory> {
    const res = await this.#call(() => this.#rpc.getTask({ id }, this.#opts(signal)));
    return { task: res.task!, history: res.history };
  }

  /** taskByKey returns the task holding an idempotency key on a queue, with its history. */
  async taskByKey(queue: string, key: string, signal?: AbortSignal): Promise<TaskHistory> {
    const res = await this.#call(() => this.#rpc.taskByKey({ queue, key }, this.#opts(signal)));
    return { task: res.task!, history: res.history };
  }

  /** listDead lists dead tasks matching filter, newest first. */
  async listDead(filter: DeadFilter = {}, page: PageOptions = {}, signal?: AbortSignal): Promise<Page<Task>> {
    const res = await this.#call(() =>
      this.#rpc.listDead({ filter, pageSize: page.pageSize ?? 0, pageToken: page.pageToken ?? "" }, this.#opts(signal)),
    );
    return { items: res.tasks, nextPageToken: res.nextPageToken };
  }

  /** deadGroups groups the dead tasks matching filter by failure fingerprint. */
  async deadGroups(filter: DeadFilter = {}, signal?: AbortSignal): Promise<Group[]> {
    return (await this.#call(() => this.#rpc.deadGroups({ filter }, this.#opts(signal)))).groups;
  }

  /** redrive gives dead tasks a new life with their policy reset, audited with reason. */
  async redrive(opts: RedriveOptions, signal?: AbortSignal): Promise<RedriveResponse> {
    const payload = typeof opts.payload === "string" ? encoder.encode(opts.payload) : opts.payload;
    return this.#call(() =>
      this.#rpc.redrive(
        {
          ids: opts.ids ?? [],
          filter: opts.filter,
          all: opts.all ?? false,
          payload,
          delayMs: BigInt(opts.delayMs ?? 0),
          spreadMs: BigInt(opts.spreadMs ?? 0),
          maxLife: opts.maxLife ?? 0,
          reason: opts.reason,
        },
        this.#opts(signal),
      ),
    );
  }

  /**
   * redriveDryRun counts the dead tasks a redrive with opts would select
   * (by ids, or by filter from the kept per-group counts) and changes
   * nothing.
   */
  async redriveDryRun(opts: Omit<RedriveOptions, "reason">, signal?: AbortSignal): Promise<bigint> {
    let count = 0n;
    if (opts.ids?.length) {
      for (const id of opts.ids) {
        const t = await this.getTask(id, signal);
        if (t.task.status === "DEAD" && (!opts.maxLife || t.task.life < opts.maxLife)) {
          count++;
        }
      }
      return count;
    }
    if (!opts.all && !opts.filter) {
      throw new TypeError("rdq: a redrive selects tasks by ids, filter or all; give one");
    }
    const filter = { ...opts.filter, ...(opts.maxLife ? { lifeBelow: opts.maxLife } : {}) };
    for (const g of await this.deadGroups(filter, signal)) {
      count += g.count;
    }
    return count;
  }

  /** purge deletes dead tasks for good, audited with reason. Exactly one of ids, filter or all. */
  async purge(opts: { ids?: string[]; filter?: DeadFilter; all?: boolean; reason: string }, signal?: AbortSignal): Promise<bigint> {
    const res = await this.#call(() =>
      this.#rpc.purge({ ids: opts.ids ?? [], filter: opts.filter, all: opts.all ?? false, reason: opts.reason }, this.#opts(signal)),
    );
    return res.purged;
  }

  /** listTasks lists live tasks in a state, with the DLQ's filters and paging. */
  async listTasks(state: LiveState, filter: TaskFilter = {}, page: PageOptions = {}, signal?: AbortSignal): Promise<Page<Task>> {
    const res = await this.#call(() =>
      this.#rpc.listTasks({ state, filter, pageSize: page.pageSize ?? 0, pageToken: page.pageToken ?? "" }, this.#opts(signal)),
    );
    return { items: res.tasks, nextPageToken: res.nextPageToken };
  }

  /** retryNow makes waiting tasks due at once. */
  async retryNow(ids: string[], reason: string, signal?: AbortSignal): Promise<ChangeTasksResponse> {
    return this.#call(() => this.#rpc.retryTasks({ ids, reason }, this.#opts(signal)));
  }

  /** cancel sends waiting tasks to the dead-letter queue with a CANCELLED attempt, audited. */
  async cancel(ids: string[], reason: string, signal?: AbortSignal): Promise<ChangeTasksResponse> {
    return this.#call(() => this.#rpc.cancelTasks({ ids, reason }, this.#opts(signal)));
  }

  /** pause stops every worker claiming from queue until resume. */
  async pause(queue: string, reason: string, signal?: AbortSignal): Promise<void> {
    await this.#call(() => this.#rpc.pauseQueue({ queue, reason }, this.#opts(signal)));
  }

  /** resume lets workers claim from queue again. */
  async resume(queue: string, reason: string, signal?: AbortSignal): Promise<void> {
    await this.#call(() => this.#rpc.resumeQueue({ queue, reason }, this.#opts(signal)));
  }

  /** queueStats counts each queue's tasks by state. */
  async queueStats(succeededWindowMs = 0, signal?: AbortSignal): Promise<QueueStat[]> {
    return (await this.#call(() => this.#rpc.queueStats({ succeededWindowMs: BigInt(succeededWindowMs) }, this.#opts(signal)))).queues;
  }

  /** breakers lists the circuit breakers of queue ("" for every queue). */
  async breakers(queue = "", signal?: AbortSignal): Promise<Breaker[]> {
    return (await this.#call(() => this.#rpc.listBreakers({ queue }, this.#opts(signal)))).breakers;
  }

  /** setBreaker opens or closes a (queue, handler) breaker by hand; state is "open" or "closed". */
  async setBreaker(
    opts: { queue: string; handler: string; state: "open" | "closed"; coolOffMs?: number; reason: string },
    signal?: AbortSignal,
  ): Promise<boolean> {
    const res = await this.#call(() =>
      this.#rpc.setBreaker(
        { queue: opts.queue, handler: opts.handler, state: opts.state, coolOffMs: BigInt(opts.coolOffMs ?? 0), reason: opts.reason },
        this.#opts(signal),
      ),
    );
    return res.changed;
  }

  /** audit lists audit entries, newest first. */
  async audit(
    opts: { actor?: string; action?: string; since?: Date; until?: Date } & PageOptions = {},
    signal?: AbortSignal,
  ): Promise<Page<AuditEntry>> {
    const res = await this.#call(() =>
      this.#rpc.listAudit(
        {
          actor: opts.actor ?? "",
          action: opts.action ?? "",
          since: opts.since ? timestampFromDate(opts.since) : undefined,
          until: opts.until ? timestampFromDate(opts.until) : undefined,
          pageSize: opts.pageSize ?? 0,
          pageToken: opts.pageToken ?? "",
        },
        this.#opts(signal),
      ),
    );
    return { items: res.entries, nextPageToken: res.nextPageToken };
  }

  /** workers lists the registered workers and the handlers no running worker serves. */
  async workers(queue = "", signal?: AbortSignal): Promise<ListWorkersResponse> {
    return this.#call(() => this.#rpc.listWorkers({ queue }, this.#opts(signal)));
  }
}
