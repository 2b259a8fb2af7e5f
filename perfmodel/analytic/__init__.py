"""The analytic cost model: parameters, FLOPs, bytes, memory, communication, roofline bound.

One module per concern; `estimate(workload)` runs them all. Conventions are pinned in
`conventions.py`. Each architecture family has one cost model, chosen here and nowhere else:
neural networks (`roofline.estimate_neural`) and gradient-boosted trees (`gbm.estimate_gbm`).
"""

from __future__ import annotations

from perfmodel.analytic.roofline import AnalyticEstimate
from perfmodel.workload import Workload

__all__ = ["AnalyticEstimate", "estimate"]


def estimate(w: Workload) -> AnalyticEstimate:
    """Run the workload's cost model: the roofline bound of one step and everything behind it."""
    if w.model.arch == "gbm":
        from perfmodel.analytic.gbm import estimate_gbm

        return estimate_gbm(w)
    from perfmodel.analytic.roofline import estimate_neural

    return estimate_neural(w)
