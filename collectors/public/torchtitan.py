"""torchtitan performance tables (docs/performance.md history, benchmarks/*.md, quantization docs).

Normalisation:
- step_time_s = global_batch * seq_len / (tokens_per_sec_per_gpu * num_gpus) (WPS/TPS are per
  GPU as logged by train.py). global_batch = the table's, else local batch x data-parallel
  degree (num_gpus / (TP*PP*CP)).
- seq_len: the table's, else the default quoted in `seq_len_note` from the train config toml or
  the docs text (4096 for Llama 2, 8192 for Llama 3/3.1).
- precision: bf16 -> amp_bf16 (FSDP2 mixed precision keeps fp32 sharded params); bf16 + float8
  linears / float8 tensorwise / rowwise -> fp8.
- activation_checkpointing: full -> True, none -> False, selective (layer/op) -> empty (partial
  recomputation has no schema value; kept in notes).
- peak_memory_gb = memory_gib * 1.073741824.
- Skipped: values superseded the next day (3faaa1a corrected 9515a140); OOM cells (the schema
  requires a step time); GPUs not in the catalog (the Grand Teton H100 96GB HBM2e at 500 W,
  power-limited B200, unnamed Blackwell); models without a catalog key.
"""

from __future__ import annotations

import re
from pathlib import Path

from collectors.public._common import (
    Batch,
    ImportResult,
    Layout,
    RowSink,
    is_oom,
    parse_int,
    parse_number,
    parse_percent,
    read_csv,
)

GPU_KEYS: dict[str, str | None] = {
    "A100 80GB": "A100-80GB",
    "H200 (8/host, 400Gb/s RDMA per GPU)": "H200",
    "H100 (HBM2e, 94/95GB, lower-TDP SXM)": None,
    "H100 96GB HBM2e (Grand Teton, 500W power limit)": None,
    "B200 (power limited)": None,
    "GB200": "GB200",
    "NVIDIA Blackwell SM100+ (exact model not stated)": None,
}
MODELS = {
    "Llama 2 13B": "llama2-13b",
    "Llama 2 70B": "llama2-70b",
    "Llama 3 8B": "llama3-8b",
    "Llama 3 70B": "llama3-70b",
    "Llama 3.1 8B": "llama3.1-8b",
    "Llama 3.1 70B": "llama3.1-70b",
    "Llama 3.1 405B": "llama3.1-405b",
}
PRECISIONS = {
    "bf16": "amp_bf16",
    "None (bfloat16)": "amp_bf16",
    "BF16": "amp_bf16",
    "bf16 + float8 linears": "fp8",
    "bf16 + float8 linears (fsdp float8 all-gather)": "fp8",
    "float8 tensorwise": "fp8",
    "float8 rowwise": "fp8",
}
GIB_TO_GB = 1.073741824


def _degree(text: str, name: str) -> int:
    match = re.search(rf"\b{name}\s*=?\s*(\d+)", text)
    return int(match.group(1)) if match else 1


def import_torchtitan_benchmarks(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        if "SUPERSEDED" in r["notes"] or "superseded" in r["table"]:
            sink.skip("superseded by the next-day correction (3faaa1a)")
            continue
        if is_oom(r["tokens_per_sec_per_gpu"]):
            sink.skip("OOM cell (the schema requires a step time)")
            continue
        gpu = GPU_KEYS.get(r["gpu"], "?")
        if gpu is None or gpu == "?":
            sink.skip(f"gpu not in catalog: {r['gpu']}")
            continue
        model = MODELS.get(r["model"])
        if model is None:
            sink.skip(f"model without a catalog key: {r['model'][:40]}")
            continue
        precision = PRECISIONS.get(r["precision"])
        if precision is None:
            sink.skip(f"precision without a schema value: {r['precision']}")
            continue
        n_gpus = parse_int(r["n_gpus"]) or parse_int(r["derived_n_gpus"])
        seq = parse_int(r["seq_len"])
        seq_from = "table"
        if seq is None:
            numbers = [int(x) for x in re.findall(r"\d{4,6}", r["seq_len_note"])]
            seq = max(numbers) if numbers else None
            seq_from = f"note: {r['seq_len_note']}"
        tps_gpu = parse_number(r["tokens_per_sec_per_gpu"])
        local = parse_int(r["local_batch_size"])
        if not (n_gpus and seq and tps_gpu and local):
            sink.skip("missing GPU count, sequence length, batch or throughput")
            continue
        tp, pp, cp = (
            _degree(r["parallelism"], "TP"),
            _degree(r["parallelism"], "PP"),
            _degree(r["parallelism"], "CP"),
        )
        dp = n_gpus // (tp * pp * cp)
        gbs = parse_int(r["global_batch_size"]) or local * dp
        if gbs != local * dp:
            sink.skip("global batch inconsistent with local batch x data parallel")
            continue
        ac = r["activation_checkpointing"].lower()
        ac_value = True if ac.startswith("full") else False if ac in ("no", "none") else None
        step = gbs * seq / (tps_gpu * n_gpus)
        memory = parse_number(r["memory_gib"])
        sink.add(
            config={
                k: r[k]
                for k in (
                    "source",
                    "table",
                    "model",
                    "gpu",
                    "precision",
                    "parallelism",
                    "techniques",
                    "local_batch_size",
                    "activation_checkpointing",
                    "seq_len",
                    "n_gpus",
                    "derived_n_gpus",
                )
            },
            citation=r["source"] + f" (table '{r['table']}')",
            hardware_id=r["gpu"],
            notes=(
                f"step_time_s = GBS*seq/(TPS_per_gpu*GPUs) = {gbs}*{seq}/({tps_gpu:g}*{n_gpus}); seq_len from {seq_from}; "
                f"{r['parallelism']}; {r['techniques'] or 'eager'}; AC {r['activation_checkpointing'] or '-'}; {r['notes']}"
            ),
            model=(model, "llama"),
            batch=Batch(local, gbs, seq),
            precision=precision,
            activation_checkpointing=ac_value,
            layout=Layout(gpu, n_gpus, "fsdp", tp, pp, cp, gpu_name_raw=r["gpu"]),
            framework="torchtitan",
            step_time_s=step,
            tokens_per_s=tps_gpu * n_gpus,
            peak_memory_gb=memory * GIB_TO_GB if memory else None,
            reported_mfu=parse_percent(r["mfu"]),
        )
    return sink.result()
