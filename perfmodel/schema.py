"""The feature table: every column, its dtype, unit and meaning. The only place they are defined.

Collectors write rows with these columns, public importers normalise third-party tables into
them, training reads them, tests check against them. A row is one measured configuration: the
workload it ran (model, training, hardware, parallelism), what was measured, and its provenance.
`perfmodel.codec` maps the workload columns to and from a `Workload` (the only place it is done).

Derived analytic features (FLOPs, roofline bound, memory estimate) are *not* stored: they are
recomputed from these columns by `perfmodel.features`, so a fix to the cost model never
needs a re-collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.errors import DataError

SCHEMA_VERSION = "6"
"""Bumped when a column is added, removed or changes meaning (2: the workload fields head_dim,
tied_embeddings, learned_pos_embeddings, fused_cross_entropy, attention_kernel, torch_compile,
lora_target_modules, cpu_offload; run_group and sample_weight; source_kind 'probe' and 'user';
3: channels_last; 4: gemm_layers, attention_layers, attention_gflops_per_sample,
attention_mscores_per_sample; 5: depthwise_layers, depthwise_gflops_per_sample,
depthwise_melements_per_sample, grouped_layers, grouped_gflops_per_sample, grouped_melements_per_sample;
6: embedding_params, embedding_lookups_per_sample, embedding_dim)."""

SOURCE_KINDS = ("own", "public", "probe", "user")
"""Allowed `source_kind` values (see the column's meaning)."""


@dataclass(frozen=True, kw_only=True)
class Column:
    """One feature-table column."""

    name: str
    """Column name; numeric names carry their unit."""
    dtype: str
    """pandas dtype: 'string', 'Int64', 'float64', 'boolean', 'object' (list of floats)."""
    unit: str
    """Physical unit, or '' for categories and counts."""
    meaning: str
    """What the value is, in one sentence."""
    required: bool = False
    """Rows without it are rejected."""
    required_if_ok: bool = False
    """Rows with status 'ok' must have it (an OOM row has no step time)."""


_C = Column

# fmt: off
COLUMNS: tuple[Column, ...] = (
    # --- provenance -------------------------------------------------------------------------
    _C(name="row_id", dtype="string", unit="", meaning="Stable unique id (hash of source + configuration).", required=True),
    _C(name="source", dtype="string", unit="", meaning="Dataset the row comes from: 'perfmodel-collector' or a public file stem.", required=True),
    _C(name="citation", dtype="string", unit="", meaning="Repository:path@commit (or collector version) the number was read from.", required=True),
    _C(name="source_kind", dtype="string", unit="", meaning="'own' (measured by our collectors), 'public' (third-party table), 'probe' (a `perfmodel probe` run of a user's config) or 'user' (a user's finished run, `perfmodel ingest`).", required=True),
    _C(name="collected_at", dtype="string", unit="ISO-8601", meaning="When it was measured or published (date or timestamp)."),
    _C(name="collector_version", dtype="string", unit="", meaning="perfmodel version that measured or imported the row."),
    _C(name="hardware_id", dtype="string", unit="", meaning="Stable fingerprint of the measuring host (own rows) or the system name (public rows)."),
    _C(name="status", dtype="string", unit="", meaning="'ok', 'oom' (did not fit) or 'error'.", required=True),
    _C(name="benchmark_kind", dtype="string", unit="", meaning="'training_slice', 'microbench' or 'public_training'.", required=True),
    _C(name="notes", dtype="string", unit="", meaning="Free text: caveats carried from the source."),
    _C(name="run_group", dtype="string", unit="", meaning="Rows of one run share it (logged windows of one run, noise repeats, re-runs of one configuration across versions or hosts); cross-validation never splits a group. Default: the row_id (a run of one row)."),
    _C(name="sample_weight", dtype="float64", unit="", meaning="Training weight so that one run is one vote: 1/k for each of the k rows of a run_group. Default 1.0; `perfmodel dataset build` fills empty cells with 1/k."),
    # --- model ------------------------------------------------------------------------------
    _C(name="model_name", dtype="string", unit="", meaning="Model name as measured (catalog key where one exists).", required=True),
    _C(name="model_family", dtype="string", unit="", meaning="Family for grouped evaluation: llama, gpt, bert, resnet, mlp, ...", required=True),
    _C(name="arch", dtype="string", unit="", meaning="decoder | encoder | encoder-decoder | cnn | mlp | gbm | other.", required=True),
    _C(name="params_total", dtype="float64", unit="parameters", meaning="Total parameter count."),
    _C(name="hidden_size", dtype="Int64", unit="", meaning="Transformer width d."),
    _C(name="num_layers", dtype="Int64", unit="", meaning="Transformer blocks L."),
    _C(name="num_heads", dtype="Int64", unit="", meaning="Attention heads."),
    _C(name="num_kv_heads", dtype="Int64", unit="", meaning="Key/value heads (GQA)."),
    _C(name="head_dim", dtype="Int64", unit="", meaning="Width of one attention head (empty = hidden_size / num_heads)."),
    _C(name="ffn_hidden_size", dtype="Int64", unit="", meaning="MLP inner width."),
    _C(name="vocab_size", dtype="Int64", unit="", meaning="Vocabulary size."),
    _C(name="gated_mlp", dtype="boolean", unit="", meaning="SwiGLU/GeGLU MLP."),
    _C(name="tied_embeddings", dtype="boolean", unit="", meaning="The LM head shares the input embedding matrix."),
    _C(name="learned_pos_embeddings", dtype="Int64", unit="positions", meaning="Rows of a learned absolute position-embedding table (0 for rotary/ALiBi)."),
    _C(name="num_experts", dtype="Int64", unit="", meaning="MoE experts per layer (1 = dense)."),
    _C(name="experts_per_token", dtype="Int64", unit="", meaning="MoE top-k."),
    _C(name="forward_gflops_per_sample", dtype="float64", unit="GFLOP", meaning="Forward FLOPs per sample for non-transformer archs."),
    _C(name="activation_mb_per_sample", dtype="float64", unit="MB", meaning="Activation memory per sample for non-transformer archs."),
    _C(name="gemm_layers", dtype="Int64", unit="kernels", meaning="Convolutions and matmuls with weights one forward of a non-transformer model runs (collectors/public/timm_kernel_census.py); empty = not known."),
    _C(name="attention_layers", dtype="Int64", unit="kernels", meaning="Attentions (softmaxes over scores) one forward of a non-transformer model runs (hybrid transformers); empty or 0 = none."),
    _C(name="attention_gflops_per_sample", dtype="float64", unit="GFLOP", meaning="Forward GFLOPs of those attentions' batched matmuls per sample (part of forward_gflops_per_sample)."),
    _C(name="attention_mscores_per_sample", dtype="float64", unit="M elements", meaning="Scores those attentions' softmaxes normalise per sample, millions."),
    _C(name="depthwise_layers", dtype="Int64", unit="kernels", meaning="Depthwise convolutions (one input channel per group) among gemm_layers (collectors/public/timm_kernel_census.py); empty or 0 = none."),
    _C(name="depthwise_gflops_per_sample", dtype="float64", unit="GFLOP", meaning="Forward GFLOPs of those depthwise convolutions per sample (part of forward_gflops_per_sample)."),
    _C(name="depthwise_melements_per_sample", dtype="float64", unit="M elements", meaning="Elements those depthwise convolutions read and write per sample (inputs + outputs), millions."),
    _C(name="grouped_layers", dtype="Int64", unit="kernels", meaning="Grouped convolutions with several input channels a group (ResNeXt, RegNet) among gemm_layers; empty or 0 = none."),
    _C(name="grouped_gflops_per_sample", dtype="float64", unit="GFLOP", meaning="Forward GFLOPs of those grouped convolutions per sample (part of forward_gflops_per_sample)."),
    _C(name="grouped_melements_per_sample", dtype="float64", unit="M elements", meaning="Elements those grouped convolutions read and write per sample (inputs + outputs), millions."),
    _C(name="embedding_params", dtype="Int64", unit="elements", meaning="Elements of a recommender's embedding tables (part of params_total); empty or 0 = none."),
    _C(name="embedding_lookups_per_sample", dtype="Int64", unit="rows", meaning="Embedding-table rows one sample looks up."),
    _C(name="embedding_dim", dtype="Int64", unit="", meaning="Width of a looked-up embedding row (mean over the lookups)."),
    _C(name="part_layers", dtype="Int64", unit="", meaning="Transformer blocks of a transformer part inside a non-transformer model (Ludwig ECD FT-Transformer combiner / transformer encoder); empty or 0 = none."),
    _C(name="part_tokens", dtype="Int64", unit="tokens", meaning="Tokens per sample the transformer part runs over."),
    _C(name="part_hidden_size", dtype="Int64", unit="", meaning="Width of the transformer part."),
    _C(name="part_num_heads", dtype="Int64", unit="", meaning="Attention heads of the transformer part."),
    _C(name="part_ffn_size", dtype="Int64", unit="", meaning="Feed-forward inner width of the transformer part."),
    _C(name="part_inputs", dtype="Int64", unit="", meaning="Per-sample input projections into the transformer part (FT-Transformer: one per input feature)."),
    _C(name="part_input_width", dtype="float64", unit="elements", meaning="Mean input width of those projections."),
    _C(name="part_vocab_size", dtype="Int64", unit="tokens", meaning="Token-embedding rows before the transformer part (0 = none)."),
    _C(name="gbm_rows", dtype="Int64", unit="rows", meaning="Training rows of a gradient-boosted-tree slice."),
    _C(name="gbm_features", dtype="Int64", unit="features", meaning="Input features of a gradient-boosted-tree slice."),
    _C(name="gbm_rounds", dtype="Int64", unit="rounds", meaning="Boosting rounds of a gradient-boosted-tree slice."),
    # --- training ---------------------------------------------------------------------------
    _C(name="seq_len", dtype="Int64", unit="tokens", meaning="Tokens per sample (transformers: a row without it cannot be costed)."),
    _C(name="micro_batch_size", dtype="Int64", unit="samples", meaning="Samples per GPU per forward/backward.", required=True),
    _C(name="grad_accum_steps", dtype="Int64", unit="", meaning="Micro-batches per optimizer step."),
    _C(name="global_batch_size", dtype="Int64", unit="samples", meaning="Samples per optimizer step over all GPUs."),
    _C(name="precision", dtype="string", unit="", meaning="fp32 | tf32 | amp_bf16 | amp_fp16 | bf16 | fp16 | fp8.", required=True),
    _C(name="optimizer", dtype="string", unit="", meaning="adamw | sgd | ... | none (forward+backward only)."),
    _C(name="activation_checkpointing", dtype="boolean", unit="", meaning="Full activation recomputation."),
    _C(name="fused_cross_entropy", dtype="boolean", unit="", meaning="Fused/chunked linear cross-entropy: the (tokens x vocab) logits are never materialised."),
    _C(name="attention_kernel", dtype="string", unit="", meaning="sdpa | flash | eager (perfmodel.workload.ATTENTION_KERNELS)."),
    _C(name="torch_compile", dtype="boolean", unit="", meaning="Model wrapped in torch.compile."),
    _C(name="channels_last", dtype="boolean", unit="", meaning="Model and images in torch.channels_last (NHWC) memory format (empty = PyTorch's default, NCHW)."),
    _C(name="lora_r", dtype="Int64", unit="", meaning="LoRA rank (empty = full fine-tuning)."),
    _C(name="lora_target_modules", dtype="Int64", unit="matrices", meaning="Weight matrices per layer that carry LoRA adapters (2 = q,v, PEFT's default)."),
    _C(name="quantization_bits", dtype="Int64", unit="bits", meaning="Frozen base-weight bits (QLoRA)."),
    _C(name="trainable_fraction", dtype="float64", unit="fraction", meaning="Parameters receiving gradients / total (non-LoRA freezing)."),
    _C(name="includes_optimizer_step", dtype="boolean", unit="", meaning="Measured time includes the optimizer step (NeuSight rows do not)."),
    # --- hardware and parallelism -----------------------------------------------------------
    _C(name="gpu", dtype="string", unit="", meaning="Accelerator catalog key (or 'cpu').", required=True),
    _C(name="gpu_name_raw", dtype="string", unit="", meaning="Accelerator name as the source wrote it."),
    _C(name="num_gpus", dtype="Int64", unit="GPUs", meaning="Accelerators in total.", required=True),
    _C(name="num_nodes", dtype="Int64", unit="nodes", meaning="Machines."),
    _C(name="strategy", dtype="string", unit="", meaning="ddp | fsdp | zero1 | zero2 | zero3."),
    _C(name="tensor_parallel", dtype="Int64", unit="", meaning="Tensor-parallel degree."),
    _C(name="pipeline_parallel", dtype="Int64", unit="", meaning="Pipeline-parallel degree."),
    _C(name="context_parallel", dtype="Int64", unit="", meaning="Context (sequence) parallel degree."),
    _C(name="cpu_offload", dtype="boolean", unit="", meaning="Optimizer state (and for zero3 parameters) offloaded to host memory."),
    _C(name="framework", dtype="string", unit="", meaning="Software stack family: one of perfmodel.workload.FRAMEWORKS (hf-eager, torch-eager, composer-fsdp, megatron, nemo, torchtitan, deepspeed, dle-ngc, lightgbm) or another name (the learned model sees it as 'other')."),
    _C(name="torch_version", dtype="string", unit="", meaning="PyTorch version where known."),
    # --- measurements -----------------------------------------------------------------------
    _C(name="step_time_s", dtype="float64", unit="s", meaning="Median wall time of one optimizer step (global batch); empty for OOM rows.", required_if_ok=True),
    _C(name="step_time_std_s", dtype="float64", unit="s", meaning="Standard deviation of measured step times."),
    _C(name="step_times_s", dtype="object", unit="s", meaning="Every measured step time (own rows)."),
    _C(name="warmup_steps", dtype="Int64", unit="steps", meaning="Steps run before timing (excluded)."),
    _C(name="measured_steps", dtype="Int64", unit="steps", meaning="Steps timed."),
    _C(name="tokens_per_s", dtype="float64", unit="tokens/s", meaning="Measured throughput over all GPUs in tokens/s."),
    _C(name="samples_per_s", dtype="float64", unit="samples/s", meaning="Measured throughput over all GPUs in samples/s."),
    _C(name="peak_memory_gb", dtype="float64", unit="GB", meaning="Measured peak device memory per GPU in GB."),
    _C(name="achieved_tflops_per_gpu", dtype="float64", unit="TFLOP/s", meaning="Model FLOPs per second per GPU by the pinned convention."),
    _C(name="reported_mfu", dtype="float64", unit="fraction", meaning="MFU as the source reported it (its own convention)."),
    _C(name="repeat_index", dtype="Int64", unit="", meaning="0 for the first measurement of a configuration, >0 for noise repeats."),
)
# fmt: on

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
REQUIRED: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.required)
BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}

# fmt: off
MICROBENCH_COLUMNS: tuple[Column, ...] = (
    _C(name="hardware_id", dtype="string", unit="", meaning="Host fingerprint.", required=True),
    _C(name="gpu", dtype="string", unit="", meaning="Accelerator catalog key or 'cpu'.", required=True),
    _C(name="device_name", dtype="string", unit="", meaning="Device name as the driver reports it."),
    _C(name="bench", dtype="string", unit="", meaning="matmul | hbm_copy | attention | h2d_copy | d2h_copy | all_reduce | kernel <kind/variant> <phase> (collectors/kernel_bench.py).", required=True),
    _C(name="dtype", dtype="string", unit="", meaning="fp32 | tf32 | bf16 | fp16."),
    _C(name="shape", dtype="string", unit="", meaning="Problem shape, e.g. '4096x4096x4096'."),
    _C(name="status", dtype="string", unit="", meaning="ok | oom | unsupported | error.", required=True),
    _C(name="median_time_s", dtype="float64", unit="s", meaning="Median time of one call."),
    _C(name="achieved_tflops", dtype="float64", unit="TFLOP/s", meaning="Achieved FLOP rate (compute benches)."),
    _C(name="achieved_gb_per_s", dtype="float64", unit="GB/s", meaning="Achieved bandwidth (copy benches)."),
    _C(name="collected_at", dtype="string", unit="ISO-8601", meaning="Timestamp."),
    _C(name="collector_version", dtype="string", unit="", meaning="perfmodel version."),
)
# fmt: on


# --- the kernel table: one measured kernel call per row (datasets/kernels/*.parquet) ------------
# Never training rows of the feature table: it is what `perfmodel.kernels.efficiency` is fitted on.
# Built by `perfmodel kernels build` (collectors/public/kernel_table.py) from public kernel
# benchmarks and the collectors' micro-benchmarks; work columns come from `perfmodel.kernels.work`.

KERNEL_SCHEMA_VERSION = "1"
"""Bumped when a kernel-table column is added, removed or changes meaning."""

# fmt: off
KERNEL_COLUMNS: tuple[Column, ...] = (
    _C(name="row_id", dtype="string", unit="", meaning="Stable unique id (hash of source + measured point).", required=True),
    _C(name="source", dtype="string", unit="", meaning="Dataset the row comes from (a public file stem or 'perfmodel-collector').", required=True),
    _C(name="citation", dtype="string", unit="", meaning="owner/repo@commit:path (or the collector version) the number was read from.", required=True),
    _C(name="gpu", dtype="string", unit="", meaning="Accelerator catalog key, or 'cpu'.", required=True),
    _C(name="gpu_name_raw", dtype="string", unit="", meaning="Accelerator name as the source wrote it."),
    _C(name="hardware_id", dtype="string", unit="", meaning="Measuring host fingerprint (own CPU rows: its measured ceilings)."),
    _C(name="kernel_kind", dtype="string", unit="", meaning="perfmodel.kernels.work.KERNEL_KINDS.", required=True),
    _C(name="impl", dtype="string", unit="", meaning="eager | fused | compiled (perfmodel.kernels.work.IMPLS).", required=True),
    _C(name="variant", dtype="string", unit="", meaning="perfmodel.kernels.work.VARIANTS[kind].", required=True),
    _C(name="dtype", dtype="string", unit="", meaning="fp32 | tf32 | bf16 | fp16 | fp8: what the kernel computes and stores in.", required=True),
    _C(name="phase", dtype="string", unit="", meaning="forward | backward | full (forward + backward).", required=True),
    _C(name="shape", dtype="string", unit="", meaning="KernelWork.shape joined by 'x' (its meaning per kind: perfmodel/kernels/work.py)."),
    _C(name="flops", dtype="float64", unit="FLOP", meaning="Useful FLOPs of the call (0 for memory-bound kinds).", required=True),
    _C(name="bytes", dtype="float64", unit="bytes", meaning="Minimal HBM bytes: every input read once, every output written once.", required=True),
    _C(name="bytes_moved", dtype="float64", unit="bytes", meaning="HBM bytes the implementation moves (eager: summed over its ops).", required=True),
    _C(name="launches", dtype="float64", unit="kernels", meaning="Kernels the call launches.", required=True),
    _C(name="time_s", dtype="float64", unit="s", meaning="Measured device time of one call (the source's median or mean, see notes).", required=True),
    _C(name="time_p20_s", dtype="float64", unit="s", meaning="20th percentile of the measured times, where the source gives it."),
    _C(name="time_p80_s", dtype="float64", unit="s", meaning="80th percentile of the measured times, where the source gives it."),
    _C(name="provider_raw", dtype="string", unit="", meaning="The implementation as the source names it (Liger kernel_provider, NeuSight op)."),
    _C(name="kernel_name_raw", dtype="string", unit="", meaning="The benchmark or op name as the source writes it."),
    _C(name="measured_at", dtype="string", unit="ISO-8601", meaning="When it was measured or committed."),
    _C(name="torch_version", dtype="string", unit="", meaning="PyTorch version where known."),
    _C(name="notes", dtype="string", unit="", meaning="How the row was derived; caveats carried from the source."),
)
# fmt: on

KERNEL_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in KERNEL_COLUMNS)


def empty_frame(columns: tuple[Column, ...] = COLUMNS) -> Any:
    """An empty DataFrame with the schema's columns and dtypes."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in columns})


def conform(frame: Any, columns: tuple[Column, ...] = COLUMNS) -> Any:
    """Return `frame` with exactly the schema's columns, in order, cast to their dtypes.

    Missing optional columns are added empty; unknown columns raise DataError; rows with a
    missing required value raise DataError naming the column.
    """
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd


    names = [c.name for c in columns]
    unknown = sorted(set(frame.columns) - set(names))
    if unknown:
        raise DataError(f"unknown feature-table columns {unknown}; the schema is perfmodel/schema.py")
    out = pd.DataFrame(index=frame.index)
    for c in columns:
        if c.name in frame.columns:
            series = frame[c.name]
        else:
            series = pd.Series([None] * len(frame), index=frame.index)
        out[c.name] = series if c.dtype == "object" else series.astype(c.dtype)
        if c.required and out[c.name].isna().any():
            bad = int(out[c.name].isna().sum())
            raise DataError(f"{bad} row(s) have no value for required column {c.name!r}")
        if c.required_if_ok and "status" in out.columns:
            missing = out[c.name].isna() & (out["status"] == "ok")
            if missing.any():
                raise DataError(f"{int(missing.sum())} row(s) with status 'ok' have no value for {c.name!r}")
    if "source_kind" in out.columns:
        unknown_kinds = sorted(set(out["source_kind"].dropna()) - set(SOURCE_KINDS))
        if unknown_kinds:
            raise DataError(f"unknown source_kind {unknown_kinds}; allowed: {', '.join(SOURCE_KINDS)}")
    return out.reset_index(drop=True)


def fill_run_defaults(frame: Any) -> Any:
    """`frame` with empty run_group cells set to the row_id (a run of one row) and empty
    sample_weight cells set to 1/k, k = the rows of the table that share the run_group."""
    frame = frame.copy()
    group = frame["run_group"].astype("string").fillna(frame["row_id"].astype("string"))
    frame["run_group"] = group
    size = group.map(group.value_counts())
    weight = frame["sample_weight"].astype("float64")
    frame["sample_weight"] = weight.where(weight.notna(), 1.0 / size.astype("float64"))
    return frame
