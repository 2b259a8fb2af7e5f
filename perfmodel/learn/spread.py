"""Seed-to-seed spread: how much the protocol's numbers move when only the seeds change (LightGBM
bagging, the early-stopping split, the random split's folds). A difference between two models,
or two datasets, smaller than this spread is not evidence of anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from perfmodel.errors import ConfigError
from perfmodel.learn.evaluate import EvalConfig, evaluate_all
from perfmodel.learn.metrics import HEADLINE_METRIC, HEADLINE_PARTS, SPLITS

Progress = Callable[[str], None]


def _seeded(base: EvalConfig, seed: int, splits: tuple[str, ...]) -> EvalConfig:
    return dataclasses.replace(base, lgbm=dataclasses.replace(base.lgbm, seed=seed), seed=seed, splits=splits)


def seed_spread(
    X: Any,
    y: Any,
    kept: Any,
    *,
    seeds: int = 5,
    splits: tuple[str, ...] = ("random", "unseen_gpu"),
    config: EvalConfig | None = None,
    progress: Progress | None = None,
    kernel_table: Any = None,
) -> Any:
    """Run the protocol `seeds` times (seed k drives LightGBM's bagging and early-stopping split
    and the random split's folds) and return the model's metrics per (seed, split)."""
    if seeds < 2:
        raise ConfigError(f"--seeds must be at least 2 to measure a spread; got {seeds}")
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise ConfigError(f"unknown split(s) {unknown}; choose from {', '.join(SPLITS)}")
    base = config or EvalConfig()
    rows = []
    for seed in range(seeds):
        if progress:
            progress(f"seed {seed + 1}/{seeds}")
        summary = evaluate_all(X, y, kept, _seeded(base, seed, splits), kernel_table=kernel_table).summary
        for rec in summary[summary["method"] == "model"].to_dict("records"):
            rows.append(
                {
                    "seed": seed,
                    "split": rec["split"],
                    "median_ape_pct": rec["median_ape_pct"],
                    "p90_ape_pct": rec["p90_ape_pct"],
                    "coverage90_pct": rec["coverage90_pct"],
                }
            )
    return pd.DataFrame(rows)


def spread_summary(runs: Any) -> Any:
    """Per split and metric: mean, standard deviation, min and max over the seeds."""
    long = runs.melt(id_vars=["seed", "split"], var_name="metric")
    return (
        long.groupby(["split", "metric"], sort=False)["value"]
        .agg(["mean", "std", "min", "max"])
        .reset_index()
    )


@dataclass(frozen=True, kw_only=True)
class HeadlineSpread:
    """The headline metric over several seeds, and the margin a better model must exceed."""

    metric: str
    """Name of the headline metric (percent)."""
    values_pct: tuple[float, ...]
    """The metric for seeds 0, 1, ..., in percent."""

    @property
    def seeds(self) -> int:
        return len(self.values_pct)

    @property
    def range_pct(self) -> float:
        """max - min over the seeds, in percentage points: the margin used by `decide_champion`."""
        return max(self.values_pct) - min(self.values_pct)

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "seeds": self.seeds,
            "values_pct": list(self.values_pct),
            "range_pct": self.range_pct,
        }


def headline_spread(
    X: Any,
    y: Any,
    kept: Any,
    *,
    seeds: int,
    config: EvalConfig | None = None,
    seed0_pct: float | None = None,
    progress: Progress | None = None,
    kernel_table: Any = None,
) -> HeadlineSpread:
    """The headline metric (mean of the leave-one-source-out and accelerator-never-seen median
    APEs) for seeds 0..seeds-1. `seed0_pct`
    is the value of an evaluation already run with `config` (seed 0), which is then not repeated."""
    if seeds < 2:
        raise ConfigError(f"a seed spread needs at least 2 seeds; got {seeds}")
    base = config or EvalConfig()
    values = []
    for seed in range(seeds):
        if seed == 0 and seed0_pct is not None:
            values.append(float(seed0_pct))
            continue
        if progress:
            progress(f"seed spread: seed {seed + 1}/{seeds} ({SPLITS['loso']}, {SPLITS['unseen_gpu']})")
        headline_splits = tuple(part.removesuffix("_median_ape_pct") for part in HEADLINE_PARTS)
        ev = evaluate_all(X, y, kept, _seeded(base, seed, headline_splits), kernel_table=kernel_table)
        values.append(float(ev.metrics()[HEADLINE_METRIC]))
    return HeadlineSpread(metric=HEADLINE_METRIC, values_pct=tuple(values))
