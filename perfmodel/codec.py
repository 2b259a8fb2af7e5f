"""Feature-table row <-> `Workload`: the one place the mapping between the two exists.

    workload_to_row(w, **provenance) -> dict      every workload column, plus what you pass
    workload_from_row(row, *, gpu=None) -> Workload

A row states the workload it measured in the columns of `perfmodel.schema`. Each column below
maps to one field of ModelSpec / TrainingSpec / ParallelSpec (or the Workload's gpu and
framework); `tests/test_codec.py` checks that workload -> row -> workload is the identity for
every field the cost model reads.

Reading a row:
- A row must state what the cost model cannot assume: the columns of REQUIRED_COLUMNS and, by
  architecture, of REQUIRED_BY_ARCH (a transformer row without seq_len, a CNN row without
  forward FLOPs). A row without one raises DataError naming the column; it is never defaulted
  (training counts such rows as a skip reason).
- Every other empty cell takes the field's default in perfmodel.workload: the same default a
  config that omits the setting gets, so a training row and a prediction of the same job agree.
  An empty num_nodes is the number of servers `num_gpus` of that accelerator fill
  (`GPUSpec.servers_for`).
- A row measures one optimizer step: the amount-of-data fields (tokens, samples, epochs,
  eval_fraction) are not stored, and the rebuilt workload has steps=1.
- CPU rows measured by perfmodel itself (source_kind in MEASURED_SOURCE_KINDS, with a
  hardware_id) are rebuilt with the host that measured them and its measured ceilings, not with
  the machine reading them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Mapping
from typing import Any

from perfmodel.catalog import get_gpu, get_measured_host
from perfmodel.catalog.models import model_entries, model_from_entry, resolve_model_key
from perfmodel.errors import DataError, quote
from perfmodel.schema import BY_NAME
from perfmodel.workload import GPUSpec, ModelSpec, ParallelSpec, TrainingSpec, Workload

MODEL_COLUMNS: dict[str, str] = {
    "model_name": "name",
    "model_family": "family",
    "arch": "arch",
    "params_total": "params_total",
    "hidden_size": "hidden_size",
    "num_layers": "num_layers",
    "num_heads": "num_heads",
    "num_kv_heads": "num_kv_heads",
    "head_dim": "head_dim",
    "ffn_hidden_size": "ffn_hidden_size",
    "vocab_size": "vocab_size",
    "gated_mlp": "gated_mlp",
    "tied_embeddings": "tied_embeddings",
    "learned_pos_embeddings": "learned_pos_embeddings",
    "num_experts": "num_experts",
    "experts_per_token": "experts_per_token",
    "forward_gflops_per_sample": "forward_gflops_per_sample",
    "activation_mb_per_sample": "activation_mb_per_sample",
    "gemm_layers": "gemm_layers",
    "attention_layers": "attention_layers",
    "attention_gflops_per_sample": "attention_gflops_per_sample",
    "attention_mscores_per_sample": "attention_mscores_per_sample",
    "depthwise_layers": "depthwise_layers",
    "depthwise_gflops_per_sample": "depthwise_gflops_per_sample",
    "depthwise_melements_per_sample": "depthwise_melements_per_sample",
    "grouped_layers": "grouped_layers",
    "grouped_gflops_per_sample": "grouped_gflops_per_sample",
    "grouped_melements_per_sample": "grouped_melements_per_sample",
    "embedding_params": "embedding_params",
    "embedding_lookups_per_sample": "embedding_lookups_per_sample",
    "embedding_dim": "embedding_dim",
    "part_layers": "part_layers",
    "part_tokens": "part_tokens",
    "part_hidden_size": "part_hidden_size",
    "part_num_heads": "part_num_heads",
    "part_ffn_size": "part_ffn_size",
    "part_inputs": "part_inputs",
    "part_input_width": "part_input_width",
    "part_vocab_size": "part_vocab_size",
}
"""Feature-table column -> ModelSpec field."""

TRAINING_COLUMNS: dict[str, str] = {
    "seq_len": "seq_len",
    "micro_batch_size": "micro_batch_size",
    "grad_accum_steps": "grad_accum_steps",
    "precision": "precision",
    "optimizer": "optimizer",
    "activation_checkpointing": "activation_checkpointing",
    "lora_r": "lora_r",
    "lora_target_modules": "lora_target_modules",
    "quantization_bits": "quantization_bits",
    "fused_cross_entropy": "fused_cross_entropy",
    "attention_kernel": "attention_kernel",
    "torch_compile": "torch_compile",
    "channels_last": "channels_last",
    "trainable_fraction": "trainable_fraction",
    "gbm_rows": "gbm_rows",
    "gbm_features": "gbm_features",
    "gbm_rounds": "gbm_rounds",
}
"""Feature-table column -> TrainingSpec field."""

PARALLEL_COLUMNS: dict[str, str] = {
    "num_gpus": "num_gpus",
    "num_nodes": "num_nodes",
    "strategy": "strategy",
    "tensor_parallel": "tensor_parallel",
    "pipeline_parallel": "pipeline_parallel",
    "context_parallel": "context_parallel",
    "cpu_offload": "cpu_offload",
}
"""Feature-table column -> ParallelSpec field."""

NOT_IN_ROWS: dict[str, tuple[str, ...]] = {
    "model": ("source", "reference_input"),
    "training": ("tokens", "samples", "epochs", "steps", "eval_fraction"),
    "parallel": ("price_per_gpu_hour",),
    "workload": ("assumptions",),
}
"""Workload fields a row does not store: descriptions (where dims came from), the amount of data
and whole-run terms (a row measures one step), the price (cost, not time), and the assumption
lines shown to a user."""

REQUIRED_COLUMNS: tuple[str, ...] = (
    "model_name",
    "model_family",
    "arch",
    "micro_batch_size",
    "precision",
    "gpu",
    "num_gpus",
)
"""Columns every row needs to describe a workload."""

TRANSFORMER_ARCHS = ("decoder", "encoder", "encoder-decoder")
REQUIRED_BY_ARCH: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(TRANSFORMER_ARCHS, ("hidden_size", "num_layers", "num_heads", "seq_len")),
    **dict.fromkeys(("cnn", "mlp", "other"), ("params_total", "forward_gflops_per_sample")),
    "gbm": ("gbm_rows", "gbm_features"),
}
"""Dimensions the cost model needs, by architecture: a row without one cannot be costed."""

MEASURED_SOURCE_KINDS = ("own", "probe", "user")
"""Rows measured by perfmodel's own harness: a CPU row is rebuilt with the host that measured it."""

_MISSING_TEXT = ("", "<NA>", "nan", "NaN", "None")


def is_missing(value: Any) -> bool:
    """True for an empty cell: None, NaN, pandas NA, or their string spellings."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        return value in _MISSING_TEXT
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists and arrays are values
        return False


def model_columns(model: ModelSpec) -> dict[str, Any]:
    """The model part of a row: every MODEL_COLUMNS column from `model`."""
    return {column: getattr(model, name) for column, name in MODEL_COLUMNS.items()}


def workload_to_row(w: Workload, **provenance: Any) -> dict[str, Any]:
    """A feature-table row for `w`: every workload column, the gpu name, the framework and the
    global batch, plus `provenance` (any other schema column: row_id, source, citation,
    source_kind, status, benchmark_kind, step_time_s, ...). run_group defaults to row_id.
    Raises DataError for a keyword that is not a schema column."""
    unknown = sorted(set(provenance) - set(BY_NAME))
    if unknown:
        raise DataError(f"unknown feature-table columns {unknown}; the schema is perfmodel/schema.py")
    t, par = w.training, w.parallel
    row: dict[str, Any] = {
        **model_columns(w.model),
        **{column: getattr(t, name) for column, name in TRAINING_COLUMNS.items()},
        **{column: getattr(par, name) for column, name in PARALLEL_COLUMNS.items()},
        "gpu": w.gpu.name,
        "framework": w.framework,
        "global_batch_size": t.micro_batch_size * t.grad_accum_steps * par.data_parallel,
    }
    row.update(provenance)
    if "row_id" in provenance and "run_group" not in provenance:
        row["run_group"] = provenance["row_id"]
    return row


UNRECORDED_DEFAULTS: dict[str, dict[str, Any]] = {
    "training": {"optimizer_state": None, "optimizer_in_backward": None, "gradient_clipping": None,
                 "checkpointing_policy": "full",
                 "lora_dropout": 0.0},
}  # fmt: skip
"""Workload fields a feature-table row does not record (memory-only details), with the value a
workload read from a row gets. The model's dropout is not recorded either: a row takes it from the
catalog (`catalog_dropout`)."""


def catalog_dropout(model: ModelSpec) -> float:
    """The dropout a feature-table row of `model` trains with: the catalog's for its name when the
    catalog model has the row's shape (GPT-2, BERT, RoBERTa: 0.1, as their config.json train them), else
    0 (the published tables do not state it; Llama-style models have none)."""
    return _catalog_dropout(model.name, model.arch, model.hidden_size, model.num_layers)


@functools.lru_cache(maxsize=256)
def _catalog_dropout(name: str, arch: str, hidden: int | None, layers: int | None) -> float:
    """`catalog_dropout` by the fields it reads (every row and every prediction asks it)."""
    key = resolve_model_key(name) if name else None
    if key is None:
        return 0.0
    spec = model_from_entry(model_entries()[key])
    return float(spec.dropout) if (spec.arch, spec.hidden_size, spec.num_layers) == (arch, hidden, layers) else 0.0


def recorded(w: Workload) -> Workload:
    """`w` as a feature-table row records it (UNRECORDED_DEFAULTS reset, the catalog's dropout):
    what a learned feature computed from `w` must see, so that a prediction and a row of the same
    run agree. `w` itself when nothing differs."""
    changes: dict[str, Any] = {}
    for section, defaults in UNRECORDED_DEFAULTS.items():
        spec = getattr(w, section)
        diff = {k: v for k, v in defaults.items() if getattr(spec, k) != v}
        if diff:
            changes[section] = dataclasses.replace(spec, **diff)
    dropout = catalog_dropout(w.model)
    if w.model.dropout != dropout:
        changes["model"] = dataclasses.replace(w.model, dropout=dropout)
    return dataclasses.replace(w, **changes) if changes else w


def workload_from_row(row: Mapping[str, Any], *, gpu: GPUSpec | None = None) -> Workload:
    """Rebuild the Workload a feature-table row measured (see the module docstring for required
    columns and defaults). `gpu` replaces the accelerator the row names (e.g. a device that only
    has to validate precisions). Raises DataError for a missing required column, ConfigError for
    a value out of range, CatalogError for an unknown accelerator: all PerfModelError."""
    arch = _required(row, "arch")
    for column in (*REQUIRED_COLUMNS, *REQUIRED_BY_ARCH.get(str(arch), ())):
        _required(row, column)
    model = ModelSpec(**_fields(row, MODEL_COLUMNS, ModelSpec))
    dropout = catalog_dropout(model)
    if dropout:
        model = dataclasses.replace(model, dropout=dropout)
    training = TrainingSpec(**_fields(row, TRAINING_COLUMNS, TrainingSpec), steps=1)
    accelerator = gpu or _accelerator(row)
    parallel_fields = _fields(row, PARALLEL_COLUMNS, ParallelSpec)
    parallel_fields.setdefault("num_nodes", accelerator.servers_for(parallel_fields["num_gpus"]))
    framework = row.get("framework")
    extra: dict[str, Any] = {} if is_missing(framework) else {"framework": str(framework)}
    return Workload(
        model=model, training=training, gpu=accelerator, parallel=ParallelSpec(**parallel_fields), **extra
    )


def _required(row: Mapping[str, Any], column: str) -> Any:
    value = row.get(column)
    if is_missing(value):
        arch = row.get("arch")
        what = f"a {arch} row" if column in REQUIRED_BY_ARCH.get(str(arch), ()) else "a row"  # a known arch
        raise DataError(
            f"{what} needs {column!r} and it is empty; "
            f"rows missing what the cost model needs are skipped, never defaulted"
        )
    return value


def _fields(row: Mapping[str, Any], columns: Mapping[str, str], spec: type) -> dict[str, Any]:
    """Keyword arguments for `spec` from the row's non-empty cells, converted to field types."""
    types = {f.name: str(f.type) for f in dataclasses.fields(spec)}
    out: dict[str, Any] = {}
    for column, name in columns.items():
        value = row.get(column)
        if not is_missing(value):
            out[name] = _convert(value, types[name], column)
    return out


def _convert(value: Any, type_name: str, column: str) -> Any:
    """A cell as the field's type: int, float, bool or str (from the dataclass annotation)."""
    base = type_name.split("|")[0].strip()
    if base == "str":
        return str(value)
    if base == "bool":
        if isinstance(value, str):
            text = value.strip().lower()
            if text not in ("true", "false", "1", "0"):
                raise DataError(f"column {column!r} must be true or false, got {quote(value)}")
            return text in ("true", "1")
        return bool(value)
    if base == "int" and isinstance(value, numbers.Integral):
        return int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(f"column {column!r} must be a number, got {quote(value)}") from None
    if base == "int":
        if not number.is_integer():
            raise DataError(f"column {column!r} must be a whole number, got {quote(value)}")
        return int(number)
    return number


def _accelerator(row: Mapping[str, Any]) -> GPUSpec:
    name = str(row["gpu"])
    host = row.get("hardware_id")
    if name == "cpu" and not is_missing(host) and str(row.get("source_kind")) in MEASURED_SOURCE_KINDS:
        return get_measured_host(str(host))  # the CPU that measured the row, with its ceilings
    return get_gpu(name)
