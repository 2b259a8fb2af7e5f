"""`perfmodel validate`: run the user's own config on a fraction of its data (or for N steps), then
extrapolate to the full run with an interval (perfmodel.run.extrapolate: start-up,
preprocessing, warm-up, stable steps, evaluation and checkpoint passes, each measured and scaled).

    validate_ludwig("model.yaml", dataset="train.csv", fraction=0.1)   # real Ludwig, in its venv
    validate_trainer(trainer, steps=40)                                # a transformers.Trainer

**Ludwig.** The dataset is split as Ludwig splits it by default (random, the config's
`preprocessing.split.probabilities`, default 0.7/0.1/0.2; a `fixed` split uses its column), the
training rows are sampled down to `fraction`, and validation and test stay whole, so every
evaluation pass reads what the full run's passes read. The config then trains for real in the
Ludwig venv (perfmodel/config/ludwig_venv.py), one process as a user runs it
(perfmodel/run/ludwig_validate_child.py), with the three sets given to `LudwigModel.train`. Ludwig
counts a batch as a step: the full run has epochs x ceil(training rows / batch size) of them
(or `trainer.train_steps`). Evaluation and checkpoint passes: one per epoch (or per
`checkpoints_per_epoch`) - as many as the partial run had - or, with `steps_per_checkpoint`, the
full run's steps / that. With `steps=N` the config trains `train_steps: N` on all of the data.
`check_full=True` then trains the full run too and reports the error of the extrapolation.

**Hugging Face Trainer.** The trainer's own `train()` runs with `max_steps` capped at `steps`,
with a timing callback that separates the optimizer steps from evaluation (`on_evaluate`) and checkpoint saves
(`on_save`); the full run's counts come from its arguments (max_steps, or epochs x update steps
per epoch; eval/save strategy and steps). perfmodel's live-ETA callback
(perfmodel.monitor.hf.PerfmodelCallback) is attached only with `live_eta=True`: its own start-up (a
prediction for its prior, ~2 s on a 2-core CPU) would count as the run's. Start-up is the rest of `train()`'s wall time (data
loader, optimizer, the first step's set-up, the end of training); the interpreter and imports are
the caller's and not part of it.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.config.ludwig import is_ludwig
from perfmodel.config.ludwig_venv import require_ludwig_python
from perfmodel.errors import ConfigError, DataError, PerfModelError
from perfmodel.monitor.intervals import Intervals
from perfmodel.run.extrapolate import (
    HOST_NOISE,
    Extrapolation,
    FullShape,
    PhaseTimes,
    extrapolate,
    host_noise_of,
)
from perfmodel.safe_yaml import read_yaml_file

CHILD = Path(__file__).with_name("ludwig_validate_child.py")
DEFAULT_SPLIT = (0.7, 0.1, 0.2)
"""Ludwig's default random split (training, validation, test)."""
SEED = 42
"""Seed of the split and of the sample of training rows (Ludwig's default random seed)."""
CHILD_TIMEOUT_S = 6 * 3600.0


class ValidateError(PerfModelError, RuntimeError):
    """The partial (or full) run failed."""


@dataclass(frozen=True, kw_only=True)
class FullCheck:
    """The full run, measured after the extrapolation (check_full)."""

    measured_s: float
    """Its wall time in s."""
    error: float
    """Extrapolated / measured - 1."""
    inside: bool
    """The measured wall time lies inside the extrapolation's interval."""
    load_avg: tuple[float, float] | None = None
    """1-minute load average at its start and end."""

    def to_json(self) -> dict[str, Any]:
        return {
            "measured_s": self.measured_s,
            "error": self.error,
            "inside_interval": self.inside,
            "load_avg": None if self.load_avg is None else list(self.load_avg),
        }


@dataclass(frozen=True, kw_only=True)
class ValidationResult:
    framework: str
    """ludwig | hf-trainer."""
    fraction: float | None
    """Share of the training rows the partial run used (None with steps)."""
    partial_steps: int
    """Steps the partial run took."""
    full_steps: int
    """Steps of the full run."""
    partial_wall_s: float
    """Wall time of the partial run in s."""
    extrapolation: Extrapolation
    rows: dict[str, int] = field(default_factory=dict)
    """Rows of each split in the partial run (Ludwig)."""
    full_rows: dict[str, int] = field(default_factory=dict)
    """The same in the full run."""
    load_avg: tuple[float, float] | None = None
    """1-minute load average at the partial run's start and end."""
    cpu_count: int | None = None
    check: FullCheck | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "fraction": self.fraction,
            "partial_steps": self.partial_steps,
            "full_steps": self.full_steps,
            "partial_wall_s": self.partial_wall_s,
            **self.extrapolation.to_json(),
            "rows": dict(self.rows),
            "full_rows": dict(self.full_rows),
            "load_avg": None if self.load_avg is None else list(self.load_avg),
            "cpu_count": self.cpu_count,
            "check": None if self.check is None else self.check.to_json(),
            "notes": [*self.extrapolation.notes, *self.notes],
        }


def _check(ex: Extrapolation, measured_s: float, load: tuple[float, float] | None) -> FullCheck:
    t = ex.total_s
    return FullCheck(
        measured_s=measured_s,
        error=t.estimate / measured_s - 1 if measured_s > 0 else math.inf,
        inside=t.low <= measured_s <= t.high,
        load_avg=load,
    )


# --- Ludwig -----------------------------------------------------------------------------------


def load_ludwig_config(config: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    cfg = dict(config) if isinstance(config, Mapping) else read_yaml_file(config)
    if not isinstance(cfg, dict) or not is_ludwig(cfg):
        raise ConfigError(
            f"{config if not isinstance(config, Mapping) else 'the config'} is not a Ludwig config "
            "(input_features / output_features): validate runs Ludwig configs; for a Trainer script "
            "use perfmodel.run.validate.validate_trainer, for a native config `perfmodel probe`"
        )
    return copy.deepcopy(cfg)


def split_rows(frame: Any, cfg: Mapping[str, Any], seed: int = SEED) -> tuple[Any, Any, Any, list[str]]:
    """(training, validation, test) frames as Ludwig's split would size them, with notes."""
    split = ((cfg.get("preprocessing") or {}).get("split")) or {}
    notes: list[str] = []
    kind = str(split.get("type", "random"))
    if kind == "fixed":
        column = str(split.get("column", "split"))
        if column not in frame.columns:
            raise DataError(f"the config splits on column {column!r}, which the dataset does not have")
        which = frame[column].astype(int).to_numpy()
    else:
        probs = tuple(float(p) for p in split.get("probabilities", DEFAULT_SPLIT))
        if len(probs) != 3 or abs(sum(probs) - 1) > 1e-6 or min(probs) < 0:
            raise ConfigError(
                f"preprocessing.split.probabilities must be 3 shares summing to 1; got {list(probs)}"
            )
        if kind != "random":
            notes.append(
                f"split type {kind!r} sized as a random split of {list(probs)} (timing needs sizes only)"
            )
        which = np.random.default_rng(seed).choice(3, size=len(frame), p=probs)
    return frame[which == 0], frame[which == 1], frame[which == 2], notes


def _ludwig_steps(trainer: Mapping[str, Any], resolved: Mapping[str, Any], train_rows: int) -> int:
    batch = int(trainer.get("batch_size") or resolved.get("batch_size") or 1)
    epochs = int(resolved.get("epochs") or 1)
    steps = epochs * math.ceil(train_rows / batch)
    cap = resolved.get("train_steps")
    return min(steps, int(cap)) if cap else steps


def _run_child(python: str, spec: dict[str, Any], work: Path, timeout_s: float) -> dict[str, Any]:
    spec_path, out_path = work / "spec.json", work / "out.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.run(
            [python, str(CHILD), str(spec_path), str(out_path)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=work,
        )
    except subprocess.TimeoutExpired:
        raise ValidateError(f"the Ludwig run did not finish within {timeout_s:.0f} s") from None
    except OSError as exc:
        raise ValidateError(f"cannot start Ludwig's python {python}: {exc}") from None
    if proc.returncode != 0 or not out_path.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ValidateError(f"the Ludwig run failed (exit {proc.returncode}): {tail[0][:300]}")
    data: dict[str, Any] = json.loads(out_path.read_text())
    return data


def _phase_times(out: Mapping[str, Any]) -> PhaseTimes:
    batches = list(out["batches"])
    small = out.get("small_preprocess")
    return PhaseTimes(
        wall_s=float(out["wall_s"]),
        intervals=Intervals.of([(1, float(s)) for s, _ in batches]),
        eval_passes_s=[float(e["s"]) for e in out["evals"]],
        checkpoint_passes_s=[float(c["s"]) for c in out["checkpoints"]],
        preprocess_s=float(out["preprocess_s"]),
        preprocess_rows=int(sum(out["rows"].values())),
        small_preprocess=None if not small else (float(small["s"]), int(small["rows"])),
    )


def validate_ludwig(
    config: str | Path | Mapping[str, Any],
    *,
    dataset: str | Path,
    fraction: float | None = 0.1,
    steps: int | None = None,
    confidence: float = 0.9,
    host_noise: float = HOST_NOISE,
    check_full: bool = False,
    python: str | None = None,
    work_dir: str | Path | None = None,
    timeout_s: float = CHILD_TIMEOUT_S,
) -> ValidationResult:
    """Train the Ludwig config on `fraction` of its training rows (or for `steps` steps) in the
    Ludwig venv and extrapolate to the full run (module doc)."""
    # pandas: reading the user's dataset (0.3-0.8 s of import; not on the CLI's cold start)
    import pandas as pd

    cfg = load_ludwig_config(config)
    if steps is not None:
        fraction = None
        if steps < 1:
            raise ConfigError(f"--steps must be >= 1; got {steps}")
    elif fraction is None or not 0 < fraction < 1:
        raise ConfigError(f"--fraction must be in (0, 1); got {fraction}")
    ludwig_py = require_ludwig_python(python)
    path = Path(dataset).expanduser()
    if not path.is_file() or path.suffix.lower() != ".csv":
        raise DataError(f"--dataset {path}: give a CSV file (the rows the config trains on)")
    try:
        frame = pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any parse failure is a data error
        raise DataError(f"cannot read {path} as CSV: {str(exc)[:200]}") from None
    train, val, test, notes = split_rows(frame, cfg)
    if len(train) < 2:
        raise DataError(f"{path}: {len(train)} training rows after the split; validate needs at least 2")
    full_rows = {"training": len(train), "validation": len(val), "test": len(test)}
    with tempfile.TemporaryDirectory(prefix="perfmodel-validate-", dir=work_dir) as tmp:
        work = Path(tmp)
        sets = _write_sets(work / "full", train, val, test)
        part_cfg = copy.deepcopy(cfg)
        if fraction is not None:
            part = train.sample(n=max(2, round(len(train) * fraction)), random_state=SEED)
            part_sets = _write_sets(work / "part", part, val, test)
        else:
            part, part_sets = train, sets
            part_cfg.setdefault("trainer", {})["train_steps"] = int(steps or 1)
        small = _write_sets(
            work / "small",
            part.iloc[: max(2, len(part) // 4)],
            val.iloc[: max(1, len(val) // 4)],
            test.iloc[: max(1, len(test) // 4)],
        )
        spec = {"config": part_cfg, **part_sets, "output_dir": str(work / "out"), "small": small}
        out = _run_child(ludwig_py, spec, work, timeout_s)
        result = _ludwig_result(out, cfg, full_rows, fraction, confidence, host_noise, notes)
        if check_full:
            full = _run_child(
                ludwig_py, {"config": cfg, **sets, "output_dir": str(work / "out-full")}, work, timeout_s
            )
            load = (float(full["load_avg_start"][0]), float(full["load_avg_end"][0]))
            result = _replace(result, check=_check(result.extrapolation, float(full["wall_s"]), load))
            if int(full["trainer"]["steps"]) != result.full_steps:
                result.notes.append(
                    f"the full run took {full['trainer']['steps']} steps, not the {result.full_steps} counted"
                )
    return result


def _write_sets(folder: Path, train: Any, val: Any, test: Any) -> dict[str, str | None]:
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, str | None] = {}
    for key, frame in (("training_set", train), ("validation_set", val), ("test_set", test)):
        if len(frame):
            p = folder / f"{key}.csv"
            frame.to_csv(p, index=False)
            out[key] = str(p)
        else:
            out[key] = None
    return out


def _ludwig_result(
    out: Mapping[str, Any],
    cfg: Mapping[str, Any],
    full_rows: dict[str, int],
    fraction: float | None,
    confidence: float,
    host_noise: float,
    notes: list[str],
) -> ValidationResult:
    trainer, resolved = out["trainer"] or {}, out["resolved_trainer"]
    part_steps = int(trainer.get("steps") or len(out["batches"]))
    full_cfg_steps = dict(resolved)
    if fraction is None:
        full_cfg_steps["train_steps"] = (cfg.get("trainer") or {}).get("train_steps")
    full_steps = _ludwig_steps(trainer, full_cfg_steps, full_rows["training"])
    evals, ckpts = len(out["evals"]), len(out["checkpoints"])
    spc = int(resolved.get("steps_per_checkpoint") or 0)
    if spc > 0 or fraction is None:
        per_epoch = max(1, int(resolved.get("checkpoints_per_epoch") or 1))
        full_passes = full_steps // spc if spc > 0 else int(resolved.get("epochs") or 1) * per_epoch
        full_evals = full_passes if evals else 0
        full_ckpts = full_passes if ckpts else 0
    else:  # per epoch: as many as the partial run (the same epochs)
        full_evals, full_ckpts = evals, ckpts
    rows = dict(out["rows"])
    ratio = 1.0
    if resolved.get("evaluate_training_set") and rows.get("training"):
        eval_rows = rows.get("validation", 0) + rows.get("test", 0)
        ratio = (eval_rows + full_rows["training"]) / (eval_rows + rows["training"])
        notes.append("evaluate_training_set: each evaluation pass is scaled by the rows it reads")
    if resolved.get("early_stop", -1) not in (-1, None) and int(resolved.get("epochs") or 1) > 1:
        notes.append(
            f"early_stop is {resolved.get('early_stop')}: the full run may stop before its "
            f"{resolved.get('epochs')} epochs; the extrapolation assumes it runs them all"
        )
    shape = FullShape(
        steps=full_steps,
        eval_passes=full_evals,
        checkpoint_passes=full_ckpts,
        preprocess_rows=sum(full_rows.values()),
        eval_row_ratio=ratio,
    )
    noise = host_noise_of(out.get("load_avg_start"), out.get("cpu_count"), host_noise)
    ex = extrapolate(_phase_times(out), shape, confidence=confidence, host_noise=noise)
    return ValidationResult(
        framework="ludwig",
        fraction=fraction,
        partial_steps=part_steps,
        full_steps=full_steps,
        partial_wall_s=float(out["wall_s"]),
        extrapolation=ex,
        rows=rows,
        full_rows=full_rows,
        load_avg=(float(out["load_avg_start"][0]), float(out["load_avg_end"][0])),
        cpu_count=out.get("cpu_count"),
        notes=notes,
    )


def _replace(result: ValidationResult, **changes: Any) -> ValidationResult:
    return replace(result, **changes)  # notes stay the same list object


# --- Hugging Face Trainer ---------------------------------------------------------------------


def _trainer_callback_base() -> Any:
    # transformers: heavy, only a Trainer validation needs it
    from transformers import TrainerCallback

    return TrainerCallback


def _phase_callback() -> Any:
    base = _trainer_callback_base()

    class PhaseCallback(base):  # type: ignore[misc,valid-type]
        """Separates optimizer steps from evaluation and checkpoint saves (HF calls on_step_end,
        then evaluates and saves, then starts the next step)."""

        def __init__(self) -> None:
            self.steps: list[float] = []
            self.evals: list[float] = []
            self.saves: list[float] = []
            self.mark: float | None = None
            self.began = self.ended = 0.0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.began = self.mark = time.perf_counter()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.mark is None:
                self.mark = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.perf_counter()
            if self.mark is not None:
                self.steps.append(now - self.mark)
            self.mark = now

        def on_evaluate(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.perf_counter()
            self.evals.append(now - (self.mark or now))
            self.mark = now

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.perf_counter()
            self.saves.append(now - (self.mark or now))
            self.mark = now

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.ended = time.perf_counter()

    return PhaseCallback()


def trainer_full_shape(trainer: Any, total_steps: int | None = None) -> FullShape:
    """The full run's steps, evaluation and checkpoint passes from a Trainer's arguments."""
    args = trainer.args
    if total_steps:
        steps = int(total_steps)
    elif args.max_steps and args.max_steps > 0:
        steps = int(args.max_steps)
    else:
        per_epoch = math.ceil(
            len(trainer.get_train_dataloader()) / max(1, int(args.gradient_accumulation_steps))
        )
        steps = math.ceil(float(args.num_train_epochs) * per_epoch)
    epochs = (
        max(1, math.ceil(float(args.num_train_epochs))) if not (args.max_steps and args.max_steps > 0) else 1
    )

    def count(strategy: Any, every: Any) -> int:
        name = str(getattr(strategy, "value", strategy)).lower()
        if name == "steps":
            every_steps = every if every >= 1 else math.ceil(every * steps)  # a float < 1: a share of the run
            return steps // max(1, int(every_steps))
        if name == "epoch":
            return epochs
        return 0

    evals = (
        count(args.eval_strategy, args.eval_steps or args.logging_steps)
        if trainer.eval_dataset is not None
        else 0
    )
    saves = count(args.save_strategy, args.save_steps)
    return FullShape(steps=steps, eval_passes=evals, checkpoint_passes=saves)


def validate_trainer(
    trainer: Any,
    *,
    steps: int,
    total_steps: int | None = None,
    confidence: float = 0.9,
    host_noise: float = HOST_NOISE,
    live_eta: bool = False,
) -> ValidationResult:
    """Run `trainer.train()` for `steps` optimizer steps (max_steps capped, restored after; the
    live-ETA callback too with `live_eta`), and extrapolate to the full run (module doc; `total_steps`
    overrides the step count the trainer's arguments give)."""
    if steps < 1:
        raise ConfigError(f"steps must be >= 1; got {steps}")
    shape = trainer_full_shape(trainer, total_steps)
    if steps >= shape.steps:
        raise ConfigError(f"steps ({steps}) must be fewer than the full run's {shape.steps}")
    phases = _phase_callback()
    added = [phases]
    if live_eta:
        # perfmodel.monitor.hf imports transformers (the Trainer has it already)
        from perfmodel.monitor.hf import PerfmodelCallback

        added.append(PerfmodelCallback(record=False, sampler=False, total_steps=steps))
    args = trainer.args
    saved = args.max_steps
    for cb in added:
        trainer.add_callback(cb)
    load = os.getloadavg()
    t0 = time.perf_counter()
    try:
        args.max_steps = steps
        trainer.train()
    finally:
        args.max_steps = saved
        for cb in added:
            trainer.remove_callback(cb)
    wall = time.perf_counter() - t0
    times = PhaseTimes(
        wall_s=wall,
        intervals=Intervals.of([(1, s) for s in phases.steps]),
        eval_passes_s=phases.evals,
        checkpoint_passes_s=phases.saves,
    )
    # the partial run's passes are counted as it ran them; the full run's from its own arguments
    noise = host_noise_of(load, os.cpu_count(), host_noise)
    ex = extrapolate(times, shape, confidence=confidence, host_noise=noise)
    notes = []
    if not phases.evals and shape.eval_passes:
        notes.append(
            f"no evaluation pass in the first {steps} steps: the full run's {shape.eval_passes} are not timed"
        )
    if not phases.saves and shape.checkpoint_passes:
        notes.append(
            f"no checkpoint in the first {steps} steps: the full run's {shape.checkpoint_passes} are not timed"
        )
    return ValidationResult(
        framework="hf-trainer",
        fraction=None,
        partial_steps=len(phases.steps),
        full_steps=shape.steps,
        partial_wall_s=wall,
        extrapolation=ex,
        load_avg=(load[0], os.getloadavg()[0]),
        cpu_count=os.cpu_count(),
        notes=notes,
    )


def check_trainer(result: ValidationResult, trainer: Any) -> ValidationResult:
    """Train the full run now and add how far the extrapolation was from it."""
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    trainer.train()
    measured = time.perf_counter() - t0
    return _replace(result, check=_check(result.extrapolation, measured, (load0, os.getloadavg()[0])))
