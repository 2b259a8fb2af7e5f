"""A fast screen of many candidate workloads: the same point estimate as `predict` (roofline bound x
learned correction, steps, total time, price), computed for all candidates in one batch through the
learned model's public `correct()`. Used only to order and prune candidates; every number that
is shown or checked against a constraint comes from `perfmodel.predict.predict` itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class Screened:
    """Approximate total time and cost of one candidate (see the module docstring)."""

    total_time_s: float
    """Point estimate, s."""
    total_time_high_s: float
    """High end of the interval, s."""
    cost_usd: float | None
    """Point estimate, USD (None without a price)."""
    cost_high_usd: float | None
    """High end, USD."""


def screen(
    workloads: Sequence[Workload],
    *,
    confidence: float = 0.9,
    model_dir: str | Path | None = None,
    use_learned: bool = True,
) -> list[Screened]:
    from perfmodel.analytic import estimate
    from perfmodel.analytic.totals import plan_run, total_time_s
    from perfmodel.decide.cost import price_for
    from perfmodel.predict import ANALYTIC_EFFICIENCY, _load_learned

    if not workloads:
        return []
    ests = [estimate(w) for w in workloads]
    learned = _load_learned(model_dir) if use_learned else None
    if learned is not None:
        corrections = learned.correct(list(zip(workloads, ests, strict=True)), confidence=confidence)
        factors = [(math.exp(c.log_ratio), math.exp(c.log_high)) for c in corrections]
    else:
        lo, mid, _ = ANALYTIC_EFFICIENCY
        factors = [(1 / mid, 1 / lo)] * len(workloads)
    out = []
    for w, est, (mid_f, high_f) in zip(workloads, ests, factors, strict=True):
        plan = plan_run(w, est)
        total = total_time_s(plan, est.t_bound_s * mid_f)
        high = total_time_s(plan, est.t_bound_s * high_f)
        price = price_for(w)
        per_s = w.parallel.num_gpus / 3600.0 * price.usd_per_gpu_hour if price is not None else None
        out.append(
            Screened(
                total_time_s=total,
                total_time_high_s=high,
                cost_usd=total * per_s if per_s is not None else None,
                cost_high_usd=high * per_s if per_s is not None else None,
            )
        )
    return out
