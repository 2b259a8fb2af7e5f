"""How right is the analytic memory model? Compare it with published peak-memory measurements
(datasets/public/memory/peak_memory.parquet, built by collectors.public.memory)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.analytic.memory import estimate_memory
from perfmodel.catalog import get_gpu, get_model
from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

DEFAULT_PATH = Path(__file__).resolve().parents[1] / "datasets" / "public" / "memory" / "peak_memory.parquet"


@dataclass(frozen=True, kw_only=True)
class MemoryCheck:
    table: Any
    """One row per measurement: configuration, measured and predicted GB, error %."""
    median_abs_error_pct: float
    p90_abs_error_pct: float
    within_interval_pct: float
    """Share of measurements inside the predicted memory interval."""


def workload_for(row: dict[str, Any]) -> Workload:
    gpu = get_gpu(str(row["gpu"]))
    return Workload(
        model=get_model(str(row["model_name"])),
        training=TrainingSpec(
            seq_len=int(row["seq_len"]),
            micro_batch_size=int(row["micro_batch_size"]),
            grad_accum_steps=int(row.get("grad_accum_steps") or 1),
            precision=str(row["precision"]),
            activation_checkpointing=bool(row["activation_checkpointing"]),
            fused_cross_entropy=bool(row.get("fused_cross_entropy", False)),
            steps=1,
        ),
        gpu=gpu,
        parallel=ParallelSpec(
            num_gpus=int(row["num_gpus"]),
            num_nodes=gpu.servers_for(int(row["num_gpus"])),
            strategy=str(row["strategy"]),
            tensor_parallel=int(row.get("tensor_parallel") or 1),
            pipeline_parallel=int(row.get("pipeline_parallel") or 1),
            context_parallel=int(row.get("context_parallel") or 1),
            cpu_offload=bool(row.get("cpu_offload", False)),
        ),
        framework=str(row.get("framework", "hf-eager")),
    )


def check_memory(path: str | Path = DEFAULT_PATH) -> MemoryCheck:
    import numpy as np
    import pandas as pd

    from perfmodel.predict import MEMORY_INTERVAL

    frame = pd.read_parquet(path)
    predicted = []
    for row in frame.to_dict("records"):
        predicted.append(estimate_memory(workload_for(row)).total_gb)
    out = frame.copy()
    out["predicted_gb"] = predicted
    out["error_pct"] = (out["predicted_gb"] / out["peak_memory_gb"] - 1) * 100
    lo, hi = MEMORY_INTERVAL
    inside = (out["predicted_gb"] * lo <= out["peak_memory_gb"]) & (out["peak_memory_gb"] <= out["predicted_gb"] * hi)
    ape = out["error_pct"].abs()
    return MemoryCheck(
        table=out,
        median_abs_error_pct=float(np.median(ape)),
        p90_abs_error_pct=float(np.percentile(ape, 90)),
        within_interval_pct=float(inside.mean() * 100),
    )
