"""Published peak-memory measurements, normalised for checking the analytic memory model.

Only rows whose configuration is fully stated are kept (model, GPUs, sharding, tensor /
pipeline / context parallel, micro-batch, sequence length, precision, checkpointing). Each row says
what its number is (`peak_memory_kind`): `allocated` (torch.cuda.max_memory_allocated), `reserved`
(max_memory_reserved) or `device` (nvidia-smi: everything on the GPU, CUDA context included).
  * torchtitan docs/performance.md (Dec 2024 H100 tables): Llama 3.1 8B / 70B / 405B, memory in
    GiB per GPU as logged by train.py (torch.cuda.max_memory_reserved): reserved.
  * ml-engineering insights/when-to-upgrade-gpus: Llama 3.1 8B on 8 x H200 / B200, DeepSpeed
    ZeRO-3 + activation checkpointing + CPU AdamW offload + Liger-Kernel (fused cross-entropy),
    "peak = max_memory_reserved, worst rank": reserved.
  * Hugging Face transformers docs perf_train_gpu_one (v4.26): bert-large-uncased sequence
    classification on one V100 16GB with the Trainer, batch / accumulation / checkpointing / fp16 /
    Adafactor / bnb Adam8bit variants, nvidia-smi "GPU memory occupied": device.
Rows without a stated model, GPU count or sequence length are skipped with a counted reason; the
single-GPU sources whose sequence lengths are not stated (LLaMA-Factory's "max length" rows, PEFT's
length-bucketed runs whose peak includes generation at batch 50, torchao's torchtune rows) are
not imported.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from collectors.public.torchtitan import GIB_TO_GB, _degree
from perfmodel.paths import peak_memory_path

COLUMNS = tuple(
    "source citation model_name gpu num_gpus strategy tensor_parallel pipeline_parallel "
    "context_parallel micro_batch_size grad_accum_steps seq_len precision activation_checkpointing "
    "checkpointing_as_published checkpointing_policy cpu_offload fused_cross_entropy framework optimizer "
    "optimizer_state attention_kernel framework_recipe peak_memory_gb peak_memory_kind notes".split()
)


def import_torchtitan_memory(path: Path, skipped: Counter[str]) -> list[dict[str, Any]]:
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    frame = pd.read_csv(path)
    rows = []
    models = {
        "Llama 3.1 8B": "llama3.1-8b",
        "Llama 3.1 70B": "llama3.1-70b",
        "Llama 3.1 405B": "llama3.1-405b",
    }
    for rec in frame.to_dict("records"):
        mem = rec.get("memory_gib")
        if not isinstance(mem, str) and pd.isna(mem):
            continue
        model = models.get(str(rec.get("model")))
        gpu_raw = str(rec.get("gpu"))
        if model is None:
            skipped["model not named or not in catalog"] += 1
            continue
        if "H100" not in gpu_raw or pd.isna(rec.get("n_gpus")):
            skipped["GPU count not stated"] += 1
            continue
        par = str(rec.get("parallelism"))
        prec = str(rec.get("precision"))
        ac = str(rec.get("activation_checkpointing"))
        seq = rec.get("seq_len")
        rows.append(
            {
                "source": "torchtitan_benchmarks",
                "citation": str(rec.get("source")),
                "model_name": model,
                "gpu": "H100-SXM",
                "num_gpus": int(rec["n_gpus"]),
                "strategy": "fsdp",
                "tensor_parallel": _degree(par, "TP"),
                "pipeline_parallel": _degree(par, "PP"),
                "context_parallel": _degree(par, "CP"),
                # torchtitan pipelines split the local batch into micro-batches of 1 (its default
                # pipeline_parallel_microbatch_size); without PP the local batch is the micro-batch
                "micro_batch_size": 1 if _degree(par, "PP") > 1 else int(rec["local_batch_size"]),
                "grad_accum_steps": int(rec["local_batch_size"]) if _degree(par, "PP") > 1 else 1,
                "seq_len": int(seq) if not pd.isna(seq) else 8192,  # llama3 toml default (seq_len_note)
                "precision": "fp8" if "float8" in prec.lower() else "amp_bf16",
                "activation_checkpointing": ac in ("full", "selective"),
                "checkpointing_as_published": ac,
                "checkpointing_policy": "selective" if ac == "selective" else "full",
                "cpu_offload": False,
                "fused_cross_entropy": False,
                "framework": "torchtitan",
                "optimizer": "adamw",
                "optimizer_state": "fp32",
                "peak_memory_gb": float(mem) * GIB_TO_GB,
                "peak_memory_kind": "reserved",
                "notes": f"{gpu_raw}; {par}; {rec.get('techniques')}",
            }
        )
    return rows


def import_ml_engineering_memory(path: Path, skipped: Counter[str]) -> list[dict[str, Any]]:
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    frame = pd.read_csv(path)
    rows = []
    for rec in frame.to_dict("records"):
        if pd.isna(rec.get("peak_mem_gib")):
            continue
        seq_text = str(rec.get("seq_len")).strip().upper()
        if not seq_text.endswith("K"):
            skipped["sequence length not stated"] += 1
            continue
        rows.append(
            {
                "source": "ml_engineering_llama31_8b_h200_vs_b200",
                "citation": str(rec.get("source")),
                "model_name": "llama3.1-8b",
                "gpu": str(rec.get("gpu")),
                "num_gpus": int(rec["n_gpus"]),
                "strategy": "zero3",
                "tensor_parallel": 1,
                "pipeline_parallel": 1,
                "context_parallel": 1,
                "micro_batch_size": int(rec["micro_batch_size"]),
                "grad_accum_steps": 1,
                "seq_len": int(seq_text[:-1]) * 1024,
                "precision": "bf16",
                "activation_checkpointing": True,
                "checkpointing_as_published": "full",
                "checkpointing_policy": "full",
                "cpu_offload": True,
                "fused_cross_entropy": True,
                "framework": "deepspeed",
                # Liger-Kernel's apply_liger_kernel_to_llama: rope, rms_norm, swiglu, fused linear CE
                "framework_recipe": '{"fused": ["norm", "activation", "rotary", "loss"], "loss": "fused-linear"}',
                "optimizer": "adamw",
                "optimizer_state": "fp32",
                "peak_memory_gb": float(rec["peak_mem_gib"]) * GIB_TO_GB,
                "peak_memory_kind": "reserved",
                "notes": str(rec.get("config")),
            }
        )
    return rows


HF_DOCS_OPTIMIZERS = {"adamw (Trainer default)": ("adamw", "fp32"), "adafactor": ("adafactor", "fp32"),
                      "bnb.optim.Adam8bit": ("adamw", "8bit")}  # fmt: skip


def import_hf_docs_memory(path: Path, skipped: Counter[str]) -> list[dict[str, Any]]:
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    frame = pd.read_csv(path)
    rows = []
    for rec in frame.to_dict("records"):
        if pd.isna(rec.get("peak_memory_gb")):
            continue
        optimizer = HF_DOCS_OPTIMIZERS.get(str(rec.get("optimizer")))
        if "bert-large" not in str(rec.get("model")) or optimizer is None:
            skipped["model or optimizer not modelled"] += 1
            continue
        ckpt = str(rec.get("activation_checkpointing")) == "True"
        rows.append(
            {
                "source": "hf_transformers_perf_docs",
                "citation": f"{rec['citation_repo']}@{rec['citation_commit']}:{rec['citation_path']}",
                "model_name": "bert-large",
                "gpu": "V100-16GB",
                "num_gpus": 1,
                "strategy": "ddp",
                "tensor_parallel": 1,
                "pipeline_parallel": 1,
                "context_parallel": 1,
                "micro_batch_size": int(rec["micro_batch_size"]),
                "grad_accum_steps": int(rec["grad_accum"]),
                "seq_len": int(rec["seq_len"]),
                "precision": str(rec["precision"]),
                "activation_checkpointing": ckpt,
                "checkpointing_as_published": "full" if ckpt else "none",
                "checkpointing_policy": "full",
                "cpu_offload": False,
                "fused_cross_entropy": False,
                "framework": "hf-eager",
                # transformers v4.26: BertSelfAttention computes attention in Python (SDPA came in
                # v4.41); the Trainer's default optimizer was transformers' own AdamW (a loop)
                "attention_kernel": "eager",
                "framework_recipe": '{"optimizer_impl": "for-loop", "kv_cache": false}',
                "optimizer": optimizer[0],
                "optimizer_state": optimizer[1],
                "peak_memory_gb": float(rec["peak_memory_gb"]),
                "peak_memory_kind": "device",
                "notes": f"{rec['model']}; {rec['optimizer']}; {rec['peak_memory_kind']}",
            }
        )
    return rows


def import_peak_memory(public_dir: Path) -> tuple[Any, Counter[str]]:
    """All published peak-memory rows as a DataFrame, and skip reasons."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    skipped: Counter[str] = Counter()
    rows = import_torchtitan_memory(public_dir / "torchtitan_benchmarks.csv", skipped)
    rows += import_ml_engineering_memory(public_dir / "ml_engineering_llama31_8b_h200_vs_b200.csv", skipped)
    rows += import_hf_docs_memory(public_dir / "hf_transformers_perf_docs.csv", skipped)
    return pd.DataFrame(rows, columns=list(COLUMNS)), skipped


def write_peak_memory(public_dir: Path, out: Path | None = None) -> tuple[Path, Counter[str]]:
    """Write the peak-memory table (default `perfmodel.paths.peak_memory_path()`)."""
    out = out or peak_memory_path()
    frame, skipped = import_peak_memory(public_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(out, index=False)
    return out, skipped
