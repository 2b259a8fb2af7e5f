"""Reading runs that were not watched by a callback (or were): the files training leaves behind,
turned into progress intervals for the monitor core.

Formats (`read_trace(path)` detects them):
- perfmodel run record (`perfmodel_run.json`, written by the callbacks and StepTimer);
- Hugging Face `trainer_state.json` (`log_history`): per-log times from `perfmodel_elapsed_s`
  (added by PerfmodelCallback) or `train_runtime` (logged with include_num_input_tokens_seen);
  else, given the output folder, the save times of `checkpoint-*/trainer_state.json`; else only
  the final `train_runtime` (one interval: no warm-up, no spread);
- Ludwig `training_progress.json` (global `steps`; it holds no times) with the profiler's
  `system_resource_usage/<tag>/run_*.json` (`total_execution_time` in microseconds, average CPU
  utilisation) when present; without the profiler, `--follow` times the steps as the file changes;
- a CSV or JSONL of steps: `step_time_s` (or `duration_s`, `seconds`) per row, or a cumulative
  `elapsed_s` (or `time_s`, `timestamp`); optional `step`, `gpu_util_pct`, `cpu_util_pct`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.errors import DataError
from perfmodel.monitor.record import RECORD_FILE, is_record, record_from_json
from perfmodel.monitor.utilization import UtilSample

DURATION_KEYS = ("step_time_s", "duration_s", "seconds", "step_time")
ELAPSED_KEYS = ("elapsed_s", "time_s", "timestamp", "wall_time_s")
MAX_JSON_BYTES = 256 * 2**20


@dataclass(frozen=True, kw_only=True)
class RunTrace:
    """A run's progress as read from its files."""

    path: str
    """What was read."""
    format: str
    """perfmodel-run | hf-trainer-state | hf-checkpoints | ludwig | steps-csv | steps-jsonl."""
    intervals: list[tuple[int, float]] = field(default_factory=list)
    """(steps, seconds) between progress points; the first may include warm-up."""
    start_step: int = 0
    """Global step at which the first interval starts."""
    steps_done: int = 0
    """Global step reached."""
    total_steps: int | None = None
    """Steps the run will take, when the files say."""
    finished: bool = False
    """The files say the run ended."""
    samples: list[UtilSample] = field(default_factory=list)
    """Utilisation readings (seconds since the first progress point)."""
    config: dict[str, Any] | None = None
    """Native perfmodel config (run records)."""
    prediction: dict[str, Any] | None = None
    """The prior recorded with the run."""
    hardware: dict[str, Any] | None = None
    """Hardware fingerprint recorded with the run."""
    framework: str | None = None
    """Software stack family, when known."""
    updated_at: float | None = None
    """Modification time (Unix seconds) of the file that gave the progress."""
    notes: list[str] = field(default_factory=list)
    """What could not be read, and what was assumed."""


def _load_json(path: Path) -> Any:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise DataError(f"{path} is larger than {MAX_JSON_BYTES // 2**20} MB; not a progress file")
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {path} as JSON: {exc}") from None


def _intervals_from_points(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    out = []
    for (s0, t0), (s1, t1) in zip(points[:-1], points[1:], strict=True):
        if s1 > s0 and t1 >= t0:
            out.append((s1 - s0, t1 - t0))
    return out


# --- Hugging Face -----------------------------------------------------------------------------


def _hf_state(path: Path, state: dict[str, Any], checkpoints: list[tuple[int, float]]) -> RunTrace:
    history = [e for e in state.get("log_history") or [] if isinstance(e, dict)]
    total = int(state["max_steps"]) if state.get("max_steps") else None
    step = int(state.get("global_step") or 0)
    final = next((e for e in reversed(history) if "train_loss" in e and "train_runtime" in e), None)
    finished = final is not None or (total is not None and step >= total)
    common: dict[str, Any] = {
        "path": str(path),
        "steps_done": step,
        "total_steps": total,
        "finished": finished,
        "updated_at": path.stat().st_mtime,
        "framework": "hf-eager",
    }
    for key in ("perfmodel_elapsed_s", "train_runtime"):
        points = [(0, 0.0)] + [
            (int(e["step"]), float(e[key])) for e in history if key in e and "step" in e and e is not final
        ]
        if len(points) >= 3:
            return RunTrace(format="hf-trainer-state", intervals=_intervals_from_points(points), **common)
    if len(checkpoints) >= 2:
        return RunTrace(
            format="hf-checkpoints",
            intervals=_intervals_from_points(checkpoints),
            start_step=checkpoints[0][0],
            notes=["times are checkpoint save times (the first checkpoint's steps are untimed)"],
            **common,
        )
    if final is not None and step:
        return RunTrace(
            format="hf-trainer-state",
            intervals=[(step, float(final["train_runtime"]))],
            notes=[
                "only the total train_runtime is logged: no warm-up exclusion or spread; use PerfmodelCallback "
                "(or include_num_input_tokens_seen) for per-log times"
            ],
            **common,
        )
    return RunTrace(format="hf-trainer-state", notes=["trainer_state.json holds no times yet"], **common)


def _hf_checkpoint_points(folder: Path) -> list[tuple[int, float]]:
    points = []
    for p in folder.glob("checkpoint-*/trainer_state.json"):
        try:
            points.append((int(_load_json(p).get("global_step") or 0), p.stat().st_mtime))
        except DataError:
            continue
    return sorted(points)


# --- Ludwig -----------------------------------------------------------------------------------


def _ludwig_profiles(folder: Path) -> list[dict[str, Any]]:
    runs = []
    for p in sorted(folder.rglob("system_resource_usage/*/run_*.json"))[:50]:
        data = _load_json(p)
        if isinstance(data, dict) and "total_execution_time" in data:
            runs.append(data)
    return runs


def _ludwig(path: Path, progress: dict[str, Any], profiles: list[dict[str, Any]]) -> RunTrace:
    steps = int(progress.get("steps") or 0)
    notes = [f"epoch {progress.get('epoch')}, batch size {progress.get('batch_size')}"]
    train = [r for r in profiles if "train" in str(r.get("code_block_tag", "")).lower()] or profiles
    intervals: list[tuple[int, float]] = []
    samples: list[UtilSample] = []
    if train and steps:
        run = train[-1]
        intervals = [(steps, float(run["total_execution_time"]) / 1e6)]  # Ludwig records microseconds
        cpu = run.get("average_global_cpu_utilization", run.get("average_cpu_utilization"))
        if cpu is not None:
            samples = [UtilSample(t_s=intervals[0][1], cpu_pct=float(cpu), gpu_pct=None)]
        notes.append(
            f"timed by Ludwig's profiler (tag {run.get('code_block_tag')!r}): one interval, no warm-up exclusion"
        )
    else:
        notes.append(
            "training_progress.json holds no times: use --follow to time the steps as the file changes"
        )
    return RunTrace(
        path=str(path),
        format="ludwig",
        intervals=intervals,
        steps_done=steps,
        samples=samples,
        updated_at=path.stat().st_mtime,
        notes=notes,
    )


# --- step tables ------------------------------------------------------------------------------


def _rows(path: Path, fmt: str) -> list[dict[str, Any]]:
    import pandas as pd

    try:
        frame = pd.read_csv(path) if fmt == "steps-csv" else pd.read_json(path, lines=True)
    except Exception as exc:  # noqa: BLE001 - any parse failure is a data error
        raise DataError(f"cannot read {path} as {fmt[6:].upper()}: {exc}") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    return frame.to_dict("records")


def _steps_table(path: Path, fmt: str) -> RunTrace:
    rows = _rows(path, fmt)
    if not rows:
        raise DataError(f"{path} has no rows")
    keys = set(rows[0])
    dur = next((k for k in DURATION_KEYS if k in keys), None)
    ela = next((k for k in ELAPSED_KEYS if k in keys), None)
    if dur is None and ela is None:
        raise DataError(
            f"{path} needs a column {' / '.join(DURATION_KEYS)} (per step) or {' / '.join(ELAPSED_KEYS)} (cumulative)"
        )
    has_step = "step" in keys
    steps = [int(r["step"]) if has_step else i + 1 for i, r in enumerate(rows)]
    if dur is not None:
        times, t = [], 0.0
        for r in rows:
            t += float(r[str(dur)])
            times.append(t)
        start = steps[0] - 1 if has_step else 0
        points = [(start, 0.0)] + list(zip(steps, times, strict=True))
    else:
        key = str(ela)
        t0 = float(rows[0][key])
        points = [(s, float(r[key]) - t0) for s, r in zip(steps, rows, strict=True)]
        start = points[0][0]
    samples = [
        UtilSample(
            t_s=t,
            cpu_pct=_num(r.get("cpu_util_pct", r.get("cpu_util"))),
            gpu_pct=_num(r.get("gpu_util_pct", r.get("gpu_util"))),
        )
        for (_, t), r in zip(points[-len(rows) :], rows, strict=True)
    ]
    samples = [s for s in samples if s.cpu_pct is not None or s.gpu_pct is not None]
    return RunTrace(
        path=str(path),
        format=fmt,
        intervals=_intervals_from_points(points),
        start_step=start,
        steps_done=steps[-1],
        samples=samples,
        updated_at=path.stat().st_mtime,
    )


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if v != v else v  # NaN


# --- detection --------------------------------------------------------------------------------


def _record(path: Path, data: dict[str, Any]) -> RunTrace:
    rec = record_from_json(data, str(path))
    done = rec.start_step + sum(k for k, _ in rec.intervals)
    return RunTrace(
        path=str(path),
        format="perfmodel-run",
        intervals=list(rec.intervals),
        start_step=rec.start_step,
        steps_done=done,
        total_steps=rec.total_steps,
        finished=rec.finished,
        config=rec.config,
        prediction=rec.prediction,
        hardware=rec.hardware,
        framework=rec.framework,
        updated_at=path.stat().st_mtime,
        notes=list(rec.notes),
    )


def _json_file(path: Path, folder: Path | None) -> RunTrace:
    data = _load_json(path)
    if is_record(data):
        return _record(path, data)
    if isinstance(data, dict) and "log_history" in data:
        return _hf_state(path, data, _hf_checkpoint_points(folder or path.parent))
    if isinstance(data, dict) and "steps" in data and "epoch" in data:
        # Ludwig writes <experiment>_run/model/training_progress.json; profiles live beside <experiment>_run/
        return _ludwig(path, data, _ludwig_profiles(folder or path.parent.parent))
    if isinstance(data, dict) and "total_execution_time" in data:
        raise DataError(
            f"{path} is a Ludwig profiler file: give the run folder (or training_progress.json) so steps are known"
        )
    raise DataError(f"{path}: not a perfmodel run record, trainer_state.json or training_progress.json")


def read_trace(path: str | Path) -> RunTrace:
    """Read the progress of the run at `path` (a file, or a run's output folder)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{p} does not exist")
    if p.is_dir():
        for candidate in (p / RECORD_FILE, p / "trainer_state.json"):
            if candidate.is_file():
                return _json_file(candidate, p)
        checkpoints = _hf_checkpoint_points(p)
        if checkpoints:
            newest = max(p.glob("checkpoint-*/trainer_state.json"), key=lambda f: f.stat().st_mtime)
            return _hf_state(newest, _load_json(newest), checkpoints)
        progress = sorted(p.rglob("training_progress.json"), key=lambda f: f.stat().st_mtime)
        if progress:
            return _ludwig(progress[-1], _load_json(progress[-1]), _ludwig_profiles(p))
        raise DataError(
            f"{p} holds no {RECORD_FILE}, trainer_state.json, checkpoint-*/ or training_progress.json; "
            "give one of those files, or a CSV/JSONL of step times"
        )
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return _steps_table(p, "steps-csv")
    if suffix in (".jsonl", ".ndjson"):
        return _steps_table(p, "steps-jsonl")
    if suffix == ".json":
        return _json_file(p, None)
    raise DataError(f"{p}: unknown kind of file (expected .json, .csv or .jsonl)")
