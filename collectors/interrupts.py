"""Stop signals become Ctrl-C: SIGTERM (what `timeout`, batch schedulers and container stops
send) and SIGHUP (a closed terminal or SSH session) raise `Interrupted`, a KeyboardInterrupt, so
a collection stopped by any of them keeps what it measured, prints its summary and exits as
after Ctrl-C (130). Once the collector is writing what it measured (`finishing`), further stop
signals are ignored so that write completes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
"""Signals handled like Ctrl-C (those this platform has)."""


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived; `signal_name` says which (e.g. 'SIGTERM')."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class StopState:
    """What the handlers know: whether the block is finishing (signals ignored)."""

    def __init__(self) -> None:
        self.finishing = False
        """Set by the caller while it writes what was measured."""
        self.received: list[str] = []
        """Names of the stop signals received, in order."""


def signal_name(exc: BaseException) -> str:
    """'SIGTERM', 'SIGHUP' or 'SIGINT' for an interrupt (a plain KeyboardInterrupt is Ctrl-C)."""
    return exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[StopState]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise `Interrupted` in the main thread
    (ignored once `state.finishing` is set); the previous handlers come back afterwards. Off the
    main thread (where Python cannot install handlers) it changes nothing."""
    state = StopState()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        state.received.append(name)
        if not state.finishing:
            raise Interrupted(name)

    previous = {}
    for name in STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield state
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
