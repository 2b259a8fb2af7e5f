"""Will it fit: one rule, used by every command (predict, sweep, compare, advise, the service, the
fit suggestions).

The rule compares the device total (allocated peak + the allocator's caching + what lives outside
it: perfmodel.analytic.memory) and its interval with the accelerator's memory:
  * fits: even the interval's high end fits;
  * tight: the estimate fits, the high end does not (it may run out of memory: leave headroom);
  * does not fit: the estimate itself exceeds the memory.
`fits` (the `fits_in_memory` of `predict --json`) is true for "fits" and "tight". The margin is
the memory minus the estimate (negative: missing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.analytic import peak_memory
from perfmodel.analytic.memory import MemoryBreakdown, scaled
from perfmodel.workload import Workload

VERDICTS = ("fits", "tight", "does not fit")


@dataclass(frozen=True, kw_only=True)
class FitVerdict:
    """The fit verdict of one run on one accelerator."""

    verdict: str
    """One of VERDICTS."""
    capacity_gb: float
    """The accelerator's memory (GB, 1e9 bytes); 0: unknown (the verdict is then "fits")."""
    device_gb: float
    """The device total's estimate the verdict compares (GB)."""
    device_low_gb: float
    device_high_gb: float
    margin_gb: float
    """capacity - estimate (GB; negative: missing)."""

    @property
    def fits(self) -> bool:
        """True unless the estimate exceeds the memory ('fits' or 'tight')."""
        return self.verdict != "does not fit"

    def line(self) -> str:
        """One line for people, e.g. 'fits (margin +12.3 GB)'."""
        if not self.capacity_gb:
            return "fits (the accelerator's memory is not known)"
        if self.verdict == "fits":
            return f"fits (margin {self.margin_gb:+.1f} GB)"
        if self.verdict == "tight":
            return (
                f"tight: {self.device_gb:.1f} GB of {self.capacity_gb:.0f} GB fits, but up to "
                f"{self.device_high_gb:.1f} GB may be needed (margin {self.margin_gb:+.1f} GB)"
            )
        return f"does not fit: needs ~{self.device_gb:.1f} GB, {self.capacity_gb:.0f} GB available ({self.margin_gb:+.1f} GB)"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "compares": "device_memory_gb",
            "capacity_gb": self.capacity_gb,
            "device_gb": self.device_gb,
            "device_low_gb": self.device_low_gb,
            "device_high_gb": self.device_high_gb,
            "margin_gb": self.margin_gb,
        }


def decide(device_low_gb: float, device_gb: float, device_high_gb: float, capacity_gb: float) -> FitVerdict:
    """The rule itself (module docstring)."""
    if not capacity_gb:
        verdict = "fits"
    elif device_high_gb <= capacity_gb:
        verdict = "fits"
    elif device_gb <= capacity_gb:
        verdict = "tight"
    else:
        verdict = "does not fit"
    return FitVerdict(
        verdict=verdict, capacity_gb=capacity_gb, device_gb=device_gb, device_low_gb=device_low_gb,
        device_high_gb=device_high_gb, margin_gb=capacity_gb - device_gb,
    )  # fmt: skip


def fit_verdict(memory: MemoryBreakdown, capacity_gb: float) -> FitVerdict:
    """The verdict of a memory estimate on an accelerator of `capacity_gb`."""
    low, estimate, high = memory.ranges()["device"]
    return decide(low, estimate, high, capacity_gb)


def verdict_of(w: Workload, memory_scale: float = 1.0) -> FitVerdict:
    """The verdict of a workload on its own accelerator (the analytic memory model; its allocated
    peak times `memory_scale` when anchored to the oracle: perfmodel.analytic.memory.scaled)."""
    return fit_verdict(scaled(w, peak_memory(w), memory_scale), float(w.gpu.memory_gb))
