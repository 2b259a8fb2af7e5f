"""pytorch/ao benchmark tables (torchao/optim/README.md, prototype/quantized_training/README.md,
docs/source/workflows/training.md, prototype/float8nocompile/README.md).

Kept: torchao's float8 end-to-end runs with torchtitan on one node of 8x AMD MI300X
(docs/source/workflows/training.md, "AMD MI300x"): Llama3-8B, batch 1 per GPU, sequence 8192,
100 steps, torch.compile, FSDP2, per-op selective activation checkpointing.
- step_time_s = 8 x 8192 / (median tokens/s x 8): torchtitan logs tokens/s per GPU (its tps
  metric), the table does not say per GPU or total; per GPU is also the only plausible reading
  (a total would be under 5% MFU).
- precision: "none (bfloat16)" -> amp_bf16 (FSDP2 mixed precision, fp32 sharded parameters, as
  in the torchtitan importer); "tensorwise with float8 all-gather" and "rowwise with bfloat16
  all-gather" -> fp8 (all three matmuls of each linear in float8; the all-gather dtype and the
  scaling granularity are in notes). The two fp8 rows have identical workload columns and share
  a run_group (one vote).
- activation_checkpointing empty: per-op selective recomputation has no schema value.

Skipped, counted by reason:
- GPUs not in the catalog: RTX 4070 Ti SUPER (ViT-H / ViT-giant / Llama2-1B rows); B200 rows
  are "power limited" (limit not stated; the catalog B200 runs at 1000 W).
- 8x "H100" rows (float8 e2e and float8nocompile): the H100 variant is not stated (SXM 80GB
  700 W, or the 96GB HBM2e 500 W parts of torchtitan's own H100 tables); float8nocompile rows
  also state neither the model nor the batch.
- Llama2-7B full fine-tunes (torchtune on "A100"): batch size and tokens per sample not stated,
  nor the A100 variant; the 8-/4-bit optimizer rows also change optimizer-state precision,
  which the workload cannot express.
- Llama2-1B pre-training on an RTX 4090: "Llama2-1B" is a custom config whose dims the README
  does not state; compile / checkpointing not stated; approximate ("~17k") throughput.
- rowwise_with_gw_hp: the weight-gradient matmuls stay in bf16 (mixed fp8/bf16 per linear).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_int, parse_number, read_csv

GPU_KEYS: dict[str, str | None] = {
    "MI300X": "MI300X",
    "RTX 4070 Ti SUPER": None,
    "RTX 4070 Ti SUPER 16GB": None,
    "B200 (power limited)": None,
}
MODELS: dict[str, str] = {"Llama3-8b": "llama3-8b"}
SCALING: dict[str, tuple[str, str]] = {
    "none (bfloat16)": ("amp_bf16", "bf16 baseline (FSDP2 mixed precision)"),
    "tensorwise with float8 all-gather": ("fp8", "float8 tensorwise scaling, float8 FSDP all-gather"),
    "rowwise with bfloat16 all-gather": ("fp8", "float8 rowwise scaling, bf16 FSDP all-gather"),
}
"""Scaling recipe of the e2e tables -> (precision, description)."""
SKIP_SCALING: dict[str, str] = {
    "rowwise_with_gw_hp with bfloat16 all-gather": "rowwise_with_gw_hp: weight-gradient matmuls in bf16 (mixed fp8/bf16)",
}
OPTIMIZER_README = "torchao/optim/README.md"
QT_README = "torchao/prototype/quantized_training/README.md"


def import_torchao_readme_benchmarks(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        reason = _skip_reason(r)
        if reason:
            sink.skip(reason)
            continue
        precision, described = SCALING[r["src_scaling"]]
        seq, batch, n_gpus = (
            parse_int(r["seq_len"]),
            parse_int(r["micro_batch_size"]),
            parse_int(r["num_gpus"]),
        )
        tps_gpu = parse_number(r["tokens_per_s"])
        if not (seq and batch and n_gpus and tps_gpu):
            sink.skip("missing sequence length, batch, GPU count or throughput")
            continue
        gpu = str(GPU_KEYS[r["gpu"]])  # a catalog key: _skip_reason refused the rest
        gbs = batch * n_gpus
        step = gbs * seq / (tps_gpu * n_gpus)
        sink.add(
            config={"heading": r["src_heading"], "row": r["src_raw_row"]},
            run_key={"gpu": gpu, "model": r["model"], "precision": precision},
            citation=f"{r['citation_repo']}@{r['citation_commit']}:{r['citation_path']} (table '{r['src_heading']}')",
            notes=(
                f"step_time_s = {gbs}*{seq}/({tps_gpu:g} tokens/s per GPU*{n_gpus}) (torchtitan logs tokens/s per "
                f"GPU); {described}; torchtitan + torch.compile + FSDP2, per-op selective AC (no schema value); "
                "100 steps, median tokens/s"
            ),
            model=(MODELS[r["model"]], "llama"),
            batch=Batch(batch, gbs, seq),
            layout=Layout(gpu, n_gpus, "fsdp", num_nodes=1, gpu_name_raw=r["gpu"]),
            precision=precision,
            optimizer="adamw",
            torch_compile=True,
            framework="torchtitan",
            step_time_s=step,
            tokens_per_s=tps_gpu * n_gpus,
            peak_memory_gb=parse_number(r["peak_memory_gb"]),
            measured_steps=100,
        )
    return sink.result()


def _skip_reason(r: Mapping[str, str]) -> str | None:
    """Why a row is not imported, or None (see the module docstring)."""
    if r["citation_path"] == OPTIMIZER_README and r["model"].startswith("Llama2-7B"):
        if "PyTorch" not in r["optimizer"]:
            return "torchtune Llama2-7B: low-bit optimizer state (not expressible); batch and tokens/sample not stated"
        return "torchtune Llama2-7B: batch size, tokens per sample and A100 variant not stated"
    if r["citation_path"] == QT_README and r["gpu"] == "RTX 4090":
        return "Llama2-1B pre-training on RTX 4090: model dims, compile and checkpointing not stated; approximate (~) throughput"
    gpu = r["gpu"]
    if gpu == "H100":
        return "8x H100: variant not stated (SXM 80GB 700 W or 96GB HBM2e 500 W)"
    if gpu not in GPU_KEYS:
        return f"unrecognised gpu: {gpu}"
    if GPU_KEYS[gpu] is None:
        return f"gpu not in catalog: {gpu}"
    if r["src_scaling"] in SKIP_SCALING:
        return SKIP_SCALING[r["src_scaling"]]
    if r["src_scaling"] not in SCALING or r["model"] not in MODELS:
        return f"unrecognised recipe or model: {r['src_scaling'] or r['model']}"
    return None
