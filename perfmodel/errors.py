"""One error hierarchy. Messages say what was wrong, what is allowed, and how to fix it.

Each subclass also inherits the matching builtin so callers can catch either.
"""

from __future__ import annotations


class PerfModelError(Exception):
    """Base class of every error perfmodel raises on purpose."""


class ConfigError(PerfModelError, ValueError):
    """A config file, flag or override is missing, unknown or out of range."""


class CatalogError(PerfModelError, KeyError):
    """An unknown model or accelerator name."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if self.args else ""


class DataError(PerfModelError, ValueError):
    """A dataset or feature table that cannot be read or does not match the schema."""


class UnsupportedError(PerfModelError, NotImplementedError):
    """A workload perfmodel has no cost model for (the message names what is unsupported)."""


class ModelNotFoundError(PerfModelError, FileNotFoundError):
    """No trained performance model where one was expected."""
