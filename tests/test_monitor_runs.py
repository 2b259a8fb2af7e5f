"""`perfmodel runs`: measured runs side by side (summaries with known answers, the ratio verdict,
the plot, and the command through its real entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfmodel.errors import ConfigError
from perfmodel.monitor.record import RunRecord, write_record
from perfmodel.monitor.runs import plot_runs, summarize_runs

ROOT = Path(__file__).resolve().parents[1]


def record_run(
    folder: Path, mean_s: float, steps: int = 200, seed: int = 0, memory_gb: float | None = None
) -> Path:
    """A finished run: 3 slow warm-up steps, then lognormal steps (sd 0.1) of mean `mean_s`."""
    rng = np.random.default_rng(seed)
    times = [10 * mean_s, 6 * mean_s, 4 * mean_s] + list(mean_s * np.exp(rng.normal(-0.005, 0.1, steps - 3)))
    config = {
        "training": {"micro_batch_size": 4, "grad_accum_steps": 2, "seq_len": 128},
        "hardware": {"num_gpus": 1},
    }
    return write_record(
        folder,
        RunRecord(
            source="step-timer",
            intervals=[(1, float(t)) for t in times],
            total_steps=steps,
            finished=True,
            config=config,
            peak_memory_gb=memory_gb,
            peak_memory_kind="host-rss" if memory_gb else None,
        ),
    )


def test_summaries_and_ratio_verdicts(tmp_path):
    a = record_run(tmp_path / "a", 0.05, seed=1, memory_gb=1.5)
    b = record_run(tmp_path / "b", 0.05, seed=2)
    c = record_run(tmp_path / "c", 0.075, seed=3)
    first, same, slow = summarize_runs([a, b, c])
    assert first.warmup_steps == 3 and first.warmup_s == pytest.approx(1.0)
    assert first.stable.median_s == pytest.approx(0.05, rel=0.05)
    assert first.stable.p10_s < first.stable.median_s < first.stable.p90_s
    assert first.steps_per_s == pytest.approx(1 / first.stable.mean_s)
    assert first.samples_per_step == 8 and first.tokens_per_step == 8 * 128
    assert first.trace.peak_memory_gb == 1.5 and same.trace.peak_memory_gb is None
    assert first.ratio is None
    assert same.ratio.verdict == "within the noise" and same.ratio.low < 1 < same.ratio.high
    assert slow.ratio.verdict == "slower" and slow.ratio.low > 1.3
    assert summarize_runs([c, a])[1].ratio.verdict == "faster"
    doc = slow.to_json()
    assert doc["ratio_to_first"]["verdict"] == "slower" and doc["tokens_per_s"] == pytest.approx(
        doc["steps_per_s"] * 1024
    )


def test_level_shift_counted_and_csv_memory(tmp_path):
    path = tmp_path / "steps.csv"
    rng = np.random.default_rng(0)
    rows = ["step,step_time_s,peak_memory_gb"]
    for i in range(1, 301):
        t = (0.5 if i < 3 else 0.05 * (1.5 if i > 150 else 1.0)) * rng.uniform(0.95, 1.05)
        rows.append(f"{i},{t:.6f},{1 + i / 1000:.4f}")
    path.write_text("\n".join(rows) + "\n")
    (s,) = summarize_runs([path])
    assert s.level_shifts == 1 and s.trace.peak_memory_gb == pytest.approx(1.3)


@pytest.mark.slow
def test_plot_marks_warmup_and_median(tmp_path):
    runs = summarize_runs([record_run(tmp_path / "a", 0.05), record_run(tmp_path / "b", 0.08, seed=4)])
    out = plot_runs(runs, tmp_path / "runs.svg")
    svg = out.read_text()
    for gid in ("steps:0", "steps:1", "warmup:0", "warmup:1", "median:0", "median:1"):
        assert f'id="{gid}"' in svg
    with pytest.raises(ConfigError, match="must end in"):
        plot_runs(runs, tmp_path / "runs.txt")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_runs_cli_table_json_and_errors(tmp_path):
    a, b = record_run(tmp_path / "a", 0.05), record_run(tmp_path / "b", 0.1, seed=5)
    out = run_cli("runs", str(a), str(b), "--plot", str(tmp_path / "r.png"))
    assert out.returncode == 0, out.stderr
    for label in (
        "Warm-up",
        "Median step",
        "Spread p10–p90",
        "Throughput",
        "Peak memory",
        "Total (timed)",
        "slower",
    ):
        assert label in out.stdout
    assert (tmp_path / "r.png").stat().st_size > 1000
    doc = json.loads(run_cli("runs", str(a), str(b), "--json").stdout)
    assert [r["ratio_to_first"] is None for r in doc["runs"]] == [True, False]
    bad = run_cli("runs", str(a), str(tmp_path / "missing"))
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "does not exist" in bad.stderr


def test_runs_of_different_batch_sizes_compare_time_per_sample(tmp_path):
    a = record_run(tmp_path / "a", 0.05, seed=1)  # 8 samples per step
    path = record_run(tmp_path / "b", 0.08, seed=2)
    doc = json.loads(path.read_text())
    doc["config"]["training"]["micro_batch_size"] = 8  # 16 samples per step, 1.6x the step time
    path.write_text(json.dumps(doc))
    _, b = summarize_runs([a, path])
    assert b.ratio.per == "sample" and b.ratio.estimate == pytest.approx(0.8, rel=0.05)
    assert b.ratio.verdict == "faster"
