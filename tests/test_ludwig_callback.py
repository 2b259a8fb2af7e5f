"""perfmodel's Ludwig callback against Ludwig 0.17.10's real callback interface.

Ludwig calls (ludwig/api.py, ludwig/trainers/trainer.py of 0.17.10): on_train_init(base_config=,
experiment_directory=, experiment_name=, model_name=, output_directory=, resume_directory=),
on_train_start(model=, config=, config_fp=), on_batch_end(trainer, progress_tracker, save_path,
sync_step=should_step), on_train_end(output_directory); every method of ludwig.callbacks.Callback
also takes **kwargs. The first real run showed the mismatch this pins: Ludwig passes `sync_step=`.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfmodel.config.ludwig_venv import ludwig_python

ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_callback_takes_ludwigs_calls_as_ludwig_makes_them(tmp_path):
    from perfmodel.monitor.ludwig import PerfmodelLudwigCallback
    from perfmodel.monitor.report import ConsoleReporter

    clock, out = Clock(), io.StringIO()
    cb = PerfmodelLudwigCallback(
        clock=clock, sampler=False, reporter=ConsoleReporter(out), report_every_s=5.0
    )
    config = {
        "input_features": [{"name": "a", "type": "number"}],
        "output_features": [{"name": "y", "type": "binary"}],
        "trainer": {"batch_size": 16, "epochs": 2},
    }
    cb.on_train_init(
        base_config=config,
        experiment_directory=str(tmp_path),
        experiment_name="api_experiment",
        model_name="run",
        output_directory=str(tmp_path / "out"),
        resume_directory=None,
        extra="ignored",
    )
    cb.on_train_start(model=None, config=config, config_fp=None, extra="ignored")
    trainer = SimpleNamespace(total_steps=40)
    tracker = SimpleNamespace(steps=0, epoch=0)
    for i in range(40):
        clock.t += 0.05
        tracker.steps = i + 1
        cb.on_batch_end(trainer, tracker, str(tmp_path), sync_step=(i + 1) % 4 == 0)
        if (i + 1) % 20 == 0:
            cb.on_epoch_end(trainer, tracker, str(tmp_path), extra="ignored")
    cb.on_train_end(str(tmp_path / "out"), extra="ignored")
    assert cb.final is not None and cb.final.finished and cb.final.steps_done == 39
    assert cb.final.observed.median_s == pytest.approx(0.05)
    record = json.loads((tmp_path / "out" / "perfmodel_run.json").read_text())
    assert record["total_steps"] == 40 and record["config"]["framework"] == "ludwig"


@pytest.mark.ludwig
@pytest.mark.slow
@pytest.mark.skipif(
    ludwig_python() is None, reason="no Ludwig venv (make ludwig-env or $PERFMODEL_LUDWIG_PYTHON)"
)
def test_a_real_ludwig_training_with_the_callback(tmp_path):
    import pandas as pd

    rows = 200
    pd.DataFrame(
        {
            "a": [float(i % 7) for i in range(rows)],
            "b": [float(i % 5) for i in range(rows)],
            "y": [i % 2 for i in range(rows)],
        }
    ).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "c.yaml").write_text(
        "input_features: [{name: a, type: number}, {name: b, type: number}]\n"
        "output_features: [{name: y, type: binary}]\ntrainer: {epochs: 2, batch_size: 8}\n"
    )
    proc = subprocess.run(
        [
            str(ludwig_python()),
            "-m",
            "collectors.ludwig_child",
            "callback",
            str(tmp_path / "c.yaml"),
            str(tmp_path / "d.csv"),
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert (
        result["ludwig_callback_base"] == "ludwig.callbacks.Callback"
    )  # Ludwig's own base class, not the stand-in
    # ceil(0.7 x 200) = 140 training rows, ceil(140 / 8) = 18 batches per epoch, 2 epochs; timing starts after the first
    assert (
        result["finished"] and result["steps_timed"] == 35 and result["total_steps_after_first_batch"] == 35
    )
    assert "[perfmodel] step 35/35" in proc.stderr
    # the prior needs lightgbm (perfmodel's learned model) in Ludwig's venv; without it the training still runs
    assert result["prior_step_s"] is not None or any("lightgbm" in n for n in result["prior_notes"])
