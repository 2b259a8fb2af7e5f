"""Liger-Kernel's kernel benchmarks (shared/data/public/liger_kernel_benchmarks.csv): eager Hugging
Face / PyTorch modules against fused kernels, per kernel, forward / backward / full, on B200, H100
SXM/PCIe/NVL, A100 40/80 GB and RTX 3090/4090.

Normalisation (speed rows only; memory rows and `no-grad-forward` are skipped):
- time_s = y_value_50 / 1000 (the median of triton.testing.do_bench, which flushes the L2 cache
  before every call); time_p20_s / time_p80_s from y_value_20 / y_value_80.
- The shape and dtype come from `extra_benchmark_config_str` and `x_value`, read the way the
  benchmark script of that commit reads them (`first_commit`, linkedin/Liger-Kernel
  benchmark/scripts/benchmark_<kernel>.py, cited per row). Where the config names no dtype, the
  script's tensors are `torch.randn(...)` without a dtype (fp32) or a dtype the script fixes, as
  `SCRIPT_DTYPES` records with its line.
- A sweep whose time stays flat while its bytes grow 4x or more (largest / smallest size < 1.5x) is
  left out: a fixed harness cost dominates it, not the kernel (the B200 backward and full sweeps of
  the 2026 cutile harness: e.g. rope backward 0.51-0.54 ms from 1k to 8k tokens).
- Providers: `huggingface` / `torch` = eager; `liger*`, `megatron-fused` = fused; `torch_compile`
  and Megatron's `bias_swiglu_impl` (`@jit_fuser` = torch.compile) = compiled.

Kept kernels: rms_norm, layer_norm, megatron_rms_norm, fused_add_rms_norm (the eager provider:
residual add + RMSNorm, as two summed works), rope, cross_entropy, megatron_cross_entropy,
megatron_swiglu (the activation only: the input is already projected), embedding, softmax.
Left out, with the reason counted in the import report:
- swiglu, geglu, tiled_swiglu, tiled_geglu: whole LlamaMLP modules; three matmuls take > 90% of
  their time, so they measure matmuls, not the activation.
- fused_linear_* and the distillation / preference losses (cpo, orpo, simpo, kto, grpo, jsd, tvd,
  kl_div): the LM-head matmul fused into the loss, or losses outside the training steps modelled.
- llama4_rope (complex-number rotary), qwen2vl_mrope (multimodal sections), dyt, poly_norm,
  group_norm, relu_squared, sparsemax, fused_moe, attention variants: kernels with no counterpart
  in the modelled steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from collectors.public.kernel_rows import KernelImport, combine
from perfmodel.kernels import work as W

REPO = "linkedin/Liger-Kernel"
SOURCE = "liger_kernel_benchmarks"

GPU_KEYS = {
    "NVIDIA A100-SXM4-40GB": "A100-40GB",
    "NVIDIA A100-SXM4-80GB": "A100-80GB",
    "NVIDIA B200": "B200",
    "NVIDIA GeForce RTX 3090": "RTX-3090",
    "NVIDIA GeForce RTX 4090": "RTX-4090",
    "NVIDIA H100 80GB HBM3": "H100-SXM",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H100 PCIe": "H100-PCIe",
}

SCRIPT_DTYPES: dict[str, tuple[str, str]] = {
    "cross_entropy": (
        "fp32",
        "_input = torch.randn(B * T, V, requires_grad=True, device=...) (no dtype: fp32)",
    ),
    "megatron_cross_entropy": (
        "bf16",
        "logits = torch.randn(s, b, v, ..., dtype=torch.bfloat16); torch provider: F.cross_entropy(logits.float())",
    ),
    "megatron_rms_norm": ("bf16", "torch.randn(s, b, h, ..., dtype=torch.bfloat16)"),
    "megatron_swiglu": ("bf16", "torch.randn(s, b, 2 * ffn_local, ..., dtype=torch.bfloat16)"),
}
"""Kernels whose benchmark config names no dtype: the dtype the script's tensors have (its line)."""

MODEL_VOCAB = {
    "llama_2_7b": 32000, "llama_3_8b": 128256, "qwen2.5_7b": 152064, "qwen2.5_14b": 152064,
    "qwen2.5_72b": 152064, "deepseek_v2_lite": 102400, "deepseek_v3": 129280,
}  # fmt: skip
"""vocab_size of the model configs the B200 cross-entropy sweep names (benchmark_model_configs.py)."""

SKIPPED_KERNELS = {
    **dict.fromkeys(("swiglu", "geglu", "tiled_swiglu", "tiled_geglu"), "whole MLP module (matmul-dominated)"),
    **dict.fromkeys(
        ("fused_linear_cross_entropy", "fused_linear_jsd", "fused_linear_cpo_loss", "fused_linear_orpo_loss",
         "fused_linear_simpo_loss", "fused_linear_grpo_loss_sequence", "fused_linear_grpo_loss_token",
         "kto_loss", "distill_cosine_loss", "distill_jsd_loss", "jsd", "tvd", "kl_div"),
        "loss with its LM-head matmul fused in, or outside the modelled steps",
    ),
}  # fmt: skip


def _provider_impl(kernel: str, provider: str) -> str | None:
    if provider in ("huggingface", "torch"):
        return "eager"
    if provider == "torch_compile" or (kernel == "megatron_swiglu" and provider == "megatron"):
        return "compiled"
    if kernel == "megatron_rms_norm" and provider == "megatron":
        return "eager"  # WrappedTorchNorm returns a plain torch.nn.RMSNorm
    if provider.startswith("liger") or provider == "megatron-fused":
        return "fused"
    return None  # Megatron's vocab-parallel cross-entropies: other op chains than the census counted


def _dtype(cfg: dict[str, Any], kernel: str) -> str | None:
    named = str(cfg.get("dtype", ""))
    if named:
        return {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(named)
    if kernel in SCRIPT_DTYPES:
        return SCRIPT_DTYPES[kernel][0]
    return None


def _tokens(cfg: dict[str, Any], x: float, x_name: str) -> int:
    """Rows of the B200-era scripts: x is the swept sequence length / BT; bsz from the config."""
    if x_name in ("T", "BT"):
        return int(x) * (int(cfg.get("bsz", 1)) if x_name == "T" else 1)
    return int(cfg.get("bsz", 1)) * int(cfg.get("seq_len", 1))


# Each maker: (config, x, x_name, dtype, impl, phase) -> KernelWork | None, and a one-line note.
Maker = Callable[[dict[str, Any], float, str, str, str, str], W.KernelWork | None]


def _rms_norm(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    # M x H, H swept; the eager provider is the script's own copy of Hugging Face LlamaRMSNorm
    return W.norm_work(int(cfg["M"]), int(x), dtype, variant="rms", impl=impl, phase=phase)


def _layer_norm(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    if "M" in cfg:  # M x N, N swept
        return W.norm_work(int(cfg["M"]), int(x), dtype, variant="layer", impl=impl, phase=phase)
    return W.norm_work(
        _tokens(cfg, x, x_name), int(cfg["hidden_size"]), dtype, variant="layer", impl=impl, phase=phase
    )


def _megatron_rms_norm(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    rows = int(cfg["S"]) * int(cfg["B"])
    return W.norm_work(
        rows, int(x), dtype, variant="rms-torch" if impl == "eager" else "rms", impl=impl, phase=phase
    )


def _fused_add_rms_norm(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    if impl != "eager" or "M" not in cfg or dtype != "fp32":
        return None  # fused-add kernels and the bf16 sweep (casts around the add) are not modelled
    rows, cols = int(cfg["M"]), int(x)
    add = W.elementwise_work(rows * cols, dtype, variant="add", phase=phase)
    norm = W.norm_work(rows, cols, dtype, variant="rms", phase=phase)
    return combine([norm, add])


def _rope(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    q_heads = int(cfg.get("num_q_heads", cfg.get("num_attention_heads", 0)))
    kv_heads = int(cfg.get("num_kv_heads", cfg.get("num_key_value_heads", 0)))
    if x_name == "H":  # hidden size swept at a fixed sequence length (batch 1)
        tokens, hidden = int(cfg["seq_len"]), int(x)
    else:  # sequence length swept (batch 1: q is (1, seq_len, heads, head_dim))
        tokens, hidden = int(x) * int(cfg.get("bsz", 1)), int(cfg["hidden_size"])
    return W.rotary_work(tokens, q_heads, kv_heads, hidden // q_heads, dtype, impl=impl, phase=phase)


def _cross_entropy(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    if "B" in cfg:  # B*T x V, V swept
        return W.loss_work(int(cfg["B"]) * int(cfg["T"]), int(x), dtype, impl=impl, phase=phase)
    if x_name == "model_config":
        return W.loss_work(_tokens(cfg, 0, ""), MODEL_VOCAB[str(x)], dtype, impl=impl, phase=phase)
    return W.loss_work(int(x), int(cfg["vocab_size"]), dtype, impl=impl, phase=phase)


def _megatron_cross_entropy(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    return W.loss_work(int(cfg["S"]) * int(cfg["B"]), int(x), dtype, impl=impl, phase=phase)


def _megatron_swiglu(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    rows, ffn = int(cfg["S"]) * int(cfg["B"]), int(x)
    act = W.activation_work(rows, ffn, dtype, variant="swiglu", impl=impl, phase=phase)
    if impl != "eager" or phase == "forward":
        return act
    # the eager input is torch.chunk(y, 2, -1): its backward concatenates the two gradients
    cat = W.elementwise_work(2 * rows * ffn, dtype, variant="copy", inputs=1, outputs=1, phase="forward")
    return combine([act, cat])


def _embedding(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    tokens, vocab, dim = int(cfg["B"]) * int(cfg["T"]), int(x), int(cfg["D"])
    work = W.embedding_work(tokens, vocab, dim, dtype, impl=impl, phase=phase)
    if phase == "forward":
        return work
    # `full` (benchmark_embedding.py) calls output.backward(torch.randn_like(output)): the random
    # upstream gradient is written each call, and without `grad_to_none` autograd adds each call's
    # dense (vocab x dim) weight gradient to `.grad` (read both, write one)
    e = W.BYTES_PER_ELEMENT[dtype]
    randn = W.KernelWork(
        kind="elementwise", impl="eager", variant="copy", dtype=dtype, phase="forward", flops=0.0,
        bytes=float(tokens * dim * e), bytes_moved=float(tokens * dim * e), launches=1.0, shape=(tokens, dim),
    )  # fmt: skip
    accumulate = W.elementwise_work(vocab * dim, dtype, variant="add", inputs=2, outputs=1)
    return combine([work, randn, accumulate])


def _softmax(cfg, x, x_name, dtype, impl, phase):  # type: ignore[no-untyped-def]
    if "M" in cfg:
        rows, cols = int(cfg["M"]), int(x)
    else:
        rows, cols = _tokens(cfg, x, x_name), int(cfg["hidden_size"])
    return W.elementwise_work(
        rows * cols, dtype, variant="softmax", inputs=1, outputs=1, impl=impl, phase=phase, rows=rows
    )


MAKERS: dict[str, Maker] = {
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "megatron_rms_norm": _megatron_rms_norm,
    "fused_add_rms_norm": _fused_add_rms_norm,
    "rope": _rope,
    "cross_entropy": _cross_entropy,
    "megatron_cross_entropy": _megatron_cross_entropy,
    "megatron_swiglu": _megatron_swiglu,
    "embedding": _embedding,
    "softmax": _softmax,
}


SERIES = ("kernel_name", "kernel_provider", "kernel_operation_mode", "extra_benchmark_config_str", "gpu_name",
          "source_file", "first_commit", "timestamp")  # fmt: skip
"""Columns that identify one size sweep (x varies within it)."""


def flat_series(points: list[tuple[tuple[Any, ...], float, float]]) -> set[tuple[Any, ...]]:
    """Sweeps (by key) whose time stays flat while their bytes grow 4x or more: of (key, bytes, seconds)."""
    by_key: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for key, size, seconds in points:
        by_key.setdefault(key, []).append((size, seconds))
    flat = set()
    for key, pts in by_key.items():
        if len(pts) >= 3:
            (b_lo, t_lo), (b_hi, t_hi) = min(pts), max(pts)
            if b_hi >= 4 * b_lo and t_hi < 1.5 * t_lo:
                flat.add(key)
    return flat


def import_liger_kernel_benchmarks(path: str | Path) -> KernelImport:
    out = KernelImport(SOURCE)
    kept: list[tuple[tuple[Any, ...], W.KernelWork, str, dict[str, Any]]] = []
    for r in pd.read_csv(path).to_dict("records"):
        kernel, provider, mode = (
            str(r[c]) for c in ("kernel_name", "kernel_provider", "kernel_operation_mode")
        )
        if r["metric_name"] != "speed":
            out.skip("memory row (peak MB, not a time)")
            continue
        if mode not in W.PHASES:
            out.skip(f"mode {mode} (inference)")
            continue
        if kernel not in MAKERS:
            out.skip(f"{kernel}: {SKIPPED_KERNELS.get(kernel, 'no counterpart in the modelled steps')}")
            continue
        impl = _provider_impl(kernel, provider)
        gpu = GPU_KEYS.get(str(r["gpu_name"]))
        cfg = json.loads(r["extra_benchmark_config_str"])
        dtype = _dtype(cfg, kernel)
        if impl is None or gpu is None or dtype is None:
            out.skip(f"{kernel}: provider {provider}, gpu or dtype not mapped")
            continue
        x: Any = r["x_value"] if r["x_name"] == "model_config" else float(r["x_value"])
        work = MAKERS[kernel](cfg, x, str(r["x_name"]), dtype, impl, mode)
        if work is None:
            out.skip(
                f"{kernel}: provider {provider} in {dtype} (fused-add kernel or cast chain not modelled)"
            )
            continue
        kept.append((tuple(r[c] for c in SERIES), work, gpu, r))
    flat = flat_series([(key, w.bytes_moved, float(r["y_value_50"])) for key, w, _, r in kept])
    for key, work, gpu, r in kept:
        if key in flat:
            out.skip("sweep time flat while its bytes grow >= 4x (harness cost, not the kernel)")
            continue
        kernel, commit = str(r["kernel_name"]), str(r["first_commit"])
        notes = f"x {r['x_name']}={r['x_value']}, config {r['extra_benchmark_config_str']}"
        if kernel in SCRIPT_DTYPES and '"dtype"' not in str(r["extra_benchmark_config_str"]):
            notes += f"; dtype from the script: {SCRIPT_DTYPES[kernel][1]}"
        if kernel == "rms_norm" and work.impl == "eager":
            notes += (
                "; the script's LlamaRMSNorm keeps an fp32 weight (its output is fp32), the census's is bf16"
            )
        out.add(
            work,
            gpu=gpu,
            time_s=float(r["y_value_50"]) / 1e3,
            citation=f"{REPO}@{commit}:{r['source_file']} (shapes: benchmark/scripts/benchmark_{kernel}.py@{commit})",
            identity={k: r[k] for k in (*SERIES, "x_value", "y_value_50")},
            gpu_name_raw=str(r["gpu_name"]),
            provider_raw=str(r["kernel_provider"]),
            kernel_name_raw=kernel,
            time_p20_s=float(r["y_value_20"]) / 1e3,
            time_p80_s=float(r["y_value_80"]) / 1e3,
            measured_at=str(r["timestamp"]),
            notes=notes,
        )
    return out
