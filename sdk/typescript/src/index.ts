/**
 * rdq for Node: RdqClient submits tasks to rdq-server and operates its
 * dead-letter queue; createReceiver verifies and runs HTTP callbacks;
 * serveHandlers and handlerRoutes host the gRPC HandlerService.
 *
 * @packageDocumentation
 */
export { RdqClient } from "./client.js";
export type {
  ClientOptions,
  DeadFilter,
  FirstFailure,
  LiveState,
  NewTask,
  Page,
  PageOptions,
  RedriveOptions,
  SubmitOptions,
  Submitted,
  SubmittedItem,
  TaskFilter,
  TaskHistory,
} from "./client.js";
export {
  ConflictError,
  DuplicateError,
  ERROR_DOMAIN,
  errorOfCode,
  ForbiddenError,
  InvalidError,
  NotFoundError,
  RdqError,
  UnauthenticatedError,
  UnavailableError,
} from "./errors.js";
export { ENVELOPE_VERSION, parseSubmission } from "./envelope.js";
export type { Execution, Handler, Logger } from "./execution.js";
export { handlerRoutes, serveHandlers } from "./handlerservice.js";
export type { HandlerServer, HandlerServiceOptions, HandlerTLS } from "./handlerservice.js";
export { PermanentError, RetryAfterError, outcomeOf } from "./outcome.js";
export type { Outcome } from "./outcome.js";
export {
  FAILURE_CONTENT_TYPE,
  FAILURE_VERSION,
  MAX_BODY_BYTES,
  MAX_ERROR_TYPE_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_STACK_BYTES,
  SECRET_PREFIX,
  createReceiver,
  failureBody,
  nodeHandler,
} from "./receiver.js";
export type { CallbackMessage, FailureBody, FetchHandler, ReceiverOptions } from "./receiver.js";
export { traceHeaders } from "./trace.js";
export { VERSION } from "./version.js";
export type { Attempt, AuditEntry, Breaker, Group, QueueStat, Task } from "./gen/rdq/v1/rdq_pb.js";
