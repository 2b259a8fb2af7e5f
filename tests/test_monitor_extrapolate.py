"""A finished partial run (a validation on a fraction, a `max_steps` cap) extrapolated to the step
count asked for: `perfmodel monitor RUN --total-steps N` (and `monitor_path(total_steps=N)`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfmodel.monitor.record import RunRecord, write_record
from perfmodel.monitor.watch import monitor_path

ROOT = Path(__file__).resolve().parents[1]
MEAN_S = 0.05


def partial_run(folder: Path, steps: int = 40, seed: int = 0) -> Path:
    """A finished run record of `steps` steps: 3 slow warm-up steps, then lognormal steps of mean MEAN_S."""
    rng = np.random.default_rng(seed)
    sigma = 0.15
    times = [0.5, 0.3, 0.2] + list(MEAN_S * np.exp(rng.normal(-(sigma**2) / 2, sigma, steps - 3)))
    record = RunRecord(
        source="step-timer", intervals=[(1, float(t)) for t in times], total_steps=steps, finished=True
    )
    return write_record(folder, record)


def test_finished_partial_run_is_finished_without_a_larger_count(tmp_path):
    report = monitor_path(partial_run(tmp_path))
    assert report.snapshot.finished and not report.extrapolated
    assert report.snapshot.remaining_s.estimate == 0.0


def test_finished_partial_run_is_extrapolated_to_total_steps(tmp_path):
    report = monitor_path(partial_run(tmp_path), total_steps=400)
    s = report.snapshot
    assert report.extrapolated and not s.finished
    assert s.total_steps == 400 and s.steps_done == 40
    rem = s.remaining_s
    assert rem.low < rem.estimate < rem.high
    assert rem.estimate == pytest.approx(360 * s.observed.mean_s, rel=1e-6)
    assert s.total_s.estimate == pytest.approx(s.elapsed_s + rem.estimate)
    assert any("extrapolated" in n for n in report.notes)
    doc = report.to_json()
    assert doc["extrapolated"] is True and doc["finished"] is False


def test_extrapolation_interval_covers_the_truth_usually(tmp_path):
    """20 seeded partial runs of 40 steps: the 90% interval for the other 360 steps holds their true
    time (drawn from the same generator) in most of them."""
    hits = 0
    for seed in range(20):
        report = monitor_path(partial_run(tmp_path / str(seed), seed=seed), total_steps=400)
        rng = np.random.default_rng(1000 + seed)
        truth = float(np.sum(MEAN_S * np.exp(rng.normal(-(0.15**2) / 2, 0.15, 360))))
        rem = report.snapshot.remaining_s
        hits += rem.low <= truth <= rem.high
    assert hits >= 16


@pytest.mark.slow
def test_monitor_cli_extrapolates_a_finished_partial_run(tmp_path):
    path = partial_run(tmp_path)
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "perfmodel", "monitor", str(path), "--total-steps", "400"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Extrapolated" in out.stdout and "ran 40 of 400 steps" in out.stdout
    assert "Finished" not in out.stdout
    doc = json.loads(
        subprocess.run(
            [*cmd, "--json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
        ).stdout
    )
    assert doc["extrapolated"] and doc["remaining_s"]["estimate"] > 0
