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
  `elapsed_s` (or `time_s`, `timestamp`); optional `step`, `gpu_util_pct`, `cpu_util_pct`,
  `peak_memory_gb` (or `memory_gb`: the largest value is the run's peak).

Every file is opened like a config file (perfmodel.files.open_regular): only a regular file, of at
most MAX_JSON_BYTES (JSON, parsed whole) or MAX_TABLE_BYTES (step tables, streamed in chunks of
CHUNK_ROWS rows into compact arrays, so memory stays a few hundred MB at 10 million steps). A row
whose time is missing, NaN, infinite or negative, whose step number is not a whole number in
0..MAX_STEP, or whose step does not pass the rows before it is skipped, and the skips are counted
in the trace's notes: one bad row never drops the rows after it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.errors import DataError
from perfmodel.files import open_regular, read_bounded
from perfmodel.monitor.intervals import Intervals
from perfmodel.monitor.record import RECORD_FILE, is_record, record_from_json
from perfmodel.monitor.utilization import UtilSample

DURATION_KEYS = ("step_time_s", "duration_s", "seconds", "step_time")
ELAPSED_KEYS = ("elapsed_s", "time_s", "timestamp", "wall_time_s")
MEMORY_KEYS = ("peak_memory_gb", "memory_gb")
MAX_JSON_BYTES = 64 * 2**20
"""Largest JSON progress file read (64 MB: parsed whole, it takes several times that in memory;
a trainer_state.json of 40,000 log entries is about 8 MB, a run record of a million steps 25 MB)."""
MAX_TABLE_BYTES = 4 * 2**30
"""Largest CSV / JSONL of steps (4 GiB, some 300 million rows: streamed, so memory stays bounded)."""
CHUNK_ROWS = 1_000_000
"""Rows of a step table parsed at a time."""
MAX_STEP = 10**12
"""Largest step number read as one (a million steps a second for 11 days); beyond it, absurd."""
MAX_UTIL_SAMPLES = 100_000
"""Utilisation readings kept from a step table; beyond, a regular subsample (every 2nd, 4th, ...)."""


@dataclass(frozen=True, kw_only=True)
class RunTrace:
    """A run's progress as read from its files."""

    path: str
    """What was read."""
    format: str
    """perfmodel-run | hf-trainer-state | hf-checkpoints | ludwig | steps-csv | steps-jsonl."""
    intervals: Intervals = field(default_factory=Intervals)
    """(steps, seconds) between progress points; the first may include warm-up (any sequence of
    pairs is stored as Intervals)."""
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
    peak_memory_gb: float | None = None
    """Peak memory in GB where the files record it (run records; a step table's peak_memory_gb)."""
    peak_memory_kind: str | None = None
    """What it measured (cuda-allocated, host-rss, or the step table's column name)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "intervals", Intervals.of(self.intervals))


def _load_json(path: Path) -> Any:
    data = read_bounded(path, what="progress file", limit_bytes=MAX_JSON_BYTES, error=DataError)
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"cannot read {path} as JSON: {str(exc)[:200]}") from None


def _intervals_from_points(points: Sequence[tuple[float, float]]) -> Intervals:
    """Intervals between consecutive (step, time) points where the step grows and the time does
    not go back (NaN times fail the test: only their two intervals are lost)."""
    if len(points) < 2:
        return Intervals()
    steps, times = (np.asarray(column, dtype=np.float64) for column in zip(*points, strict=True))
    ds, dt = np.diff(steps), np.diff(times)
    keep = (ds > 0) & (dt >= 0)
    return Intervals(ds[keep].astype(np.int64), dt[keep])


def _step_number(value: Any) -> float | None:
    """A log entry's step as a number, None when it is not a whole number in 0..MAX_STEP."""
    try:
        step = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return step if 0 <= step <= MAX_STEP and step.is_integer() else None


def _time_value(value: Any) -> float | None:
    try:
        t = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return t if np.isfinite(t) else None


# --- Hugging Face -----------------------------------------------------------------------------


def _hf_state(path: Path, state: dict[str, Any], checkpoints: list[tuple[int, float]]) -> RunTrace:
    history = [e for e in state.get("log_history") or [] if isinstance(e, dict)]
    total_steps = _step_number(state.get("max_steps") or 0)
    total = int(total_steps) if total_steps else None
    step = int(_step_number(state.get("global_step") or 0) or 0)
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
        entries = [e for e in history if key in e and "step" in e and e is not final]
        read = [(_step_number(e["step"]), _time_value(e[key])) for e in entries]
        points = [(0.0, 0.0)] + [(st, t) for st, t in read if st is not None and t is not None]
        if len(points) >= 3:
            skipped = len(entries) - (len(points) - 1)
            notes = (
                [
                    f"skipped {skipped} log entr{'y' if skipped == 1 else 'ies'} whose step or {key} is not a number in range"
                ]
                if skipped
                else []
            )
            return RunTrace(
                format="hf-trainer-state", intervals=_intervals_from_points(points), notes=notes, **common
            )
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
            intervals=Intervals.of([(step, float(final["train_runtime"]))]),
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
            step = _step_number((_load_json(p) or {}).get("global_step") or 0)
        except (DataError, AttributeError):
            continue
        if step is not None:
            points.append((int(step), p.stat().st_mtime))
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
    intervals = Intervals()
    samples: list[UtilSample] = []
    if train and steps:
        run = train[-1]
        intervals = Intervals.of(
            [(steps, float(run["total_execution_time"]) / 1e6)]
        )  # Ludwig records microseconds
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


class _StepTable:
    """A CSV / JSONL of steps read chunk by chunk into intervals, by the module's rules for bad
    rows. Durations: each row times the steps since the highest step before it. Cumulative times:
    the rows whose step and time both pass every earlier row's are the points, the first of them
    starts the clock, and each interval joins two consecutive points."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.duration: str | None = None
        self.elapsed: str | None = None
        self.has_step = False
        self.rows = 0
        self.skipped = {"time": 0, "step": 0, "order": 0}
        self.start: float | None = None
        """Step before the first interval."""
        self.highest = -1.0
        """Highest step number read so far (with durations: the boundary of the next interval)."""
        self.latest = -np.inf
        """Latest cumulative time read (cumulative times only)."""
        self.point: tuple[float, float] | None = None
        """The last point: (step, cumulative time) (cumulative times only)."""
        self.t0 = 0.0
        self.clock = 0.0
        """Seconds since the first point at the last kept row (durations)."""
        self.steps: list[np.ndarray] = []
        self.seconds: list[np.ndarray] = []
        self.samples: list[UtilSample] = []
        self.memory_gb: float | None = None
        """Largest value of a peak_memory_gb / memory_gb column."""
        self.sample_every = 1

    def columns(self, names: Sequence[str]) -> None:
        keys = set(names)
        self.duration = next((k for k in DURATION_KEYS if k in keys), None)
        self.elapsed = next((k for k in ELAPSED_KEYS if k in keys), None)
        if self.duration is None and self.elapsed is None:
            raise DataError(
                f"{self.path} needs a column {' / '.join(DURATION_KEYS)} (per step) or "
                f"{' / '.join(ELAPSED_KEYS)} (cumulative)"
            )
        self.has_step = "step" in keys

    def add(self, frame: Any) -> None:
        n = len(frame)
        memory = _column(frame, MEMORY_KEYS)
        if memory is not None and np.isfinite(memory).any():
            top = float(np.nanmax(np.where(np.isfinite(memory), memory, np.nan)))
            self.memory_gb = top if self.memory_gb is None else max(self.memory_gb, top)
        if self.has_step:
            steps = _column(frame, ("step",))
            assert steps is not None
            good = np.isfinite(steps) & (steps >= 0) & (steps <= MAX_STEP) & (steps == np.floor(steps))
        else:
            steps = np.arange(self.rows + 1, self.rows + n + 1, dtype=np.float64)
            good = np.ones(n, dtype=bool)
        self.rows += n
        self.skipped["step"] += int(n - good.sum())
        time = _column(frame, (str(self.duration or self.elapsed),))
        assert time is not None
        steps, time, frame = steps[good], time[good], frame[good]
        timed = np.isfinite(time) & (time >= 0 if self.duration is not None else True)
        if self.start is None and len(steps):
            if self.duration is not None:  # the first row times the steps since the one before it
                self.start = self.highest = steps[0] - 1 if self.has_step else 0.0
        passing = self._passing(steps)
        if self.duration is not None:
            before = np.maximum.accumulate(np.concatenate(([self.highest], steps)))
            self.highest = float(before[-1])
            keep = passing & timed
            self.skipped["time"] += int((passing & ~timed).sum())  # its steps are not timed: left out
            self._keep((steps - before[:-1])[keep], time[keep], frame[keep])
        else:
            self.skipped["time"] += int((passing & ~timed).sum())
            self._points(steps, time, passing & timed, frame)

    def _passing(self, steps: np.ndarray) -> np.ndarray:
        """Rows whose step passes every earlier row's (the rest are counted)."""
        before = np.maximum.accumulate(np.concatenate(([self.highest], steps)))[:-1]
        passing = steps > before
        self.skipped["order"] += int((~passing).sum())
        return passing

    def _keep(self, steps: np.ndarray, seconds: np.ndarray, frame: Any) -> None:
        if not len(steps):
            return
        self.steps.append(_compact(steps))
        self.seconds.append(seconds)
        clock = np.add.accumulate(np.concatenate(([self.clock], seconds)))[1:]
        self.clock = float(clock[-1])
        self._samples(clock, frame)

    def _points(self, steps: np.ndarray, time: np.ndarray, ok: np.ndarray, frame: Any) -> None:
        steps, time, frame = steps[ok], time[ok], frame[ok]
        latest = np.maximum.accumulate(np.concatenate(([self.latest], time)))[:-1]
        forward = time >= latest  # the clock did not go back
        self.skipped["order"] += int((~forward).sum())
        steps, time, frame = steps[forward], time[forward], frame[forward]
        if not len(steps):
            return
        self.highest, self.latest = max(self.highest, float(steps.max())), float(time.max())
        if self.point is None:  # the first point starts the clock
            self.point, self.t0, self.start = (
                (float(steps[0]), float(time[0])),
                float(time[0]),
                float(steps[0]),
            )
            self._samples(time[:1] - self.t0, frame[:1])
            steps, time, frame = steps[1:], time[1:], frame[1:]
            if not len(steps):
                return
        ds = np.diff(np.concatenate(([self.point[0]], steps)))
        dt = np.diff(np.concatenate(([self.point[1]], time)))
        self.point = (float(steps[-1]), float(time[-1]))
        self.steps.append(_compact(ds))
        self.seconds.append(dt)
        self._samples(time - self.t0, frame)

    def _samples(self, clock: np.ndarray, frame: Any) -> None:
        cpu = _column(frame, ("cpu_util_pct", "cpu_util"))
        gpu = _column(frame, ("gpu_util_pct", "gpu_util"))
        if cpu is None and gpu is None:
            return
        known = np.zeros(len(clock), dtype=bool)
        for values in (cpu, gpu):
            if values is not None:
                known |= np.isfinite(values)
        for i in np.flatnonzero(known)[:: self.sample_every].tolist():
            self.samples.append(
                UtilSample(
                    t_s=float(clock[i]),
                    cpu_pct=None if cpu is None else _finite(cpu[i]),
                    gpu_pct=None if gpu is None else _finite(gpu[i]),
                )
            )
        while len(self.samples) > MAX_UTIL_SAMPLES:  # thin to every 2nd, and take every 2nd from now on
            self.samples = self.samples[::2]
            self.sample_every *= 2

    def notes(self) -> list[str]:
        total = sum(self.skipped.values())
        if not total:
            return []
        parts = [
            f"{self.skipped['time']:,} with a missing, NaN, infinite or negative time"
            if self.skipped["time"]
            else "",
            f"{self.skipped['step']:,} whose step is not a whole number in 0..{MAX_STEP:.0e}"
            if self.skipped["step"]
            else "",
            f"{self.skipped['order']:,} whose step (or time) does not pass the rows before"
            if self.skipped["order"]
            else "",
        ]
        return [f"skipped {total:,} of {self.rows:,} rows: " + "; ".join(p for p in parts if p)]


def _compact(steps: np.ndarray) -> np.ndarray:
    """Step counts in 32 bits where they fit (a run's intervals are mostly 1 step)."""
    return steps.astype(np.int32 if len(steps) and steps.max() < 2**31 else np.int64)


def _column(frame: Any, names: tuple[str, ...]) -> np.ndarray | None:
    import pandas as pd  # pandas: 0.3-0.8 s of a cold start, only for CSV / parquet step tables

    name = next((n for n in names if n in frame.columns), None)
    if name is None:
        return None
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=np.float64)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _steps_table(path: Path, fmt: str) -> RunTrace:
    import pandas as pd  # pandas: 0.3-0.8 s of a cold start, only for CSV / parquet step tables

    table = _StepTable(path)
    kind = fmt[6:].upper()
    with open_regular(path, what="step table", limit_bytes=MAX_TABLE_BYTES, error=DataError) as fh:
        try:
            reader = (
                pd.read_csv(fh, chunksize=CHUNK_ROWS)
                if fmt == "steps-csv"
                else pd.read_json(fh, lines=True, chunksize=CHUNK_ROWS)
            )
            with reader, warnings.catch_warnings():
                warnings.simplefilter("ignore", pd.errors.DtypeWarning)  # a bad value in a number column
                for chunk in reader:
                    chunk.columns = [str(c).strip().lower() for c in chunk.columns]
                    if table.duration is None and table.elapsed is None:
                        table.columns(list(chunk.columns))
                    table.add(chunk)
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is a data error
            raise DataError(f"cannot read {path} as {kind}: {str(exc)[:200]}") from None
    if not table.rows:
        raise DataError(f"{path} has no rows")
    if table.start is None or (not table.steps and any(table.skipped.values())):
        raise DataError(f"{path} has no row with a usable step and time; {' '.join(table.notes())}")
    intervals = Intervals.concat(table.steps, table.seconds)
    return RunTrace(
        path=str(path),
        format=fmt,
        intervals=intervals,
        start_step=int(table.start),
        steps_done=int(max(table.highest, table.start)),
        samples=table.samples,
        updated_at=path.stat().st_mtime,
        notes=table.notes(),
        peak_memory_gb=table.memory_gb,
        peak_memory_kind="step table" if table.memory_gb is not None else None,
    )


# --- detection --------------------------------------------------------------------------------


def _record(path: Path, data: dict[str, Any]) -> RunTrace:
    rec = record_from_json(data, str(path))
    intervals = Intervals.of(rec.intervals)
    done = rec.start_step + intervals.total_steps()
    return RunTrace(
        path=str(path),
        format="perfmodel-run",
        intervals=intervals,
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
        peak_memory_gb=rec.peak_memory_gb,
        peak_memory_kind=rec.peak_memory_kind,
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
