"""The bridge between the feature table and the models: a table row becomes a `Workload`
(`perfmodel.codec.workload_from_row`, re-exported here), and a workload plus its analytic
estimate becomes the learned model's feature vector. Training and prediction both go through
`feature_vector`, so they can never disagree on a feature.

Two views of many vectors: `feature_frame` (a pandas DataFrame, categoricals as pandas
categories: training and evaluation) and `feature_matrix` (a 2-D numpy array with the integer
category codes that frame would carry: what `perfmodel predict` hands LightGBM, so a prediction
never imports pandas). LightGBM gives both the same predictions (tests/test_cold_start.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from perfmodel.analytic import AnalyticEstimate, estimate, peak_memory
from perfmodel.analytic.traffic import is_fused
from perfmodel.codec import is_missing, recorded, workload_from_row
from perfmodel.errors import PerfModelError
from perfmodel.workload import (
    ARCHS,
    ATTENTION_KERNELS,
    FRAMEWORKS,
    OPTIMIZERS,
    PRECISIONS,
    STRATEGIES,
    TrainingSpec,
    Workload,
)

NUMERIC_FEATURES: tuple[str, ...] = (
    "log_params_total",
    "log_params_matmul",
    "trainable_fraction",
    "hidden_size",
    "num_layers",
    "num_heads",
    "kv_head_ratio",
    "log_seq_len",
    "log_micro_batch_size",
    "grad_accum_steps",
    "log_tokens_per_micro_batch",
    "log_arithmetic_intensity",
    "lora_r",
    "quantization_bits",
    "activation_checkpointing",
    "moe_active_fraction",
    "log_peak_tflops",
    "log_hbm_bandwidth_gb_per_s",
    "memory_gb",
    "sm_count",
    "log_intra_node_bandwidth_gb_per_s",
    "release_year",
    "num_gpus",
    "log_num_gpus",
    "num_nodes",
    "data_parallel",
    "tensor_parallel",
    "pipeline_parallel",
    "context_parallel",
    "compute_share_of_bound",
    "memory_share_of_bound",
    "comm_share_of_bound",
    "memory_fill_fraction",
    "includes_optimizer_step",
    "log_bound_over_busy",
    "log_bound_s",
    "nonmatmul_share_of_bound",
    "host_share_of_bound",
    "dequant_share_of_bound",
    "optimizer_share_of_bound",
    "log_floor_over_bound",
    "torch_compile",
    "fused_elementwise",
)
"""Numeric features the learned model sees (ratios and logs so they transfer across scales)."""

CATEGORICAL_FEATURES: tuple[str, ...] = (
    "arch",
    "compute_dtype",
    "precision",
    "strategy",
    "framework",
    "vendor",
    "optimizer",
    "attention_kernel",
)
"""Categorical features (LightGBM native categories)."""

FEATURE_NAMES: tuple[str, ...] = NUMERIC_FEATURES + CATEGORICAL_FEATURES


def feature_vector(
    w: Workload, est: AnalyticEstimate, *, includes_optimizer_step: bool = True
) -> dict[str, Any]:
    """The learned model's inputs for one workload."""
    m, t, par, g = w.model, w.training, w.parallel, w.gpu
    p = est.params
    bound = est.t_bound_s
    busy = max(est.t_compute_s, est.t_memory_s)
    tokens_per_micro = t.micro_batch_size * (t.seq_len if m.is_transformer else 1)
    capacity = g.memory_gb or 1.0
    return {
        "log_params_total": math.log10(max(p.total, 1.0)),
        "log_params_matmul": math.log10(max(p.matmul_active, 1.0)),
        "trainable_fraction": p.trainable / p.total if p.total else 1.0,
        "hidden_size": float(m.hidden_size or 0),
        "num_layers": float(m.num_layers or 0),
        "num_heads": float(m.num_heads or 0),
        "kv_head_ratio": (m.kv_heads / m.num_heads) if m.num_heads else 1.0,
        "log_seq_len": math.log2(t.seq_len) if m.is_transformer else 0.0,
        "log_micro_batch_size": math.log2(t.micro_batch_size),
        "grad_accum_steps": float(t.grad_accum_steps),
        "log_tokens_per_micro_batch": math.log2(tokens_per_micro),
        "log_arithmetic_intensity": math.log10(max(est.arithmetic_intensity, 1e-6)),
        "lora_r": float(t.lora_r or 0),
        "quantization_bits": float(t.quantization_bits or 0),
        "activation_checkpointing": float(t.activation_checkpointing),
        "moe_active_fraction": m.experts_per_token / m.num_experts,
        "log_peak_tflops": math.log10(max(est.peak_tflops, 1e-6)),
        "log_hbm_bandwidth_gb_per_s": math.log10(max(est.mem_bw_gb_per_s, 1e-6)),
        "memory_gb": float(g.memory_gb),
        "sm_count": float(g.sm_count),
        "log_intra_node_bandwidth_gb_per_s": math.log10(max(g.intra_node_bandwidth_gb_per_s, 1e-3)),
        "release_year": float(g.release_year),
        "num_gpus": float(par.num_gpus),
        "log_num_gpus": math.log2(par.num_gpus),
        "num_nodes": float(par.num_nodes),
        "data_parallel": float(par.data_parallel),
        "tensor_parallel": float(par.tensor_parallel),
        "pipeline_parallel": float(par.pipeline_parallel),
        "context_parallel": float(par.context_parallel),
        "compute_share_of_bound": est.t_compute_s / bound,
        "memory_share_of_bound": est.t_memory_s / bound,
        "comm_share_of_bound": est.t_comm_exposed_s / bound,
        "memory_fill_fraction": _recorded_memory_gb(w, est) / capacity,
        "includes_optimizer_step": float(includes_optimizer_step),
        "log_bound_over_busy": math.log10(bound / busy) if busy else 0.0,
        "log_bound_s": math.log10(bound),
        "nonmatmul_share_of_bound": est.t_nonmatmul_s / bound,
        "host_share_of_bound": est.t_host_s / bound,
        "dequant_share_of_bound": est.t_dequant_s / bound,
        "optimizer_share_of_bound": est.t_optimizer_s / bound,
        "log_floor_over_bound": math.log10(est.t_roofline_s / bound),
        "torch_compile": float(t.torch_compile),
        "fused_elementwise": float(is_fused(w)),
        "arch": m.arch,
        "compute_dtype": t.compute_dtype,
        "precision": t.precision,
        "strategy": par.strategy,
        "framework": w.framework if w.framework in FRAMEWORKS else "other",
        "vendor": g.vendor,
        "optimizer": t.optimizer,
        "attention_kernel": t.attention_kernel,
    }


def feature_frame(items: Iterable[tuple[Workload, AnalyticEstimate, bool]]) -> Any:
    """A DataFrame of feature vectors (categoricals as pandas categories with fixed levels)."""
    import pandas as pd

    rows = [feature_vector(w, e, includes_optimizer_step=opt) for w, e, opt in items]
    frame = pd.DataFrame(rows, columns=list(FEATURE_NAMES))
    return categorize(frame)


CATEGORY_LEVELS: dict[str, tuple[str, ...]] = {
    "arch": ARCHS,
    "compute_dtype": tuple(dict.fromkeys(TrainingSpec(precision=p).compute_dtype for p in PRECISIONS)),
    "precision": PRECISIONS,
    "strategy": STRATEGIES,
    "framework": (*FRAMEWORKS, "other"),
    "vendor": ("nvidia", "amd", "intel", "cpu"),  # GPUSpec.vendor
    "optimizer": OPTIMIZERS,
    "attention_kernel": ATTENTION_KERNELS,
}
"""Levels of each categorical feature, in the order the shipped model's category codes use
(perfmodel.workload's constants; a new level appends, never reorders)."""


def category_code(name: str, value: Any, levels: Sequence[str] | None = None) -> float:
    """The code pandas gives `value` in a categorical feature `name` with categories `levels`
    (default `CATEGORY_LEVELS[name]`): its position, or NaN when it is missing or is not a level
    of `CATEGORY_LEVELS[name]` (pandas makes such a value NaN before any re-coding)."""
    order = CATEGORY_LEVELS[name] if levels is None else levels
    if not isinstance(value, str) or value not in CATEGORY_LEVELS[name] or value not in order:
        return math.nan
    return float(list(order).index(value))


def categorized(row: Mapping[str, Any]) -> dict[str, Any]:
    """A feature vector as a record of its `feature_frame`: a categorical value that is not one of
    `CATEGORY_LEVELS` becomes NaN, as `pd.Categorical` makes it."""
    out = dict(row)
    for name, levels in CATEGORY_LEVELS.items():
        if name in out and not (isinstance(out[name], str) and out[name] in levels):
            out[name] = math.nan
    return out


def feature_matrix(
    rows: Sequence[Mapping[str, Any]],
    names: Sequence[str] = FEATURE_NAMES,
    levels: Mapping[str, Sequence[str]] | None = None,
) -> Any:
    """Feature vectors as a 2-D float64 numpy array, columns in `names` order: numeric features
    as floats (None -> NaN), categorical ones as `category_code` with `levels[name]` (default
    `CATEGORY_LEVELS`; a LightGBM booster's own `pandas_categorical` where it differs). This is
    the array LightGBM builds from a `feature_frame` itself, without pandas."""
    import numpy as np

    levels = levels or {}
    out = np.empty((len(rows), len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        if name in CATEGORY_LEVELS:
            order = levels.get(name)
            out[:, j] = [category_code(name, row.get(name), order) for row in rows]
        else:
            out[:, j] = [math.nan if row.get(name) is None else float(row[name]) for row in rows]
    return out


def categorize(frame: Any) -> Any:
    import pandas as pd

    for name, levels in CATEGORY_LEVELS.items():
        values = frame[name].where(frame[name].isin(levels))  # an unknown level is missing, not an error
        frame[name] = pd.Categorical(values, categories=list(levels))
    return frame


def rows_to_training_data(table: Any) -> tuple[Any, Any, Any, dict[str, int]]:
    """From the feature table to (X, y, kept_table, skipped_reasons).

    y = log(measured step time / analytic bound). Only rows with status 'ok' and a positive
    step time are used; rows that cannot be turned into a workload (a dimension the cost model
    needs is empty, a value out of range, an unknown accelerator) are skipped and counted by
    reason, e.g. "DataError: a decoder row needs 'seq_len' and it is empty".
    """
    import numpy as np
    import pandas as pd

    items = []
    targets = []
    keep = []
    skipped: dict[str, int] = {}
    for idx, row in enumerate(table.to_dict("records")):
        if str(row.get("status")) != "ok":
            skipped["status not ok"] = skipped.get("status not ok", 0) + 1
            continue
        step = row.get("step_time_s")
        if is_missing(step) or float(step) <= 0:
            skipped["no step time"] = skipped.get("no step time", 0) + 1
            continue
        try:
            w = workload_from_row(row)
            est = estimate(w)
        except (PerfModelError, ZeroDivisionError, ValueError) as exc:
            reason = type(exc).__name__ + ": " + str(exc).split(";")[0][:60]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        opt = row.get("includes_optimizer_step")
        items.append((w, est, True if is_missing(opt) else bool(opt)))
        targets.append(math.log(float(step) / est.t_bound_s))
        keep.append(idx)
    X = feature_frame(items) if items else pd.DataFrame(columns=list(FEATURE_NAMES))
    y = np.asarray(targets, dtype=float)
    kept = table.iloc[keep].reset_index(drop=True)
    return X, y, kept, skipped


def _recorded_memory_gb(w: Workload, est: AnalyticEstimate) -> float:
    """The device memory of `w` as a feature-table row records it (perfmodel.codec.recorded: no
    dropout, optimizer-state format, step in backward, checkpointing policy or LoRA dropout), so
    that the learned model sees the feature it was trained on and a row of the same run agrees."""
    row_view = recorded(w)
    return est.memory.total_gb if row_view is w else peak_memory(row_view).total_gb
