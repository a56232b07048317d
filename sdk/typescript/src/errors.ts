import { BinaryReader } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";

/** The domain of the google.rpc.ErrorInfo detail in which rdq-server puts its stable error code. */
export const ERROR_DOMAIN = "rdq";

/**
 * RdqError is every error the client throws for a call rdq-server refused
 * or could not answer. `code` is rdq's stable error code ("invalid_argument",
 * "permission_denied", "not_dead", ...), the same on REST and gRPC;
 * `grpcCode` the transport's status. The message says what was wrong and
 * what to do.
 */
export class RdqError extends Error {
  override name = "RdqError";
  readonly code: string;
  readonly grpcCode: Code;

  constructor(message: string, code: string, grpcCode: Code, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.grpcCode = grpcCode;
  }
}

/** The request was malformed: fix the field the message names; retrying as is fails again. */
export class InvalidError extends RdqError {
  override name = "InvalidError";
}

/** The token is missing, unknown or expired: configure a valid bearer token. */
export class UnauthenticatedError extends RdqError {
  override name = "UnauthenticatedError";
}

/** The token's principal lacks the role the call needs on the queue (submitter ⊂ operator ⊂ admin). */
export class ForbiddenError extends RdqError {
  override name = "ForbiddenError";
}

/** The task (or queue, breaker) does not exist, or is not visible to the principal. */
export class NotFoundError extends RdqError {
  override name = "NotFoundError";
}

/** The task is not in the state the call needs (not dead, not waiting, at its redrive limit). */
export class ConflictError extends RdqError {
  override name = "ConflictError";
}

/** rdq-server or its store could not answer now: retry with backoff. */
export class UnavailableError extends RdqError {
  override name = "UnavailableError";
}

/**
 * A submission whose idempotency key is already taken on its queue, when
 * the caller asked for duplicates to be errors (`SubmitOptions.rejectDuplicate`).
 * `taskId` is the id of the task that holds the key.
 */
export class DuplicateError extends RdqError {
  override name = "DuplicateError";
  readonly taskId: string;

  constructor(message: string, taskId: string) {
    super(message, "duplicate", Code.AlreadyExists);
    this.taskId = taskId;
  }
}

/** reasonOf returns the rdq code of the ErrorInfo detail of err, or "". */
function reasonOf(err: ConnectError): string {
  for (const d of err.details) {
    if (!("type" in d) || d.type !== "google.rpc.ErrorInfo") {
      continue;
    }
    let reason = "";
    let domain = "";
    try {
      const r = new BinaryReader(d.value);
      while (r.pos < r.len) {
        const [field, wireType] = r.tag();
        if (field === 1) {
          reason = r.string();
        } else if (field === 2) {
          domain = r.string();
        } else {
          r.skip(wireType);
        }
      }
    } catch {
      continue; // a malformed detail carries no code
    }
    if (domain === ERROR_DOMAIN) {
      return reason;
    }
  }
  return "";
}

const hints: Partial<Record<Code, string>> = {
  [Code.Unauthenticated]: "check the bearer token given to the client",
  [Code.PermissionDenied]: "ask an admin for a role on this queue that allows the call",
  [Code.Unavailable]: "rdq-server could not be reached or is overloaded; retry with backoff",
  [Code.DeadlineExceeded]: "the call did not finish in time; retry, or raise timeoutMs",
};

type ErrorClass = new (message: string, code: string, grpcCode: Code, options?: { cause?: unknown }) => RdqError;

const byGrpc: Partial<Record<Code, ErrorClass>> = {
  [Code.InvalidArgument]: InvalidError,
  [Code.ResourceExhausted]: InvalidError,
  [Code.Unauthenticated]: UnauthenticatedError,
  [Code.PermissionDenied]: ForbiddenError,
  [Code.NotFound]: NotFoundError,
  [Code.FailedPrecondition]: ConflictError,
  [Code.AlreadyExists]: ConflictError,
  [Code.Unavailable]: UnavailableError,
  [Code.DeadlineExceeded]: UnavailableError,
};

/** The gRPC status of each of rdq's stable error codes (server/errors.go). */
const grpcOfCode: Record<string, Code> = {
  invalid_argument: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  not_found: Code.NotFound,
  method_not_allowed: Code.Unimplemented,
  not_dead: Code.FailedPrecondition,
  redrive_limit: Code.FailedPrecondition,
  not_pending: Code.FailedPrecondition,
  payload_too_large: Code.ResourceExhausted,
  unsupported_media_type: Code.InvalidArgument,
  canceled: Code.Canceled,
  deadline_exceeded: Code.DeadlineExceeded,
  unimplemented: Code.Unimplemented,
  unavailable: Code.Unavailable,
  internal: Code.Internal,
};

function build(message: string, code: string, grpcCode: Code, cause?: unknown): RdqError {
  const hint = hints[grpcCode];
  const Class = byGrpc[grpcCode] ?? RdqError;
  return new Class(`rdq: ${message}${hint ? ` (${hint})` : ""}`, code, grpcCode, cause === undefined ? undefined : { cause });
}

/**
 * errorOfCode returns the RdqError of one of rdq's stable error codes, as
 * a batch item's error carries it.
 */
export function errorOfCode(code: string, message: string): RdqError {
  return build(message, code, grpcOfCode[code] ?? Code.Unknown);
}

/** toRdqError turns what a call threw into the matching RdqError subclass. */
export function toRdqError(e: unknown): RdqError {
  if (e instanceof RdqError) {
    return e;
  }
  const err = ConnectError.from(e);
  const code = reasonOf(err) || Code[err.code].replace(/[A-Z]/g, (c, i: number) => (i ? "_" : "") + c.toLowerCase());
  return build(err.rawMessage, code, err.code, e);
}
