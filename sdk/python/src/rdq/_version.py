"""The version of this package, as pyproject.toml states it (a test keeps them equal)."""

__version__ = "0.1.0"
