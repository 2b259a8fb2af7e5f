"""What a probe runs: the user's workload as one of the collectors' training slices, scaled down
until it fits this machine's memory and the probe's time budget.

The slice models (perfmodel/measure/models.py) are built from dimensions: a decoder runs as the
collectors' Llama-style decoder, an encoder as their BERT-style encoder, a GBM as LightGBM rounds.
What the slice cannot express is stated, never hidden: a non-gated MLP runs gated, fp8 runs bf16,
a quantized base runs unquantized, several GPUs run as one, gradient accumulation as one
micro-batch per step. The model carries every such difference (ratio of its predictions).

Scale-down order (the first that fits wins): fewer layers (halving, down to MIN_LAYERS), then a
shorter sequence (halving, down to MIN_SEQ_LEN), then a smaller micro-batch (halving, down to 1).
"Fits" means the analytic peak memory is at most MEMORY_FRACTION of the device's memory and the
predicted step time (high end of its interval) times the steps to run is at most the time
allowed for stepping. Width, heads and vocabulary are never changed: they set the matmul shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from perfmodel.codec import workload_from_row
from perfmodel.errors import UnsupportedError
from perfmodel.measure.configs import SliceConfig, analytic_memory, row_fields
from perfmodel.prediction import predict
from perfmodel.workload import GPUSpec, Workload

MIN_LAYERS = 1
MIN_SEQ_LEN = 64
MEMORY_FRACTION = 0.6
"""Share of the device's (available) memory a probe may plan to use: the analytic memory model's
error is ~30% median (`perfmodel memcheck`), and the host keeps running other things."""
KIND_OF_ARCH = {"decoder": "llama", "encoder": "bert", "gbm": "lightgbm"}
SLICE_OPTIMIZER = {"adamw": "adamw", "adam": "adamw", "sgd": "sgd", "sgd_momentum": "sgd"}


@dataclass(frozen=True, kw_only=True)
class ProbePlan:
    """One candidate probe: the slice to run and the workload it is, on this host."""

    config: Any
    """perfmodel.measure.configs.SliceConfig to run."""
    workload: Workload
    """The probed workload on this host (what the model predicts for the ratio)."""
    scaled: tuple[str, ...] = ()
    """What was scaled down, e.g. 'layers 32 -> 4'."""
    differences: tuple[str, ...] = ()
    """What the slice runs differently from the target (besides scaling)."""
    memory_gb: float | None = None
    """Analytic peak memory of the probe in GB."""
    predicted_step_s: tuple[float, float, float] | None = None
    """(estimate, low, high) predicted step time of the probe on this host in s."""

    def to_json(self) -> dict[str, Any]:
        return {
            "slice": dataclasses.asdict(self.config),
            "scaled_down": list(self.scaled),
            "differences": list(self.differences),
            "memory_gb": self.memory_gb,
            "predicted_step_time_s": None
            if self.predicted_step_s is None
            else dict(zip(("estimate", "low", "high"), self.predicted_step_s, strict=True)),
        }


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What this machine allows."""

    memory_gb: float
    """Memory the probe may use in GB (already reduced by MEMORY_FRACTION)."""
    max_step_s: float
    """Longest predicted step (high end) the budget allows in s."""
    supports: Any = None
    """device.supports(precision) -> bool."""
    notes: list[str] = field(default_factory=list)


def _precision(target: str, supports: Any) -> tuple[str, list[str]]:
    wanted = "bf16" if target == "fp8" else target
    notes = ["fp8 runs as bf16 (the slices have no fp8 kernels)"] if target == "fp8" else []
    if supports is None or supports(wanted):
        return wanted, notes
    for fallback in ({"fp16": "bf16", "amp_fp16": "amp_bf16"}.get(wanted, "fp32"), "fp32"):
        if supports(fallback):
            return fallback, [
                *notes,
                f"precision {target} is not supported on this device: probed in {fallback}",
            ]
    raise UnsupportedError(f"this device runs neither {target} nor fp32")


def slice_for(
    target: Workload, *, layers: int, seq_len: int, batch: int, supports: Any = None
) -> tuple[Any, list[str]]:
    """The collectors' SliceConfig for `target` at the given size, and what differs."""
    m, t = target.model, target.training
    kind = KIND_OF_ARCH.get(m.arch)
    if kind is None:
        raise UnsupportedError(
            f"probe runs decoder, encoder and gbm workloads; {m.arch} models are predicted only "
            f"(the collectors build no {m.arch} model from a config's dimensions)"
        )
    notes: list[str] = []
    if kind == "lightgbm":
        return SliceConfig(
            kind="lightgbm",
            micro_batch_size=t.gbm_rows or batch,
            in_features=t.gbm_features or 16,
            warmup_steps=2,
            measured_steps=10,
        ), notes
    precision, pnotes = _precision(t.precision, supports)
    notes += pnotes
    optimizer = SLICE_OPTIMIZER.get(t.optimizer)
    if optimizer is None:
        optimizer = "adamw"
        notes.append(f"optimizer {t.optimizer} runs as adamw")
    if kind == "llama" and not m.gated_mlp:
        notes.append("the decoder runs with a gated (SwiGLU) MLP of the same inner width")
    if m.head_dim and m.hidden_size and m.head_dim * (m.num_heads or 1) != m.hidden_size:
        notes.append(f"head_dim {m.head_dim} runs as hidden_size / num_heads")
    if m.num_experts > 1:
        notes.append(f"{m.num_experts}-expert MoE layers run dense")
    if t.quantization_bits:
        notes.append(f"the {t.quantization_bits}-bit base runs unquantized")
    if t.lora_r and t.lora_target_modules != 2:
        notes.append(f"LoRA runs on q and v (the slices' adapters); the target adapts {t.lora_target_modules} matrices a layer")
    if target.parallel.num_gpus > 1:
        notes.append(f"{target.parallel.num_gpus} GPUs ({target.parallel.strategy}) run as one")
    if t.grad_accum_steps > 1:
        notes.append(f"gradient accumulation x{t.grad_accum_steps} runs one micro-batch per step")
    config = SliceConfig(
        kind=kind,
        micro_batch_size=batch,
        hidden_size=m.hidden_size,
        num_layers=layers,
        num_heads=m.num_heads,
        num_kv_heads=m.kv_heads if kind == "llama" else None,
        ffn_hidden_size=m.ffn_size,
        vocab_size=m.vocab_size or 32000,
        seq_len=seq_len,
        num_classes=2 if kind == "bert" else None,
        precision=precision,
        optimizer=optimizer,
        activation_checkpointing=t.activation_checkpointing,
        lora_r=t.lora_r,
        warmup_steps=2,
        measured_steps=10,
    )
    return config, notes


def probed_workload(config: Any, host: GPUSpec) -> Workload:
    """The workload a slice is, on `host` (through the row codec, as the feature table will read it)."""
    return workload_from_row({**row_fields(config), "gpu": host.name}, gpu=host)


def _halvings(value: int, floor: int) -> Iterator[int]:
    while True:
        yield value
        if value <= floor:
            return
        value = max(value // 2, floor)


def candidate_sizes(target: Workload) -> Iterator[tuple[int, int, int, tuple[str, ...]]]:
    """(layers, seq_len, batch, what was scaled) in the module's scale-down order."""
    m, t = target.model, target.training
    L, s, b = m.num_layers or 1, t.seq_len, t.micro_batch_size
    for layers in _halvings(L, min(MIN_LAYERS, L)):
        yield layers, s, b, (f"layers {L} -> {layers}",) if layers != L else ()
    low_layers = min(MIN_LAYERS, L)
    scaled_l = (f"layers {L} -> {low_layers}",) if low_layers != L else ()
    for seq in list(_halvings(s, min(MIN_SEQ_LEN, s)))[1:]:
        yield low_layers, seq, b, (*scaled_l, f"sequence {s} -> {seq}")
    low_seq = min(MIN_SEQ_LEN, s)
    for batch in list(_halvings(b, 1))[1:]:
        scaled_s = (f"sequence {s} -> {low_seq}",) if low_seq != s else ()
        yield low_layers, low_seq, batch, (*scaled_l, *scaled_s, f"micro-batch {b} -> {batch}")


def _memory_gb(config: Any) -> float:
    if config.kind == "lightgbm":  # float32 features + LightGBM's binned copy and gradients
        return config.micro_batch_size * (config.in_features or 16) * 4 * 3 / 1e9
    return float(analytic_memory(config).total_gb)


def choose_plan(
    target: Workload,
    host: GPUSpec,
    limits: Limits,
    *,
    steps: int,
    warmup: int,
    confidence: float = 0.9,
    model_dir: Any = None,
) -> ProbePlan:
    """The largest probe (module order) that fits `limits`; UnsupportedError naming the smallest
    one's needs when none does."""
    last: tuple[float, float] | None = None
    for layers, seq, batch, scaled in candidate_sizes(target):
        config, notes = slice_for(target, layers=layers, seq_len=seq, batch=batch, supports=limits.supports)
        config = dataclasses.replace(config, warmup_steps=warmup, measured_steps=steps)
        memory = _memory_gb(config)
        workload = probed_workload(config, host)
        st = predict(workload, confidence=confidence, model_dir=model_dir).step_time_s
        last = (memory, st.high)
        if memory <= limits.memory_gb and st.high <= limits.max_step_s:
            return ProbePlan(
                config=config,
                workload=workload,
                scaled=scaled,
                differences=tuple(notes),
                memory_gb=memory,
                predicted_step_s=(st.estimate, st.low, st.high),
            )
        if config.kind == "lightgbm":
            break
    memory, step_high = last or (0.0, 0.0)
    raise UnsupportedError(
        f"too large to probe on this machine even scaled down: the smallest probe needs ~{memory:.1f} GB "
        f"(allowed {limits.memory_gb:.1f} GB) and up to {step_high:.1f} s per step (allowed {limits.max_step_s:.1f} s); "
        "raise --budget-s, or use perfmodel predict"
    )
