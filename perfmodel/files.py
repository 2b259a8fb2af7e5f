"""Opening a file a user names (a config, a run's progress file, a step table) so that it cannot
hang perfmodel or exhaust its memory: only a regular file of at most a given size is opened.

`open_regular` checks with `os.stat` before opening (a FIFO, /dev/zero, a directory or a socket
is refused by its kind, so a device's size of 0 never passes a size limit), opens non-blocking
(a FIFO swapped in between cannot block), checks the descriptor again, and refuses a file over
the limit. Readers then stream from the handle (or read at most the limit, `read_bounded`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from perfmodel.errors import ConfigError, PerfModelError, clip

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


@contextlib.contextmanager
def open_regular(
    path: str | Path, *, what: str, limit_bytes: int, error: type[PerfModelError] = ConfigError
) -> Iterator[BinaryIO]:
    """A binary handle on the regular file `path` of at most `limit_bytes`; `error` (naming `what`
    and the path, one line) for a missing, special, oversized or unreadable file. Never blocks."""
    p = Path(path).expanduser()
    shown = clip(str(p))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise error(f"{what} {shown} does not exist") from None
    except (OSError, ValueError) as exc:
        why = _why(exc) if isinstance(exc, OSError) else type(exc).__name__
        raise error(f"cannot read {what} {shown}: {why}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{what} {shown} is a directory; give a file")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {shown} is {_kind(st.st_mode)}, not a regular file; give a file")
    if st.st_size > limit_bytes:
        raise error(f"{what} {shown} is {st.st_size:,} bytes; the limit is {limit_bytes:,}")
    try:
        fd = os.open(p, _OPEN_FLAGS)
    except OSError as exc:
        raise error(f"cannot read {what} {shown}: {_why(exc)}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped for something else after the first check
            raise error(f"{what} {shown} is {_kind(mode)}, not a regular file; give a file")
        fh = os.fdopen(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_bounded(
    path: str | Path, *, what: str, limit_bytes: int, error: type[PerfModelError] = ConfigError
) -> bytes:
    """The bytes of a regular file of at most `limit_bytes` (`open_regular`'s rules; a file that
    grows past the limit while it is read is refused too)."""
    shown = clip(str(Path(path).expanduser()))
    with open_regular(path, what=what, limit_bytes=limit_bytes, error=error) as fh:
        try:
            data = fh.read(limit_bytes + 1)
        except OSError as exc:
            raise error(f"cannot read {what} {shown}: {_why(exc)}") from None
    if len(data) > limit_bytes:
        raise error(f"{what} {shown} is over {limit_bytes:,} bytes; the limit is {limit_bytes:,}")
    return data
