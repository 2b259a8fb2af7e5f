"""NVIDIA NeMo / Megatron-Bridge performance summaries, NeMo AutoModel, and the NeMo long-sequence
context-parallel table.

Normalisation (Megatron-Bridge / NeMo performance summary):
- step_time_s = global_batch_size * seq_len / (tokens_per_sec_per_gpu * num_gpus).
- precision: BF16 -> amp_bf16 (Megatron keeps fp32 master weights and gradients in the
  distributed optimizer); FP8, FP8-CS, FP8-MX, MXFP8 -> fp8 (the raw recipe is in notes and in
  the row id, so FP8-CS and FP8-MX rows of one configuration are both kept); NVFP4 has no schema
  precision and is skipped; rows without a stated precision (the 25.09 page) are skipped.
- strategy: fsdp when the FSDP column is set, otherwise zero1 (Megatron's distributed optimizer
  shards optimizer state over data-parallel ranks, the NeMo default); framework nemo.
- grad_accum_steps = global_batch / (micro_batch * data_parallel), data_parallel =
  num_gpus / (TP * PP * CP), when the table gives no GA column.
- Versions: the same workload (release, system, model, task, precision recipe, variant, GPU
  count, sequence length) in several page versions keeps only the latest (README: "Many 26.x rows
  were edited during drafting. Use in_latest"); draft edits of parallel settings count as
  superseded too.
- Skipped: models without a catalog key (MoE models, Nemotron-H/3, Qwen, DeepSeek, GPT-OSS, ...);
  LoRA rows (adapter rank not stated); n/a throughput.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from collectors.public._common import (
    Batch,
    ImportResult,
    Layout,
    RowSink,
    is_missing,
    parse_int,
    parse_number,
    read_csv,
)

GPU_KEYS: dict[str, str | None] = {
    "DGX-H100": "H100-SXM",
    "DGX-B200": "B200",
    "DGX-GB200": "GB200",
    "DGX-B300": "B300",
    "DGX-GB300": "GB300",
}
PRECISIONS: dict[str, str | None] = {
    "BF16": "amp_bf16",
    "FP8": "fp8",
    "FP8-CS": "fp8",
    "FP8-MX": "fp8",
    "MXFP8": "fp8",
    "NVFP4": None,
}
# Raw model name -> (catalog key, family).
MODELS: dict[str, tuple[str, str]] = {
    "GPT3-5B": ("gpt3-5b", "gpt"),
    "GPT3-20B": ("gpt3-20b", "gpt"),
    "GPT3-175B": ("gpt3-175b", "gpt"),
    "LLAMA2-7B": ("llama2-7b", "llama"),
    "LLAMA2-13B": ("llama2-13b", "llama"),
    "LLAMA2-70B": ("llama2-70b", "llama"),
    "LLAMA3-8B": ("llama3-8b", "llama"),
    "LLAMA3_8B": ("llama3-8b", "llama"),
    "LLAMA3-70B": ("llama3-70b", "llama"),
    "LLAMA3_70B": ("llama3-70b", "llama"),
    "LLAMA3.1_405B": ("llama3.1-405b", "llama"),
    "Nemotron-340B": ("nemotron4-340b", "nemotron"),
    "Llama3 70B": ("llama3-70b", "llama"),
}
_WORKLOAD = ["release", "system", "model", "task", "precision", "variant", "n_gpus", "seq_len", "seq_len_k"]


def _model(row: pd.Series) -> str:
    """Model name; the 24.03.01 long-sequence rows name it only in the text above the table."""
    if row["model"].strip():
        return row["model"].strip()
    match = re.search(r"performance of the (LLAMA2-7B) model", row.get("context", ""))
    return match.group(1) if match else ""


def _task(row: pd.Series) -> str:
    """'LoRA', 'SFT' or '' (pre-training); 26.x pages say it only in the section title."""
    if row["task"].strip():
        return row["task"].strip()
    section = row["section"].lower()
    return "LoRA" if "lora" in section else "SFT" if "sft" in section or "finetun" in section else ""


def _keep_latest(frame: pd.DataFrame, sink: RowSink, key: list[str], flag: str) -> pd.DataFrame:
    frame = frame.copy()
    frame["_latest"] = frame[flag] == "True"
    frame = frame.sort_values(["_latest", "last_date", "first_date"], kind="stable")
    keep = ~frame.duplicated(key, keep="last")
    sink.skip("superseded by a later version of the same workload on the page", int((~keep).sum()))
    return frame[keep].sort_index()


def import_nvidia_nemo_megatron_bridge_perf_summary(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    frame["model"] = [_model(r) for _, r in frame.iterrows()]
    frame["task"] = [_task(r) for _, r in frame.iterrows()]
    frame = _keep_latest(frame, sink, _WORKLOAD, "in_latest")
    for _, r in frame.iterrows():
        if r["model"] not in MODELS:
            sink.skip("model without a catalog key" if r["model"] else "model not named")
            continue
        if r["task"] == "LoRA":
            sink.skip("LoRA row (adapter rank not stated)")
            continue
        gpu = GPU_KEYS.get(r["system"])
        if gpu is None:
            sink.skip(f"gpu not in catalog: {r['system']}")
            continue
        if is_missing(r["precision"]):
            sink.skip("precision not stated")
            continue
        precision = PRECISIONS.get(r["precision"])
        if precision is None:
            sink.skip(f"precision without a schema value: {r['precision']}")
            continue
        n_gpus = parse_int(r["n_gpus"])
        gbs = parse_int(r["global_batch_size"])
        mbs = parse_int(r["micro_batch_size"])
        seq = parse_int(r["seq_len"]) or ((parse_int(r["seq_len_k"]) or 0) * 1024) or None
        tps_gpu = parse_number(r["tokens_per_sec_per_gpu"])
        tp, pp = parse_int(r["tp"]) or 1, parse_int(r["pp"]) or 1
        cp = parse_int(r["cp"]) or 1
        if not (n_gpus and gbs and mbs and seq):
            sink.skip("missing GPU count, batch or sequence length")
            continue
        if not tps_gpu or tps_gpu <= 0 or re.search(r"[({\[]", r["tokens_per_sec_per_gpu"]):
            sink.skip("no throughput value")
            continue
        if n_gpus % (tp * pp * cp):
            sink.skip("GPU count not divisible by TP x PP x CP")
            continue
        dp = n_gpus // (tp * pp * cp)
        ga = parse_int(r["grad_accum"])
        if ga is None:
            if gbs % (mbs * dp):
                sink.skip("global batch not divisible by micro batch x data parallel")
                continue
            ga = gbs // (mbs * dp)
        fsdp = (parse_int(r["fsdp"]) or 0) > 0
        step = gbs * seq / (tps_gpu * n_gpus)
        sink.add(
            config={
                k: r[k]
                for k in (
                    *_WORKLOAD,
                    "global_batch_size",
                    "micro_batch_size",
                    "tp",
                    "pp",
                    "cp",
                    "vp",
                    "ep",
                    "fsdp",
                )
            },
            citation=f"{r['repo']}@{r['last_commit']}:{r['path']} ({r['release']}, {r['section'][-60:]})",
            collected_at=r["first_date"],
            hardware_id=r["system"],
            notes=(
                f"step_time_s = GBS*seq/(tokens_per_sec_per_gpu*GPUs) = {gbs}*{seq}/({tps_gpu:g}*{n_gpus}); "
                f"precision {r['precision']}; VP {r['vp'] or '-'}; EP {r['ep'] or '-'}; variant {r['variant'] or '-'}; "
                f"{r['task'] or 'pre-training'}; in_latest={r['in_latest']}"
            ),
            model=MODELS[r["model"]],
            batch=Batch(mbs, gbs, seq, ga),
            precision=precision,
            layout=Layout(gpu, n_gpus, "fsdp" if fsdp else "zero1", tp, pp, cp, gpu_name_raw=r["system"]),
            framework="nemo",
            step_time_s=step,
            tokens_per_s=tps_gpu * n_gpus,
        )
    return sink.result()


def import_nvidia_nemo_automodel_perf_summary(path: str | Path) -> ImportResult:
    """NeMo AutoModel (PyTorch FSDP2) on DGX-H100, BF16: time per global step is published."""
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    frame["task"] = ["lora" if "LoRA" in s else "pretrain" for s in frame["section"]]
    frame = _keep_latest(frame, sink, ["model", "task", "n_gpus", "seq_len"], "in_latest")
    for _, r in frame.iterrows():
        if r["task"] == "lora":
            sink.skip("LoRA row (adapter rank not stated)")
            continue
        if r["model"] not in MODELS:
            sink.skip("model without a catalog key")
            continue
        n_gpus = parse_int(r["n_gpus"])
        gbs = parse_int(r["global_batch_size"])
        mbs = parse_int(r["micro_batch_size"])
        seq = parse_int(r["seq_len"])
        step = parse_number(r["step_time_s"])
        tps_gpu = parse_number(r["tokens_per_sec_per_gpu"])
        if not (n_gpus and gbs and mbs and seq and step):
            sink.skip("missing GPU count, batch, sequence length or step time")
            continue
        tp, pp, cp = parse_int(r["tp"]) or 1, parse_int(r["pp"]) or 1, parse_int(r["cp"]) or 1
        sink.add(
            config={
                k: r[k]
                for k in (
                    "model",
                    "section",
                    "n_gpus",
                    "global_batch_size",
                    "micro_batch_size",
                    "seq_len",
                    "tp",
                    "pp",
                    "cp",
                    "fsdp",
                    "kernel_optimizations",
                )
            },
            citation=f"{r['repo']}@{r['last_commit']}:{r['path']} ({r['section'][-70:]})",
            collected_at=r["first_date"],
            hardware_id=r["system"] or None,
            notes=(
                f"step_time_s as published (time per global step, fwd+bwd+optimizer); kernels "
                f"{r['kernel_optimizations']}; FSDP {r['fsdp']}; mock data; in_latest={r['in_latest']}"
            ),
            model=MODELS[r["model"]],
            batch=Batch(mbs, gbs, seq, parse_int(r["grad_accum"])),
            precision="amp_bf16",
            layout=Layout("H100-SXM", n_gpus, "fsdp", tp, pp, cp, gpu_name_raw=r["system"] or "DGX-H100"),
            framework="nemo-automodel",
            step_time_s=step,
            tokens_per_s=tps_gpu * n_gpus if tps_gpu else None,
        )
    return sink.result()


def import_nvidia_nemo_long_sequence_cp(path: str | Path) -> ImportResult:
    """Model TFLOPs/GPU only: no tokens/s or step time, and turning TFLOPs back into time would need
    NeMo's FLOP formula for each sequence length. The H100 LLAMA2-7B rows are also in the
    performance summary with tokens/s (imported there). Every row is skipped with that reason."""
    path = Path(path)
    sink = RowSink(path.stem)
    sink.skip("model TFLOPs/GPU only (no tokens/s or step time)", len(read_csv(path)))
    return sink.result()
