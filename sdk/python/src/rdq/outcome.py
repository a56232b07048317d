"""The outcome contract of a handler: what it raised decides the attempt."""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass
from typing import Literal


class PermanentError(Exception):
    """A failure retrying cannot fix: the task goes to the dead-letter queue at once."""


MAX_RETRY_AFTER = 2**53 / 1000
"""The longest delay a RetryAfterError carries, in seconds; longer ones are cut to it (rdq-server caps it further)."""


class RetryAfterError(Exception):
    """A failed attempt whose next attempt is due no sooner than ``delay`` seconds.

    The delay must be finite; one past MAX_RETRY_AFTER is cut to it.
    """

    def __init__(self, delay: float, message: str) -> None:
        if not (delay >= 0 and math.isfinite(delay)):
            raise ValueError(f"rdq: RetryAfterError needs a finite delay of zero or more seconds, not {delay!r}")
        super().__init__(message)
        self.delay = min(delay, MAX_RETRY_AFTER)


@dataclass(frozen=True)
class Outcome:
    """The outcome of one execution, as rdq records it."""

    kind: Literal["success", "permanent", "retry_after", "retryable"]
    error_type: str = ""
    message: str = ""
    stack: str = ""
    delay: float = 0.0


SUCCESS = Outcome("success")


def outcome_of(exc: BaseException) -> Outcome:
    """Classifies what a handler raised.

    A PermanentError is permanent, a RetryAfterError is retry-after, any
    other exception is retryable with its type name, message and stack.
    """
    stack = "".join(traceback.format_exception(exc))
    name = type(exc).__name__
    if isinstance(exc, PermanentError):
        return Outcome("permanent", name, str(exc), stack)
    if isinstance(exc, RetryAfterError):
        return Outcome("retry_after", name, str(exc), stack, exc.delay)
    return Outcome("retryable", name, str(exc), stack)
