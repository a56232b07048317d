"""Submissions written in rdq's JSON wire envelope."""

from __future__ import annotations

import json
from typing import Any

import grpc
from google.protobuf import json_format

from .errors import InvalidError
from .v1 import rdq_pb2

#: The version of the wire envelope this package reads.
ENVELOPE_VERSION = 1


def _invalid(why: str) -> InvalidError:
    return InvalidError(
        f"rdq: the envelope is not a valid submission: {why}", "invalid_argument", grpc.StatusCode.INVALID_ARGUMENT
    )


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _invalid(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def parse_submission(doc: str | bytes) -> rdq_pb2.TaskSpec:
    """Reads a submission in rdq's JSON wire envelope (envelope/testdata/README.md
    in the repository): version 1, queue, handler, base64 payload, content
    type, headers, idempotency key, delay_ms, max_attempts, timeout_ms.

    It raises InvalidError, saying why, for what is not JSON, a key repeated
    in any object, another version, a member a submission does not have and
    a value of the wrong type; the server checks the rest (names, limits)
    when it is submitted.
    """
    try:
        value = json.loads(doc, object_pairs_hook=_no_repeats)
    except InvalidError:
        raise
    except ValueError as exc:
        raise _invalid(f"it is not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise _invalid("it must be a JSON object")
    version = value.get("version")
    if type(version) is not int or version != ENVELOPE_VERSION:
        raise _invalid(f"version must be {ENVELOPE_VERSION}, not {json.dumps(version)}")
    try:
        return json_format.ParseDict(value, rdq_pb2.TaskSpec())
    except json_format.ParseError as exc:
        raise _invalid(str(exc)) from exc
