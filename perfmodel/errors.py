"""One error hierarchy. Messages say what was wrong, what is allowed, and how to fix it.

Each subclass also inherits the matching builtin so callers can catch either. A message quotes
user-supplied values through `quote()`, so no value (a 1 MB string, an expanded YAML alias) can
make a message long.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

QUOTE_LIMIT_CHARS = 200
"""Most characters of any one value a message quotes."""

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = QUOTE_LIMIT_CHARS
_REPR.maxother = QUOTE_LIMIT_CHARS
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 6


def quote(value: Any, limit: int = QUOTE_LIMIT_CHARS) -> str:
    """`repr(value)` cut to at most `limit` characters (nested containers and long strings are
    elided with '...'); never walks more of `value` than it prints."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = QUOTE_LIMIT_CHARS) -> str:
    """`text` (a path, a message) cut to at most `limit` characters, unquoted."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class PerfModelError(Exception):
    """Base class of every error perfmodel raises on purpose."""


class ConfigError(PerfModelError, ValueError):
    """A config file, flag or override is missing, unknown or out of range.

    `problems` holds one line per problem when several were found at once (the message then
    lists them all; see `perfmodel.config.problems`)."""

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)


class CatalogError(PerfModelError, KeyError):
    """An unknown model or accelerator name."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if self.args else ""


class DataError(PerfModelError, ValueError):
    """A dataset or feature table that cannot be read or does not match the schema."""


class UnsupportedError(PerfModelError, NotImplementedError):
    """A workload perfmodel has no cost model for (the message names what is unsupported)."""


class NonFiniteError(PerfModelError, ValueError):
    """A computed result is not a finite number (NaN or infinity): never printed as one."""
