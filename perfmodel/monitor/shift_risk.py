"""The level-shift risk of a run: how far its step-time *level* has moved while it ran, beyond what
step-to-step noise explains. An ETA interval for the rest of the run is never narrower than this
(`widen`): a run whose level has moved by 20% may move by as much again.

Rule (stated so a user can check it): after warm-up, cut the per-step times into consecutive
blocks of `eta.SHIFT_WINDOW` intervals and take each block's median of log step times. Their
sample variance, less what step noise alone gives a median of SHIFT_WINDOW values
((1.2533 x robust sd)^2 / SHIFT_WINDOW, the robust sd being 1.4826 x the pooled median absolute
deviation within blocks), is the variance of the level; its square root (a log standard
deviation) is the risk. Below MIN_BLOCKS blocks it is not estimated (0: the Student-t interval of
a short phase is wide already). A run that never moved has risk ~0; one level shift of a factor F
halfway through gives about |ln F| / 2.
"""

from __future__ import annotations

import math

import numpy as np

from perfmodel.monitor import eta
from perfmodel.monitor.intervals import Intervals

MIN_BLOCKS = 3
"""Blocks of SHIFT_WINDOW intervals needed before the risk is estimated."""


def level_shift_risk(intervals: Intervals, warmup: int = 0) -> float:
    """The log standard deviation of the run's level after `warmup` intervals (module rule)."""
    w = eta.SHIFT_WINDOW
    times = Intervals.of(intervals)[warmup:].per_step()
    blocks = len(times) // w
    if blocks < MIN_BLOCKS:
        return 0.0
    with np.errstate(divide="ignore"):
        logs = np.log(np.maximum(times[: blocks * w], 1e-12)).reshape(blocks, w)
    medians = np.median(logs, axis=1)
    robust_sd = 1.4826 * float(np.median(np.abs(logs - medians[:, None])))
    noise_var = (1.2533 * robust_sd) ** 2 / w
    excess = float(np.var(medians, ddof=1)) - noise_var
    return math.sqrt(excess) if excess > 0 else 0.0


def widen(
    estimate: float, low: float, high: float, risk: float, confidence: float
) -> tuple[float, float, float]:
    """(estimate, low, high) with each side at least z x `risk` wide in log space."""
    if risk <= 0 or estimate <= 0:
        return estimate, low, high
    floor = eta.normal_quantile((1 + confidence) / 2) * risk
    return estimate, min(low, estimate * math.exp(-floor)), max(high, estimate * math.exp(floor))
