"""rdq for Python: submit tasks to rdq-server and operate its dead-letter
queue (RdqClient), receive signed HTTP callbacks (CallbackReceiver, an ASGI
app) and host the gRPC HandlerService (serve_handlers)."""

from ._trace import trace_headers
from ._version import __version__
from .client import FirstFailure, LiveState, NewTask, Page, RdqClient, Submitted, TaskHistory
from .envelope import ENVELOPE_VERSION, parse_submission
from .errors import (
    ConflictError,
    DuplicateError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    RdqError,
    UnauthenticatedError,
    UnavailableError,
)
from .execution import Execution, Handler
from .handler_service import HandlerServer, HandlerServicer, serve_handlers
from .outcome import Outcome, PermanentError, RetryAfterError, outcome_of
from .receiver import (
    FAILURE_CONTENT_TYPE,
    FAILURE_VERSION,
    MAX_BODY_BYTES,
    MAX_ERROR_TYPE_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_STACK_BYTES,
    CallbackReceiver,
    failure_body,
)
from .sync import SyncRdqClient
from .v1.rdq_pb2 import DeadFilter, TaskFilter

__all__ = [
    "FAILURE_CONTENT_TYPE",
    "FAILURE_VERSION",
    "MAX_BODY_BYTES",
    "MAX_ERROR_TYPE_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_STACK_BYTES",
    "CallbackReceiver",
    "ConflictError",
    "DeadFilter",
    "ENVELOPE_VERSION",
    "DuplicateError",
    "Execution",
    "FirstFailure",
    "ForbiddenError",
    "Handler",
    "HandlerServer",
    "HandlerServicer",
    "InvalidError",
    "LiveState",
    "NewTask",
    "NotFoundError",
    "Outcome",
    "Page",
    "PermanentError",
    "RdqClient",
    "RdqError",
    "RetryAfterError",
    "Submitted",
    "SyncRdqClient",
    "TaskFilter",
    "TaskHistory",
    "UnauthenticatedError",
    "UnavailableError",
    "__version__",
    "failure_body",
    "outcome_of",
    "parse_submission",
    "serve_handlers",
    "trace_headers",
]
