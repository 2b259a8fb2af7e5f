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

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from perfmodel.analytic import AnalyticEstimate, estimate_many, peak_memory
from perfmodel.analytic.activations import resnet_layout
from perfmodel.analytic.step import plan_is_approximate, plan_step
from perfmodel.catalog.frameworks import recipe_of
from perfmodel.codec import is_missing, recorded, workload_from_row
from perfmodel.errors import PerfModelError
from perfmodel.workload import (
    ARCHS,
    ATTENTION_KERNELS,
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
    "recipe_fused_kinds",
    "recipe_fuses_norm",
    "recipe_fuses_activation",
    "recipe_fuses_rotary",
    "recipe_fuses_loss",
    "recipe_native_norm",
    "recipe_optimizer_fused",
    "recipe_loss_chunked",
    "recipe_host_ms_per_micro_batch",
    "matmul_share_of_bound",
    "attention_share_of_bound",
    "norm_share_of_bound",
    "activation_share_of_bound",
    "rotary_share_of_bound",
    "elementwise_share_of_bound",
    "loss_share_of_bound",
    "embedding_share_of_bound",
    "log_launches_per_micro_batch",
    "log_l2_cache_mb",
    "cnn_planned_layer_by_layer",
    "plan_approximate",
)
"""Numeric features the learned model sees (ratios and logs so they transfer across scales)."""

CATEGORICAL_FEATURES: tuple[str, ...] = (
    "arch",
    "compute_dtype",
    "precision",
    "strategy",
    "vendor",
    "optimizer",
    "attention_kernel",
)
"""Categorical features (LightGBM native categories). The training stack enters only through its
recipe (the recipe_* features: what it fuses, its optimizer, its loss), never its name, so a stack
with no training rows is described by what it does (issue 21)."""

FEATURE_NAMES: tuple[str, ...] = NUMERIC_FEATURES + CATEGORICAL_FEATURES
SHARE_KINDS = ("matmul", "attention", "norm", "activation", "rotary", "elementwise", "loss", "embedding")
"""Kernel kinds whose share of the analytic step time is a feature (`AnalyticEstimate.kernel_share`)."""


def feature_vector(
    w: Workload, est: AnalyticEstimate, *, includes_optimizer_step: bool = True
) -> dict[str, Any]:
    """The learned model's inputs for one workload."""
    m, t, par, g = w.model, w.training, w.parallel, w.gpu
    recipe = recipe_of(w)
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
        "torch_compile": float(t.torch_compile or recipe.compile),
        "recipe_fused_kinds": float(len(recipe.fused)),
        "recipe_fuses_norm": float(recipe.fuses("norm") or recipe.native_norm),
        "recipe_fuses_activation": float(recipe.fuses("activation")),
        "recipe_fuses_rotary": float(recipe.fuses("rotary")),
        "recipe_fuses_loss": float(recipe.loss == "fused-linear" or t.fused_cross_entropy),
        "recipe_native_norm": float(recipe.native_norm),
        "recipe_optimizer_fused": {"for-loop": 0.0, "foreach": 1.0, "fused": 2.0}[recipe.optimizer_impl],
        "recipe_loss_chunked": float(recipe.loss == "chunked"),
        "recipe_host_ms_per_micro_batch": recipe.host_s_per_micro_batch * 1e3,
        **{f"{k}_share_of_bound": est.kernel_share(k) for k in SHARE_KINDS},
        "log_launches_per_micro_batch": math.log10(max(est.launches_per_micro_batch, 1.0)),
        "log_l2_cache_mb": math.log10(max(g.l2_cache_mb, 0.01)),
        "cnn_planned_layer_by_layer": float(resnet_layout(w) is not None),
        "plan_approximate": float(plan_is_approximate(m)),
        "arch": m.arch,
        "compute_dtype": t.compute_dtype,
        "precision": t.precision,
        "strategy": par.strategy,
        "vendor": g.vendor,
        "optimizer": t.optimizer,
        "attention_kernel": t.attention_kernel,
    }


def feature_frame(items: Iterable[tuple[Workload, AnalyticEstimate, bool]]) -> Any:
    """A DataFrame of feature vectors (categoricals as pandas categories with fixed levels)."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    rows = [feature_vector(w, e, includes_optimizer_step=opt) for w, e, opt in items]
    frame = pd.DataFrame(rows, columns=list(FEATURE_NAMES))
    return categorize(frame)


CATEGORY_LEVELS: dict[str, tuple[str, ...]] = {
    "arch": ARCHS,
    "compute_dtype": tuple(dict.fromkeys(TrainingSpec(precision=p).compute_dtype for p in PRECISIONS)),
    "precision": PRECISIONS,
    "strategy": STRATEGIES,
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


def frame_records(frame: Any, columns: Sequence[str]) -> list[dict[str, Any]]:
    """`frame[columns].to_dict("records")` (the same Python values: floats, ints, strings, NaN) at
    about half its cost: training reads a fold's rows this way dozens of times."""
    if not columns:
        return [{} for _ in range(len(frame))]
    values = [frame[c].tolist() for c in columns]
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]


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
    # numpy: kept out of import time (the CLI's cold start)
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
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    for name, levels in CATEGORY_LEVELS.items():
        values = frame[name].where(frame[name].isin(levels))  # an unknown level is missing, not an error
        frame[name] = pd.Categorical(values, categories=list(levels))
    return frame


def rows_to_training_data(
    table: Any, efficiency: Any = None, gpus: Mapping[str, Any] | None = None
) -> tuple[Any, Any, Any, dict[str, int]]:
    """From the feature table to (X, y, kept_table, skipped_reasons).

    y = log(measured step time / kernel-model step time) (`efficiency`: the kernel efficiency
    parameters, default the shipped ones; `gpus`: catalog key -> GPUSpec replacing that
    accelerator's spec, e.g. without its measured ceilings). Only rows with status 'ok' and a
    positive step time are used; rows that cannot be turned into a workload (a dimension the cost
    model needs is empty, a value out of range, an unknown accelerator) are skipped and counted by
    reason, e.g. "DataError: a decoder row needs 'seq_len' and it is empty". The workloads and
    step plans of a table are kept for the process (`_candidates`): refitting the kernel model
    in an evaluation fold only prices them again.
    """
    # numpy, pandas: kept out of import time (the CLI's cold start); training only
    import numpy as np
    import pandas as pd

    candidates, skipped = _candidates(table)
    if gpus:
        candidates = [
            (idx, row, dataclasses.replace(w, gpu=gpus[w.gpu.name]) if w.gpu.name in gpus else w, plan)
            for idx, row, w, plan in candidates
        ]
    estimates = _estimates(candidates, efficiency)
    items, targets, keep = [], [], []
    for (idx, row, w, _), est in zip(candidates, estimates, strict=True):
        opt = row.get("includes_optimizer_step")
        items.append((w, est, True if is_missing(opt) else bool(opt)))
        targets.append(math.log(float(row["step_time_s"]) / est.t_bound_s))
        keep.append(idx)
    X = feature_frame(items) if items else pd.DataFrame(columns=list(FEATURE_NAMES))
    y = np.asarray(targets, dtype=float)
    kept = table.iloc[keep].reset_index(drop=True)
    return X, y, kept, dict(skipped)


def planned_rows(table: Any, efficiency: Any = None) -> list[tuple[Workload, AnalyticEstimate]]:
    """(workload, kernel-model estimate) of every row `rows_to_training_data` keeps, in its order
    (the `row` of an evaluation's out-of-fold predictions indexes them)."""
    candidates, _ = _candidates(table)
    return list(zip([c[2] for c in candidates], _estimates(candidates, efficiency), strict=True))


def _estimates(candidates: list[Any], efficiency: Any) -> list[AnalyticEstimate]:
    """`estimate_many` of the candidates' workloads, each distinct workload once: rows of one run
    (its logged windows, repeats) share one plan (`_candidates`)."""
    first: dict[int, int] = {}
    unique = [i for i, c in enumerate(candidates) if c[3] is None or first.setdefault(id(c[3]), i) == i]
    priced = estimate_many([candidates[i][2] for i in unique], efficiency, plans=[candidates[i][3] for i in unique])
    of = dict(zip(unique, priced, strict=True))
    return [of[i] if c[3] is None else of[first[id(c[3])]] for i, c in enumerate(candidates)]


_CANDIDATES: dict[Any, tuple[list[Any], dict[str, int]]] = {}
"""Table content key -> (candidates, skipped) of the last few tables this process read."""


def _candidates(table: Any) -> tuple[list[Any], dict[str, int]]:
    """(index, row, workload, step plan) of every row of `table` whose kernels can be planned, and
    the rows skipped by reason; cached per table content (row ids and step times)."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    key = None
    if "row_id" in table and "step_time_s" in table:
        key = (len(table), int(pd.util.hash_pandas_object(table[["row_id", "step_time_s"]], index=False).sum()))
        if key in _CANDIDATES:
            return _CANDIDATES[key]
    skipped: dict[str, int] = {}
    candidates = []
    plans: dict[str, Any] = {}  # one plan per distinct workload (`_estimates` prices each once)
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
            plan = None
            if w.model.arch != "gbm":
                same = repr(w)  # every field of the workload and its parts
                plan = plans[same] if same in plans else plans.setdefault(same, plan_step(w))
        except (PerfModelError, ZeroDivisionError, ValueError) as exc:
            reason = type(exc).__name__ + ": " + str(exc).split(";")[0][:60]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        candidates.append((idx, row, w, plan))
    if key is not None:
        if len(_CANDIDATES) >= 2:
            _CANDIDATES.pop(next(iter(_CANDIDATES)))
        _CANDIDATES[key] = (candidates, skipped)
    return candidates, skipped


def _recorded_memory_gb(w: Workload, est: AnalyticEstimate) -> float:
    """The device memory of `w` as a feature-table row records it (perfmodel.codec.recorded: no
    dropout, optimizer-state format, step in backward, checkpointing policy or LoRA dropout), so
    that the learned model sees the feature it was trained on and a row of the same run agrees."""
    row_view = recorded(w)
    return est.memory.total_gb if row_view is w else peak_memory(row_view).total_gb
