"""Seeded synthetic feature tables whose true answer is known, for tests and development.

Rows conform to `perfmodel.schema`. The measured step time of each row is
    t = t_bound / efficiency * exp(noise),   noise ~ N(0, noise_sigma)
with an efficiency that is a smooth, known function of the workload and the accelerator (so a
model can learn it and transfer it to an unseen accelerator), optionally times a per-accelerator
random factor (which no model can know: it is what grouped calibration must absorb).

The synthetic accelerators (`SYNTHETIC_GPUS`) are fictional catalog entries; `synthetic_catalog()`
makes them resolvable by name for the duration of a `with` block, through the catalog's public
`use_extra_gpus` (tests only).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Iterator
from typing import Any

from perfmodel.analytic import estimate
from perfmodel.catalog import get_gpu, gpu_from_entry, use_extra_gpus
from perfmodel.errors import PerfModelError
from perfmodel.features import workload_from_row
from perfmodel.schema import conform

SYNTHETIC_GPUS: dict[str, dict[str, Any]] = {
    f"synth-{name}": {
        "name": f"synth-{name}",
        "vendor": vendor,
        "generation": generation,
        "memory_gb": mem,
        "hbm_bandwidth_gb_per_s": bw,
        "peak_tflops": {"fp32": fp32, "tf32": fp32 * 8, "bf16": bf16, "fp16": bf16},
        "intra_node_bandwidth_gb_per_s": nvl,
        "sm_count": sms,
        "release_year": year,
    }
    for name, vendor, generation, mem, bw, fp32, bf16, nvl, sms, year in (
        ("v1", "nvidia", "SynthVolta", 32, 900, 15.7, 125, 150, 80, 2017),
        ("t1", "nvidia", "SynthTuring", 24, 670, 16.3, 130, 50, 72, 2018),
        ("a1", "nvidia", "SynthAmpere", 40, 1555, 19.5, 312, 300, 108, 2020),
        ("a2", "nvidia", "SynthAmpere", 80, 2039, 19.5, 312, 300, 108, 2020),
        ("a3", "nvidia", "SynthAmpere", 24, 936, 35.6, 142, 56, 84, 2020),
        ("h1", "nvidia", "SynthHopper", 80, 3350, 67, 989, 450, 132, 2022),
        ("h2", "nvidia", "SynthHopper", 141, 4800, 67, 989, 450, 132, 2024),
        ("l1", "nvidia", "SynthAda", 48, 864, 91.6, 362, 32, 142, 2022),
        ("m1", "amd", "SynthCDNA", 128, 3200, 47.9, 383, 200, 208, 2021),
        ("m2", "amd", "SynthCDNA", 192, 5300, 81.7, 1307, 448, 304, 2023),
    )
}
"""Fictional accelerators with plausible datasheet numbers (names prefixed 'synth-')."""

_MODELS: tuple[dict[str, Any], ...] = (
    {
        "model_family": "llama",
        "hidden_size": 2048,
        "num_layers": 16,
        "num_heads": 16,
        "ffn_hidden_size": 5632,
        "vocab_size": 32000,
        "gated_mlp": True,
    },
    {
        "model_family": "llama",
        "hidden_size": 4096,
        "num_layers": 32,
        "num_heads": 32,
        "ffn_hidden_size": 11008,
        "vocab_size": 32000,
        "gated_mlp": True,
    },
    {
        "model_family": "llama",
        "hidden_size": 5120,
        "num_layers": 40,
        "num_heads": 40,
        "ffn_hidden_size": 13824,
        "vocab_size": 32000,
        "gated_mlp": True,
    },
    {
        "model_family": "gpt",
        "hidden_size": 768,
        "num_layers": 12,
        "num_heads": 12,
        "ffn_hidden_size": 3072,
        "vocab_size": 50257,
        "gated_mlp": False,
    },
    {
        "model_family": "gpt",
        "hidden_size": 1600,
        "num_layers": 48,
        "num_heads": 25,
        "ffn_hidden_size": 6400,
        "vocab_size": 50257,
        "gated_mlp": False,
    },
    {
        "model_family": "gpt",
        "hidden_size": 2560,
        "num_layers": 32,
        "num_heads": 32,
        "ffn_hidden_size": 10240,
        "vocab_size": 50257,
        "gated_mlp": False,
    },
    {
        "model_family": "mistral",
        "hidden_size": 4096,
        "num_layers": 32,
        "num_heads": 32,
        "num_kv_heads": 8,
        "ffn_hidden_size": 14336,
        "vocab_size": 32000,
        "gated_mlp": True,
    },
    {
        "model_family": "bert",
        "arch": "encoder",
        "hidden_size": 1024,
        "num_layers": 24,
        "num_heads": 16,
        "ffn_hidden_size": 4096,
        "vocab_size": 30522,
        "gated_mlp": False,
    },
)


def true_log_inefficiency(
    gpu: Any, tokens_per_micro: float, params: float, num_gpus: int, precision: str
) -> float:
    """log(1 / efficiency) on `gpu` (a GPUSpec): the known answer (before noise and per-GPU
    random factors)."""
    peak = gpu.peak_tflops.get("bf16") or gpu.peak_tflops.get("fp16") or 1.0
    ridge = math.log10(peak * 1e3 / max(gpu.hbm_bandwidth_gb_per_s, 1.0))  # FLOP/byte
    size = math.log10(params)
    eff = 0.62
    eff *= 1.0 / (1.0 + 2000.0 / tokens_per_micro)  # small micro-batches under-fill the GPU
    eff *= 1.0 / (1.0 + 0.25 * max(ridge - 2.3, 0.0))  # high flop/byte machines are harder to feed
    eff *= 0.8 + 0.05 * min(max(size - 8.0, 0.0), 3.0)  # large matmuls run closer to peak
    eff *= 0.92 ** math.log2(num_gpus)  # scaling losses
    eff *= 0.85 if precision.startswith("amp") else 1.0
    return -math.log(eff)


def make_synthetic_table(
    n_rows: int = 600,
    *,
    seed: int = 0,
    gpus: tuple[str, ...] | None = None,
    noise_sigma: float = 0.05,
    gpu_effect_sigma: float = 0.0,
) -> Any:
    """A schema-conforming feature table of `n_rows` synthetic measurements on `gpus` (catalog
    keys; default the fictional `SYNTHETIC_GPUS`, which need `synthetic_catalog()`)."""
    # numpy: kept out of import time (the CLI's cold start); pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import numpy as np
    import pandas as pd


    rng = np.random.default_rng(seed)
    names = tuple(gpus or SYNTHETIC_GPUS)
    specs = {g: get_gpu(g) for g in names}
    gpu_effect = {g: float(rng.normal(0.0, gpu_effect_sigma)) if gpu_effect_sigma else 0.0 for g in names}
    rows: list[dict[str, Any]] = []
    attempts = 0
    while len(rows) < n_rows and attempts < n_rows * 20:
        attempts += 1
        gpu = names[int(rng.integers(len(names)))]
        spec = specs[gpu]
        model = dict(_MODELS[int(rng.integers(len(_MODELS)))])
        model.setdefault("arch", "decoder")
        seq = int(rng.choice([256, 512, 1024, 2048, 4096]))
        mbs = int(rng.choice([1, 2, 4, 8, 16]))
        num_gpus = int(rng.choice([1, 1, 2, 4, 8]))
        half = "bf16" if spec.supports("bf16") else "fp16"
        precision = str(rng.choice([half, f"amp_{half}"]))
        row: dict[str, Any] = {
            **model,
            "model_name": f"{model['model_family']}-{model['hidden_size']}x{model['num_layers']}",
            "seq_len": seq,
            "micro_batch_size": mbs,
            "grad_accum_steps": 1,
            "global_batch_size": mbs * num_gpus,
            "precision": precision,
            "optimizer": "adamw",
            "activation_checkpointing": bool(rng.random() < 0.3),
            "gpu": gpu,
            "num_gpus": num_gpus,
            "num_nodes": 1,
            "strategy": "fsdp" if num_gpus > 1 and rng.random() < 0.5 else "ddp",
            "framework": str(rng.choice(["hf-eager", "torchtitan", "megatron"])),
            "status": "ok",
            "benchmark_kind": "public_training",
            "source": str(rng.choice(["synthetic-a", "synthetic-b"])),
            "source_kind": "public",
            "citation": f"perfmodel.learn.synthetic seed={seed}",
            "includes_optimizer_step": True,
        }
        try:
            est = estimate(workload_from_row(row))
        except PerfModelError:
            continue
        if est.memory.total_gb > spec.memory_gb * 1.2:
            continue  # would not fit; real tables have no such rows
        log_ineff = true_log_inefficiency(spec, mbs * seq, est.params.total, num_gpus, precision)
        log_ratio = log_ineff + gpu_effect[gpu] + float(rng.normal(0.0, noise_sigma))
        step = est.t_bound_s * math.exp(log_ratio)
        row["step_time_s"] = step
        row["tokens_per_s"] = mbs * seq * num_gpus / step
        row["params_total"] = float(est.params.total)
        key = f"{seed}:{len(rows)}:{sorted(row.items())}"
        row["row_id"] = hashlib.sha256(key.encode()).hexdigest()[:16]
        rows.append(row)
    return conform(pd.DataFrame(rows))


def synthetic_gpu_specs() -> list[Any]:
    """`SYNTHETIC_GPUS` as GPUSpecs."""
    return [gpu_from_entry(entry) for entry in SYNTHETIC_GPUS.values()]


@contextlib.contextmanager
def synthetic_catalog() -> Iterator[None]:
    """Make `SYNTHETIC_GPUS` resolvable through `perfmodel.catalog.get_gpu` inside the block, in
    this process only (`perfmodel.catalog.use_extra_gpus`): evaluation worker processes and
    subprocesses do not see them, so code that fits folds on them runs with `n_jobs=1`."""
    with use_extra_gpus(synthetic_gpu_specs()):
        yield
