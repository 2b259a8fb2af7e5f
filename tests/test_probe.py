"""`perfmodel probe`: planning the probe (scale-down), combining measurement and model, a real CPU
probe end to end through the command line, and clean stops on the budget and on Ctrl-C."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.errors import UnsupportedError
from perfmodel.prediction import Interval
from perfmodel.run.combine import RATIO_FRACTION_FAR, RATIO_FRACTION_NEAR, combine
from perfmodel.run.plan import Limits, candidate_sizes, choose_plan

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = (
    "throughput_tokens_per_s",
    "throughput_samples_per_s",
    "step_time_s",
    "total_time_s",
    "gpu_hours",
    "peak_memory_gb",
    "confidence_level",
    "total_steps",
    "fits_in_memory",
    "model",
    "workload",
    "hardware",
    "warnings",
)
TINY = """
model: {name: tiny-llama, hidden_size: 64, num_layers: 2, num_heads: 2, vocab_size: 512, gated_mlp: true, ffn_hidden_size: 128}
training: {seq_len: 32, micro_batch_size: 2, precision: fp32, optimizer: adamw, steps: 1000}
hardware: {gpu: cpu}
framework: torch-eager
"""


def tiny_workload(tmp_path: Path, text: str = TINY):
    from perfmodel.config import load_workload

    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    return load_workload(path)


@pytest.fixture
def datasets_dir(tmp_path, monkeypatch):
    """The collectors' folder (and so every host fingerprint lookup) in a temporary place."""
    monkeypatch.setenv("PERFMODEL_DATASETS", str(tmp_path / "datasets"))
    return tmp_path / "datasets"


# --- planning -------------------------------------------------------------------------------


def test_scale_down_order_is_layers_then_sequence_then_batch():
    from perfmodel.config import load_workload

    w = load_workload(
        None,
        overrides=[
            "model.name=llama2-7b",
            "training.seq_len=512",
            "training.micro_batch_size=8",
            "training.steps=10",
            "hardware.gpu=cpu",
        ],
    )
    sizes = [(layers, seq, batch) for layers, seq, batch, _ in candidate_sizes(w)]
    assert sizes[0] == (32, 512, 8) and sizes[1] == (16, 512, 8)
    assert sizes[5] == (1, 512, 8) and sizes[6] == (1, 256, 8)
    assert sizes[-1] == (1, 64, 1)
    layers = [s[0] for s in sizes]
    assert layers == sorted(layers, reverse=True)


def test_plan_for_a_7b_model_on_a_small_host_is_scaled_down_and_says_so():
    from perfmodel.catalog import get_gpu
    from perfmodel.config import load_workload

    w = load_workload(
        None,
        overrides=[
            "model.name=llama2-7b",
            "training.seq_len=512",
            "training.micro_batch_size=8",
            "training.steps=10",
            "hardware.gpu=A100-80GB",
            "training.precision=bf16",
        ],
    )
    limits = Limits(memory_gb=6.0, max_step_s=30.0, supports=lambda p: p in ("fp32", "bf16", "amp_bf16"))
    plan = choose_plan(w, get_gpu("cpu"), limits, steps=10, warmup=2)
    assert plan.memory_gb <= 6.0 and plan.predicted_step_s[2] <= 30.0
    assert plan.config.num_layers < 32 and plan.scaled[0].startswith("layers 32 -> ")
    assert plan.config.hidden_size == 4096 and plan.config.vocab_size == 32000  # never scaled
    tiny = Limits(memory_gb=0.01, max_step_s=1e-6, supports=limits.supports)
    with pytest.raises(UnsupportedError, match="too large to probe on this machine"):
        choose_plan(w, get_gpu("cpu"), tiny, steps=10, warmup=2)


@pytest.mark.parametrize(("targets", "said"), [(None, True), ("2", False)])
def test_a_lora_probe_says_its_slice_adapts_q_and_v_only(targets, said):
    """The slices' adapters sit on q and v; a target that adapts more (hf-eager's all-linear default)
    is probed on q, v and the plan says so (the model's ratio carries the difference)."""
    from perfmodel.config import load_workload
    from perfmodel.run.plan import slice_for

    overrides = ["model.name=llama2-7b", "training.seq_len=256", "training.micro_batch_size=1", "training.steps=10",
                 "hardware.gpu=cpu", "training.precision=fp32", "training.lora_r=8"]  # fmt: skip
    if targets:
        overrides.append(f"training.lora_target_modules={targets}")
    w = load_workload(None, overrides=overrides)
    _, notes = slice_for(w, layers=2, seq_len=64, batch=1, supports=lambda p: True)
    assert any(n.startswith("LoRA runs on q and v") for n in notes) is said


def test_cnn_workloads_are_not_probed(tmp_path):
    from perfmodel.catalog import get_gpu
    from perfmodel.config import load_workload

    w = load_workload(
        None,
        overrides=["model.name=resnet50", "training.steps=10", "hardware.gpu=cpu", "training.precision=fp32"],
    )
    with pytest.raises(UnsupportedError, match="probe runs decoder, encoder and gbm workloads"):
        choose_plan(w, get_gpu("cpu"), Limits(memory_gb=8, max_step_s=10), steps=10, warmup=2)


# --- combining ------------------------------------------------------------------------------


def test_the_model_carries_only_what_differs():
    target = Interval(estimate=2.0, low=1.0, high=4.0)  # model half-width ln 2
    probe = Interval(estimate=0.5, low=0.25, high=1.0)
    measured = (0.6, 0.6 / 1.05, 0.6 * 1.05)  # a tight measurement
    same = combine(
        measured_s=measured,
        target=target,
        probe=probe,
        distance=0.0,
        same_device=True,
        same_gpu_count=True,
        identical=True,
    )
    assert same.step_time_s.estimate == pytest.approx(0.6 * 4.0)  # measured x ratio of predictions
    assert math.log(same.step_time_s.high / same.step_time_s.estimate) == pytest.approx(math.log(1.05))
    near = combine(
        measured_s=measured,
        target=target,
        probe=probe,
        distance=0.2,
        same_device=True,
        same_gpu_count=True,
        identical=False,
    )
    expected = math.sqrt(math.log(1.05) ** 2 + (RATIO_FRACTION_NEAR * math.log(2)) ** 2)
    assert math.log(near.step_time_s.high / near.step_time_s.estimate) == pytest.approx(expected)
    assert near.narrower
    far = combine(
        measured_s=measured,
        target=target,
        probe=probe,
        distance=2.0,
        same_device=True,
        same_gpu_count=True,
        identical=False,
    )
    assert far.ratio_fraction == RATIO_FRACTION_FAR and not far.narrower  # then the prediction stands
    other_device = combine(
        measured_s=measured,
        target=target,
        probe=probe,
        distance=0.1,
        same_device=False,
        same_gpu_count=True,
        identical=False,
    )
    assert other_device.ratio_fraction > 1 and not other_device.narrower


# --- measuring ------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def fake_prepare(clock: FakeClock, step_s: float, interrupt_at: int | None = None):
    from perfmodel.measure.device import CpuDevice
    from perfmodel.measure.slices import PreparedSlice

    calls = {"n": 0}

    def prepare(config, device):
        def step() -> None:
            calls["n"] += 1
            if interrupt_at is not None and calls["n"] == interrupt_at:
                raise KeyboardInterrupt
            clock.t += step_s * (4.0 if calls["n"] == 1 else 1.0)

        return PreparedSlice(
            step=step, device=CpuDevice(), facts={"params_total": 1e5, "samples_per_step": 2}
        )

    return prepare


@pytest.mark.slow
def test_budget_stops_the_probe_and_keeps_what_was_measured(tmp_path, datasets_dir):
    from perfmodel.run.probe import probe_workload

    clock = FakeClock()
    # 1 s steps, 40 s budget: warm-up 2 steps (5 s), then the budget ends after ~35 measured steps of 50
    result = probe_workload(
        tiny_workload(tmp_path),
        steps=50,
        budget_s=40.0,
        clock=clock,
        prepare=fake_prepare(clock, 1.0),
        out_dir=tmp_path / "raw",
    )
    assert result.stopped == "budget"
    m = result.measurement
    assert 10 <= len(m.step_times_s) < 50 and m.median_s == pytest.approx(1.0)
    assert clock.t <= 40.0 + 1.0
    assert result.row_id and Path(result.shard).is_file()


@pytest.mark.slow
def test_budget_too_small_for_ten_steps_leaves_the_prediction_and_writes_nothing(tmp_path, datasets_dir):
    from perfmodel.run.probe import probe_workload

    clock = FakeClock()
    result = probe_workload(
        tiny_workload(tmp_path),
        steps=10,
        budget_s=8.0,
        clock=clock,
        prepare=fake_prepare(clock, 1.0),
        out_dir=tmp_path / "raw",
    )
    assert result.stopped == "budget" and result.measurement is None
    assert result.after.step_time_s == result.before.step_time_s
    assert not (tmp_path / "raw").exists() or not list((tmp_path / "raw").glob("*.parquet"))


@pytest.mark.slow
def test_ctrl_c_stops_the_probe_cleanly(tmp_path, datasets_dir):
    from perfmodel.run.probe import probe_workload

    clock = FakeClock()
    result = probe_workload(
        tiny_workload(tmp_path),
        steps=10,
        budget_s=100.0,
        clock=clock,
        prepare=fake_prepare(clock, 1.0, interrupt_at=6),
        out_dir=tmp_path / "raw",
    )
    assert result.stopped == "interrupted" and result.measurement is None and result.row_id is None


@pytest.mark.slow
def test_probe_on_cpu_end_to_end_through_the_command_line(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    out = tmp_path / "datasets" / "raw"
    env = {**os.environ, "PERFMODEL_DATASETS": str(tmp_path / "datasets"), "COLUMNS": "160", "NO_COLOR": "1"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "probe",
            "--config",
            str(config),
            "--steps",
            "10",
            "--device",
            "cpu",
            "--budget-s",
            "120",
            "--record",
            str(tmp_path / "probe_run.json"),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(CONTRACT) <= set(data)  # predict --json contract kept
    probe = data["probe"]
    assert probe["stopped"] == "complete"
    measured = probe["measured"]
    assert (
        measured["steps"] >= 10
        and measured["warmup_steps"] >= 2
        and len(measured["warmup_times_s"]) == measured["warmup_steps"]
    )
    assert all(t > 0 for t in measured["step_times_s"])
    assert probe["plan"]["scaled_down"] == []  # the tiny config fits this machine whole
    assert probe["combined"]["ratio_fraction"] in (0.0, RATIO_FRACTION_NEAR)
    # the kept row: a measured probe row with this host's fingerprint, readable by the codec
    import pandas as pd

    from perfmodel.codec import workload_from_row

    shards = list(out.glob("probe__*.parquet"))
    assert len(shards) == 1 and list(out.glob("fingerprint__*.json"))
    row = pd.read_parquet(shards[0]).iloc[0].to_dict()
    assert row["source_kind"] == "probe" and row["row_id"] == probe["row_id"] and row["status"] == "ok"
    assert list(row["step_times_s"]) == pytest.approx(measured["step_times_s"])
    os.environ["PERFMODEL_DATASETS"], before = (
        str(tmp_path / "datasets"),
        os.environ.get("PERFMODEL_DATASETS"),
    )
    try:
        w = workload_from_row(row)
    finally:
        if before is None:
            del os.environ["PERFMODEL_DATASETS"]
        else:
            os.environ["PERFMODEL_DATASETS"] = before
    assert w.model.hidden_size == 64 and w.gpu.vendor == "cpu"
    # the same run offered again (its record) is refused as a duplicate
    again = subprocess.run(
        [sys.executable, "-m", "perfmodel", "ingest", str(tmp_path / "probe_run.json")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert again.returncode == 1 and "already in" in again.stderr and len(again.stderr.splitlines()) == 1
