"""unslothai/unsloth README benchmark tables, every version (vendor numbers; lowest trust).

No row states its whole workload, so every row is skipped with the reason for its table kind:
- fixed_notebook_run: total seconds of a linked Colab/Kaggle notebook; step count, batch and
  sequence length are set in the notebook, and the model is named only for two tables.
- one_epoch: one epoch over a dataset of a rounded size; model and sequence length not stated.
- one_epoch_peak_memory: peak memory only, no time.
- max_context_length: the longest context that fits a VRAM budget: a capacity point, no time.
- LLaMA-Factory's wiki table as quoted (LLaMA2-7B, batch 4, accumulation 2, LoRA r8, "max length
  1024", tokens per GPU per second): the A100 variant (40/80 GB, SXM/PCIe) is not stated, nor
  the 16-bit precision (fp16 or bf16), nor the tokens per sample ("max length" is the truncation
  length; the dataset and packing are not stated), so neither the accelerator nor the step is
  known. The Unsloth rows would also need a framework family perfmodel does not have (Triton
  kernels with manual autograd).
"""

from __future__ import annotations

from pathlib import Path

from collectors.public._common import ImportResult, RowSink, read_csv

REASONS: dict[str, str] = {
    "fixed_notebook_run": "notebook total time: steps, batch and sequence length are set in the notebook, not stated",
    "one_epoch": "epoch time: model and sequence length not stated",
    "one_epoch_peak_memory": "peak memory only, no time",
    "max_context_length": "capacity point (longest context that fits), not a throughput",
    "throughput": (
        "LLaMA-Factory quote: A100 variant, 16-bit precision and tokens per sample (max length only) not stated"
    ),
}
"""Skip reason by the CSV's row_kind."""


def import_unsloth_readme_benchmarks(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for kind in read_csv(path)["row_kind"]:
        sink.skip(REASONS.get(kind, f"unknown table kind {kind!r}"))
    return sink.result()
