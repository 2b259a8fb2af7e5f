"""Measurement x model: the probe's measured step time replaces the learned estimate for what was
measured; the model carries only what differs, as the ratio of its predictions for the target and
for the probed workload on this host:

    step_target = measured_mean x predict(target) / predict(probe)

Interval, in log space at the prediction's confidence level:
    half = sqrt(half_measured^2 + (f x half_model)^2)
where half_measured is the Student-t half-width of the measured mean (perfmodel.monitor.eta) and
half_model the learned model's half-width for the target. `f`, the share of the model's
uncertainty the *ratio* keeps, was measured on leave-one-hardware-out out-of-fold predictions
(the 2,983-row feature table and learning code of this checkout on 2026-11-30; method and
script in docs/run.md):
pairs of rows on one held-out accelerator, from one source, family, precision and width
(a probe and its target): the 90th percentile of |log ratio error| over the median 90%
half-width was 0.51 for pairs whose roofline bounds are within a factor e^0.5 = 1.65 (7,527
pairs), 1.22 farther apart (4,490 pairs); 0.77 for pairs on different GPU counts (10,968 pairs)
and 1.14 for the same workload on two different accelerators (990 pairs). So a probe narrows the
interval only when it is close to the target; the errors of the model on two workloads of one
machine are far from perfectly correlated. When the combined interval is not narrower than the
prediction's, the prediction stands and the output says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.prediction import Interval

NEAR_LOG_BOUND_RATIO = 0.5
"""Probe and target whose roofline bounds differ by less than e^0.5 are 'near'."""
RATIO_FRACTION_NEAR = 0.51
RATIO_FRACTION_FAR = 1.22
RATIO_FRACTION_GPU_COUNT = 0.77
RATIO_FRACTION_CROSS_DEVICE = 1.14


def _half(iv: Interval) -> float:
    """Log half-width of an interval (mean of the two sides: analytic intervals are asymmetric)."""
    return (math.log(iv.high / iv.estimate) + math.log(iv.estimate / iv.low)) / 2


@dataclass(frozen=True, kw_only=True)
class Combined:
    """The probe-informed step time."""

    step_time_s: Interval
    """Measured x ratio, with the combined interval."""
    ratio: float
    """predict(target) / predict(probe)."""
    ratio_fraction: float
    """f: the share of the model's half-width the ratio keeps."""
    log_bound_distance: float
    """|log(bound(target) / bound(probe))| per micro-batch."""
    half_measured: float
    """Log half-width from the measured spread."""
    half_model: float
    """Log half-width the model adds for the difference (f x its own)."""
    narrower: bool
    """True when narrower than the prediction's interval (then it replaces it)."""
    reason: str
    """Which rule set f, in words."""


def ratio_fraction(
    *, distance: float, same_device: bool, same_gpu_count: bool, identical: bool
) -> tuple[float, str]:
    """f and the rule that chose it (the module's table)."""
    if identical:
        return 0.0, "the probe ran the target workload itself on the target device: the model carries nothing"
    f = RATIO_FRACTION_NEAR if distance < NEAR_LOG_BOUND_RATIO else RATIO_FRACTION_FAR
    why = f"probe {'near' if distance < NEAR_LOG_BOUND_RATIO else 'far from'} the target (bound ratio e^{distance:.2f})"
    if not same_gpu_count and RATIO_FRACTION_GPU_COUNT > f:
        f, why = RATIO_FRACTION_GPU_COUNT, "the target runs on a different number of GPUs"
    if not same_device and RATIO_FRACTION_CROSS_DEVICE > f:
        f, why = RATIO_FRACTION_CROSS_DEVICE, "the probe ran on another kind of device than the target's"
    return f, why


def combine(
    *,
    measured_s: tuple[float, float, float],
    target: Interval,
    probe: Interval,
    distance: float,
    same_device: bool,
    same_gpu_count: bool,
    identical: bool,
) -> Combined:
    """Measured (estimate, low, high) mean step time of the probe, the model's step-time
    predictions for the target and the probe, and how they differ -> the combined step time."""
    mean, low, high = measured_s
    half_meas = max(math.log(high / mean), math.log(mean / low))
    ratio = target.estimate / probe.estimate
    f, why = ratio_fraction(
        distance=distance, same_device=same_device, same_gpu_count=same_gpu_count, identical=identical
    )
    half_model = f * _half(target)
    half = math.sqrt(half_meas**2 + half_model**2)
    est = mean * ratio
    step = Interval(estimate=est, low=est * math.exp(-half), high=est * math.exp(half))
    return Combined(
        step_time_s=step,
        ratio=ratio,
        ratio_fraction=f,
        log_bound_distance=distance,
        half_measured=half_meas,
        half_model=half_model,
        narrower=half < _half(target),
        reason=why,
    )
