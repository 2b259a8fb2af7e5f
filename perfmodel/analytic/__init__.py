"""The analytic cost model: parameters, FLOPs, bytes, memory, communication, roofline bound.

One module per concern; `estimate(workload)` runs them all. Conventions are pinned in
`conventions.py`. Each architecture family has one cost model, chosen here and nowhere else:
neural networks (`roofline.estimate_neural`) and gradient-boosted trees (`gbm.estimate_gbm`).
"""

from __future__ import annotations

from perfmodel.analytic.memory import MemoryBreakdown
from perfmodel.analytic.roofline import AnalyticEstimate
from perfmodel.workload import Workload

__all__ = ["AnalyticEstimate", "estimate", "peak_memory"]


def estimate(w: Workload) -> AnalyticEstimate:
    """Run the workload's cost model: the roofline bound of one step and everything behind it."""
    if w.model.arch == "gbm":
        from perfmodel.analytic.gbm import estimate_gbm

        return estimate_gbm(w)
    from perfmodel.analytic.roofline import estimate_neural

    return estimate_neural(w)


def peak_memory(w: Workload) -> MemoryBreakdown:
    """The workload's peak memory per device alone: `estimate(w).memory` without the time terms
    (what a search over micro-batches or GPU counts asks many times)."""
    if w.model.arch == "gbm":
        from perfmodel.analytic.gbm import host_memory

        return host_memory(w)
    from perfmodel.analytic.memory import estimate_memory

    return estimate_memory(w)
