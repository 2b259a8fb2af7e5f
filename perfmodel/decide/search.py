"""The search space of `advise`: for each GPU type x precision x quantized base (LoRA: 4 and 8 bits)
x GPU count x strategy x activation checkpointing, the largest micro-batch that fits and divides the per-replica batch (the global batch
is kept), pruned by the analytic memory model before anything is predicted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfmodel.analytic.activations import resnet_layout
from perfmodel.analytic.step import layout_transposed
from perfmodel.config.source import ConfigSource
from perfmodel.decide.express import ludwig_precision
from perfmodel.decide.fit import largest_divisor_that_fits, with_parallel, with_training
from perfmodel.errors import PerfModelError
from perfmodel.workload import Workload

DEFAULT_GPUS = ("H100-SXM", "A100-80GB", "A100-40GB", "L40S", "A10G", "L4")
"""Accelerators searched when none are given (besides the config's own): common rentable training
GPUs with listed prices."""
DEFAULT_MAX_GPUS = 64
SEARCH_STRATEGIES = ("ddp", "fsdp")
"""Data-parallel strategies searched on more than one GPU (plus the config's own)."""


def global_batch(w: Workload) -> int:
    return w.training.micro_batch_size * w.training.grad_accum_steps * w.parallel.data_parallel


def _precisions(source: ConfigSource, base: Workload, gpu: Workload) -> list[str]:
    """The config's precision and bf16 mixed precision (fp16 where the GPU has no bf16); for a
    Ludwig config, the precisions Ludwig's keys can express."""
    own = base.training.precision
    if source.dialect == "ludwig":
        options = [own, "bf16", "amp_fp16", "fp16", "fp32"]
        out = [p for p in dict.fromkeys(options) if p == own or ludwig_precision(source.raw, p) is not None]
        return [p for p in out if gpu.gpu.supports({"amp_fp16": "fp16"}.get(p, p))][:3]
    mixed = "amp_bf16" if gpu.gpu.supports("bf16") else "amp_fp16"
    return [
        p
        for p in dict.fromkeys((own, mixed))
        if gpu.gpu.supports({"amp_bf16": "bf16", "amp_fp16": "fp16"}.get(p, p))
    ]


QUANTIZATIONS = (4, 8)
"""Quantized bases searched for a LoRA fine-tune (QLoRA: 4-bit NF4, or 8-bit), besides its own."""


def quantizations(source: ConfigSource, base: Workload) -> list[int | None]:
    """The base-weight quantizations to search: the config's own, and for a LoRA fine-tune (the
    frozen base may be quantized; a full fine-tune's weights may not) on a CUDA GPU 4 and 8 bits.
    A Ludwig config writes them as `quantization.bits` (LLM configs only)."""
    own = base.training.quantization_bits
    if not base.training.lora_r or base.gpu.vendor.lower() != "nvidia":
        return [own]
    if source.dialect == "ludwig" and str(source.raw.get("model_type") or "").lower() != "llm":
        return [own]
    return list(dict.fromkeys((own, *QUANTIZATIONS)))


def _kinds_of_step(source: ConfigSource, base: Workload, on_gpu: Workload) -> list[Workload]:
    """The config on one GPU type in each precision x base quantization x memory format searched."""
    out = []
    for precision, bits in [(p, q) for p in _precisions(source, base, on_gpu) for q in quantizations(source, on_gpu)]:
        try:
            w = with_training(on_gpu, precision=precision, quantization_bits=bits)
        except PerfModelError:
            continue
        out += [with_training(w, channels_last=nhwc) for nhwc in memory_formats(source, w)]
    return out


def memory_formats(source: ConfigSource, w: Workload) -> list[bool]:
    """channels_last values to search: the config's own, and channels_last for a native config whose
    16-bit convolutions run behind NCHW <-> NHWC transpositions in the kernel plan (a ResNet laid out
    layer by layer; `perfmodel.analytic.step.layout_transposed`). A Ludwig config has no such key."""
    own = w.training.channels_last
    if source.dialect != "native" or own or not layout_transposed(w) or resnet_layout(w) is None:
        return [own]
    return [own, True]


def _counts(base: Workload, max_gpus: int) -> list[int]:
    unit = base.parallel.model_split * base.parallel.context_parallel
    counts = {2**k for k in range(0, 31) if 2**k <= max_gpus} | (
        {base.parallel.num_gpus} if base.parallel.num_gpus <= max_gpus else set()
    )
    return sorted(n for n in counts if n % unit == 0)


def describe(w: Workload) -> str:
    t, par = w.training, w.parallel
    where = f"{par.num_gpus} x {w.gpu.name}" + (f" ({par.num_nodes} nodes)" if par.num_nodes > 1 else "")
    parts = [
        where + (f", {par.strategy}" if par.num_gpus > 1 else ""),
        t.precision,
        f"micro-batch {t.micro_batch_size} x accum {t.grad_accum_steps}",
    ]
    if t.activation_checkpointing:
        parts.append("checkpointing")
    if t.channels_last:
        parts.append("channels_last")
    if t.quantization_bits:
        parts.append(f"{t.quantization_bits}-bit base" + (" (QLoRA)" if t.quantization_bits == 4 and t.lora_r else ""))
    return "; ".join(parts)


def native_diff(base: Workload, w: Workload) -> dict[str, Any]:
    pairs = {
        "hardware.gpu": (base.gpu.name, w.gpu.name),
        "hardware.num_gpus": (base.parallel.num_gpus, w.parallel.num_gpus),
        "hardware.num_nodes": (base.parallel.num_nodes, w.parallel.num_nodes),
        "hardware.strategy": (base.parallel.strategy, w.parallel.strategy),
        "hardware.cpu_offload": (base.parallel.cpu_offload, w.parallel.cpu_offload),
        "framework": (base.framework, w.framework),
        "training.precision": (base.training.precision, w.training.precision),
        "training.activation_checkpointing": (
            base.training.activation_checkpointing,
            w.training.activation_checkpointing,
        ),
        "training.quantization_bits": (base.training.quantization_bits, w.training.quantization_bits),
        "training.channels_last": (base.training.channels_last, w.training.channels_last),
        "training.micro_batch_size": (base.training.micro_batch_size, w.training.micro_batch_size),
        "training.grad_accum_steps": (base.training.grad_accum_steps, w.training.grad_accum_steps),
    }
    return {k: new for k, (old, new) in pairs.items() if old != new}


def candidates(
    source: ConfigSource, base: Workload, gpus: Sequence[str], max_gpus: int, notes: list[str]
) -> tuple[list[tuple[dict[str, Any], Workload]], int]:
    """(native changes, workload) of every combination that fits by the memory model, and how many
    combinations were looked at."""
    batch = global_batch(base)
    found: dict[tuple[tuple[str, str], ...], tuple[dict[str, Any], Workload]] = {}
    searched = 0
    for gpu in gpus:
        try:
            on_gpu = source.workload({"hardware.gpu": gpu} if gpu != base.gpu.name else {})
        except PerfModelError as exc:
            notes.append(f"{gpu}: skipped ({str(exc).splitlines()[0]})")
            continue
        for w0 in _kinds_of_step(source, base, on_gpu):
            for n in _counts(base, max_gpus):
                strategies = (
                    [base.parallel.strategy]
                    if n == 1
                    else list(dict.fromkeys((base.parallel.strategy, *SEARCH_STRATEGIES)))
                )
                for strategy in strategies:
                    nodes = w0.gpu.servers_for(n)
                    if n == base.parallel.num_gpus and base.parallel.gpus_per_node <= w0.gpu.gpus_per_server:
                        nodes = base.parallel.num_nodes  # the config's own layout, where it fits
                    try:
                        placed = with_parallel(w0, num_gpus=n, num_nodes=nodes, strategy=strategy)
                    except PerfModelError:
                        continue
                    dp = placed.parallel.data_parallel
                    if batch % dp:
                        searched += 2
                        continue
                    per_replica = batch // dp
                    mb_plain: int | None = None
                    for ckpt in (False, True):
                        searched += 1
                        wc = with_training(placed, activation_checkpointing=ckpt)
                        mb = largest_divisor_that_fits(wc, per_replica)
                        if mb is None:
                            continue
                        if ckpt and mb_plain is not None and mb <= mb_plain:
                            continue  # recomputation costs time and buys no larger micro-batch here
                        if not ckpt:
                            mb_plain = mb
                        chosen = with_training(wc, micro_batch_size=mb, grad_accum_steps=per_replica // mb)
                        diff = native_diff(base, chosen)
                        found[tuple(sorted((k, repr(v)) for k, v in diff.items()))] = (diff, chosen)
    return list(found.values()), searched
