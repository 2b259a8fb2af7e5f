"""The memory grid: shapes on which the FakeTensor oracle (perfmodel.measure.memory_oracle) is the
reference for the analytic memory model. 7B LoRA (Hugging Face and this project's plain-PyTorch
model) at up to 32k tokens per micro-batch, QLoRA, full fine-tuning with every optimizer state
format, GQA models with 128k vocabularies, the fused (Liger) and chunked (torchtune) losses,
checkpointing full and selective, small models at large micro-batches (fp32, tf32, autocast, with
and without checkpointing), GPT-2 and BERT, and ResNet-18 / ResNet-50 at 224x224 (SGD with
momentum and AdamW, fp32 / tf32 / bf16 / autocast, checkpointed).

`python -m collectors.memory_grid` runs the oracle on every shape and writes
`perfmodel.paths.memory_oracle_path()` (datasets/memory/oracle_grid.csv); `perfmodel memcheck`
and tests/test_memory_oracle.py compare the analytic model with it. A run takes minutes (one
fake step per shape, seconds each).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from rich.progress import Progress

from perfmodel.config import load_workload
from perfmodel.measure.memory_oracle import oracle_memory
from perfmodel.paths import memory_oracle_path

L160M = {"name": "l160m", "family": "llama", "arch": "decoder", "hidden_size": 768, "num_layers": 12, "num_heads": 12,
         "ffn_hidden_size": 2048, "vocab_size": 32000, "gated_mlp": True}  # fmt: skip
"""The 160M Llama shape of this project's `gpu` collection profile (perfmodel/measure/profiles)."""
L1B = {"name": "l1b", "family": "llama", "arch": "decoder", "hidden_size": 2048, "num_layers": 22, "num_heads": 32,
       "num_kv_heads": 4, "ffn_hidden_size": 5632, "vocab_size": 32000, "gated_mlp": True}  # fmt: skip
"""TinyLlama-1.1B's shape (the same profile)."""
L60M = {"name": "l60m", "family": "llama", "arch": "decoder", "hidden_size": 512, "num_layers": 8, "num_heads": 8,
        "ffn_hidden_size": 1408, "vocab_size": 32000, "gated_mlp": True}  # fmt: skip
L410M = {"name": "l410m", "family": "llama", "arch": "decoder", "hidden_size": 1024, "num_layers": 24, "num_heads": 16,
         "ffn_hidden_size": 2816, "vocab_size": 32000, "gated_mlp": True}  # fmt: skip
"""The 60M and 410M Llama shapes of the same profile."""


def _case(name: str, regime: str, model: str | dict[str, Any], framework: str = "hf-eager", **training: Any) -> dict[str, Any]:
    if training.get("lora_r") and "lora_target_modules" not in training:
        training["lora_target_modules"] = 2  # PEFT's default q, v (a recipe's own default may be wider)
    if framework == "torchtune" and not training.get("lora_r"):
        # torch.optim.AdamW as counted (torchtune's single-device full configs default to paged 8-bit in backward)
        training.setdefault("optimizer_state", "fp32")
        training.setdefault("optimizer_in_backward", False)
    config = {
        "model": {"name": model} if isinstance(model, str) else dict(model),
        "training": {"tokens": 1.0e8, **training},
        "hardware": {"gpu": "H200"},
        "framework": framework,
    }
    return {"case": name, "regime": regime, "config": config}


def _cnn(model: str, precision: str, batch: int, optimizer: str, framework: str = "torch-eager", **training: Any) -> dict[str, Any]:
    """A ResNet at 224x224 (the catalog's) trained in full; this project's plain-PyTorch training loop
    (torch-eager: foreach optimizers) unless `framework` says otherwise."""
    names = {"sgd_momentum": "SGD momentum", "sgd": "SGD", "adamw": "AdamW"}
    tags = [names[optimizer]] + (["checkpointed"] if training.get("activation_checkpointing") else [])
    tags += [] if framework == "torch-eager" else [framework]
    config = {
        "model": {"name": model},
        "training": {"samples": 1.28e6, "micro_batch_size": batch, "precision": precision, "optimizer": optimizer, **training},
        "hardware": {"gpu": "H200"},
        "framework": framework,
    }
    return {"case": f"{model} {precision} {batch} {' '.join(tags)}", "regime": "ResNet 224px", "config": config}


def _small(model: dict[str, Any], precision: str, b: int, s: int, framework: str = "torch-eager", **training: Any) -> dict[str, Any]:
    """A small Llama at a large micro-batch."""
    tag = f"{model['name']} {precision} {b}x{s}" + (" checkpointed" if training.get("activation_checkpointing") else "")
    return _case(tag + ("" if framework == "hf-eager" else " torch" if framework == "torch-eager" else f" {framework}"),
                 "small, large batch", model, framework, seq_len=s, micro_batch_size=b, precision=precision,
                 **training)  # fmt: skip


def _lora(tag: str, model: str, framework: str, shapes: list[tuple[int, int, str]], **extra: Any) -> list[dict[str, Any]]:
    return [
        _case(f"{tag} {p} {b}x{s}" + ("" if framework == "hf-eager" else f" {framework}"), f"7B LoRA, {framework}",
              model, framework, seq_len=s, micro_batch_size=b,
              precision=p, lora_r=16, **extra)
        for b, s, p in shapes
    ]  # fmt: skip


GRID: tuple[dict[str, Any], ...] = (
    *_lora("llama2-7b LoRA", "llama2-7b", "hf-eager", [
        (1, 512, "bf16"), (4, 512, "bf16"), (16, 512, "bf16"), (4, 2048, "bf16"), (8, 2048, "bf16"),
        (2, 8192, "bf16"), (4, 8192, "bf16"), (1, 32768, "bf16"), (4, 1024, "amp_bf16"), (4, 2048, "amp_bf16"),
        (8, 4096, "amp_bf16")]),  # fmt: skip
    _case("llama2-7b LoRA r64 7 targets dropout bf16 4x2048", "7B LoRA, hf-eager", "llama2-7b", seq_len=2048,
          micro_batch_size=4, precision="bf16", lora_r=64, lora_target_modules=7, lora_dropout=0.05),
    _case("llama2-7b LoRA checkpointed bf16 8x4096", "7B LoRA, hf-eager", "llama2-7b", seq_len=4096, micro_batch_size=8,
          precision="bf16", lora_r=16, activation_checkpointing=True),
    _case("llama2-7b LoRA r8 4 targets bf16 4x4096", "7B LoRA, hf-eager", "llama2-7b", seq_len=4096, micro_batch_size=4,
          precision="bf16", lora_r=8, lora_target_modules=4),
    *_lora("llama2-7b LoRA", "llama2-7b", "torch-eager", [
        (16, 512, "bf16"), (1, 8192, "bf16"), (8, 4096, "bf16"), (4, 1024, "amp_bf16"), (4, 2048, "amp_bf16")]),
    _case("llama2-7b LoRA checkpointed bf16 1x4096", "7B LoRA, torch-eager", "llama2-7b", "torch-eager", seq_len=4096,
          micro_batch_size=1, precision="bf16", lora_r=16, activation_checkpointing=True),
    *[
        _case(f"llama2-7b QLoRA bf16 {b}x{s}", "7B QLoRA, hf-eager", "llama2-7b", seq_len=s, micro_batch_size=b,
              precision="bf16", lora_r=16, quantization_bits=4)
        for b, s in ((4, 2048), (8, 4096), (1, 32768))
    ],
    _case("llama2-7b full bf16 2x2048", "7B full", "llama2-7b", seq_len=2048, micro_batch_size=2, precision="bf16"),
    _case("llama2-7b full bf16 2x2048 torch", "7B full", "llama2-7b", "torch-eager", seq_len=2048, micro_batch_size=2,
          precision="bf16"),
    _case("llama2-7b full checkpointed bf16 4x4096", "7B full", "llama2-7b", seq_len=4096, micro_batch_size=4,
          precision="bf16", activation_checkpointing=True),
    _case("llama2-7b full 8-bit AdamW bf16 2x2048", "7B full", "llama2-7b", seq_len=2048, micro_batch_size=2,
          precision="bf16", optimizer_state="8bit"),
    _case("llama2-7b full paged 8-bit AdamW bf16 2x2048", "7B full", "llama2-7b", seq_len=2048, micro_batch_size=2,
          precision="bf16", optimizer_state="paged-8bit"),
    _case("llama2-7b full paged AdamW in backward checkpointed bf16 1x2048", "7B full", "llama2-7b", seq_len=2048,
          micro_batch_size=1, precision="bf16", optimizer_state="paged-fp32", optimizer_in_backward=True,
          activation_checkpointing=True),
    _case("llama3.2-1b full bf16 4x2048", "1-3B GQA", "llama3.2-1b", seq_len=2048, micro_batch_size=4, precision="bf16"),
    _case("llama3.2-1b full amp 4x2048", "1-3B GQA", "llama3.2-1b", seq_len=2048, micro_batch_size=4, precision="amp_bf16"),
    _case("llama3.2-1b liger bf16 4x2048", "1-3B GQA", "llama3.2-1b", "liger", seq_len=2048, micro_batch_size=4,
          precision="bf16"),
    _case("llama3.2-1b torchtune bf16 4x2048", "1-3B GQA", "llama3.2-1b", "torchtune", seq_len=2048, micro_batch_size=4,
          precision="bf16"),
    _case("llama3.2-1b selective checkpointing bf16 4x4096", "1-3B GQA", "llama3.2-1b", seq_len=4096, micro_batch_size=4,
          precision="bf16", activation_checkpointing=True, checkpointing_policy="selective"),
    _case("llama3.2-1b LoRA bf16 8x2048", "1-3B GQA", "llama3.2-1b", seq_len=2048, micro_batch_size=8, precision="bf16",
          lora_r=16),
    _case("llama3.2-3b full amp 4x2048", "1-3B GQA", "llama3.2-3b", seq_len=2048, micro_batch_size=4, precision="amp_bf16"),
    _case("llama3.2-3b LoRA bf16 8x2048", "1-3B GQA", "llama3.2-3b", seq_len=2048, micro_batch_size=8, precision="bf16",
          lora_r=16),
    _case("llama3.2-3b liger checkpointed bf16 2x4096", "1-3B GQA", "llama3.2-3b", "liger", seq_len=4096,
          micro_batch_size=2, precision="bf16", activation_checkpointing=True),
    _case("mistral-7b LoRA bf16 4x4096", "7B LoRA, hf-eager", "mistral-7b", seq_len=4096, micro_batch_size=4,
          precision="bf16", lora_r=16),
    _case("mistral-7b LoRA bf16 4x4096 torch", "7B LoRA, torch-eager", "mistral-7b", "torch-eager", seq_len=4096,
          micro_batch_size=4, precision="bf16", lora_r=16),
    _case("qwen2.5-0.5b full bf16 8x2048", "small, large batch", "qwen2.5-0.5b", seq_len=2048, micro_batch_size=8,
          precision="bf16"),
    _case("qwen2.5-0.5b liger bf16 8x2048", "small, large batch", "qwen2.5-0.5b", "liger", seq_len=2048,
          micro_batch_size=8, precision="bf16"),
    _case("l160m bf16 8x1024", "small, large batch", L160M, seq_len=1024, micro_batch_size=8, precision="bf16"),
    _case("l160m amp 8x1024", "small, large batch", L160M, seq_len=1024, micro_batch_size=8, precision="amp_bf16"),
    _case("l160m bf16 8x1024 torch", "small, large batch", L160M, "torch-eager", seq_len=1024, micro_batch_size=8,
          precision="bf16"),
    _case("l160m amp 8x1024 torch", "small, large batch", L160M, "torch-eager", seq_len=1024, micro_batch_size=8,
          precision="amp_bf16"),
    _case("l160m amp 64x512 torch", "small, large batch", L160M, "torch-eager", seq_len=512, micro_batch_size=64,
          precision="amp_bf16"),
    _case("l160m fp32 eager attention 4x512", "small, large batch", L160M, seq_len=512, micro_batch_size=4,
          precision="fp32", attention_kernel="eager"),
    _case("l1b amp 4x2048 torch", "1-3B GQA", L1B, "torch-eager", seq_len=2048, micro_batch_size=4, precision="amp_bf16"),
    _case("l1b amp checkpointed 4x2048 torch", "1-3B GQA", L1B, "torch-eager", seq_len=2048, micro_batch_size=4,
          precision="amp_bf16", activation_checkpointing=True),
    _case("l1b bf16 accumulation 2 4x2048", "1-3B GQA", L1B, seq_len=2048, micro_batch_size=4, precision="bf16",
          grad_accum_steps=2),
    _case("gpt2 amp 8x1024", "GPT-2 / BERT", "gpt2", seq_len=1024, micro_batch_size=8, precision="amp_bf16"),
    _case("gpt2-medium fp32 4x1024", "GPT-2 / BERT", "gpt2-medium", seq_len=1024, micro_batch_size=4, precision="fp32"),
    _case("bert-base amp 32x512", "GPT-2 / BERT", "bert-base", seq_len=512, micro_batch_size=32, precision="amp_bf16"),
    _case("bert-large fp32 4x512", "GPT-2 / BERT", "bert-large", seq_len=512, micro_batch_size=4, precision="fp32"),
    _case("bert-base LoRA amp 32x512", "GPT-2 / BERT", "bert-base", seq_len=512, micro_batch_size=32, precision="amp_bf16",
          lora_r=16),
    _case("bert-large amp 16x512 torch", "GPT-2 / BERT", {"name": "bert-large", "dropout": 0.0}, "torch-eager",
          seq_len=512, micro_batch_size=16, precision="amp_bf16"),
    # small decoders at large micro-batches, fp32 / tf32 / autocast, with and without checkpointing
    _small(L60M, "fp32", 32, 512),
    _small(L60M, "tf32", 32, 4096),
    _small(L60M, "amp_bf16", 32, 4096, "hf-eager"),
    _small(L60M, "fp32", 16, 2048, activation_checkpointing=True),
    _small(L160M, "fp32", 32, 512),
    _small(L160M, "amp_bf16", 16, 2048),
    _small(L160M, "fp32", 16, 1024, activation_checkpointing=True),
    _small(L160M, "amp_bf16", 32, 1024, "hf-eager", activation_checkpointing=True),
    _small(L160M, "fp32", 32, 1024, "hf-eager", activation_checkpointing=True),
    _small(L410M, "amp_bf16", 16, 1024),
    _small(L410M, "fp32", 16, 2048, "hf-eager"),
    _small(L410M, "amp_bf16", 32, 1024, activation_checkpointing=True),
    # ResNet-18 / ResNet-50 at 224x224: SGD with momentum and AdamW, every precision, checkpointed
    _cnn("resnet18", "fp32", 32, "sgd_momentum"),
    _cnn("resnet18", "fp32", 256, "sgd_momentum"),
    _cnn("resnet18", "tf32", 128, "adamw"),
    _cnn("resnet18", "amp_bf16", 256, "sgd_momentum"),
    _cnn("resnet18", "bf16", 256, "adamw"),
    _cnn("resnet18", "amp_bf16", 64, "sgd_momentum", activation_checkpointing=True),
    _cnn("resnet50", "fp32", 64, "sgd_momentum"),
    _cnn("resnet50", "fp32", 256, "adamw"),
    _cnn("resnet50", "tf32", 128, "sgd_momentum"),
    _cnn("resnet50", "amp_bf16", 128, "adamw"),
    _cnn("resnet50", "amp_bf16", 256, "sgd_momentum"),
    _cnn("resnet50", "bf16", 32, "sgd_momentum"),
    _cnn("resnet50", "bf16", 128, "adamw"),
    _cnn("resnet50", "amp_bf16", 64, "adamw", "hf-eager"),
    _cnn("resnet50", "amp_bf16", 128, "adamw", activation_checkpointing=True),
    _cnn("resnet50", "fp32", 32, "sgd", activation_checkpointing=True),
)
"""Every shape: case name, regime (for the per-regime table) and the native config."""


def run_grid(cases: tuple[dict[str, Any], ...] = GRID, *, progress: bool = True) -> list[dict[str, Any]]:
    """The oracle's allocated peak for each case (a row per case, for the CSV)."""
    import transformers  # an optional package (the dev extra): its version is recorded with the rows

    rows = []
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("oracle", total=len(cases))
        for case in cases:
            bar.update(task, description=case["case"])
            result = oracle_memory(load_workload(case["config"]))
            rows.append({
                "case": case["case"], "regime": case["regime"], "config": json.dumps(case["config"], sort_keys=True),
                "oracle_allocated_gb": round(result.peak_allocated_gb, 6), "oracle_seconds": round(result.seconds, 2),
                "model": result.model, "torch": torch.__version__, "transformers": transformers.__version__,
            })  # fmt: skip
            bar.advance(task)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the memory oracle on the memory grid and write its table.")
    parser.add_argument("--out", type=Path, default=None, help="CSV to write (default: datasets/memory/oracle_grid.csv)")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this text")
    parser.add_argument(
        "--missing", action="store_true",
        help="run only the cases the stored table lacks, keep its other rows and write them all in the grid's order",
    )  # fmt: skip
    args = parser.parse_args(argv)
    # pandas: the table's writer
    import pandas as pd

    out = args.out or memory_oracle_path()
    stored = pd.read_csv(out) if args.missing and out.exists() else None
    have = set(stored["case"]) if stored is not None else set()
    cases = tuple(c for c in GRID if args.only in c["case"] and c["case"] not in have)
    out.parent.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(run_grid(cases))
    if stored is not None:
        order = {c["case"]: i for i, c in enumerate(GRID)}
        table = pd.concat([stored[stored["case"].isin(order)], table], ignore_index=True)
        table = table.sort_values("case", key=lambda names: names.map(order)).reset_index(drop=True)
    table.to_csv(out, index=False)
    print(f"{len(cases)} shapes run, {len(table)} rows -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
