"""`perfmodel validate`: the extrapolation from a partial run (synthetic phases with known answers),
the Ludwig split, the Trainer's full-run shape, and - slow - real Ludwig and real Trainer runs:
extrapolate from 10%, then measure the full run, and check it lies inside the stated interval."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from perfmodel.config.ludwig_venv import ludwig_python
from perfmodel.errors import ConfigError
from perfmodel.monitor.intervals import Intervals
from perfmodel.monitor.shift_risk import level_shift_risk, widen
from perfmodel.run.extrapolate import FullShape, PhaseTimes, extrapolate, host_noise_of
from perfmodel.run.validate import split_rows, trainer_full_shape
from tests.conftest import in_timing_rounds

ROOT = Path(__file__).resolve().parents[1]


def steps(n: int, mean_s: float, seed: int = 0, sd: float = 0.1) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(mean_s * np.exp(rng.normal(-(sd**2) / 2, sd, n)))


def partial(n: int = 50, seed: int = 0) -> PhaseTimes:
    times = [1.0, 0.5] + steps(n - 2, 0.1, seed)
    wall = 5.0 + sum(times) + 3 * 0.4 + 3 * 0.05 + 1.0
    return PhaseTimes(
        wall_s=wall,
        intervals=Intervals.of([(1, t) for t in times]),
        eval_passes_s=[0.4, 0.42, 0.38],
        checkpoint_passes_s=[0.05, 0.05, 0.05],
        preprocess_s=1.0,  # 0.5 s fixed + 1 ms/row at 500 rows
        preprocess_rows=500,
        small_preprocess=(0.625, 125),
    )


def test_each_phase_is_scaled_by_its_rule():
    ex = extrapolate(
        partial(), FullShape(steps=500, eval_passes=3, checkpoint_passes=3, preprocess_rows=5000)
    )
    by = {p.name: p for p in ex.phases}
    assert by["start-up"].full_s.estimate == pytest.approx(5.0)
    assert by["preprocessing"].full_s.estimate == pytest.approx(0.5 + 5000 * 0.001)
    assert by["warm-up"].measured_count == 2 and by["warm-up"].full_s.estimate == pytest.approx(1.5)
    stable = by["stable steps"].full_s
    assert stable.low < 498 * 0.1 < stable.high and stable.estimate == pytest.approx(49.8, rel=0.1)
    assert by["evaluation"].full_s.estimate == pytest.approx(3 * 0.4)
    assert by["checkpoints"].full_s.estimate == pytest.approx(0.15)
    total = ex.total_s
    assert total.estimate == pytest.approx(sum(p.full_s.estimate for p in ex.phases))
    assert total.low < total.estimate < total.high


def test_passes_scale_with_their_count_and_rows():
    ex = extrapolate(
        partial(),
        FullShape(steps=500, eval_passes=30, checkpoint_passes=10, preprocess_rows=500, eval_row_ratio=2.0),
    )
    by = {p.name: p for p in ex.phases}
    assert by["evaluation"].full_s.estimate == pytest.approx(30 * 0.4 * 2.0)
    assert by["checkpoints"].full_s.estimate == pytest.approx(10 * 0.05)


def test_total_interval_covers_a_synthetic_full_run():
    """Partial runs of 50 steps from a known generator: the 90% interval holds the full run's
    total (drawn from the same generator, host noise 0) in most of 30 seeds."""
    hits = 0
    for seed in range(30):
        ex = extrapolate(
            partial(seed=seed), FullShape(steps=500, eval_passes=3, checkpoint_passes=3), host_noise=0.0
        )
        truth = 5.0 + 1.5 + sum(steps(498, 0.1, seed + 100)) + 1.2 + 0.15 + 1.0
        hits += ex.total_s.low <= truth <= ex.total_s.high
    assert hits >= 25


def test_host_noise_grows_with_a_moving_load_on_an_oversubscribed_host():
    assert host_noise_of((0.5, 0.4, 0.3), 2) == 0.10  # not oversubscribed
    assert host_noise_of((8.5, 8.0, 5.6), 2) == pytest.approx(float(np.std(np.log([8.5, 8.0, 5.6]), ddof=1)))
    assert host_noise_of((6.0, 6.0, 6.0), 2) == 0.10
    assert host_noise_of(None, None) == 0.10


def test_level_shift_risk_is_zero_for_noise_and_large_after_a_shift():
    flat = Intervals.of([(1, t) for t in steps(200, 0.1, 1)])
    shifted = Intervals.of([(1, t) for t in steps(100, 0.1, 2) + steps(100, 0.15, 3)])
    assert level_shift_risk(flat) < 0.02
    assert level_shift_risk(shifted) == pytest.approx(math.log(1.5) / 2, rel=0.3)
    assert level_shift_risk(Intervals.of([(1, 0.1)] * 20)) == 0.0  # under 3 blocks: not estimated
    e, lo, hi = widen(10.0, 9.9, 10.1, 0.1, 0.9)
    assert e == 10.0 and lo == pytest.approx(10 * math.exp(-1.645 * 0.1), rel=1e-3) and hi > 11.7


def test_split_rows_sizes_as_ludwig_does():
    frame = pd.DataFrame({"x": range(10_000), "split": [0] * 5000 + [1] * 2000 + [2] * 3000})
    train, val, test, notes = split_rows(frame, {})
    assert abs(len(train) - 7000) < 300 and abs(len(val) - 1000) < 150 and abs(len(test) - 2000) < 200
    train, val, test, _ = split_rows(
        frame, {"preprocessing": {"split": {"type": "fixed", "column": "split"}}}
    )
    assert (len(train), len(val), len(test)) == (5000, 2000, 3000)
    _, _, _, notes = split_rows(
        frame, {"preprocessing": {"split": {"type": "stratify", "probabilities": [0.8, 0.1, 0.1]}}}
    )
    assert notes and "stratify" in notes[0]
    with pytest.raises(ConfigError, match="probabilities"):
        split_rows(frame, {"preprocessing": {"split": {"probabilities": [0.5, 0.1]}}})


def test_trainer_full_shape_from_its_arguments():
    args = SimpleNamespace(
        max_steps=-1,
        num_train_epochs=3,
        gradient_accumulation_steps=2,
        eval_strategy="steps",
        eval_steps=50,
        logging_steps=10,
        save_strategy="epoch",
        save_steps=500,
    )
    trainer = SimpleNamespace(args=args, eval_dataset=[1], get_train_dataloader=lambda: range(101))
    shape = trainer_full_shape(trainer)
    assert shape.steps == 3 * 51 and shape.eval_passes == 153 // 50 and shape.checkpoint_passes == 3
    args.max_steps, args.save_strategy = 400, "no"
    shape = trainer_full_shape(trainer)
    assert shape.steps == 400 and shape.eval_passes == 8 and shape.checkpoint_passes == 0


# --- slow: real runs ----------------------------------------------------------------------------


def tiny_ludwig(folder: Path, rows: int = 2000) -> tuple[Path, Path]:
    """A tabular Ludwig config and its CSV: 2 epochs of batch 8 (350 steps on all rows, 36 on 10%)."""
    rng = np.random.default_rng(0)
    age = rng.integers(18, 90, rows)
    frame = pd.DataFrame(
        {
            "age": age,
            "income": rng.lognormal(10, 1, rows).round(2),
            "workclass": rng.choice([f"w{i}" for i in range(8)], rows),
            "label": (age > 50).astype(int),
        }
    )
    data = folder / "data.csv"
    frame.to_csv(data, index=False)
    config = folder / "ludwig.yaml"
    config.write_text(LUDWIG_CONFIG)
    return config, data


LUDWIG_CONFIG = """input_features:
  - {name: age, type: number}
  - {name: income, type: number}
  - {name: workclass, type: category}
output_features:
  - {name: label, type: binary}
trainer: {epochs: 2, batch_size: 8, eval_batch_size: 512, early_stop: -1}
"""


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.skipif(ludwig_python() is None, reason="no Ludwig venv (make ludwig-env)")
def test_validate_real_ludwig_from_10_percent_then_the_full_run(tmp_path, quiet_host):
    config, data = tiny_ludwig(tmp_path)
    in_timing_rounds(lambda: _validate_ludwig_round(config, data))


def _validate_ludwig_round(config, data):
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    cmd = [
        sys.executable,
        "-m",
        "perfmodel",
        "validate",
        str(config),
        "--dataset",
        str(data),
        "--check-full",
        "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["framework"] == "ludwig" and doc["fraction"] == 0.1
    assert doc["full_steps"] == 2 * math.ceil(doc["full_rows"]["training"] / 8)
    assert {p["name"] for p in doc["phases"]} >= {
        "start-up",
        "preprocessing",
        "warm-up",
        "stable steps",
        "evaluation",
    }
    check = doc["check"]
    print(
        f"ludwig: extrapolated {doc['total_time_s']}, measured {check['measured_s']:.1f} s, error {check['error']:+.1%}"
    )
    assert check["inside_interval"], (doc["total_time_s"], check, doc["load_avg"])


@pytest.mark.slow
@pytest.mark.timing
def test_validate_real_trainer_from_10_percent_then_the_full_run(tmp_path, monkeypatch, quiet_host):
    # torch, transformers: heavy, only this test needs them
    import torch
    import transformers.trainer
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from perfmodel.run.validate import check_trainer, validate_trainer

    # the repository's datasets/ folder imports as a package named `datasets` (see test_monitor_hf)
    monkeypatch.setattr(transformers.trainer, "is_datasets_available", lambda: False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    class RandomTokens(torch.utils.data.Dataset):
        def __init__(self, n: int) -> None:
            self.n = n

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            ids = torch.randint(0, 128, (32,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids.clone()}

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=400,
        per_device_train_batch_size=8,
        logging_steps=50,
        eval_strategy="steps",
        eval_steps=20,
        per_device_eval_batch_size=64,
        save_strategy="steps",
        save_steps=100,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model, args=args, train_dataset=RandomTokens(4096), eval_dataset=RandomTokens(256)
    )
    try:
        result = validate_trainer(trainer, steps=40, live_eta=False)
        assert result.partial_steps == 40 and result.full_steps == 400
        by = {p.name: p for p in result.extrapolation.phases}
        assert by["evaluation"].measured_count == 2 and by["evaluation"].full_count == 20
        assert by["checkpoints"].full_count == 4
        result = check_trainer(result, trainer)
    finally:
        torch.set_num_threads(threads)
    c, t = result.check, result.extrapolation.total_s
    print(
        f"trainer: extrapolated {t.estimate:.1f} s ({t.low:.1f}-{t.high:.1f}), measured {c.measured_s:.1f} s, error {c.error:+.1%}"
    )
    assert c.inside, (t, c, result.load_avg)


# --- the Trainer from the CLI: `perfmodel validate --trainer SCRIPT -- ARGS` --------------------

TRAINER_SCRIPT = '''"""A user's training script, unchanged: GPT-2 (2 layers, width 32) on random tokens."""
import argparse

import torch
import transformers.trainer
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

# the test runs with the repository on PYTHONPATH, whose datasets/ folder would import as `datasets`
transformers.trainer.is_datasets_available = lambda: False

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--max-steps", type=int, default=400)
opts = parser.parse_args()
torch.set_num_threads(1)


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        ids = torch.randint(0, 128, (32,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64))
args = TrainingArguments(
    output_dir=opts.out, max_steps=opts.max_steps, per_device_train_batch_size=8, logging_steps=50,
    eval_strategy="steps", eval_steps=20, per_device_eval_batch_size=64, save_strategy="steps",
    save_steps=100, report_to="none", use_cpu=True, dataloader_num_workers=0,
)
trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(4096), eval_dataset=RandomTokens(256))
trainer.train()
open(opts.out + "/after-train.txt", "w").write("the script went on after train()")
'''


def _perfmodel(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["validate"], "give one Ludwig config"),
        (["validate", "a.yaml"], "needs --dataset"),
        (["validate", "--trainer", "train.py", "--dataset", "d.csv"], "are for a Ludwig config"),
    ],
)
def test_validate_cli_says_which_form_it_needs(tmp_path, args, message):
    done = _perfmodel(*args, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.slow
def test_validate_trainer_script_that_never_trains_is_one_error(tmp_path):
    (tmp_path / "noop.py").write_text("import transformers\nprint('no training here')\n")
    done = _perfmodel("validate", "--trainer", "noop.py", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error: noop.py ran to its end without calling")


@pytest.mark.slow
@pytest.mark.timing
def test_validate_trainer_script_from_the_cli_extrapolates_10_percent_into_the_full_run(tmp_path, quiet_host):
    (tmp_path / "train.py").write_text(TRAINER_SCRIPT)
    rounds = iter(range(1, 100))
    in_timing_rounds(lambda: _validate_trainer_round(tmp_path, next(rounds)))


def _validate_trainer_round(tmp_path, round_no):
    load0 = os.getloadavg()[0]
    out = tmp_path / f"out{round_no}"
    out.mkdir()
    done = _perfmodel(
        "validate", "--trainer", "train.py", "--fraction", "0.1", "--check-full", "--json",
        "--", "--out", str(out), "--max-steps", "400", cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["framework"] == "hf-trainer"
    assert doc["partial_steps"] == 40 and doc["full_steps"] == 400  # 10% of the script's max_steps
    assert not (out / "after-train.txt").exists()  # stopped at train(): nothing after it ran
    check, total = doc["check"], doc["total_time_s"]
    print(
        f"validate --trainer: partial {doc['partial_wall_s']:.1f} s, extrapolated {total['estimate']:.1f} s "
        f"({total['low']:.1f}-{total['high']:.1f}), full run measured {check['measured_s']:.1f} s, "
        f"error {check['error']:+.1%}; load {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    assert check["inside_interval"], (total, check, doc["load_avg"])
