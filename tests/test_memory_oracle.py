"""The FakeTensor oracle (perfmodel/measure/memory_oracle.py) and the analytic memory model
against it.

  * the analytic model against the stored grid (datasets/memory/oracle_grid.csv, >= 50 shapes,
    7B LoRA up to 32k tokens per micro-batch): median error <= 5% (a fast test: the oracle's
    numbers are data, the analytic side is recomputed);
  * the oracle against real CPU allocations: the same step run for real on small models under
    PyTorch's profiler (slow);
  * the stored grid is what the oracle computes today (a few shapes re-run; slow);
  * the issue's two peaks (6.92 GiB bf16 / 8.59 GiB autocast for a 160M Llama at 8 x 1024).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from collectors.memory_grid import GRID
from perfmodel.analytic.memory import estimate_memory
from perfmodel.config import load_workload
from perfmodel.memcheck import check_oracle_grid
from perfmodel.paths import memory_oracle_path

GIB = 2**30


def test_the_grid_covers_what_the_issue_names():
    table = pd.read_csv(memory_oracle_path())
    assert len(table) == len(GRID) >= 50
    assert list(table["case"]) == [c["case"] for c in GRID]
    configs = [json.loads(c) for c in table["config"]]
    tokens = [c["training"]["seq_len"] * c["training"]["micro_batch_size"] for c in configs]
    lora_7b = [t for c, t in zip(configs, tokens, strict=True) if c["model"].get("name") == "llama2-7b" and c["training"].get("lora_r")]
    assert max(lora_7b) >= 32768 and len(lora_7b) >= 15
    assert {c["framework"] for c in configs} >= {"hf-eager", "torch-eager", "liger", "torchtune"}


def test_the_analytic_model_is_within_5_percent_of_the_oracle_on_the_grid():
    grid = check_oracle_grid()
    assert grid.median_abs_error_pct <= 5.0
    assert grid.max_abs_error_pct <= 10.0, grid.table.sort_values("error_pct").to_string()
    for regime in grid.by_regime:
        assert regime["median_abs_error_pct"] <= 5.0, regime


SMALL = {"name": "small", "arch": "decoder", "hidden_size": 128, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
         "ffn_hidden_size": 352, "vocab_size": 2000, "gated_mlp": True}  # fmt: skip


def _small(framework: str = "hf-eager", model: dict | None = None, **training):
    return load_workload({"model": model or SMALL, "training": {"tokens": 1e6, "seq_len": 256, "micro_batch_size": 4, **training},
                          "hardware": {"gpu": "H200"}, "framework": framework})  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "framework,training",
    [
        ("hf-eager", {"precision": "bf16"}),
        ("hf-eager", {"precision": "amp_bf16"}),
        ("hf-eager", {"precision": "bf16", "lora_r": 8, "lora_dropout": 0.1}),
        ("hf-eager", {"precision": "bf16", "activation_checkpointing": True}),
        ("hf-eager", {"precision": "fp32", "attention_kernel": "eager", "grad_accum_steps": 2}),
        ("torch-eager", {"precision": "bf16", "lora_r": 8}),
        ("torch-eager", {"precision": "amp_bf16"}),
        ("hf-eager", {"precision": "bf16", "optimizer_state": "8bit"}),
    ],
)
def test_the_oracle_counts_what_the_cpu_allocator_allocates(framework, training, monkeypatch):
    """Fake tensors under MemTracker against the same step run for real on this CPU, its peak from
    every allocation and free the profiler records. CUDA's 512-byte rounding is off for this
    comparison (the CPU allocator does not round); tolerance 1%."""
    from perfmodel.measure import memory_oracle as mo

    w = _small(framework, **training)
    real = mo.measured_cpu_peak_gb(w)
    monkeypatch.setattr(mo, "CUDA_ALLOCATION_BYTES", 1)
    fake = mo.oracle_memory(w).peak_allocated_gb
    assert fake == pytest.approx(real, rel=0.01), (framework, training, fake, real)


@pytest.mark.slow
def test_the_stored_grid_is_what_the_oracle_computes():
    from perfmodel.measure.memory_oracle import oracle_memory

    table = pd.read_csv(memory_oracle_path()).set_index("case")
    for case in ("llama2-7b LoRA bf16 1x32768", "l160m amp 8x1024 torch", "llama3.2-1b liger bf16 4x2048"):
        got = oracle_memory(load_workload(json.loads(table.loc[case, "config"]))).peak_allocated_gb
        assert got == pytest.approx(table.loc[case, "oracle_allocated_gb"], rel=1e-6), case


def test_the_issues_two_peaks_are_the_oracles():
    """Issue 28: a 160M LlamaForCausalLM at micro-batch 8 x sequence 1024 with AdamW peaked at
    6.92 GiB in bf16 and 8.59 GiB under bf16 autocast under FakeTensorMode with MemTracker (6.99
    and 8.78 GiB measured on an H200). The grid holds the oracle's numbers; the analytic model
    gives the same."""
    table = pd.read_csv(memory_oracle_path()).set_index("case")
    for case, gib in (("l160m bf16 8x1024", 6.92), ("l160m amp 8x1024", 8.59)):
        oracle = table.loc[case, "oracle_allocated_gb"] * 1e9 / GIB
        assert oracle == pytest.approx(gib, abs=0.005)
        analytic = estimate_memory(load_workload(json.loads(table.loc[case, "config"]))).allocated_gb * 1e9 / GIB
        assert analytic == pytest.approx(gib, abs=0.01)


def test_what_the_oracle_cannot_run_is_said():
    from perfmodel.measure.memory_oracle import oracle_memory, unsupported_reason

    multi = load_workload({"model": {"name": "llama2-7b"}, "training": {"tokens": 1e6},
                           "hardware": {"gpu": "H200", "num_gpus": 8, "strategy": "fsdp"}})  # fmt: skip
    assert "one device" in unsupported_reason(multi)
    with pytest.raises(ValueError, match="cannot run this workload: .*one device"):
        oracle_memory(multi)
    assert "torch.compile" in unsupported_reason(_small("torch-compile"))
    assert unsupported_reason(_small()) is None
