"""`perfmodel predict --memory exact`: the allocated peak counted by the FakeTensor oracle
(perfmodel.measure.memory_oracle: one real training step of the workload's model under
`FakeTensorMode` with PyTorch's memory tracker, on the CPU) in place of the analytic model's.

The oracle's count becomes the allocated peak with the interval `ORACLE_INTERVAL` (x1.00-x1.03:
exact for the step it runs, and a real run allocates 1-3% more beside it); reserved and the device
total are computed from it by the analytic model's own rule (perfmodel.analytic.memory
`with_allocated`), so the verdict and the fit suggestions follow from it as they do from the
analytic estimate. Where the oracle cannot run the workload (`unsupported_reason`, PyTorch or
transformers not installed, a step it fails on) this is an `UnsupportedError`, one line: an
explicit `exact` never falls back to the analytic estimate (docs/memory.md says why).

This module does not import torch: `exact_memory` loads the oracle when it runs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from perfmodel.analytic.memory import ORACLE_INTERVAL, PARTS, MemoryBreakdown, with_allocated
from perfmodel.errors import UnsupportedError, clip
from perfmodel.workload import Workload

Progress = Callable[[str], None]
"""Where progress lines go (the CLI: stderr); None: nowhere."""
HEARTBEAT_S = 10.0
"""Seconds between 'still running' lines while the oracle runs."""
HINT = "drop --memory exact for the analytic estimate"
PARTS_OF_KIND = {"parameters": "weights", "buffers": "weights", "gradients": "gradients", "optimizer": "optimizer",
                 "activations": "activations", "temporary": "temporary"}  # fmt: skip
"""MemTracker's kinds (OracleMemory.at_peak_gb) -> the allocated peak's parts (any other kind, e.g.
'other': temporary)."""


@dataclass(frozen=True, kw_only=True)
class ExactMemory:
    """The oracle's count of one run's memory, as a prediction uses it."""

    breakdown: MemoryBreakdown
    """The oracle's allocated peak by part, with reserved and device total computed from it."""
    oracle_gb: float
    """The oracle's allocated peak (GB)."""
    analytic_gb: float
    """The analytic model's allocated peak of the same run (GB)."""
    seconds: float
    """Wall time of the oracle, loading PyTorch included (s)."""
    step_seconds: float
    """Of which the fake training step itself (s)."""
    model: str
    """What the oracle built."""
    at_peak_gb: dict[str, float] = field(default_factory=dict)
    """What was allocated at the peak, by MemTracker's kinds (GB)."""

    @property
    def scale(self) -> float:
        """Oracle over analytic allocated peak (1 when the analytic one is 0)."""
        return self.oracle_gb / self.analytic_gb if self.analytic_gb > 0 else 1.0

    def assumption(self) -> str:
        lo, hi = ORACLE_INTERVAL
        return (
            f"memory: the allocated peak is the FakeTensor oracle's ({self.oracle_gb:.2f} GB: one training step "
            f"of {self.model} under FakeTensorMode with MemTracker on this CPU, {self.seconds:.1f} s), interval "
            f"x{lo:.2f}-x{hi:.2f} (a real run allocates 1-3% more); reserved and device total from it by the "
            f"analytic rule; the analytic model gives {self.analytic_gb:.2f} GB ({(self.scale - 1) * 100:+.2f}%)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "peak_allocated_gb": self.oracle_gb,
            "analytic_peak_allocated_gb": self.analytic_gb,
            "at_peak_gb": dict(self.at_peak_gb),
            "model": self.model,
            "seconds": self.seconds,
            "step_seconds": self.step_seconds,
        }


def exact_memory(w: Workload, analytic: MemoryBreakdown, progress: Progress | None = None) -> ExactMemory:
    """Run the oracle on `w` and put its count in place of `analytic` (the analytic estimate of
    `w`). Raises UnsupportedError (one line) when the oracle cannot run `w`."""
    started = time.perf_counter()
    say = progress or (lambda _line: None)
    say("memory: loading PyTorch for the FakeTensor oracle (--memory exact)...")
    try:
        # torch (heavy, optional): loaded only when the oracle runs
        from perfmodel.measure import memory_oracle
    except ImportError as exc:
        raise UnsupportedError(f"--memory exact needs PyTorch ({clip(str(exc), 120)}); {HINT}") from None
    reason = memory_oracle.unsupported_reason(w)
    if reason:
        raise UnsupportedError(f"--memory exact: the FakeTensor oracle cannot run this config: {reason}; {HINT}")
    say(
        f"memory: running one training step of {w.model.name or 'the model'} under FakeTensorMode on the CPU "
        "(no real memory is used; tens of seconds for a 7B model on 2 cores)..."
    )
    with _heartbeat(say, started):
        try:
            oracle = memory_oracle.oracle_memory(w)
        except Exception as exc:  # noqa: BLE001 - the oracle runs transformers' and torch's own code: any failure is one line
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise UnsupportedError(
                f"--memory exact: the FakeTensor oracle failed on this config ({type(exc).__name__}: "
                f"{clip(first, 200)}); {HINT}"
            ) from None
    parts = dict.fromkeys(PARTS, 0.0)
    for kind, gb in oracle.at_peak_gb.items():
        parts[PARTS_OF_KIND.get(kind, "temporary")] += gb
    breakdown = with_allocated(w, analytic, parts, interval=ORACLE_INTERVAL, paged_gb=oracle.paged_gb)
    seconds = time.perf_counter() - started
    say(f"memory: the oracle counted {breakdown.allocated_gb:.2f} GB allocated at the peak ({seconds:.1f} s)")
    return ExactMemory(
        breakdown=breakdown,
        oracle_gb=breakdown.allocated_gb,
        analytic_gb=analytic.allocated_gb,
        seconds=seconds,
        step_seconds=oracle.seconds,
        model=oracle.model,
        at_peak_gb=dict(oracle.at_peak_gb),
    )


@contextlib.contextmanager
def _heartbeat(say: Progress, started: float, every_s: float = HEARTBEAT_S) -> Iterator[None]:
    """A 'still running' line every `every_s` seconds while the block runs."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(every_s):
            say(f"memory: the oracle is still running ({time.perf_counter() - started:.0f} s)")

    thread = threading.Thread(target=beat, name="memory-oracle-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
