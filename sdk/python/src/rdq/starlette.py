"""Starlette and FastAPI helpers (needs the ``starlette`` extra)."""

from __future__ import annotations

from starlette.routing import Route

from .execution import Handler
from .receiver import CallbackReceiver


def callback_route(path: str, secret: str | bytes, handler: Handler, *, deadline: float = 8.0) -> Route:
    """A POST route at path that receives rdq's callbacks with a CallbackReceiver.

    Add it to a Starlette app's routes, or to FastAPI's with
    ``app.router.routes.append(callback_route(...))``.
    """
    return Route(path, CallbackReceiver(secret, handler, deadline=deadline), methods=["POST"])
