"""One collector per output folder: an exclusive lock on `<out>/.collect.lock` (filelock, an
OS-level flock the kernel drops when the holder dies, so a killed collector never leaves a stale
lock), and a small JSON note beside it naming the holder (pid, host, start time, profile).

Two collectors on one folder would measure the same configurations while slowing each other
down, so the second one refuses by default (`CollectorBusy`, naming the holder) or, asked to,
waits its turn.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from perfmodel.errors import PerfModelError

LOCK_NAME = ".collect.lock"
"""The lock file inside the output folder (kept between runs: waiters share its inode)."""
HOLDER_NAME = ".collect.holder.json"
"""Who holds the lock: written after it is taken, removed before it is released."""
WAIT_POLL_S = 0.25
"""How often a waiting collector retries the lock, in s."""


class CollectorBusy(PerfModelError, RuntimeError):
    """Another collector holds the output folder."""


class OutputDirError(PerfModelError, OSError):
    """The output folder cannot be created or written (a file in its place, no permission)."""


@dataclass(frozen=True, kw_only=True)
class Holder:
    """The collector that holds an output folder."""

    pid: int
    """Process id on `host`."""
    host: str
    """Host name."""
    started_at: str
    """When it took the lock (UTC, ISO 8601, seconds)."""
    profile: str
    """The profile it runs."""

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, profile {self.profile}, since {self.started_at}"


def read_holder(out_dir: str | Path) -> Holder | None:
    """The holder note of `out_dir`, or None when there is none or it cannot be read (a holder
    that has just taken the lock writes it a moment later)."""
    try:
        data = json.loads((Path(out_dir) / HOLDER_NAME).read_text())
        return Holder(
            pid=int(data["pid"]),
            host=str(data["host"]),
            started_at=str(data["started_at"]),
            profile=str(data.get("profile", "?")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ensure_output_dir(out_dir: str | Path) -> Path:
    """Create `out_dir` if needed; OutputDirError (one line) when it is a file or cannot be
    created or written."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"--out {out} is a file, not a folder: pass a folder for the shards")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputDirError(f"the output folder {out} is not writable by this user: pass another --out")
    return out


@contextlib.contextmanager
def hold_output_dir(
    out_dir: str | Path,
    *,
    profile: str,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[Holder]:
    """Hold `out_dir` exclusively for the duration of the block. Another holder: CollectorBusy
    naming it, or with `wait`, block until it is gone (`on_wait` is told once)."""
    # filelock: only when a collection holds the folder
    from filelock import FileLock, Timeout

    out = ensure_output_dir(out_dir)
    lock = FileLock(str(out / LOCK_NAME))
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            other = read_holder(out)
            who = other.describe() if other else "holder unknown: it is just starting"
            if not wait:
                raise CollectorBusy(
                    f"{out} is in use by another collector ({who}); two collectors on one folder slow each "
                    "other and measure the same configurations: wait for it (--wait) or use another --out"
                ) from None
            if on_wait is not None:
                on_wait(f"waiting for the collector holding {out} ({who})")
            lock.acquire(timeout=-1, poll_interval=WAIT_POLL_S)
    except OSError as exc:
        raise OutputDirError(f"cannot lock the output folder {out}: {exc.strerror or exc}") from None
    holder = Holder(
        pid=os.getpid(),
        host=socket.gethostname(),
        started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        profile=profile,
    )
    note = out / HOLDER_NAME
    try:
        tmp = out / f".{HOLDER_NAME}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(asdict(holder)) + "\n")
        os.replace(tmp, note)
        yield holder
    finally:
        with contextlib.suppress(OSError):
            if read_holder(out) == holder:
                note.unlink()
        lock.release()
