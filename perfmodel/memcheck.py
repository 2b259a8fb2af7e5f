"""How right is the analytic memory model? Compare it with published peak-memory measurements
(`perfmodel.paths.peak_memory_path()`, datasets/public/memory/peak_memory.parquet, built by
collectors.public.memory)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.analytic.memory import estimate_memory
from perfmodel.catalog import get_model
from perfmodel.codec import is_missing, model_columns, workload_from_row
from perfmodel.paths import peak_memory_path
from perfmodel.prediction import MEMORY_INTERVAL
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class MemoryCheck:
    table: Any
    """One row per measurement: configuration, measured and predicted GB, error %."""
    median_abs_error_pct: float
    p90_abs_error_pct: float
    within_interval_pct: float
    """Share of measurements inside the predicted memory interval."""


def workload_for(row: dict[str, Any]) -> Workload:
    """The workload of one peak-memory measurement: the catalog model named by model_name, the
    row's own training and parallel settings (perfmodel.codec reads them)."""
    stated = {k: v for k, v in row.items() if not is_missing(v)}
    return workload_from_row({**model_columns(get_model(str(row["model_name"]))), **stated})


def check_memory(path: str | Path | None = None) -> MemoryCheck:
    """Predicted vs measured peak memory per GPU for every row of `path` (default
    `perfmodel.paths.peak_memory_path()`)."""
    # numpy: kept out of import time (the CLI's cold start); pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import numpy as np
    import pandas as pd


    frame = pd.read_parquet(path or peak_memory_path())
    predicted = []
    for row in frame.to_dict("records"):
        predicted.append(estimate_memory(workload_for(row)).total_gb)
    out = frame.copy()
    out["predicted_gb"] = predicted
    out["error_pct"] = (out["predicted_gb"] / out["peak_memory_gb"] - 1) * 100
    lo, hi = MEMORY_INTERVAL
    inside = (out["predicted_gb"] * lo <= out["peak_memory_gb"]) & (
        out["peak_memory_gb"] <= out["predicted_gb"] * hi
    )
    ape = out["error_pct"].abs()
    return MemoryCheck(
        table=out,
        median_abs_error_pct=float(np.median(ape)),
        p90_abs_error_pct=float(np.percentile(ape, 90)),
        within_interval_pct=float(inside.mean() * 100),
    )
