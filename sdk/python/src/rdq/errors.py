"""Typed errors of the rdq client, each with rdq's stable error code."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import grpc

#: The domain of the google.rpc.ErrorInfo detail in which rdq-server puts its
#: stable error code.
ERROR_DOMAIN = "rdq"


class RdqError(Exception):
    """A call rdq-server refused or could not answer.

    ``code`` is rdq's stable error code ("invalid_argument",
    "permission_denied", "not_dead", ...), the same on REST and gRPC;
    ``grpc_code`` the transport's status. The message says what was wrong
    and what to do.
    """

    def __init__(self, message: str, code: str, grpc_code: grpc.StatusCode) -> None:
        super().__init__(message)
        self.code = code
        self.grpc_code = grpc_code


class InvalidError(RdqError):
    """The request was malformed: fix the field the message names."""


class UnauthenticatedError(RdqError):
    """The token is missing or unknown: configure a valid bearer token."""


class ForbiddenError(RdqError):
    """The principal lacks the role the call needs on the queue."""


class NotFoundError(RdqError):
    """The task does not exist, or is not visible to the principal."""


class ConflictError(RdqError):
    """The task is not in the state the call needs (not dead, not waiting, at its redrive limit)."""


class UnavailableError(RdqError):
    """rdq-server or its store could not answer now: retry with backoff."""


class DuplicateError(RdqError):
    """The idempotency key is taken on the queue; ``task_id`` holds it.

    Raised only when the caller asked for it (``reject_duplicate=True``).
    """

    def __init__(self, message: str, task_id: str) -> None:
        super().__init__(message, "duplicate", grpc.StatusCode.ALREADY_EXISTS)
        self.task_id = task_id


_BY_STATUS: dict[grpc.StatusCode, type[RdqError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: InvalidError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: ForbiddenError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: ConflictError,
    grpc.StatusCode.ALREADY_EXISTS: ConflictError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: UnavailableError,
}

_STATUS_OF_CODE: dict[str, grpc.StatusCode] = {
    "invalid_argument": grpc.StatusCode.INVALID_ARGUMENT,
    "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "permission_denied": grpc.StatusCode.PERMISSION_DENIED,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "method_not_allowed": grpc.StatusCode.UNIMPLEMENTED,
    "not_dead": grpc.StatusCode.FAILED_PRECONDITION,
    "redrive_limit": grpc.StatusCode.FAILED_PRECONDITION,
    "not_pending": grpc.StatusCode.FAILED_PRECONDITION,
    "payload_too_large": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "unsupported_media_type": grpc.StatusCode.INVALID_ARGUMENT,
    "canceled": grpc.StatusCode.CANCELLED,
    "deadline_exceeded": grpc.StatusCode.DEADLINE_EXCEEDED,
    "unimplemented": grpc.StatusCode.UNIMPLEMENTED,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "internal": grpc.StatusCode.INTERNAL,
}

_HINTS: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.UNAUTHENTICATED: "check the bearer token given to the client",
    grpc.StatusCode.PERMISSION_DENIED: "ask an admin for a role on this queue that allows the call",
    grpc.StatusCode.UNAVAILABLE: "rdq-server could not be reached or is overloaded; retry with backoff",
    grpc.StatusCode.DEADLINE_EXCEEDED: "the call did not finish in time; retry, or raise the timeout",
}


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """Returns the length-delimited fields of a protobuf message; others are skipped."""
    out: list[tuple[int, bytes]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            varint()
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n = varint()
            out.append((field, data[i : i + n]))
            i += n
        else:
            raise ValueError(f"wire type {wire}")
    return out


def _reason(status_details: bytes) -> str:
    """The rdq code in a google.rpc.Status's ErrorInfo detail, or ""."""
    try:
        for field, any_msg in _fields(status_details):
            if field != 3:
                continue
            parts = dict(_fields(any_msg))
            if not parts.get(1, b"").endswith(b"/google.rpc.ErrorInfo"):
                continue
            info = dict(_fields(parts.get(2, b"")))
            if info.get(2, b"").decode() == ERROR_DOMAIN:
                return info.get(1, b"").decode()
    except (IndexError, ValueError, UnicodeDecodeError):
        return ""
    return ""


def _build(message: str, code: str, status: grpc.StatusCode) -> RdqError:
    hint = _HINTS.get(status)
    cls = _BY_STATUS.get(status, RdqError)
    return cls(f"rdq: {message}" + (f" ({hint})" if hint else ""), code, status)


def error_of_code(code: str, message: str) -> RdqError:
    """The RdqError of one of rdq's stable error codes, as a batch item carries it."""
    return _build(message, code, _STATUS_OF_CODE.get(code, grpc.StatusCode.UNKNOWN))


def from_rpc_error(err: grpc.aio.AioRpcError) -> RdqError:
    """Turns a failed call into the matching RdqError subclass."""
    status = err.code()
    reason = ""
    trailers = cast("Iterable[tuple[str, str | bytes]]", err.trailing_metadata() or ())
    for key, value in trailers:
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            reason = _reason(value)
    return _build(err.details() or status.name.lower(), reason or status.name.lower(), status)
