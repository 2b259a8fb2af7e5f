"""What would fit: the largest micro-batch is the boundary of the memory model (mb fits, mb+1 does
not), suggestions fit and keep the global batch when they say so, and `predict` shows them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.analytic.memory import estimate_memory
from perfmodel.catalog import get_gpu, get_model
from perfmodel.config import ConfigSource
from perfmodel.decide.fit import fewest_gpus, largest_divisor_that_fits, largest_micro_batch, suggest_fits
from perfmodel.prediction import predict
from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

ROOT = Path(__file__).resolve().parents[1]


def _w(model: str, gpu: str, num_gpus: int = 1, strategy: str = "ddp", **training) -> Workload:
    training.setdefault("tokens", 1e8)
    return Workload(
        model=get_model(model),
        training=TrainingSpec(**training),
        gpu=get_gpu(gpu),
        parallel=ParallelSpec(num_gpus=num_gpus, strategy=strategy),
    )


CASES = [
    _w("llama2-7b", "A100-80GB", lora_r=16, seq_len=512),
    _w("llama2-7b", "RTX-4090", lora_r=64, quantization_bits=4, seq_len=1024, precision="fp16"),
    _w("llama2-7b", "A100-80GB", num_gpus=8, strategy="fsdp", seq_len=4096, precision="amp_bf16"),
    _w("gpt2-medium", "T4", seq_len=1024, precision="amp_fp16", activation_checkpointing=True),
]


def _mem_fits(w: Workload, mb: int) -> bool:
    """The memory model's verdict, computed through the analytic memory module directly."""
    sized = dataclasses.replace(w, training=dataclasses.replace(w.training, micro_batch_size=mb))
    return estimate_memory(sized).total_gb <= w.gpu.memory_gb


@pytest.mark.parametrize("w", CASES, ids=lambda w: f"{w.model.name}-{w.gpu.name}-{w.parallel.num_gpus}")
def test_largest_micro_batch_is_the_memory_boundary(w, tmp_path):
    mb = largest_micro_batch(w)
    assert mb is not None and mb >= 1
    assert _mem_fits(w, mb) and not _mem_fits(w, mb + 1)
    # the user-visible verdict agrees on both sides of the boundary
    at = dataclasses.replace(w, training=dataclasses.replace(w.training, micro_batch_size=mb))
    above = dataclasses.replace(w, training=dataclasses.replace(w.training, micro_batch_size=mb + 1))
    assert predict(at, model_dir=tmp_path).fits_in_memory
    assert not predict(above, model_dir=tmp_path).fits_in_memory


def test_largest_micro_batch_is_none_when_one_does_not_fit_and_respects_the_limit():
    huge = _w("llama2-70b", "T4", seq_len=4096, precision="fp16")
    assert largest_micro_batch(huge) is None
    small = CASES[0]
    assert largest_micro_batch(small, limit=3) == min(3, largest_micro_batch(small))


def test_largest_divisor_keeps_the_batch_whole():
    w = CASES[0]
    for per_replica in (1, 6, 32, 96, 1000):
        d = largest_divisor_that_fits(w, per_replica)
        assert d is not None and per_replica % d == 0 and _mem_fits(w, d)
        assert not any(per_replica % k == 0 and _mem_fits(w, k) for k in range(d + 1, per_replica + 1))


def _global_batch(w: Workload) -> int:
    return w.training.micro_batch_size * w.training.grad_accum_steps * w.parallel.data_parallel


def _apply(w: Workload, changes: dict) -> Workload:
    t = {k.split(".")[1]: v for k, v in changes.items() if k.startswith("training.")}
    p = {k.split(".")[1]: v for k, v in changes.items() if k.startswith("hardware.")}
    return dataclasses.replace(
        w, training=dataclasses.replace(w.training, **t), parallel=dataclasses.replace(w.parallel, **p)
    )


@pytest.mark.parametrize(
    "w",
    [
        _w(
            "llama2-7b",
            "A100-80GB",
            seq_len=2048,
            micro_batch_size=16,
            grad_accum_steps=2,
            precision="amp_bf16",
        ),
        _w("llama2-7b", "L4", lora_r=16, seq_len=2048, micro_batch_size=8, grad_accum_steps=4),
        _w(
            "llama3-8b",
            "H100-SXM",
            num_gpus=2,
            strategy="fsdp",
            seq_len=8192,
            micro_batch_size=4,
            grad_accum_steps=2,
        ),
    ],
    ids=["7b-full-a100", "7b-lora-l4", "8b-8k-fsdp"],
)
def test_every_suggestion_fits_and_keeps_the_global_batch_when_it_says_so(w, tmp_path):
    assert not predict(w, model_dir=tmp_path).fits_in_memory
    report = suggest_fits(w, model_dir=tmp_path)
    assert not report.fits and report.suggestions
    for s in report.suggestions:
        moved = _apply(w, s.changes)
        again = predict(moved, model_dir=tmp_path)
        assert again.fits_in_memory, s.summary
        assert s.outcome.fits_in_memory
        assert s.outcome.total_time_s.estimate == pytest.approx(again.total_time_s.estimate)
        if s.global_batch_kept:
            assert _global_batch(moved) == _global_batch(w), s.summary
    kinds = [s.kind for s in report.suggestions]
    assert len(set(kinds)) == len(kinds)


def test_fewest_gpus_is_the_fewest_with_full_sharding(tmp_path):
    w = _w("llama2-13b", "A100-40GB", seq_len=1024, micro_batch_size=1, precision="amp_bf16")
    found = fewest_gpus(w)
    assert found is not None
    moved, _ = found
    n = moved.parallel.num_gpus
    assert estimate_memory(moved).total_gb <= w.gpu.memory_gb
    assert moved.parallel.num_nodes == -(-n // w.gpu.gpus_per_server)
    # half as many GPUs, fully sharded, does not fit (so fewer is not possible)
    if n // 2 > 1:
        half = dataclasses.replace(
            w,
            parallel=ParallelSpec(
                num_gpus=n // 2, strategy="fsdp", num_nodes=-(-(n // 2) // w.gpu.gpus_per_server)
            ),
        )
        assert estimate_memory(half).total_gb > w.gpu.memory_gb


def test_a_run_that_fits_gets_no_suggestions(tmp_path):
    report = suggest_fits(CASES[0], model_dir=tmp_path)
    assert report.fits and report.suggestions == () and report.to_json() == []


def _predict_cli(*args: str) -> dict:
    res = subprocess.run(
        [sys.executable, "-m", "perfmodel", "predict", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


@pytest.mark.slow
def test_predict_json_carries_fit_suggestions(tmp_path):
    example = str(ROOT / "examples" / "llama2-7b-lora.yaml")
    fits = _predict_cli("--config", example)
    assert fits["fits_in_memory"] and fits["fit_suggestions"] == []
    data = _predict_cli("--config", example, "--gpu", "L4", "--set", "training.seq_len=2048")
    assert not data["fits_in_memory"]
    assert data["fit_suggestions"]
    for s in data["fit_suggestions"]:
        assert set(s) >= {
            "kind",
            "summary",
            "changes",
            "config_changes",
            "total_time_s",
            "peak_memory_gb",
            "fits_in_memory",
        }
        assert s["fits_in_memory"] is True
        assert s["peak_memory_gb"]["estimate"] <= s["memory_capacity_gb"]
        # the suggestion is what `predict` says after the same changes, given as --set
        sets = [a for k, v in s["changes"].items() for a in ("--set", f"{k}={json.dumps(v)}")]
        again = _predict_cli("--config", example, "--gpu", "L4", "--set", "training.seq_len=2048", *sets)
        assert again["fits_in_memory"]
        assert again["total_time_s"]["estimate"] == pytest.approx(s["total_time_s"]["estimate"])


def test_ludwig_suggestions_are_written_in_ludwig_keys():
    source = ConfigSource.load(
        ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml", tokens=1e8, gpu="T4", overrides=["training.seq_len=2048"]
    )
    report = suggest_fits(source.base(), source=source)
    assert report.suggestions
    for s in report.suggestions:
        data = s.to_json()
        assert all(
            k.split(".")[0] in ("trainer", "backend", "quantization") for k in data["config_changes"]
        ), data
        assert all(k.startswith("hardware.") for k in data["flags"])


def _grid() -> list[Workload]:
    """Runs of every kind the searches meet: LoRA and full, 4-bit, checkpointing, tensor and
    pipeline parallel, one GPU to many, GPUs of 16 to 141 GB, small and large models."""
    out = []
    for model, gpu in (
        ("llama2-7b", "A10G"),
        ("llama2-13b", "A100-80GB"),
        ("gpt2-medium", "T4"),
        ("llama2-70b", "H100-SXM"),
    ):
        for seq, mb in ((512, 1), (2048, 8), (4096, 32)):
            for extra in (
                {},
                {"lora_r": 16},
                {"activation_checkpointing": True},
                {"lora_r": 64, "quantization_bits": 4},
            ):
                out.append(
                    _w(
                        model,
                        gpu,
                        seq_len=seq,
                        micro_batch_size=mb,
                        grad_accum_steps=4,
                        precision="bf16" if gpu != "T4" else "fp16",
                        **extra,
                    )
                )
    pp = _w("llama2-13b", "A100-40GB", seq_len=2048, micro_batch_size=4, grad_accum_steps=8)
    out.append(
        dataclasses.replace(
            pp, parallel=ParallelSpec(num_gpus=4, strategy="ddp", pipeline_parallel=2, tensor_parallel=2)
        )
    )
    out.append(dataclasses.replace(pp, parallel=ParallelSpec(num_gpus=2, strategy="zero2")))
    return out


@pytest.mark.parametrize("adapt_batch", [False, True])
def test_fewest_gpus_by_bisection_equals_trying_every_count_and_strategy(adapt_batch):
    from perfmodel.decide.fit import fewest_gpus_scan

    grid, found, none = _grid(), 0, 0
    for w in grid:
        for max_gpus in (8, 1024):
            fast = fewest_gpus(w, adapt_batch=adapt_batch, max_gpus=max_gpus)
            slow = fewest_gpus_scan(w, adapt_batch=adapt_batch, max_gpus=max_gpus)
            assert (fast is None) == (slow is None), (w.model.name, w.training, w.parallel, max_gpus)
            if fast is not None and slow is not None:
                found += 1
                assert fast[1] == slow[1] and fast[0] == slow[0], (w.model.name, w.training, w.parallel)
            none += fast is None
    assert found > 20 and none > 0  # the grid has runs that move and runs no count up to 8 fits


def test_largest_micro_batch_equals_doubling_and_bisection():
    from perfmodel.decide.fit import _bisect_micro_batch, fits, with_training

    seen = set()
    for w in _grid():
        for limit in (1, 3, 64, 65536):
            got = largest_micro_batch(w, limit=limit)
            if not fits(with_training(w, micro_batch_size=1)):
                assert got is None
                continue
            assert got == _bisect_micro_batch(w, limit), (w.model.name, w.training, limit)
            seen.add(got)
    assert len(seen) > 5  # boundaries of many sizes, not one


def test_peak_memory_alone_is_the_estimates_memory():
    from perfmodel.analytic import estimate, peak_memory
    from perfmodel.workload import ModelSpec

    gbm = Workload(
        model=ModelSpec(name="lightgbm", arch="gbm"),
        training=TrainingSpec(gbm_rows=100_000, gbm_features=20, gbm_rounds=300),
        gpu=get_gpu("A100-80GB"),
        parallel=ParallelSpec(),
    )
    for w in [*_grid(), gbm]:
        assert peak_memory(w) == estimate(w).memory
    assert peak_memory(gbm).total_gb > 0


@pytest.mark.parametrize(
    ("training", "hardware", "absent"),
    [
        ({"lora_r": 16}, {}, ["LoRA"]),
        ({"lora_r": 16, "quantization_bits": 4}, {}, ["LoRA", "4-bit"]),
        ({"activation_checkpointing": True, "micro_batch_size": 1}, {}, ["activation checkpointing", "micro_batch_size"]),
        ({}, {"strategy": "fsdp", "num_gpus": 8}, ["sharding (fsdp/zero3)"]),
        ({"optimizer_state": "8bit"}, {}, ["8-bit optimizer"]),
    ],
)
def test_the_oom_hint_never_suggests_what_the_config_already_does(training, hardware, absent):
    import dataclasses

    from perfmodel.config import load_workload
    from perfmodel.prediction import memory_remedies

    w = load_workload(Path(__file__).resolve().parents[1] / "examples" / "llama2-7b-lora.yaml")
    w = dataclasses.replace(w, training=dataclasses.replace(w.training, **{"lora_r": None, **training}))
    if hardware:
        w = dataclasses.replace(w, parallel=dataclasses.replace(w.parallel, **hardware))
    hints = " ".join(memory_remedies(w)).replace("(QLoRA)", "")  # a quantized base is not LoRA itself
    for word in absent:
        assert word not in hints, hints
    full = dataclasses.replace(w, training=dataclasses.replace(w.training, lora_r=None, quantization_bits=None))
    assert "LoRA" in " ".join(memory_remedies(full))  # a full fine-tune is told about LoRA
