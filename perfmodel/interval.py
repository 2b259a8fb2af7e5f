"""A predicted value with its interval (`Interval`), and the physics floor no step time goes below.
Every prediction, decision and ETA carries its numbers as Intervals."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A predicted value with its interval at the prediction's confidence level."""

    estimate: float
    low: float
    high: float

    def scaled(self, factor: float) -> Interval:
        return Interval(estimate=self.estimate * factor, low=self.low * factor, high=self.high * factor)

    def inverted(self, numerator: float) -> Interval:
        """numerator / self (a rate from a time): low and high swap."""
        return Interval(
            estimate=numerator / self.estimate, low=numerator / self.high, high=numerator / self.low
        )

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def floored(step: Interval, floor_s: float) -> tuple[Interval, bool]:
    """`step` never faster than the roofline floor (physics: no step beats the hardware's peak
    FLOPs and bandwidth, so throughput and MFU are capped); True when the estimate itself moved."""
    if step.low >= floor_s:
        return step, False
    moved = step.estimate < floor_s
    return Interval(estimate=max(step.estimate, floor_s), low=floor_s, high=max(step.high, floor_s)), moved
