"""stas00/ml-engineering: the torch.compile study on one B200 (training/performance/README.md).

Two settings, each timed in eager mode and under torch.compile() (default, "reduce-overhead",
"max-autotune"): Llama-3.2-1B (NousResearch/Llama-3.2-1B, the same config as Meta's) at batch 1 x
512 tokens and Llama-3.1-8B at batch 1 x 8192 tokens, bf16 weights, SDPA, torch 2.13.0+cu130.
The benchmark script (training/performance/benchmarks/torch-compile-bench.py of the same
repository) loads the model with dtype=bfloat16 and attn_implementation="sdpa", enables gradient
checkpointing for the backward workloads, feeds random token ids (labels = inputs), runs one
cold step and 3 warm-up steps, and reports the mean of the next 10 steps.

Normalisation:
- "forward+backward": zero_grad + forward + loss.backward(), no optimizer step -> optimizer
  'none', includes_optimizer_step false. "+ AdamW step": the same plus torch.optim.AdamW.step()
  on the bf16 parameters -> optimizer 'adamw'.
- precision bf16 (weights in bf16, no autocast); activation_checkpointing true for both.
- eager -> torch_compile false; the three compile modes -> torch_compile true (the mode is in
  notes: the workload has no field for it, so the three rows of one workload share a run_group
  and count as one vote).
- step_time_s = the published steady-state ms / 1000; tokens_per_s = batch x seq / step time.
- Skipped: forward-only rows (inference under no_grad, not training).
"""

from __future__ import annotations

import re
from pathlib import Path

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_int, parse_number, read_csv

GPU_KEYS: dict[str, str | None] = {"NVIDIA B200": "B200"}
MODELS: dict[str, tuple[str, str]] = {
    "Llama 3.2 1B (NousResearch/Llama-3.2-1B)": ("llama3.2-1b", "llama"),
    "Llama 3.1 8B (meta-llama/Llama-3.1-8B)": ("llama3.1-8b", "llama"),
}
SCRIPT = "training/performance/benchmarks/torch-compile-bench.py"
WARMUP_STEPS = 4
"""The cold (first) step and 3 warm-up steps run before the 10 timed ones."""
MEASURED_STEPS = 10


def import_ml_engineering_torch_compile_b200(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        if r["row_kind"] != "training_step":
            sink.skip("forward-only (inference under no_grad)")
            continue
        gpu = GPU_KEYS.get(r["gpu"])
        if gpu is None:
            sink.skip(f"gpu not in catalog: {r['gpu']}")
            continue
        model = MODELS.get(r["model"])
        if model is None:
            sink.skip(f"model without a catalog key: {r['model']}")
            continue
        with_optimizer = r["workload"].strip() == "+ AdamW step"
        if not with_optimizer and r["workload"].strip() != "forward+backward":
            sink.skip(f"unknown workload {r['workload']}")
            continue
        seq, batch = parse_int(r["seq_len"]), parse_int(r["micro_batch_size"])
        step = parse_number(r["step_time_s"])
        if (
            not (seq and batch and step)
            or r["precision"] != "bf16"
            or r["activation_checkpointing"] != "True"
        ):
            sink.skip("missing sequence length, batch or step time, or not bf16 with checkpointing")
            continue
        mode = r["compile_mode"].strip()
        compiled = mode != "eager"
        ms = re.match(r"[\d.]+", r["src_cell"])
        sink.add(
            config={"model": r["model"], "workload": r["workload"], "mode": mode},
            run_key={"model": model[0], "optimizer": with_optimizer, "compile": compiled},
            citation=(
                f"{r['citation_repo']}@{r['citation_commit']}:{r['citation_path']} "
                f"(torch.compile tables, row '{r['workload'].strip()}', column {mode})"
            ),
            collected_at="2026-08-09",
            torch_version="2.13.0+cu130",
            notes=(
                f"step_time_s = {ms.group(0) if ms else r['src_cell']} ms / 1000 (mean of {MEASURED_STEPS} steps after "
                f"{WARMUP_STEPS} untimed ones, {SCRIPT}); {r['model']}; {r['workload'].strip()}; compile: {mode}; "
                "bf16 weights, SDPA, gradient checkpointing on, random token ids"
            ),
            model=model,
            batch=Batch(batch, batch, seq),
            layout=Layout(gpu, 1, gpu_name_raw=r["gpu"]),
            precision="bf16",
            optimizer="adamw" if with_optimizer else "none",
            includes_optimizer_step=with_optimizer,
            activation_checkpointing=True,
            attention_kernel="sdpa",
            torch_compile=compiled,
            framework="hf-eager",
            step_time_s=step,
            warmup_steps=WARMUP_STEPS,
            measured_steps=MEASURED_STEPS,
        )
    return sink.result()
