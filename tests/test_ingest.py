"""`perfmodel ingest`: a finished run becomes a measured row (source_kind 'user') in the collectors'
folder, readable by the row codec; the same run twice is refused with one line."""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.errors import DataError
from perfmodel.ingest import ingest_run
from perfmodel.monitor import StepTimer
from perfmodel.monitor.report import ConsoleReporter
from perfmodel.run.keep import DuplicateRunError

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "model: {name: gpt2}\ntraining: {seq_len: 128, micro_batch_size: 4, precision: fp32, steps: 30}\nhardware: {gpu: cpu}\n"


@pytest.fixture
def raw(tmp_path, monkeypatch):
    from perfmodel.catalog import hardware

    monkeypatch.setenv("PERFMODEL_DATASETS", str(tmp_path / "datasets"))
    # the catalog remembers each folder's fingerprints for the process; this one gets one later
    hardware.forget_measured_hosts()
    yield tmp_path / "datasets" / "raw"
    hardware.forget_measured_hosts()


def hardware_cache_clear() -> None:
    from perfmodel.catalog import hardware

    hardware.forget_measured_hosts()


def timed_run(
    tmp_path: Path, times: list[float], *, config: Path | None = None, total: int | None = None
) -> Path:
    """A StepTimer run under a fake clock; returns its record."""
    clock = {"t": 0.0}
    timer = StepTimer(
        total_steps=total or len(times),
        config=config,
        clock=lambda: clock["t"],
        sampler=False,
        reporter=ConsoleReporter(io.StringIO()),
        record_path=tmp_path / "run",
    )
    with timer:
        for t in times:
            clock["t"] += t
            timer.step()
    return tmp_path / "run" / "perfmodel_run.json"


def test_a_monitored_run_becomes_a_user_row(tmp_path, raw):
    import pandas as pd

    from perfmodel.codec import workload_from_row

    config = tmp_path / "run.yaml"
    config.write_text(CONFIG)
    # 28 stable steps whose median (0.435 s), mean (0.486 s), min and max all differ
    times = [3.0, 1.2] + [0.30 + 0.01 * i for i in range(27)] + [2.0]
    record = timed_run(tmp_path, times, config=config)
    result = ingest_run(record)
    assert result.row_id.startswith("user-") and result.warmup_steps == 2 and result.measured_steps == 28
    shard = Path(result.shard)
    assert shard.parent == raw and shard.name.startswith("user__")
    assert list(raw.glob("fingerprint__*.json"))
    row = pd.read_parquet(shard).iloc[0].to_dict()
    assert row["source_kind"] == "user" and row["status"] == "ok" and row["gpu"] == "cpu"
    assert list(row["step_times_s"]) == pytest.approx(times[2:])
    assert row["step_time_s"] == pytest.approx(statistics.median(times[2:]), rel=1e-9)  # 0.435 s, not the mean 0.486 s
    assert row["run_group"] == row["row_id"]
    hardware_cache_clear()
    w = workload_from_row(row)  # the codec reads it back, with the host that measured it
    assert w.model.hidden_size == 768 and w.training.seq_len == 128 and w.gpu.vendor == "cpu"


@pytest.mark.slow
def test_the_same_run_twice_is_refused(tmp_path, raw):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG)
    record = timed_run(tmp_path, [2.0] + [0.5] * 20, config=config)
    first = ingest_run(record)
    with pytest.raises(DuplicateRunError, match=f"already in .* as row {first.row_id}"):
        ingest_run(record)
    env = {**os.environ, "PERFMODEL_DATASETS": str(tmp_path / "datasets")}
    res = subprocess.run(
        [sys.executable, "-m", "perfmodel", "ingest", str(record)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1 and "already in" in res.stderr
    other = timed_run(
        tmp_path / "b", [2.0] + [0.5] * 19 + [0.51], config=config
    )  # other step times: a new run
    assert ingest_run(other).row_id != first.row_id


def test_a_trainer_state_with_its_config(tmp_path, raw):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG)
    history, t = [], 0.0
    for step in range(5, 101, 5):
        t += 4.0 if step == 5 else 5 * 0.3
        history.append({"loss": 1.0, "step": step, "perfmodel_elapsed_s": t})
    history.append({"train_runtime": t, "train_loss": 1.0, "step": 100})
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 100, "max_steps": 100, "log_history": history}))
    with pytest.raises(DataError, match="does not say what ran: give --config"):
        ingest_run(state)
    result = ingest_run(state, config=config)
    assert (
        result.source_format == "hf-trainer-state"
        and result.warmup_steps == 5
        and result.measured_steps == 95
    )
    assert result.step_time_s == pytest.approx(0.3)
    assert any("assumed it ran on this machine" in n for n in result.notes)


def test_runs_that_cannot_be_rows_are_refused_with_the_reason(tmp_path, raw):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG)
    short = timed_run(tmp_path / "short", [1.0] * 8, config=config)
    with pytest.raises(DataError, match="timed interval.*after warm-up; a row needs at least 10"):
        ingest_run(short)
    unfinished = timed_run(tmp_path / "unfinished", [1.0] * 20, config=config, total=100)
    with pytest.raises(DataError, match="not a finished run"):
        ingest_run(unfinished)
    assert ingest_run(unfinished, allow_unfinished=True).measured_steps == 19
    gpu_config = tmp_path / "gpu.yaml"
    gpu_config.write_text(CONFIG.replace("gpu: cpu", "gpu: A100-80GB"))
    with pytest.raises(DataError, match="the config says A100-80GB, but the run's host has no GPU"):
        ingest_run(timed_run(tmp_path / "c", [1.0] * 20), config=gpu_config)
