"""A screen of many candidate workloads: total time and cost of each, from one batched call of
the predictor (`perfmodel.prediction.predict_many`), used to order and prune candidates before
the chosen few are predicted in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfmodel.prediction import predict_many
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class Screened:
    """Total time and cost of one candidate."""

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
    use_calibration: bool = True,
) -> list[Screened]:
    out = []
    for pred in predict_many(workloads, confidence=confidence, model_dir=model_dir, use_learned=use_learned,
                             use_calibration=use_calibration):
        out.append(
            Screened(
                total_time_s=pred.total_time_s.estimate,
                total_time_high_s=pred.total_time_s.high,
                cost_usd=pred.cost_usd.estimate if pred.cost_usd is not None else None,
                cost_high_usd=pred.cost_usd.high if pred.cost_usd is not None else None,
            )
        )
    return out
