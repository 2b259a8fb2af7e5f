"""The analytic cost model: parameters, FLOPs, bytes, memory, communication, roofline bound.

One module per concern; `estimate(workload)` runs them all. Conventions are pinned in
`conventions.py`. Each architecture family has one cost model, chosen here and nowhere else:
neural networks (`roofline.estimate_neural`) and gradient-boosted trees (`gbm.estimate_gbm`).
"""

from __future__ import annotations

from typing import Any

from perfmodel.analytic.gbm import estimate_gbm, host_memory
from perfmodel.analytic.memory import MemoryBreakdown, estimate_memory
from perfmodel.analytic.roofline import AnalyticEstimate, estimate_neural
from perfmodel.analytic.step import plan_step, price_many
from perfmodel.workload import Workload

__all__ = ["AnalyticEstimate", "estimate", "estimate_many", "peak_memory"]


def estimate(w: Workload, efficiency: Any = None) -> AnalyticEstimate:
    """Run the workload's cost model: the step time from its kernels and everything behind it.
    `efficiency`: kernel efficiency parameters (perfmodel.kernels.efficiency; None: the shipped
    ones), e.g. refitted without an accelerator's kernel data in an evaluation fold."""
    if w.model.arch == "gbm":
        return estimate_gbm(w)
    return estimate_neural(w, efficiency)


def estimate_many(
    workloads: list[Workload], efficiency: Any = None, plans: list[Any] | None = None
) -> list[AnalyticEstimate]:
    """`estimate` of many workloads, their kernels priced in one vectorised pass per accelerator
    (the same numbers as `estimate` one by one; building the training data uses it). `plans`: their
    step plans when already made (None for boosted trees)."""
    neural = [i for i, w in enumerate(workloads) if w.model.arch != "gbm"]
    plans = [plans[i] if plans is not None and plans[i] is not None else plan_step(workloads[i]) for i in neural]
    priced = price_many([(workloads[i], p) for i, p in zip(neural, plans, strict=True)], efficiency)
    out: list[AnalyticEstimate | None] = [None] * len(workloads)
    for i, plan, st in zip(neural, plans, priced, strict=True):
        out[i] = estimate_neural(workloads[i], efficiency, plan=plan, priced=st)
    for i, w in enumerate(workloads):
        if out[i] is None:
            out[i] = estimate(w, efficiency)
    return [e for e in out if e is not None]


def peak_memory(w: Workload) -> MemoryBreakdown:
    """The workload's peak memory per device alone: `estimate(w).memory` without the time terms
    (what a search over micro-batches or GPU counts asks many times)."""
    if w.model.arch == "gbm":
        return host_memory(w)
    return estimate_memory(w)
