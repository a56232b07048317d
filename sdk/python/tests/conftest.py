"""Fixtures shared by the tests; the helpers are in harness.py."""

from harness import free_port, server_binary

__all__ = ["free_port", "server_binary"]
